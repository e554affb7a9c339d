// Linear layers kept in ggml blocks on the device (quantized_weights.h).
#include "engine/backend/cuda/quantized_weights.h"

#include <algorithm>
#include <climits>

#include "engine/model/quant.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/gemm_quant.cuh"
#include "kernels/cuda/gemv_quant.cuh"

namespace rose {
namespace {

constexpr int64_t kRangeAlign = 256;  // covers every type's load alignment (gemv_quant.cuh)

int64_t align_range(int64_t bytes) { return (bytes + kRangeAlign - 1) / kRangeAlign * kRangeAlign; }

int64_t row_bytes(const StoredPart& part) {
  return gemv_quant_row_bytes(uint32_t(part.type), int(part.cols));
}

}  // namespace

bool can_keep_quantized(const std::vector<StoredPart>& parts) {
  if (parts.empty()) return false;
  for (const StoredPart& part : parts) {
    if (part.cols != parts.front().cols || part.cols > INT32_MAX) return false;
    if (!gemv_quant_supported(uint32_t(part.type), 1, int(part.cols))) return false;
    if (int64_t(part.bytes.size()) != part.rows * row_bytes(part)) return false;
    if (part.unpermute_heads > 0 &&
        (part.rows % part.unpermute_heads != 0 || (part.rows / part.unpermute_heads) % 2 != 0)) {
      return false;
    }
  }
  return true;
}

// Parts of the type of the part before them follow it directly (one range: a GGUF's gate | up of
// one type stays one matrix for the fused gated GEMV); a new type starts a new 256-byte aligned
// range. Row sizes keep each type's own alignment within a range (Q4_K rows are 144-byte
// multiples, Q4_1 rows 20-byte multiples).
int64_t quantized_upload_bytes(const std::vector<StoredPart>& parts) {
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0 && parts[i].type != parts[i - 1].type) total = align_range(total);
    total += int64_t(parts[i].bytes.size());
  }
  return align_range(total + kGemmQuantWeightPadding);  // the GEMM's last 16-byte copy
}

std::vector<QuantRange> upload_quantized(const std::vector<StoredPart>& parts, char* dst) {
  std::vector<QuantRange> ranges;
  std::vector<uint8_t> reordered;
  int64_t row_begin = 0, offset = 0;
  for (const StoredPart& part : parts) {
    const int64_t stride = row_bytes(part);
    const uint8_t* src = part.bytes.data();
    if (part.unpermute_heads > 0) {  // whole rows move: the blocks of a row stay together
      reordered.resize(part.bytes.size());
      for (int64_t row = 0; row < part.rows; ++row) {
        const int64_t to = unpermuted_row(row, part.rows, part.unpermute_heads);
        std::copy_n(src + row * stride, stride, reordered.data() + to * stride);
      }
      src = reordered.data();
    }
    if (!ranges.empty() && ranges.back().type == part.type) {
      ranges.back().rows += part.rows;  // right after the previous part (see above)
    } else {
      offset = align_range(offset);
      ranges.push_back(QuantRange{reinterpret_cast<const uint8_t*>(dst + offset), part.type,
                                  row_begin, part.rows});
    }
    ROSE_CUDA_CHECK(cudaMemcpy(dst + offset, src, part.bytes.size(), cudaMemcpyHostToDevice));
    offset += int64_t(part.bytes.size());
    row_begin += part.rows;
  }
  return ranges;
}

}  // namespace rose
