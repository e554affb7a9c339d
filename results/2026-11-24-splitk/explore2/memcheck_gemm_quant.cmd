compute-sanitizer --tool memcheck --error-exitcode 1 /tmp/splitk_bin/gpu_test_cuda_gemm_quant -tc=*identity*,*SmolLM2*,*row ranges*,*shape checks*
