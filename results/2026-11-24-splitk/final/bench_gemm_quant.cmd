/tmp/splitk_bin/gpu_bench_gemm_quant --no-skip
