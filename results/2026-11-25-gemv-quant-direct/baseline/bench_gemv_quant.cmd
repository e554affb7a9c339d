/work/main/bundle/gpu_bench_gemv_quant --no-skip
