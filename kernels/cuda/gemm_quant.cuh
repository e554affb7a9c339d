#pragma once
// y = x W^T on the tensor cores with W kept in its GGUF (ggml) blocks: the weight tiles are decoded
// inside the kernel, so decode at batch 9..512 and prefill read the compact blocks once instead of
// decoding the whole matrix to a bf16 scratch for cuBLAS. Types are ggml's ids (rose::GgmlType's
// values): engine/model/quant.h needs C++20 and the .cu files are C++17.
//
// Numerics. Each weight element is decoded to the activation dtype with exactly the value
// launch_dequantize_rows writes (the CPU reference's fp32 value, rounded to bf16/fp16), and
// multiplied by x on the tensor cores (mma.sync m16n8k16, or wgmma m64nNk16 for large shapes:
// bf16 or fp16 inputs, fp32 accumulation; the two give the same bits): the products are exact.
// Split-K: k is cut into S slices of whole 256-element steps (S = gemm_quant_splits(type, in, out):
// kernels/common/gemm_quant_split.h's rule from the shape and the SM count, never from n). Each
// slice's sum is one fp32 accumulator that takes the slice's mma steps of 16 elements in one fixed
// order (which 16 elements form a step depends only on the type); with S > 1 the S fp32 partials
// are then added in slice order, ((p0 + p1) + p2) + ..., in fp32. Against sum(w x) in exact
// arithmetic the error is at most about (in / 16 + 16) 2^-22 sum |w x| for the tensor core's
// accumulation, plus (S - 1) 2^-24 sum |w x| for the partials' adds (each rounds a sum no larger
// than sum |w x| to nearest): (in / 16 + 16 + (S - 1) / 4) 2^-22 sum |w x| in all
// (tests/gpu/test_cuda_gemm_quant.cpp derives it), plus the output's rounding when y is bf16/fp16.
//
// Batch invariance: the tile shape (weight rows x activation rows per thread block) is chosen from
// (n, out), but an output's sequence of mma steps in each slice, and the order the slices are
// added in, are the same in every tile shape, and no step mixes activation rows, so row r of y is
// bit-identical whatever n is (for a fixed S; a different S is a different, equally bounded, sum).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/common/gemm_quant_split.h"
#include "kernels/cuda/dtype.cuh"

namespace rose {

// Bytes that must stay allocated after a matrix's last block. The kernel copies 16-byte aligned
// spans with cp.async, whose src-size operand reads only the bytes inside the row and zero-fills
// the rest; but the last span of the last row is a 16-byte access that may end up to 15 bytes past
// the blocks, which compute-sanitizer reports as out of bounds. Padding the allocation keeps every
// access inside it, and costs nothing in the k loop (an exact tail copy there made the engine's
// batch-16 decode 20% slower, measured on the H100).
constexpr int kGemmQuantWeightPadding = 16;

// True when launch_gemm_quant handles this type and width: Q8_0, Q4_0, Q4_1, Q4_K or Q6_K (a
// GgmlType id), `in` a positive multiple of the type's block size (32, or 256 for Q4_K / Q6_K).
bool gemm_quant_supported(uint32_t ggml_type, int in);

// y (n, out) = x (n, in) W^T.
//   x:    (n, in) in dtype (bf16 or fp16), rows back to back; 16-byte aligned
//   w:    (out, in) stored as `out` rows of in / block_elems ggml blocks of ggml_type, each row
//         right after the previous one; 16-byte aligned, its allocation kGemmQuantWeightPadding
//         bytes longer (see there)
//   y:    (n, y_stride) in fp32 when f32_out, else in dtype; columns [0, out) of each row are
//         written, so a matrix stored as row ranges of different types (GGUF q | k | v) fills one
//         output through one launch per range at y + range start
//   workspace: (workspace_bytes) 16-byte aligned, zeroed once before its first use (every launch
//         leaves its counters at zero again); needed when the product splits
//         (gemm_quant_splits > 1), else unused and may be null. Its layout follows from
//         workspace_bytes alone (gemm_quant_split.h: arrival counters, then (S, rows, out) fp32
//         partials), so launches on one stream may share it as long as they pass the same size
//         (each starts after the previous one completes). gemm_quant_workspace_bytes(S, rows, out)
//         bytes hold `rows` rows; with fewer than n rows take, the rows run in several launches of
//         as many rows as fit (the same bits: rows are independent); fewer than min(n, 16) rows
//         is an error.
//   n >= 1 (any count: built for 9..512 and for prefill chunks of thousands); in: as
//   gemm_quant_supported; out >= 1; y_stride: elements between rows of y, >= out; 0 means out.
// Launched with PDL (kernels/cuda/launch.cuh): the first weight tile is fetched before waiting for
// the previous kernel (weights are constants), x and the workspace only after. No allocation, no
// synchronization.
void launch_gemm_quant(const void* x, const uint8_t* w, uint32_t ggml_type, void* y, int n, int in,
                       int out, bool f32_out, DType dtype, void* workspace, int64_t workspace_bytes,
                       cudaStream_t stream, int y_stride = 0);

// The k slices launch_gemm_quant uses for a product on the current device: the rule of
// kernels/common/gemm_quant_split.h, or the count forced by set_gemm_quant_split or by
// ROSEINFER_GEMM_QUANT_SPLIT_K=S (0 or 1: no split, the kernel as it was before split-K), at most
// one slice per 256-element step of `in`.
int gemm_quant_splits(uint32_t ggml_type, int in, int out);
// splits >= 1 forces that many slices for every product (tests, timing); 0 goes back to the
// default. Not thread-safe: set it while no launch is being made.
void set_gemm_quant_split(int splits);
// True when ROSEINFER_GEMM_QUANT_SPLIT_K is 0 or 1: the comparison switch for the whole path
// before split-K (the backend then also keeps its row limits of then: quant_gemm_row_limit).
bool gemm_quant_split_k_disabled();

// The tile shapes the kernel is compiled for, for the timing driver and the tests: shape `tile`
// (0 .. gemm_quant_tile_count() - 1) forces one; -1 (the default) lets launch_gemm_quant choose by
// (type, n, in, out). Every shape gives the same bits (see Batch invariance above). Not
// thread-safe: set it while no launch is being made.
int gemm_quant_tile_count();
void set_gemm_quant_tile(int tile);
int gemm_quant_tile_forced();  // the shape set_gemm_quant_tile forced, or -1
// "R x W w nN": R weight rows per warp, W warps, N activation rows per tile; and the shape
// launch_gemm_quant would choose for a product.
const char* gemm_quant_tile_name(int tile);
int gemm_quant_chosen_tile(uint32_t ggml_type, int n, int in, int out);

}  // namespace rose
