compute-sanitizer --tool racecheck --error-exitcode 1 /work/main/bundle/gpu_test_cuda_kernels -tc=*cluster decode*
