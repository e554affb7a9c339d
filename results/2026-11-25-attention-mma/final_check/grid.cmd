env ROSEINFER_BENCH_MODELS=gpt2,llama-1b,llama-8b ROSEINFER_BENCH_BATCHES=1,2 ROSEINFER_BENCH_GRAPHS=on /work/main/bundle/gpu_bench_cuda --no-skip
