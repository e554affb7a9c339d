/work/main/bundle/gpu_test_cuda_engine
