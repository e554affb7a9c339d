env ROSEINFER_BENCH_MODELS=gpt2,llama-1b ROSEINFER_BENCH_BATCHES=16,64,256 ROSEINFER_BENCH_GRAPHS=on /work/main/bundle/gpu_bench_cuda --no-skip
