// InvariantGemm (issue 10): for every linear-layer shape of the tiny, gpt2 and llama-1b presets,
// in bf16 and fp16, row r of the M-row product must equal, byte for byte, row r of the largest
// product and the 1-row product of that row alone, for M in 1, 2, 7, 64, 255, 256, 1024 (8192 for
// llama-1b's token-side shapes, the default token budget). Values are also held to a CPU fp32
// reference (tolerance atol 1e-2 + rtol 1e-2, bf16's ~4e-3 relative step plus summation order).
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/model/presets.h"
#include "kernels/cuda/gemm_invariant.h"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;
using namespace rose::gputest;

namespace {

constexpr float kAtol = 1e-2f, kRtol = 1e-2f;
constexpr int kRowCounts[] = {1, 2, 7, 64, 255, 256, 1024, 8192};

std::vector<uint8_t> download_bytes(const void* ptr, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  ROSE_CUDA_CHECK(cudaDeviceSynchronize());
  ROSE_CUDA_CHECK(cudaMemcpy(host.data(), ptr, bytes, cudaMemcpyDeviceToHost));
  return host;
}

// The shapes CudaBackend::gemm_shapes lists for a model (token side up to `tokens` rows, the
// lm_head up to `seqs`).
std::vector<GemmShape> model_shapes(const ModelConfig& c, int tokens, int seqs) {
  const bool gpt2 = c.arch == Arch::kGpt2;
  const int H = c.hidden_size, I = c.intermediate_size;
  return {GemmShape{c.qkv_dim(), H, false, tokens}, GemmShape{H, c.q_dim(), false, tokens},
          GemmShape{gpt2 ? I : 2 * I, H, false, tokens}, GemmShape{H, I, false, tokens},
          GemmShape{c.vocab_size, H, true, seqs}};
}

// One shape: bitwise row invariance over kRowCounts and the CPU reference on two rows.
void check_shape(InvariantGemm& gemm, const GemmShape& s, DType dtype, std::mt19937& rng) {
  INFO("shape out " << s.out << " in " << s.in << " f32_out " << s.f32_out << " dtype "
                    << (dtype == DType::kBF16 ? "bf16" : "fp16"));
  const int rows = s.max_rows;
  const size_t ys = s.f32_out ? 4 : 2, row_bytes = size_t(s.out) * ys;
  const Operand w = random_operand(size_t(s.out) * s.in, 1.0f / std::sqrt(float(s.in)), dtype, rng);
  const Operand x = random_operand(size_t(rows) * s.in, 1.0f, dtype, rng);
  DeviceArray<uint16_t> w_dev(w.bits), x_dev(x.bits);  // (out, in), (rows, in)
  DeviceArray<uint16_t> x1_dev(size_t(s.in));          // (1, in): one row alone
  DeviceArray<uint8_t> y_full(size_t(rows) * row_bytes), y_dev(size_t(rows) * row_bytes);
  gemm.run(x_dev.get(), w_dev.get(), y_full.get(), rows, s.in, s.out, s.f32_out, nullptr);
  const std::vector<uint8_t> full = download_bytes(y_full.get(), size_t(rows) * row_bytes);
  for (int m : kRowCounts) {
    if (m > rows) continue;
    INFO("M = " << m);
    y_dev.poison();
    gemm.run(x_dev.get(), w_dev.get(), y_dev.get(), m, s.in, s.out, s.f32_out, nullptr);
    const std::vector<uint8_t> got = download_bytes(y_dev.get(), size_t(m) * row_bytes);
    CHECK(std::memcmp(got.data(), full.data(), got.size()) == 0);  // every row vs the largest M
    for (int r : {0, m / 2, m - 1}) {  // and sample rows vs the row alone (M = 1)
      ROSE_CUDA_CHECK(cudaMemcpy(x1_dev.get(), x_dev.get() + size_t(r) * s.in, size_t(s.in) * 2,
                                 cudaMemcpyDeviceToDevice));
      y_dev.poison();
      gemm.run(x1_dev.get(), w_dev.get(), y_dev.get(), 1, s.in, s.out, s.f32_out, nullptr);
      const std::vector<uint8_t> alone = download_bytes(y_dev.get(), row_bytes);
      INFO("row " << r);
      CHECK(std::memcmp(alone.data(), got.data() + size_t(r) * row_bytes, row_bytes) == 0);
    }
  }
  for (int r : {0, rows - 1}) {  // values: fp32 reference on the same (rounded) inputs
    std::vector<float> expected(size_t(s.out)), actual(size_t(s.out));
    for (int o = 0; o < s.out; ++o) {
      float acc = 0.0f;
      for (int k = 0; k < s.in; ++k)
        acc += x.f32[size_t(r) * s.in + k] * w.f32[size_t(o) * s.in + k];
      expected[o] = acc;
      actual[o] = output_value(full, size_t(r) * s.out + o, s.f32_out, dtype);
    }
    check_close(actual, expected, kAtol, kRtol, "invariant gemm vs fp32 reference");
  }
}

void check_preset(const std::string& name, int tokens, int seqs, bool fixed_only = false) {
  const ModelConfig c = *preset_config(name);
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    const std::vector<GemmShape> shapes = model_shapes(c, tokens, seqs);
    InvariantGemm gemm(shapes, dtype, nullptr, fixed_only);
    MESSAGE(name << ": " << gemm.describe());
    std::mt19937 rng(uint32_t(c.hidden_size) * 7919u + uint32_t(dtype));
    for (const GemmShape& s : shapes) check_shape(gemm, s, dtype, rng);
  }
}

}  // namespace

TEST_CASE("invariant gemm: tiny preset shapes") { check_preset("tiny", 1024, 256); }

TEST_CASE("invariant gemm: gpt2 preset shapes") { check_preset("gpt2", 1024, 256); }

TEST_CASE("invariant gemm: llama-1b preset shapes, 8192-token budget") {
  check_preset("llama-1b", 8192, 1024);
}

TEST_CASE("invariant gemm: the fixed-order fallback kernel on the tiny preset's shapes") {
  check_preset("tiny", 1024, 256, /*fixed_only=*/true);
}

TEST_CASE("invariant gemm: an unprepared shape or row count is refused") {
  InvariantGemm gemm({GemmShape{64, 32, false, 16}}, DType::kBF16, nullptr);
  DeviceArray<uint16_t> x(17 * 32), w(64 * 32), y(17 * 64);
  CHECK_THROWS(gemm.run(x.get(), w.get(), y.get(), 17, 32, 64, false, nullptr));
  CHECK_THROWS(gemm.run(x.get(), w.get(), y.get(), 4, 32, 65, false, nullptr));
  CHECK_NOTHROW(gemm.run(x.get(), w.get(), y.get(), 16, 32, 64, false, nullptr));
}
