#pragma once
// Helpers for the GPU tests: device buffers, bf16/fp16 rounding on the host (so the CPU reference
// sees exactly the values the GPU kernels read), random fills and tolerance checks.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/dtype.cuh"

namespace rose::gputest {

inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);                  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}
inline float bf16_bits_to_f32(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline float round_bf16(float f) { return bf16_bits_to_f32(f32_to_bf16_bits(f)); }

// Device memory for `count` elements of T, poisoned (all bytes 0xFF: NaN for floats, -1 for ints)
// so anything a kernel fails to write shows in the comparison.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    ROSE_CUDA_CHECK(cudaMalloc(&ptr_, std::max<size_t>(count, 1) * sizeof(T)));
    poison();
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return static_cast<T*>(ptr_); }
  size_t size() const { return count_; }
  void poison() {
    ROSE_CUDA_CHECK(cudaMemset(ptr_, 0xFF, std::max<size_t>(count_, 1) * sizeof(T)));
  }
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() == count_);
    ROSE_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    ROSE_CUDA_CHECK(cudaDeviceSynchronize());
    ROSE_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t count_ = 0;
};

// Random values already rounded to bf16, as fp32 (for the reference) and as bf16 bits (for the
// GPU).
struct Bf16Data {
  std::vector<float> f32;
  std::vector<uint16_t> bits;
};
inline Bf16Data random_bf16(size_t count, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Bf16Data d;
  d.f32.resize(count);
  d.bits.resize(count);
  for (size_t i = 0; i < count; ++i) {
    d.bits[i] = f32_to_bf16_bits(dist(rng));
    d.f32[i] = bf16_bits_to_f32(d.bits[i]);
  }
  return d;
}
inline std::vector<float> to_f32(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_bits_to_f32(bits[i]);
  return out;
}

// Every element within atol + rtol |expected|; reports the first few misses and the count.
inline void check_close(const std::vector<float>& got, const std::vector<float>& expected,
                        float atol, float rtol, const char* what) {
  REQUIRE(got.size() == expected.size());
  size_t misses = 0;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(expected[i]));
    const double bound = atol + rtol * std::fabs(double(expected[i]));
    if (!(err <= bound)) {  // NaN counts as a miss
      if (misses < 5) {
        MESSAGE(what << ": element " << i << " got " << got[i] << " expected " << expected[i]);
      }
      ++misses;
    }
    if (err > worst) worst = err;
  }
  INFO(what << ": worst abs error " << worst << " over " << got.size() << " elements");
  CHECK(misses == 0);
}

// Storage bits of an fp32 value that is exactly representable in bf16 and in fp16 (bf16 values of
// magnitude >= 2^-10 are exact in both).
inline uint16_t storage_bits(float f, DType dtype) {
  if (dtype == DType::kBF16) return f32_to_bf16_bits(f);
  const __half_raw raw = __float2half_rn(f);
  return raw.x;
}

// Element `index` of a GEMM output downloaded as bytes: fp32 when f32_out, else dtype.
inline float output_value(const std::vector<uint8_t>& y, size_t index, bool f32_out, DType dtype) {
  if (f32_out) {
    float f;
    std::memcpy(&f, y.data() + index * 4, 4);
    return f;
  }
  uint16_t bits;
  std::memcpy(&bits, y.data() + index * 2, 2);
  if (dtype == DType::kBF16) return bf16_bits_to_f32(bits);
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

// Random values on the bf16 grid, away from fp16's subnormals; f32 for the reference, bits for the
// device (count,).
struct Operand {
  std::vector<float> f32;
  std::vector<uint16_t> bits;
};
inline Operand random_operand(size_t count, float scale, DType dtype, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(0.25f, 1.0f);
  Operand o;
  o.f32.resize(count);
  o.bits.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const float sign = (rng() & 1) ? -1.0f : 1.0f;
    o.f32[i] = round_bf16(sign * dist(rng) * scale);
    o.bits[i] = storage_bits(o.f32[i], dtype);
  }
  return o;
}

// For the timing drivers: true when `name` is in the comma-separated list of environment variable
// `var` (ROSEINFER_BENCH_ROWS=3,4), or the variable is unset.
inline bool env_selects(const char* var, const std::string& name) {
  const char* env = std::getenv(var);
  if (!env) return true;
  const std::string list = std::string(",") + env + ",";
  return list.find("," + name + ",") != std::string::npos;
}

}  // namespace rose::gputest
