/work/main/bundle/gpu_test_cuda_gemv_quant --test-case=*int8 copy from the add-norm*
