/work/main/bundle/gpu_test_cuda_all_reduce
