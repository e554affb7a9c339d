// BucketedGemm (gemm_bucketed.h): one cuBLASLt algorithm per (weight shape, row bucket), chosen at
// start; the descriptors are gemm_lt.h's.
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
  LtLayouts layouts;
  std::vector<int> bounds;  // bucket i holds rows (bounds[i-1], bounds[i]]
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
    for (ShapeAlgos& s : shapes) s.layouts.destroy();
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lt) cublasLtDestroy(lt);
  }

  // The heuristic's best at the bucket's largest n, kept only if cuBLASLt also accepts it at the
  // bucket's smallest n (run() still checks the status at every other n and falls back).
  std::optional<cublasLtMatmulAlgo_t> choose(ShapeAlgos& s, int lo, int hi) const {
    s.layouts.set_rows(hi);
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    if (cublasLtMatmulAlgoGetHeuristic(lt, s.layouts.desc, s.layouts.a, s.layouts.b, s.layouts.d,
                                       s.layouts.d, pref, 1, &result,
                                       &count) != CUBLAS_STATUS_SUCCESS ||
        count < 1 || result.state != CUBLAS_STATUS_SUCCESS) {
      return std::nullopt;
    }
    s.layouts.set_rows(lo);
    cublasLtMatmulHeuristicResult_t check{};
    if (cublasLtMatmulAlgoCheck(lt, s.layouts.desc, s.layouts.a, s.layouts.b, s.layouts.d,
                                s.layouts.d, &result.algo, &check) != CUBLAS_STATUS_SUCCESS ||
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
    s.layouts.create(s.shape, m.dtype);
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
  it->layouts.set_rows(n);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status = cublasLtMatmul(
      m.lt, it->layouts.desc, &alpha, w, it->layouts.a, x, it->layouts.b, &beta, y, it->layouts.d,
      y, it->layouts.d, &*algo, m.workspace, m.workspace_bytes, stream);
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
