#pragma once
// Linear layers kept in their ggml blocks on the device (a GGUF's own types, or --quantize): which
// matrices can stay quantized, their upload, and the product y = x W^T on them (the quantized GEMV
// for decode-sized batches, a dequantized copy into a scratch matrix and the dense GEMM above).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/weights.h"
#include "kernels/common/ggml_type.h"
#include "kernels/cuda/dtype.cuh"

namespace rose {

// Rows [row_begin, row_begin + rows) of a matrix, stored as `rows` rows of cols / block_elems
// blocks of `type`, one row after the other: consecutive stored parts of one type (a GGUF's q, k
// and v, or gate and up, when they share it).
struct QuantRange {
  const uint8_t* blocks = nullptr;  // (rows, cols / block_elems) blocks; 256-byte aligned
  GgmlType type = GgmlType::kQ8_0;
  int64_t row_begin = 0;
  int64_t rows = 0;
};

// Whether the canonical matrix made of `parts` can stay in its blocks: every part a type the
// quantized GEMV reads (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K) with whole blocks per row.
bool can_keep_quantized(const std::vector<StoredPart>& parts);

// Device bytes upload_quantized() needs for `parts` (each range 256-byte aligned).
int64_t quantized_upload_bytes(const std::vector<StoredPart>& parts);

// Copies the parts' blocks to `dst` (quantized_upload_bytes of device memory), rows in canonical
// order (a part's llama q/k un-permutation moves whole block rows), and returns their ranges.
// Synchronous: the host copies are done when it returns.
std::vector<QuantRange> upload_quantized(const std::vector<StoredPart>& parts, char* dst);

}  // namespace rose
