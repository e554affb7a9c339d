// InvariantGemm (gemm_invariant.h): cuBLASLt algorithms pinned per (weight shape, bucket of n),
// chosen and checked bit for bit once at start.
//
// The cuBLASLt descriptors and their column-major mapping are gemm_lt.h's.
#include "kernels/cuda/gemm_invariant.h"

#include <cublasLt.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "kernels/common/error.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/fill.cuh"
#include "kernels/cuda/gemm_fixed_order.cuh"

namespace rose {
namespace {

constexpr int kNumBuckets = 6;
constexpr std::array<int, kNumBuckets> kBucketLo = {1, 2, 5, 17, 65, 257};
constexpr std::array<int, kNumBuckets> kBucketHi = {1, 4, 16, 64, 256, 1 << 30};
constexpr int kCandidatesPerBucket = 6;  // heuristic results asked for at each bucket's n
constexpr int kTimedRuns = 5;

int bucket_of(int n) {
  int b = 0;
  while (b + 1 < kNumBuckets && n > kBucketHi[b]) ++b;
  return b;
}

bool same_algo(const cublasLtMatmulAlgo_t& a, const cublasLtMatmulAlgo_t& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

// "id<algo>/t<tile>" for the stats line.
std::string algo_label(const cublasLtMatmulAlgo_t& algo) {
  int32_t id = -1;
  uint32_t tile = 0;
  size_t written = 0;
  ROSE_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id,
                                                         sizeof(id), &written));
  ROSE_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                                         sizeof(tile), &written));
  return fmt::format("id{}/t{}", id, tile);
}

// Device scratch of the self-check, freed on every exit path.
struct Scratch {
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  std::vector<void*> ptrs;
  void* alloc(size_t bytes) {
    void* p = nullptr;
    ROSE_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 256)));
    ptrs.push_back(p);
    return p;
  }
  ~Scratch() {
    for (void* p : ptrs) cudaFree(p);  // errors ignored: destructors must not throw
  }
};

// One weight shape: its descriptors (B's and D's column count is set per call) and the
// algorithm per bucket (nullopt: the fixed-order kernel).
struct ShapePlan {
  GemmShape shape;
  LtLayouts layouts;
  std::array<std::optional<cublasLtMatmulAlgo_t>, kNumBuckets> algo;
  std::array<std::string, kNumBuckets> label;
  double choose_s = 0;
  std::string last_query;    // the last heuristic query's outcome (for describe())
  std::string why_fixed;     // why the shape runs on the fixed-order kernel, when it does
  std::string last_failure;  // the last cuBLASLt call that refused an algorithm
};

}  // namespace

struct InvariantGemm::Impl {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  DType dtype = DType::kBF16;
  cudaStream_t stream = nullptr;
  std::vector<ShapePlan> plans;

  ~Impl() {  // errors ignored: destructors must not throw
    for (ShapePlan& p : plans) p.layouts.destroy();
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lt) cublasLtDestroy(lt);
  }

  size_t y_size(const ShapePlan& p) const { return p.shape.f32_out ? 4 : 2; }

  static void set_rows(ShapePlan& p, int n) { p.layouts.set_rows(n); }

  // The heuristic's candidates at n, best first: workspace 0 and one K split only.
  std::vector<cublasLtMatmulAlgo_t> candidates(ShapePlan& p, int n) const {
    set_rows(p, n);
    std::array<cublasLtMatmulHeuristicResult_t, kCandidatesPerBucket> results{};
    int count = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        lt, p.layouts.desc, p.layouts.a, p.layouts.b, p.layouts.d, p.layouts.d, pref,
        kCandidatesPerBucket, results.data(), &count);
    std::vector<cublasLtMatmulAlgo_t> out;
    p.last_query = fmt::format("heuristic status {} count {}", int(status), count);
    if (status != CUBLAS_STATUS_SUCCESS) return out;  // none for this shape: the fixed kernel
    for (int i = 0; i < count; ++i) {
      int32_t splits = 1;
      uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
      size_t written = 0;
      ROSE_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(
          &results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits), &written));
      ROSE_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(
          &results[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction, sizeof(reduction),
          &written));
      if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize == 0 &&
          splits <= 1 && reduction == CUBLASLT_REDUCTION_SCHEME_NONE) {
        out.push_back(results[i].algo);
      }
    }
    p.last_query += fmt::format(", {} without split-K", out.size());
    return out;
  }

  // True when cuBLASLt runs `algo` at n rows without workspace (sets n on the layouts).
  // (The heuristic was asked for workspace-0 algorithms only, so the check's own workspace
  // figure is not tested again: a matmul that needed workspace would fail and say so.)
  bool accepts(ShapePlan& p, const cublasLtMatmulAlgo_t& algo, int n) const {
    set_rows(p, n);
    cublasLtMatmulHeuristicResult_t check{};
    const cublasStatus_t status = cublasLtMatmulAlgoCheck(
        lt, p.layouts.desc, p.layouts.a, p.layouts.b, p.layouts.d, p.layouts.d, &algo, &check);
    if (status != CUBLAS_STATUS_SUCCESS) {
      p.last_failure = fmt::format("algo check at n={}: status {}", n, int(status));
    }
    return status == CUBLAS_STATUS_SUCCESS;
  }

  // y = x W^T with `algo` at n rows; false when cuBLASLt does not support the algo at this n.
  bool try_matmul(ShapePlan& p, const cublasLtMatmulAlgo_t& algo, const void* x, const void* w,
                  void* y, int n) const {
    if (!accepts(p, algo, n)) return false;
    const float alpha = 1.0f, beta = 0.0f;
    const cublasStatus_t status =
        cublasLtMatmul(lt, p.layouts.desc, &alpha, w, p.layouts.a, x, p.layouts.b, &beta, y,
                       p.layouts.d, y, p.layouts.d, &algo, nullptr, 0, stream);
    if (status != CUBLAS_STATUS_SUCCESS) {
      p.last_failure = fmt::format("matmul at n={}: status {}", n, int(status));
    }
    return status == CUBLAS_STATUS_SUCCESS;
  }

  void choose(ShapePlan& p);
};

namespace {

// The row counts one bucket is checked at: both ends, odd ones inside, capped at max_rows.
std::vector<int> check_rows(int bucket, int max_rows) {
  const int lo = kBucketLo[bucket], hi = std::min(kBucketHi[bucket], max_rows);
  std::vector<int> rows = {lo, hi, (lo + (hi - lo) / 2) | 1, std::min(lo + 2, hi)};
  if (bucket == kNumBuckets - 1) {
    for (int n : {263, 511, 1023, 1025, 4095, hi - 1}) rows.push_back(n);
  }
  std::erase_if(rows, [&](int n) { return n < lo || n > hi; });
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

// The row count a bucket's heuristic is asked at and its candidates are timed at.
int bucket_rows(int bucket, int max_rows) { return std::min(kBucketHi[bucket], max_rows); }

// The self-check's buffers for one shape: W (out, in), X (max_rows, in), the reference's
// Y (max_rows, out), a candidate's Y (max_rows, out), and a mismatch counter.
struct CheckBuffers {
  Scratch scratch;
  void* w = nullptr;
  void* x = nullptr;
  void* y_ref = nullptr;
  void* y = nullptr;
  unsigned long long* mismatches = nullptr;
};

void make_check_buffers(CheckBuffers& b, const GemmShape& s, DType dtype, size_t y_size,
                        cudaStream_t stream) {
  b.w = b.scratch.alloc(size_t(s.out) * s.in * 2);
  b.x = b.scratch.alloc(size_t(s.max_rows) * s.in * 2);
  b.y_ref = b.scratch.alloc(size_t(s.max_rows) * s.out * y_size);
  b.y = b.scratch.alloc(size_t(s.max_rows) * s.out * y_size);
  b.mismatches = static_cast<unsigned long long*>(b.scratch.alloc(sizeof(unsigned long long)));
  const uint64_t seed = uint64_t(s.out) * 1000003u + uint64_t(s.in);
  launch_fill_uniform(b.w, dtype, int64_t(s.out) * s.in, seed, 1.0f / std::sqrt(float(s.in)),
                      stream);
  launch_fill_uniform(b.x, dtype, int64_t(s.max_rows) * s.in, seed + 1, 1.0f, stream);
}

// True when `algo` runs at every check row count of `bucket` and each result's rows equal the
// reference's rows bit for bit.
bool rows_match(InvariantGemm::Impl& impl, ShapePlan& p, CheckBuffers& b,
                const cublasLtMatmulAlgo_t& algo, int bucket) {
  const size_t ys = impl.y_size(p);
  for (int n : check_rows(bucket, p.shape.max_rows)) {
    ROSE_CUDA_CHECK(cudaMemsetAsync(b.y, 0xFF, size_t(n) * p.shape.out * ys, impl.stream));
    if (!impl.try_matmul(p, algo, b.x, b.w, b.y, n)) return false;
    ROSE_CUDA_CHECK(cudaMemsetAsync(b.mismatches, 0, sizeof(unsigned long long), impl.stream));
    const int64_t words = int64_t(n) * p.shape.out * int64_t(ys / 2);
    launch_count_mismatches(static_cast<const uint16_t*>(b.y),
                            static_cast<const uint16_t*>(b.y_ref), words, b.mismatches,
                            impl.stream);
    unsigned long long mismatches = 0;
    ROSE_CUDA_CHECK(cudaMemcpyAsync(&mismatches, b.mismatches, sizeof(mismatches),
                                    cudaMemcpyDeviceToHost, impl.stream));
    ROSE_CUDA_CHECK(cudaStreamSynchronize(impl.stream));
    if (mismatches != 0) return false;
  }
  return true;
}

// Seconds per product of `algo` at n rows (best of kTimedRuns after one warm-up).
double time_algo(InvariantGemm::Impl& impl, ShapePlan& p, CheckBuffers& b,
                 const cublasLtMatmulAlgo_t& algo, int n) {
  cudaEvent_t start, stop;
  ROSE_CUDA_CHECK(cudaEventCreate(&start));
  ROSE_CUDA_CHECK(cudaEventCreate(&stop));
  double best = 1e30;
  for (int i = 0; i <= kTimedRuns; ++i) {
    ROSE_CUDA_CHECK(cudaEventRecord(start, impl.stream));
    const bool ok = impl.try_matmul(p, algo, b.x, b.w, b.y, n);
    ROSE_CUDA_CHECK(cudaEventRecord(stop, impl.stream));
    ROSE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    ROSE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (ok && i > 0) best = std::min(best, double(ms) * 1e-3);
  }
  ROSE_CUDA_CHECK(cudaEventDestroy(start));
  ROSE_CUDA_CHECK(cudaEventDestroy(stop));
  return best;
}

// The fastest candidate of `bucket` whose rows match the reference's; nullopt when none does.
// True when cuBLASLt accepts `algo` at every row count of the bucket (a host-side check; run()
// must never meet an n the algorithm rejects).
bool supports_every_n(InvariantGemm::Impl& impl, ShapePlan& p, const cublasLtMatmulAlgo_t& algo,
                      int bucket) {
  const int hi = std::min(kBucketHi[bucket], p.shape.max_rows);
  for (int n = kBucketLo[bucket]; n <= hi; ++n) {
    if (!impl.accepts(p, algo, n)) return false;
  }
  return true;
}

// The fastest candidate of `bucket` whose rows match the reference's and that cuBLASLt accepts at
// every n of the bucket; nullopt when none does.
std::optional<cublasLtMatmulAlgo_t> pick_for_bucket(InvariantGemm::Impl& impl, ShapePlan& p,
                                                    CheckBuffers& b,
                                                    const cublasLtMatmulAlgo_t& ref, int bucket) {
  const int n = bucket_rows(bucket, p.shape.max_rows);
  std::vector<cublasLtMatmulAlgo_t> cands = impl.candidates(p, n);
  if (std::none_of(cands.begin(), cands.end(), [&](auto& a) { return same_algo(a, ref); })) {
    cands.push_back(ref);
  }
  std::vector<std::pair<double, size_t>> passing;  // (seconds at n, index into cands)
  for (size_t i = 0; i < cands.size(); ++i) {
    if (rows_match(impl, p, b, cands[i], bucket)) {
      passing.emplace_back(time_algo(impl, p, b, cands[i], n), i);
    }
  }
  std::sort(passing.begin(), passing.end());
  for (const auto& [seconds, i] : passing) {
    if (supports_every_n(impl, p, cands[i], bucket)) return cands[i];
  }
  return std::nullopt;
}

}  // namespace

void InvariantGemm::Impl::choose(ShapePlan& p) {
  const auto start = std::chrono::steady_clock::now();
  CheckBuffers b;
  make_check_buffers(b, p.shape, dtype, y_size(p), stream);
  // The reference: the best candidate at the largest n that actually runs there.
  std::vector<cublasLtMatmulAlgo_t> ref_list = candidates(p, p.shape.max_rows);
  while (!ref_list.empty() && !try_matmul(p, ref_list[0], b.x, b.w, b.y_ref, p.shape.max_rows)) {
    ref_list.erase(ref_list.begin());
  }
  bool fixed = ref_list.empty();
  if (fixed) p.why_fixed = "no reference (" + p.last_query + "; " + p.last_failure + ")";
  for (int bucket = 0; bucket < kNumBuckets && !fixed; ++bucket) {
    if (kBucketLo[bucket] > p.shape.max_rows) break;
    p.algo[bucket] = pick_for_bucket(*this, p, b, ref_list[0], bucket);
    fixed = !p.algo[bucket].has_value();
    if (fixed) {
      p.why_fixed = fmt::format("no invariant algorithm for rows {}-{} ({}; {})", kBucketLo[bucket],
                                kBucketHi[bucket], p.last_query, p.last_failure);
    }
  }
  for (int bucket = 0; bucket < kNumBuckets; ++bucket) {
    // One bucket without an invariant algorithm sends every bucket to the fixed-order kernel:
    // mixing it with cuBLASLt would give different bits at different n.
    if (fixed) p.algo[bucket].reset();
    p.label[bucket] = !p.algo[bucket] ? "fixed"
                      : same_algo(*p.algo[bucket], ref_list[0])
                          ? "ref:" + algo_label(*p.algo[bucket])
                          : algo_label(*p.algo[bucket]);
  }
  ROSE_CUDA_CHECK(cudaStreamSynchronize(stream));
  p.choose_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

InvariantGemm::InvariantGemm(const std::vector<GemmShape>& shapes, DType dtype, cudaStream_t stream,
                             bool fixed_only)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.dtype = dtype;
  m.stream = stream;
  ROSE_CUBLAS_CHECK(cublasLtCreate(&m.lt));
  ROSE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&m.pref));
  // Workspace 0 only. No reduction-scheme mask: the mask lists the schemes a candidate may use,
  // and NONE is 0, so a mask of NONE filtered out every algorithm (measured on the H100: every
  // shape fell to the fixed-order kernel). candidates() drops split-K configs itself instead.
  const uint64_t workspace = 0;
  ROSE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      m.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  for (const GemmShape& s : shapes) {
    if (s.out < 1 || s.in < 1 || s.max_rows < 1) {
      throw Error(
          fmt::format("invariant gemm: bad shape out {} in {} rows {}", s.out, s.in, s.max_rows));
    }
    auto same = [&](const ShapePlan& p) {
      return p.shape.out == s.out && p.shape.in == s.in && p.shape.f32_out == s.f32_out;
    };
    auto it = std::find_if(m.plans.begin(), m.plans.end(), same);
    if (it != m.plans.end()) {  // a shape listed twice: keep the larger row budget
      it->shape.max_rows = std::max(it->shape.max_rows, s.max_rows);
      continue;
    }
    m.plans.push_back(ShapePlan{s});
    m.plans.back().layouts.create(s, m.dtype);
  }
  for (ShapePlan& p : m.plans) {
    if (fixed_only) {
      p.label.fill("fixed");  // algo stays nullopt in every bucket
    } else {
      m.choose(p);
    }
  }
}

InvariantGemm::~InvariantGemm() = default;

void InvariantGemm::run(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                        cudaStream_t stream) {
  Impl& m = *impl_;
  auto it = std::find_if(m.plans.begin(), m.plans.end(), [&](const ShapePlan& p) {
    return p.shape.out == out && p.shape.in == in && p.shape.f32_out == f32_out;
  });
  if (it == m.plans.end() || n < 1 || n > it->shape.max_rows) {
    throw Error(fmt::format("invariant gemm: shape out {} in {} f32_out {} n {} was not prepared",
                            out, in, f32_out, n));
  }
  const std::optional<cublasLtMatmulAlgo_t>& algo = it->algo[bucket_of(n)];
  if (!algo) {
    launch_gemm_fixed_order(x, w, y, n, in, out, f32_out, m.dtype, stream);
    return;
  }
  Impl::set_rows(*it, n);
  const float alpha = 1.0f, beta = 0.0f;
  ROSE_CUBLAS_CHECK(cublasLtMatmul(m.lt, it->layouts.desc, &alpha, w, it->layouts.a, x,
                                   it->layouts.b, &beta, y, it->layouts.d, y, it->layouts.d, &*algo,
                                   nullptr, 0, stream));
}

std::string InvariantGemm::describe() const {
  std::string line = "invariant gemm:";
  for (const ShapePlan& p : impl_->plans) {
    line += fmt::format(" [{}x{}{} rows<={}:", p.shape.out, p.shape.in,
                        p.shape.f32_out ? " f32" : "", p.shape.max_rows);
    for (int b = 0; b < kNumBuckets && kBucketLo[b] <= p.shape.max_rows; ++b) {
      line += fmt::format(" {}-{}={}", kBucketLo[b], std::min(kBucketHi[b], p.shape.max_rows),
                          p.label[b]);
    }
    if (!p.why_fixed.empty()) line += " fixed because " + p.why_fixed;
    line += fmt::format("; {:.2f} s]", p.choose_s);
  }
  return line;
}

}  // namespace rose
