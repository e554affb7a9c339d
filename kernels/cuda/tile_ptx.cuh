#pragma once
// PTX wrappers the tensor-core tile kernels share (attention_prefill.cu, gemm_quant.cu,
// gemv_quant.cu): cp.async copies, ldmatrix, mma.sync m16n8k16 and bf16/fp16 register packing.
// Included from .cu files only.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace rose {

// A generic pointer into shared memory as the 32-bit shared-window address PTX expects.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- cp.async: global -> shared without registers, completion tracked per thread in groups ----

// Copies 16 bytes from global `src` to shared `dst` (both 16-byte aligned); only the first
// src_bytes (0..16) are read, the rest of the 16 are zero-filled (0: src must still be a valid
// address, nothing is read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// ---- Fragments (PTX ISA, mma.m16n8k16 with 16-bit inputs) ---------------------------------------
// Lane l, g = l / 4, t = l % 4. Each 32-bit register holds two 16-bit elements, the lower column
// (or k) index in the low half.
//   A (16x16, row major), 4 regs: a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..],
//     a3 = A[g+8][2t+8..].
//   B (16x8, "col" = k fastest), 2 regs: b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g].
//   C (16x8, fp32), 4 floats: c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1].

// ldmatrix.x4: lanes 8i..8i+7 give the row addresses (shared_address) of 8x8 matrix i; lane l
// receives register i = element (row g, columns 2t, 2t+1) of matrix i; with kTrans, (rows 2t,
// 2t+1, column g).
template <bool kTrans = false>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  }
}

// c += A B on the tensor cores: one m16n8k16 of T (bf16 or fp16) inputs, fp32 accumulate.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, __half>, "bf16 or fp16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats rounded to T (bf16 or fp16) as one register, lo in the low half (as in memory).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t bits;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    memcpy(&bits, &v, 4);
  } else {
    static_assert(std::is_same_v<T, __half>, "bf16 or fp16");
    const __half2 v = __floats2half2_rn(lo, hi);
    memcpy(&bits, &v, 4);
  }
  return bits;
}

}  // namespace rose
