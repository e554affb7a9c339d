#pragma once
// The quantized tensor-core GEMM's split-K (kernels/cuda/gemm_quant.cuh): how many slices of k one
// product is cut into, and the workspace its fp32 partials take. Shared by the kernel's launcher
// and the CUDA backend's workspace plan, which sizes the workspace without CUDA: plain C++17 (nvcc
// includes it). The slice count depends on the matrix's shape and the SM count only, never on the
// number of activation rows, so row r of y keeps its bits whatever n is.
#include <cstdint>

namespace rose {

// Slices are whole 256-element "big steps" of k (one K-quant block, eight of a 32-element type:
// the kernel's weight-copy unit), so a slice boundary never splits a block or a copy.
constexpr int kGemmQuantSliceElems = 256;
// The smallest tile of any of the kernel's compiled shapes: 32 weight rows (output columns) by 16
// activation rows. A launch has at most ceil(n / 16) x ceil(out / 32) tiles, each with one arrival
// counter in the workspace (gemm_quant.cu checks every shape against these).
constexpr int kGemmQuantMinTileCols = 32;
constexpr int kGemmQuantMinTileRows = 16;
// The rule's parameters, chosen from tests/gpu/bench_gemm_quant.cpp's slice sweep on the H100
// (results/2026-11-24-splitk): slices are added (doubling) while the product's tiles at the
// smallest weight tile, times the slices, stay within kGemmQuantTilesPerSm per SM; the first split
// needs slices of at least kGemmQuantFirstSliceK elements of k, every further one
// kGemmQuantMinSliceK (shorter slices pay the pipeline's fill and the partials' traffic for too
// little decode). Q4_K at 16 rows, us for 1 / 2 / 4 / 8 slices: llama-1b o (2048 x 2048: 64
// tiles) 12.0 / 9.4 / 9.1 / 9.2, down (2048 x 8192) 44.7 / 26.1 / 20.6 / 23.5; llama-8b down
// (4096 x 14336) 85.6 / 69.7 / 62.6 / 70.6; gate|up (512 and 896 tiles) gain nothing.
constexpr int kGemmQuantTilesPerSm = 4;
constexpr int kGemmQuantFirstSliceK = 1024;
constexpr int kGemmQuantMinSliceK = 2048;
constexpr int kGemmQuantMaxSplits = 16;

// Slices of k for a product of a kept (out, in) matrix on a device of num_sms SMs: 1 (no split)
// for a matrix with enough output tiles or too short a k.
inline int gemm_quant_split_k(int64_t in, int64_t out, int num_sms) {
  const int64_t tiles = (out + kGemmQuantMinTileCols - 1) / kGemmQuantMinTileCols;
  const int64_t target = int64_t(kGemmQuantTilesPerSm) * num_sms;
  int splits = 1;
  while (splits * 2 <= kGemmQuantMaxSplits && tiles * splits * 2 <= target &&
         in / (splits * 2) >= (splits == 1 ? kGemmQuantFirstSliceK : kGemmQuantMinSliceK)) {
    splits *= 2;
  }
  return splits;
}

// splits x out of any product the rule splits (splits > 1): at most the target's tiles x 32
// columns, whatever the matrix. The backend sizes its one workspace by this.
inline int64_t gemm_quant_max_split_cols(int num_sms) {
  return int64_t(kGemmQuantTilesPerSm) * num_sms * kGemmQuantMinTileCols;
}

// The workspace's layout follows from its size alone, never from a launch: the first 1/64 of it
// (rounded down to 256 bytes) holds the arrival counters (int32, one per tile of a launch), the
// rest the partials, (splits, rows, out) fp32. A launch's partials then never land on the
// counters another launch needs at zero, whatever their shapes (launches sharing one workspace
// pass the same size).
inline int64_t gemm_quant_counter_bytes(int64_t workspace_bytes) {
  return workspace_bytes / 64 / 256 * 256;
}
inline int64_t gemm_quant_tiles_bound(int64_t rows, int64_t out) {
  return (rows + kGemmQuantMinTileRows - 1) / kGemmQuantMinTileRows *
         ((out + kGemmQuantMinTileCols - 1) / kGemmQuantMinTileCols);
}
// Whether one split launch of `rows` activation rows and `out` columns fits a workspace.
inline bool gemm_quant_workspace_fits(int64_t workspace_bytes, int splits, int64_t rows,
                                      int64_t out) {
  const int64_t counters = gemm_quant_counter_bytes(workspace_bytes);
  return gemm_quant_tiles_bound(rows, out) * 4 <= counters &&
         int64_t(splits) * rows * out * 4 <= workspace_bytes - counters;
}
// The smallest workspace size of that layout that fits such a launch: 64 C with C a multiple of
// 256 that holds the counters and at least a 63rd of the partials (so the other 63 C hold them).
// 0 when splits == 1 (the kernel writes y directly).
inline int64_t gemm_quant_workspace_bytes(int splits, int64_t rows, int64_t out) {
  if (splits <= 1) return 0;
  const int64_t partials = int64_t(splits) * rows * out * 4;
  int64_t counters = gemm_quant_tiles_bound(rows, out) * 4;
  if (counters < (partials + 62) / 63) counters = (partials + 62) / 63;
  return 64 * ((counters + 255) / 256 * 256);
}

// A workspace that holds every split launch of up to `rows` rows the rule makes on this device:
// splits x out <= max_split_cols, and out <= max_split_cols / 2.
inline int64_t gemm_quant_workspace_bound(int64_t rows, int num_sms) {
  return gemm_quant_workspace_bytes(2, rows, gemm_quant_max_split_cols(num_sms) / 2);
}

}  // namespace rose
