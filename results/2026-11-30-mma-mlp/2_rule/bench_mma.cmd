/work/main/bundle/gpu_bench_gemv_quant_mma --no-skip
