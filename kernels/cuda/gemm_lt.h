#pragma once
// The cuBLASLt descriptors of one linear layer, shared by the GEMMs that pin algorithms
// (InvariantGemm, BucketedGemm). cuBLASLt is column-major: the backend's row-major y (n, out) =
// x (n, in) W^T, W (out, in), is D (out, n) = op(A) B with A = W read as the column-major
// (in, out) matrix, ld in, transa T; B = x as column-major (in, n), ld in; D = y as column-major
// (out, n), ld out. So cuBLASLt's m = out, k = in, and its n is our row count.
#include <cublasLt.h>

#include <cstdint>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/dtype.cuh"

namespace rose {

struct GemmShape {
  int out = 0;           // rows of W (out, in): output features
  int in = 0;            // columns of W: input features (the reduction length)
  bool f32_out = false;  // y in fp32 (the lm_head's logits), else in the storage dtype
  int max_rows = 0;      // the largest n this shape runs with (token or sequence budget)
};

// B's and D's column count is the row count n, set per call (set_rows).
struct LtLayouts {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // W: column-major (in, out), ld in
  cublasLtMatrixLayout_t b = nullptr;  // x: column-major (in, n), ld in
  cublasLtMatrixLayout_t d = nullptr;  // y: column-major (out, n), ld out

  void create(const GemmShape& shape, DType dtype) {
    const cudaDataType_t t = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
    const cudaDataType_t yt = shape.f32_out ? CUDA_R_32F : t;
    ROSE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    ROSE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
    ROSE_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
    ROSE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, t, shape.in, shape.out, shape.in));
    ROSE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, t, shape.in, shape.max_rows, shape.in));
    ROSE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d, yt, shape.out, shape.max_rows, shape.out));
  }

  // Sets the row count n on B's and D's layouts (host-side descriptor state only).
  void set_rows(int n) {
    const uint64_t cols = uint64_t(n);
    ROSE_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(b, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof(cols)));
    ROSE_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(d, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof(cols)));
  }

  void destroy() noexcept {  // errors ignored: called from destructors
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (desc) cublasLtMatmulDescDestroy(desc);
    a = b = d = nullptr;
    desc = nullptr;
  }
};

}  // namespace rose
