/work/main/bundle/gpu_test_cuda_real_quantized -s
