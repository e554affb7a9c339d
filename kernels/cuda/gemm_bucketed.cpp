// BucketedGemm (gemm_bucketed.h): one cuBLASLt algorithm per (weight shape, row bucket), chosen at
// start. The column-major mapping is InvariantGemm's (gemm_invariant.cpp): cuBLASLt's D (out, n) =
// op(A) B with A = W as column-major (in, out), ld in, transa T; B = x as (in, n), ld in.
#include "kernels/cuda/gemm_bucketed.h"

#include <cublasLt.h>
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "kernels/common/error.h"
#include "kernels/cuda/check.cuh"

namespace rose {
namespace {

struct ShapeAlgos {
  GemmShape shape;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // W: column-major (in, out), ld in
  cublasLtMatrixLayout_t b = nullptr;  // x: column-major (in, n), ld in
  cublasLtMatrixLayout_t d = nullptr;  // y: column-major (out, n), ld out
  std::vector<int> bounds;             // bucket i holds rows (bounds[i-1], bounds[i]]
  std::vector<std::optional<cublasLtMatmulAlgo_t>> algo;  // per bucket; nullopt: fall back
};

}  // namespace

struct BucketedGemm::Impl {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  DType dtype = DType::kBF16;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::vector<ShapeAlgos> shapes;

  ~Impl() {  // errors ignored: destructors must not throw
    for (ShapeAlgos& s : shapes) {
      if (s.a) cublasLtMatrixLayoutDestroy(s.a);
      if (s.b) cublasLtMatrixLayoutDestroy(s.b);
      if (s.d) cublasLtMatrixLayoutDestroy(s.d);
      if (s.desc) cublasLtMatmulDescDestroy(s.desc);
    }
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lt) cublasLtDestroy(lt);
  }

  void make_descriptors(ShapeAlgos& s) const {
    const cudaDataType_t t = dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
    const cudaDataType_t yt = s.shape.f32_out ? CUDA_R_32F : t;
    ROSE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&s.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    ROSE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                                     sizeof(transa)));
    ROSE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb,
                                                     sizeof(transb)));
    const int max_n = s.shape.max_rows;
    ROSE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.a, t, s.shape.in, s.shape.out, s.shape.in));
    ROSE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.b, t, s.shape.in, max_n, s.shape.in));
    ROSE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s.d, yt, s.shape.out, max_n, s.shape.out));
  }

  static void set_rows(ShapeAlgos& s, int n) {
    const uint64_t cols = uint64_t(n);
    ROSE_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(s.b, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof(cols)));
    ROSE_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(s.d, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof(cols)));
  }

  // The heuristic's best at the bucket's largest n, kept only if cuBLASLt also accepts it at the
  // bucket's smallest n (run() still checks the status at every other n and falls back).
  std::optional<cublasLtMatmulAlgo_t> choose(ShapeAlgos& s, int lo, int hi) const {
    set_rows(s, hi);
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    if (cublasLtMatmulAlgoGetHeuristic(lt, s.desc, s.a, s.b, s.d, s.d, pref, 1, &result, &count) !=
            CUBLAS_STATUS_SUCCESS ||
        count < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
      return std::nullopt;
    }
    set_rows(s, lo);
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoCheck(lt, s.desc, s.a, s.b, s.d, s.d, &result.algo, &check) !=
            CUBLAS_STATUS_SUCCESS ||
        check.workspaceSize > workspace_bytes) {
      return std::nullopt;
    }
    return result.algo;
  }
};

std::vector<int> BucketedGemm::bucket_bounds(int max_rows) {
  std::vector<int> bounds;
  for (int p = 8; p < max_rows; p *= 2) {
    bounds.push_back(p);
    if (p + p / 2 < max_rows && p >= 16) bounds.push_back(p + p / 2);
  }
  bounds.push_back(std::max(max_rows, 1));
  return bounds;
}

BucketedGemm::BucketedGemm(const std::vector<GemmShape>& shapes, DType dtype, void* workspace,
                           size_t workspace_bytes)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.dtype = dtype;
  m.workspace = workspace;
  m.workspace_bytes = workspace_bytes;
  ROSE_CUBLAS_CHECK(cublasLtCreate(&m.lt));
  ROSE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&m.pref));
  const uint64_t limit = workspace_bytes;
  ROSE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      m.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof(limit)));
  for (const GemmShape& s : shapes) {
    if (s.out < 1 || s.in < 1 || s.max_rows < 1) {
      throw Error(
          fmt::format("bucketed gemm: bad shape out {} in {} rows {}", s.out, s.in, s.max_rows));
    }
    auto same = [&](const ShapeAlgos& a) {
      return a.shape.out == s.out && a.shape.in == s.in && a.shape.f32_out == s.f32_out;
    };
    auto it = std::find_if(m.shapes.begin(), m.shapes.end(), same);
    if (it != m.shapes.end()) {  // a shape listed twice: keep the larger row budget
      it->shape.max_rows = std::max(it->shape.max_rows, s.max_rows);
      continue;
    }
    m.shapes.push_back(ShapeAlgos{s});
  }
  for (ShapeAlgos& s : m.shapes) {
    m.make_descriptors(s);
    s.bounds = bucket_bounds(s.shape.max_rows);
    int lo = 1;
    for (int hi : s.bounds) {
      s.algo.push_back(m.choose(s, lo, hi));
      lo = hi + 1;
    }
  }
}

BucketedGemm::~BucketedGemm() = default;

bool BucketedGemm::run(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                       cudaStream_t stream) {
  Impl& m = *impl_;
  auto it = std::find_if(m.shapes.begin(), m.shapes.end(), [&](const ShapeAlgos& s) {
    return s.shape.out == out && s.shape.in == in && s.shape.f32_out == f32_out;
  });
  if (it == m.shapes.end() || n < 1 || n > it->shape.max_rows) return false;
  const size_t bucket =
      size_t(std::lower_bound(it->bounds.begin(), it->bounds.end(), n) - it->bounds.begin());
  const std::optional<cublasLtMatmulAlgo_t>& algo = it->algo[bucket];
  if (!algo) return false;
  Impl::set_rows(*it, n);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status =
      cublasLtMatmul(m.lt, it->desc, &alpha, w, it->a, x, it->b, &beta, y, it->d, y, it->d, &*algo,
                     m.workspace, m.workspace_bytes, stream);
  // An algorithm this n does not take is refused before anything is launched: the caller falls
  // back. Any other failure is an error.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) return false;
  ROSE_CUBLAS_CHECK(status);
  return true;
}

std::string BucketedGemm::describe() const {
  std::string line = "bucketed gemm:";
  for (const ShapeAlgos& s : impl_->shapes) {
    const auto chosen =
        std::count_if(s.algo.begin(), s.algo.end(), [](const auto& a) { return a.has_value(); });
    line += fmt::format(" [{}x{}{} rows<={}: {} of {} buckets]", s.shape.out, s.shape.in,
                        s.shape.f32_out ? " f32" : "", s.shape.max_rows, chosen, s.algo.size());
  }
  return line;
}

}  // namespace rose
