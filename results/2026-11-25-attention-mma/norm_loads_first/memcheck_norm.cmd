compute-sanitizer --tool memcheck --error-exitcode 1 /work/main/bundle/gpu_test_cuda_kernels -tc=*norm*
