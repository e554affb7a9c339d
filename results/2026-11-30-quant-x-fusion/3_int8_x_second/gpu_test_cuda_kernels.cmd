/work/main/bundle/gpu_test_cuda_kernels
