/tmp/splitk_bin/gpu_test_cuda_engine
