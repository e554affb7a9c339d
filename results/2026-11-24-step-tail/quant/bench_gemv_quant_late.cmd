env ROSEINFER_CUDA_GEMV_QUANT_EARLY=0 /work/main/bundle/gpu_bench_gemv_quant --no-skip
