#include "engine/backend/cuda/stored_upload.h"

#include <algorithm>
#include <cstring>

#include "engine/common/error.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/dequant.cuh"

namespace rose {

namespace {

int64_t row_bytes(const StoredPart& part) {
  const GgmlTypeTraits& traits = ggml_type_traits(part.type);
  return part.cols / traits.block_elems * traits.block_bytes;
}

}  // namespace

bool device_decodable(const std::vector<StoredPart>& parts) {
  for (const StoredPart& part : parts) {
    const GgmlTypeTraits& traits = ggml_type_traits(part.type);
    const bool heads_ok = part.unpermute_heads == 0 ||
                          (part.unpermute_heads > 0 && part.rows % (2 * part.unpermute_heads) == 0);
    if (!device_dequant_supported(uint32_t(part.type)) || part.rows < 0 || part.cols <= 0 ||
        part.cols % traits.block_elems != 0 || !heads_ok ||
        int64_t(part.bytes.size()) != part.rows * row_bytes(part)) {
      return false;
    }
  }
  return true;
}

int64_t StoredUploader::staging_bytes_for(const std::vector<StoredPart>& parts, int64_t cap) {
  int64_t bytes = 0;
  for (const StoredPart& part : parts) {
    bytes = std::max(bytes, std::max(std::min(int64_t(part.bytes.size()), cap), row_bytes(part)));
  }
  return bytes;
}

StoredUploader::StoredUploader(int64_t staging_bytes, cudaStream_t stream)
    : staging_bytes_(staging_bytes), stream_(stream) {
  try {
    for (Slot& slot : slots_) {
      ROSE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&slot.host), size_t(staging_bytes)));
      ROSE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&slot.device), size_t(staging_bytes)));
      ROSE_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
    }
  } catch (...) {
    release();
    throw;
  }
}

StoredUploader::~StoredUploader() {
  if (slots_[0].host || slots_[1].host) cudaStreamSynchronize(stream_);  // errors ignored: noexcept
  release();
}

void StoredUploader::release() noexcept {
  for (Slot& slot : slots_) {
    if (slot.done) cudaEventDestroy(slot.done);
    if (slot.device) cudaFree(slot.device);
    if (slot.host) cudaFreeHost(slot.host);
    slot = Slot{};
  }
}

void StoredUploader::finish() {
  ROSE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  for (Slot& slot : slots_) {
    ROSE_CUDA_CHECK(cudaEventDestroy(slot.done));
    ROSE_CUDA_CHECK(cudaFree(slot.device));
    ROSE_CUDA_CHECK(cudaFreeHost(slot.host));
    slot = Slot{};
  }
}

void StoredUploader::upload(const std::vector<StoredPart>& parts, void* dst, DType dtype) {
  char* out = static_cast<char*>(dst);
  for (const StoredPart& part : parts) {
    upload_part(part, out, dtype);
    out += part.rows * part.cols * int64_t(dtype_size(dtype));
  }
}

// Whole rows per chunk, so each chunk is whole blocks and the decoder knows its first row.
void StoredUploader::upload_part(const StoredPart& part, char* dst, DType dtype) {
  ROSE_ASSERT(slots_[0].host && device_decodable({part}));
  const int64_t per_row = row_bytes(part);
  const int64_t chunk_rows = staging_bytes_ / per_row;
  ROSE_ASSERT(chunk_rows >= 1);
  for (int64_t row = 0; row < part.rows; row += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, part.rows - row);
    const size_t bytes = size_t(rows * per_row);
    Slot& slot = slots_[next_slot_];
    next_slot_ ^= 1;
    // The slot's previous chunk has been copied up and decoded: its buffers are free again.
    ROSE_CUDA_CHECK(cudaEventSynchronize(slot.done));
    std::memcpy(slot.host, part.bytes.data() + row * per_row, bytes);
    ROSE_CUDA_CHECK(
        cudaMemcpyAsync(slot.device, slot.host, bytes, cudaMemcpyHostToDevice, stream_));
    launch_dequantize_rows(dst, dtype, slot.device, uint32_t(part.type), row, rows, part.rows,
                           part.cols, part.unpermute_heads, stream_);
    ROSE_CUDA_CHECK(cudaEventRecord(slot.done, stream_));
    bytes_uploaded_ += int64_t(bytes);
  }
}

}  // namespace rose
