env ROSEINFER_BENCH_N=128,256,512 ROSEINFER_BENCH_TYPES=Q4_K,Q8_0 ROSEINFER_BENCH_MODELS=llama-1b,llama-8b ROSEINFER_BENCH_MS=8 /work/main/bundle/gpu_bench_gemm_quant --no-skip
