/work/main/bundle/gpu_test_cuda_non_finite
