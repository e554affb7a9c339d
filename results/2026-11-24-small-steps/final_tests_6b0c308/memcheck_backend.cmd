compute-sanitizer --tool memcheck --error-exitcode 3 /work/main/bundle/gpu_test_cuda_backend
