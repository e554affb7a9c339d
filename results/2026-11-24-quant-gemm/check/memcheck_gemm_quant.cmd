compute-sanitizer --tool memcheck --error-exitcode 1 /work/main/bundle/gpu_test_cuda_gemm_quant -tc=*identity*,*SmolLM2*,*row ranges*,*shape checks*
