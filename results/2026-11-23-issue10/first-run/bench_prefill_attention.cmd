/work/main/bundle/gpu_bench_prefill_attention
