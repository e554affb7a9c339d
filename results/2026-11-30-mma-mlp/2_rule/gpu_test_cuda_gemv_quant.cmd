/work/main/bundle/gpu_test_cuda_gemv_quant
