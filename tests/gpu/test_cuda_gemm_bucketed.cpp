// BucketedGemm (default mode, above the GEMV's rows): for the gpt2 and llama-1b shapes, bf16 and
// fp16, products at row counts on, next to and between bucket bounds (odd ones included) against
// a CPU fp32 reference on the same rounded inputs; every count must run on a chosen algorithm or
// report false (never a wrong result), and the bucket bounds are as documented.
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/presets.h"
#include "kernels/cuda/gemm_bucketed.h"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;
using namespace rose::gputest;

namespace {

constexpr float kAtol = 1e-2f, kRtol = 1e-2f;

void check_shape(BucketedGemm& gemm, const GemmShape& s, DType dtype, std::mt19937& rng) {
  INFO("shape out " << s.out << " in " << s.in << " f32_out " << s.f32_out << " dtype "
                    << (dtype == DType::kBF16 ? "bf16" : "fp16"));
  const Operand wo =
      random_operand(size_t(s.out) * s.in, 1.0f / std::sqrt(float(s.in)), dtype, rng);
  const Operand xo = random_operand(size_t(s.max_rows) * s.in, 1.0f, dtype, rng);
  const std::vector<float>&w = wo.f32, &x = xo.f32;
  DeviceArray<uint16_t> w_dev(wo.bits), x_dev(xo.bits);  // (out, in), (max_rows, in)
  const size_t ys = s.f32_out ? 4 : 2;
  DeviceArray<uint8_t> y_dev(size_t(s.max_rows) * s.out * ys);
  std::vector<int> counts;
  for (int bound : BucketedGemm::bucket_bounds(s.max_rows)) {
    for (int n : {bound - 1, bound, bound + 1}) {
      if (n >= 5 && n <= s.max_rows) counts.push_back(n);
    }
  }
  int ran = 0;
  for (int n : counts) {
    INFO("n = " << n);
    y_dev.poison();
    if (!gemm.run(x_dev.get(), w_dev.get(), y_dev.get(), n, s.in, s.out, s.f32_out, nullptr)) {
      continue;  // refused: the backend runs cublasGemmEx instead
    }
    ++ran;
    std::vector<uint8_t> y(size_t(n) * s.out * ys);
    ROSE_CUDA_CHECK(cudaDeviceSynchronize());
    ROSE_CUDA_CHECK(cudaMemcpy(y.data(), y_dev.get(), y.size(), cudaMemcpyDeviceToHost));
    for (int r : {0, n / 2, n - 1}) {
      std::vector<float> expected(size_t(s.out)), actual(size_t(s.out));
      for (int o = 0; o < s.out; ++o) {
        float acc = 0.0f;
        for (int k = 0; k < s.in; ++k) acc += x[size_t(r) * s.in + k] * w[size_t(o) * s.in + k];
        expected[o] = acc;
        actual[o] = output_value(y, size_t(r) * s.out + o, s.f32_out, dtype);
      }
      INFO("row " << r);
      check_close(actual, expected, kAtol, kRtol, "bucketed gemm vs fp32 reference");
    }
  }
  // Refusals are the exception, not the rule: most counts run on the chosen algorithms.
  CHECK(ran * 2 > int(counts.size()));
}

}  // namespace

TEST_CASE("bucketed gemm: bucket bounds, two per doubling, the last one the row budget") {
  CHECK(BucketedGemm::bucket_bounds(8) == std::vector<int>{8});
  CHECK(BucketedGemm::bucket_bounds(100) == std::vector<int>{8, 16, 24, 32, 48, 64, 96, 100});
  CHECK(BucketedGemm::bucket_bounds(128) == std::vector<int>{8, 16, 24, 32, 48, 64, 96, 128});
  const std::vector<int> big = BucketedGemm::bucket_bounds(16384);
  CHECK(big.size() == 22);
  CHECK(big.back() == 16384);
  CHECK(big[big.size() - 2] == 12288);
}

TEST_CASE("bucketed gemm: gpt2 and llama-1b shapes against an fp32 reference") {
  for (const char* name : {"gpt2", "llama-1b"}) {
    const ModelConfig c = *preset_config(name);
    const int H = c.hidden_size, I = c.intermediate_size;
    const std::vector<GemmShape> shapes = {
        GemmShape{c.qkv_dim(), H, false, 1500}, GemmShape{H, c.q_dim(), false, 1500},
        GemmShape{int(c.mlp_up_rows()), H, false, 300}, GemmShape{H, I, false, 300},
        GemmShape{c.vocab_size, H, true, 70}};
    for (DType dtype : {DType::kBF16, DType::kFP16}) {
      DeviceArray<uint8_t> workspace(size_t(32) << 20);
      BucketedGemm gemm(shapes, dtype, workspace.get(), size_t(32) << 20);
      MESSAGE(name << ": " << gemm.describe());
      std::mt19937 rng(uint32_t(H) * 31u + uint32_t(dtype));
      for (const GemmShape& s : shapes) check_shape(gemm, s, dtype, rng);
    }
  }
}
