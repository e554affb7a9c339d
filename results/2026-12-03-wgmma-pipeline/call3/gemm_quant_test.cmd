/work/main/bundle/gpu_test_cuda_gemm_quant
