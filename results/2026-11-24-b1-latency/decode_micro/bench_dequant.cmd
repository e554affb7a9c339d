/work/main/bundle/gpu_bench_dequant --no-skip
