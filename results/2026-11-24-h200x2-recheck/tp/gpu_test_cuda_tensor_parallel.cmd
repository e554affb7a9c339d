/work/main/bundle/gpu_test_cuda_tensor_parallel
