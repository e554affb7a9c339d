/work/main/bundle/gpu_bench_gemm_quant --no-skip
