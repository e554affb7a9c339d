env ROSEINFER_CUDA_QUANT_MMA_VARIANT=2 /work/main/bundle/gpu_bench_gemv_quant_mma --no-skip
