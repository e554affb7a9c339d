// Timing driver for the quantized tensor-core GEMM (kernels/cuda/gemm_quant.cu) at the projection
// shapes of llama-1b and llama-8b, n = 16 .. 2048 activation rows, against the path it replaces
// and against bf16 weights:
//   fused:   launch_gemm_quant (the tile shape and k slices it chooses)
//   deq+cub: launch_dequantize_rows into a bf16 scratch, then cublasGemmEx on it, as
//            CudaBackend::gemm does today (CudaBackend::dense_gemm's call: OP_T, OP_N, out, n, in,
//            bf16 in, fp32 compute, CUBLAS_GEMM_DEFAULT)
//   cublas:  the same cublasGemmEx on bf16 weights (an unquantized model)
// Prints microseconds per product, the fused kernel's TFLOP/s and GB/s of quantized weight bytes,
// the time ratios fused / deq+cub and fused / cublas (below 1: the fused kernel is faster), the
// times of every compiled tile shape (for tuning choose_tile; shapes far too small for n are
// skipped), the times at each forced slice count of ROSEINFER_BENCH_SPLITS (for tuning the split
// rule of kernels/common/gemm_quant_split.h; 1 is the kernel before split-K), and per (model, type,
// n) one layer's four products summed, with the unsplit kernel's sum beside the default's. Built as
// gpu_bench_gemm_quant, not run by ctest; run with --no-skip. Every measurement cycles through
// enough copies of the weights (>= 256 MiB in all) that they come from HBM, not the 50 MB L2; the
// dequantized scratch is one buffer, as in the backend.
//   ROSEINFER_BENCH_MS=20 (target milliseconds per measurement)  ROSEINFER_BENCH_TILES=0 (skip the
//   per-tile sweep)  ROSEINFER_BENCH_MODELS=llama-1b,llama-8b  ROSEINFER_BENCH_N=16,32,...
//   ROSEINFER_BENCH_FORCE_TILE=k (every fused product on tile shape k, e.g. under a profiler)
//   ROSEINFER_BENCH_SPLITS=1,2,4,8,16 (the slice sweep; default 1 only)
//   ROSEINFER_BENCH_TYPES=Q4_K,Q8_0 (the types timed; default all five)
// The split workspace holds every swept slice count at the largest n in one launch, zeroed once.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/model/quant.h"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/gemm_quant.cuh"
#include "tests/gpu/bench_util.h"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;
using benchutil::cold_copies;

namespace {

constexpr GgmlType kTypes[] = {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ6_K,
                               GgmlType::kQ4_1};
constexpr size_t kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);

struct Shape {
  const char* name;
  int in, out;
};

struct Model {
  const char* name;
  std::vector<Shape> shapes;  // one layer's four products
};

const Model kModels[] = {
    {"llama-1b",
     {{"qkv", 2048, 3072}, {"o", 2048, 2048}, {"gate|up", 2048, 16384}, {"down", 8192, 2048}}},
    {"llama-8b",
     {{"qkv", 4096, 6144}, {"o", 4096, 4096}, {"gate|up", 4096, 28672}, {"down", 14336, 4096}}},
};

std::vector<int> int_list(const char* env, std::vector<int> fallback) {
  if (!env || !*env) return fallback;
  std::vector<int> values;
  for (const char* p = env; *p;) {
    values.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return values;
}

double target_ms() {
  const char* env = std::getenv("ROSEINFER_BENCH_MS");
  return env ? std::max(1.0, std::atof(env)) : 20.0;
}

// `copies` device copies of `bytes` (the first uploaded, the rest copied on the device).
struct Copies {
  std::vector<std::unique_ptr<gputest::DeviceArray<uint8_t>>> arrays;
  Copies(std::vector<uint8_t> bytes, int copies) {
    bytes.resize(bytes.size() + kGemmQuantWeightPadding, 0);  // launch_gemm_quant's contract
    arrays.push_back(std::make_unique<gputest::DeviceArray<uint8_t>>(bytes));
    for (int c = 1; c < copies; ++c) {
      arrays.push_back(std::make_unique<gputest::DeviceArray<uint8_t>>(bytes.size()));
      ROSE_CUDA_CHECK(cudaMemcpy(arrays.back()->get(), arrays[0]->get(), bytes.size(),
                                 cudaMemcpyDeviceToDevice));
    }
  }
  const uint8_t* get(int c) const { return arrays[size_t(c) % arrays.size()]->get(); }
};

// Mean microseconds per call of launch(i) (i cycles the weight copies), over as many calls as fit
// in about target_ms after a warm-up (at least 3).
template <typename Launch>
double time_us(Launch launch) {
  cudaEvent_t begin, end;
  ROSE_CUDA_CHECK(cudaEventCreate(&begin));
  ROSE_CUDA_CHECK(cudaEventCreate(&end));
  const auto run = [&](int calls, int first) {
    ROSE_CUDA_CHECK(cudaEventRecord(begin, nullptr));
    for (int i = 0; i < calls; ++i) launch(first + i);
    ROSE_CUDA_CHECK(cudaEventRecord(end, nullptr));
    ROSE_CUDA_CHECK(cudaEventSynchronize(end));
    float ms = 0.0f;
    ROSE_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
    return 1000.0 * double(ms) / calls;
  };
  run(2, 0);                          // warm-up (first launches, cuBLAS heuristics)
  const double estimate = run(3, 2);  // sizes the timed run
  const int calls = int(std::clamp(target_ms() * 1000.0 / std::max(estimate, 1.0), 3.0, 400.0));
  const double us = run(calls, 5);
  ROSE_CUDA_CHECK(cudaEventDestroy(begin));
  ROSE_CUDA_CHECK(cudaEventDestroy(end));
  return us;
}

struct Totals {  // one layer's four products, per (type, n)
  double fused = 0, unsplit = 0, dequant_cublas = 0, cublas = 0;
};

// Sets the forced slice count for its lifetime (0: the default rule), then restores the default.
struct ForcedSplit {
  explicit ForcedSplit(int splits) { set_gemm_quant_split(splits); }
  ~ForcedSplit() { set_gemm_quant_split(0); }
};

void bench_model(const Model& model, const std::vector<int>& row_counts, bool sweep_tiles,
                 const std::vector<int>& splits_sweep, const std::string& types,
                 cublasHandle_t handle, std::mt19937& rng) {
  const int max_n = *std::max_element(row_counts.begin(), row_counts.end());
  int max_out = 0, max_splits = 1;
  for (const Shape& shape : model.shapes) max_out = std::max(max_out, shape.out);
  for (int s : splits_sweep) max_splits = std::max(max_splits, s);
  const int64_t workspace_bytes =
      gemm_quant_workspace_bytes(std::max(max_splits, kGemmQuantMaxSplits), max_n, max_out);
  gputest::DeviceArray<uint8_t> workspace(size_t(workspace_bytes) + 1);
  ROSE_CUDA_CHECK(cudaMemset(workspace.get(), 0, size_t(workspace_bytes)));
  std::vector<std::vector<Totals>> totals(kNumTypes, std::vector<Totals>(row_counts.size()));
  std::printf("\n%s: us per product; fused TFLOP/s and GB/s of quantized weights; time ratios\n",
              model.name);
  std::printf("%-8s %-5s %5s %9s %7s %7s %9s %9s %8s %8s  %s\n", "shape", "type", "n", "fused_us",
              "TFLOP/s", "GB/s", "deq+cub", "cublas", "f/deq+c", "f/cublas",
              "[tile, slices] per slice count (us) | per tile shape (us)");
  for (const Shape& shape : model.shapes) {
    const float alpha = 1.0f, beta = 0.0f;
    const gputest::Bf16Data x = gputest::random_bf16(size_t(max_n) * size_t(shape.in), rng);
    gputest::DeviceArray<uint16_t> x_dev(x.bits);
    gputest::DeviceArray<uint16_t> y_dev(size_t(max_n) * size_t(shape.out));
    gputest::DeviceArray<uint16_t> scratch(size_t(shape.out) * size_t(shape.in));
    // (c) bf16 weights.
    std::vector<double> cublas_us(row_counts.size());
    {
      const size_t bytes = size_t(shape.in) * size_t(shape.out) * 2;
      const gputest::Bf16Data host =
          gputest::random_bf16(size_t(shape.in) * size_t(shape.out), rng, -0.05f, 0.05f);
      std::vector<uint8_t> raw(bytes);
      std::memcpy(raw.data(), host.bits.data(), bytes);
      const Copies w(raw, cold_copies(bytes));
      for (size_t i = 0; i < row_counts.size(); ++i) {
        const int n = row_counts[i];
        cublas_us[i] = time_us([&](int c) {
          ROSE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, shape.out, n, shape.in,
                                         &alpha, w.get(c), CUDA_R_16BF, shape.in, x_dev.get(),
                                         CUDA_R_16BF, shape.in, &beta, y_dev.get(), CUDA_R_16BF,
                                         shape.out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        });
      }
    }
    for (size_t t = 0; t < kNumTypes; ++t) {
      const GgmlType type = kTypes[t];
      if (types.find(ggml_type_traits(type).name) == std::string::npos) continue;
      const std::vector<uint8_t> bytes =
          benchutil::random_weight_blocks(type, shape.out, shape.in, rng);
      const Copies w(bytes, cold_copies(bytes.size()));
      for (size_t i = 0; i < row_counts.size(); ++i) {
        const int n = row_counts[i];
        const auto fused = [&](int c) {
          launch_gemm_quant(x_dev.get(), w.get(c), uint32_t(type), y_dev.get(), n, shape.in,
                            shape.out, false, DType::kBF16, workspace.get(), workspace_bytes,
                            nullptr);
        };
        const double fused_us = time_us(fused);
        std::vector<double> split_us;
        double unsplit_us = 0;
        for (int splits : splits_sweep) {
          const ForcedSplit forced(splits);
          split_us.push_back(time_us(fused));
          if (splits == 1) unsplit_us = split_us.back();
        }
        if (unsplit_us == 0) {
          const ForcedSplit forced(1);
          unsplit_us = time_us(fused);
        }
        const double dequant_us = time_us([&](int c) {
          launch_dequantize_rows(scratch.get(), DType::kBF16, w.get(c), uint32_t(type), 0,
                                 shape.out, shape.out, shape.in, 0, nullptr);
          ROSE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, shape.out, n, shape.in,
                                         &alpha, scratch.get(), CUDA_R_16BF, shape.in, x_dev.get(),
                                         CUDA_R_16BF, shape.in, &beta, y_dev.get(), CUDA_R_16BF,
                                         shape.out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        });
        Totals& sum = totals[t][i];
        sum.fused += fused_us;
        sum.unsplit += unsplit_us;
        sum.dequant_cublas += dequant_us;
        sum.cublas += cublas_us[i];
        const double flops = 2.0 * n * double(shape.in) * shape.out;
        std::printf("%-8s %-5s %5d %9.2f %7.1f %7.0f %9.2f %9.2f %8.2f %8.2f ", shape.name,
                    ggml_type_traits(type).name, n, fused_us, flops / fused_us / 1e6,
                    double(bytes.size()) / fused_us / 1e3, dequant_us, cublas_us[i],
                    fused_us / dequant_us, fused_us / cublas_us[i]);
        std::printf(
            " [%s, %d]",
            gemm_quant_tile_name(gemm_quant_chosen_tile(uint32_t(type), n, shape.in, shape.out)),
            gemm_quant_splits(uint32_t(type), shape.in, shape.out));
        for (size_t i_s = 0; i_s < splits_sweep.size(); ++i_s)
          std::printf(" s%d %.2f", splits_sweep[i_s], split_us[i_s]);
        if (sweep_tiles) std::printf(" |");
        if (sweep_tiles) {
          for (int tile = 0; tile < gemm_quant_tile_count(); ++tile) {
            // A shape whose activation tile is far below n repeats the decode n / BN times: skip
            // it unless it is the largest.
            const int bn = std::atoi(std::strrchr(gemm_quant_tile_name(tile), 'n') + 1);
            if ((n + bn - 1) / bn > 4 && tile != gemm_quant_tile_count() - 1) {
              std::printf("       -");
              continue;
            }
            const int forced = gemm_quant_tile_forced();
            set_gemm_quant_tile(tile);
            std::printf(" %7.2f", time_us(fused));
            set_gemm_quant_tile(forced);
          }
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  std::printf("%s: one layer's four products (qkv, o, gate|up, down), us; time ratios\n",
              model.name);
  for (size_t t = 0; t < kNumTypes; ++t) {
    if (types.find(ggml_type_traits(kTypes[t]).name) == std::string::npos) continue;
    for (size_t i = 0; i < row_counts.size(); ++i) {
      const Totals& sum = totals[t][i];
      std::printf(
          "  %-8s %-5s n %5d: fused %9.2f  unsplit %9.2f  deq+cublas %9.2f  cublas-bf16 %9.2f  "
          "fused/deq+cublas %.2f  fused/cublas-bf16 %.2f\n",
          model.name, ggml_type_traits(kTypes[t]).name, row_counts[i], sum.fused, sum.unsplit,
          sum.dequant_cublas, sum.cublas, sum.fused / sum.dequant_cublas, sum.fused / sum.cublas);
    }
  }
  std::fflush(stdout);
}

}  // namespace

TEST_CASE("bench: quantized GEMM vs dequantize + cuBLAS vs bf16 cuBLAS, llama-1b and llama-8b" *
          doctest::skip(true)) {
  const std::vector<int> row_counts =
      int_list(std::getenv("ROSEINFER_BENCH_N"), {16, 32, 64, 128, 256, 512, 2048});
  const char* tiles_env = std::getenv("ROSEINFER_BENCH_TILES");
  const bool sweep_tiles = !(tiles_env && tiles_env[0] == '0');
  const std::vector<int> splits_sweep = int_list(std::getenv("ROSEINFER_BENCH_SPLITS"), {1});
  const char* types_env = std::getenv("ROSEINFER_BENCH_TYPES");
  const std::string types = types_env ? types_env : "Q4_K,Q8_0,Q4_0,Q6_K,Q4_1";
  const char* models_env = std::getenv("ROSEINFER_BENCH_MODELS");
  const std::string models = models_env ? models_env : "llama-1b,llama-8b";
  cublasHandle_t handle;
  ROSE_CUBLAS_CHECK(cublasCreate(&handle));
  void* workspace = nullptr;
  ROSE_CUDA_CHECK(cudaMalloc(&workspace, size_t(32) << 20));
  ROSE_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace, size_t(32) << 20));
  // ROSEINFER_BENCH_FORCE_TILE=k: every fused product runs tile shape k (profiling one shape).
  if (const char* force = std::getenv("ROSEINFER_BENCH_FORCE_TILE"))
    set_gemm_quant_tile(std::atoi(force));
  std::mt19937 rng(1);
  for (const Model& model : kModels) {
    if (models.find(model.name) == std::string::npos) continue;
    bench_model(model, row_counts, sweep_tiles, splits_sweep, types, handle, rng);
  }
  ROSE_CUBLAS_CHECK(cublasDestroy(handle));
  ROSE_CUDA_CHECK(cudaFree(workspace));
  CHECK(!row_counts.empty());
}
