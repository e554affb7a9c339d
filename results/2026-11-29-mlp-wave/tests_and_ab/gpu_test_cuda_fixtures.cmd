/work/main/bundle/gpu_test_cuda_fixtures
