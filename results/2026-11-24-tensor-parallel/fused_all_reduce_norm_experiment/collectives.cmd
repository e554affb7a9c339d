/work/main/bundle/gpu_bench_collectives --no-skip
