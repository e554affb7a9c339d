/work/main/bundle/gpu_test_cuda_backend
