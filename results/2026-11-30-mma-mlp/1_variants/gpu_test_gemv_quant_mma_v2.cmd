env ROSEINFER_CUDA_QUANT_MMA_VARIANT=2 /work/main/bundle/gpu_test_cuda_gemv_quant -tc=int8 tensor-core*
