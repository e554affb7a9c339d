#pragma once
// Loads a WeightSource's stored parts (GGUF blocks, WeightSource::stored_parts) onto the device
// and decodes them there (kernels/cuda/dequant.cuh): the file's compact bytes are copied in row
// chunks through two pinned + device staging slots, so copying one chunk out of the mapping
// overlaps with uploading and decoding the previous one. A quantized model then never exists as
// fp32 on the host, which is what keeps GPU load time short.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "engine/model/weights.h"
#include "kernels/cuda/dtype.cuh"

namespace rose {

// Whether every part has a device decoder and a layout the decoder takes (whole blocks per row,
// bytes matching the shape). Otherwise the caller reads the tensor through read_f32.
bool device_decodable(const std::vector<StoredPart>& parts);

class StoredUploader {
 public:
  static constexpr int64_t kMaxStagingBytes = int64_t(64) << 20;  // per slot

  // Staging big enough for `parts`' largest part (up to `cap`) and at least one row of each.
  static int64_t staging_bytes_for(const std::vector<StoredPart>& parts,
                                   int64_t cap = kMaxStagingBytes);

  // Allocates two slots of staging_bytes each (pinned host and device).
  StoredUploader(int64_t staging_bytes, cudaStream_t stream);
  ~StoredUploader();  // frees what finish() did not (an error path): never throws
  StoredUploader(const StoredUploader&) = delete;
  StoredUploader& operator=(const StoredUploader&) = delete;

  // Enqueues the decode of the canonical tensor made of `parts` (in row order) into dst
  // ((sum of the parts' rows), cols) in dtype, on the stream. The mapped bytes may be unmapped
  // only after finish().
  void upload(const std::vector<StoredPart>& parts, void* dst, DType dtype);
  // Waits for every upload and frees the staging.
  void finish();
  int64_t bytes_uploaded() const { return bytes_uploaded_; }

 private:
  struct Slot {
    uint8_t* host = nullptr;     // pinned
    uint8_t* device = nullptr;   // what the decoder reads
    cudaEvent_t done = nullptr;  // recorded after the decoder that last read this slot
  };
  void upload_part(const StoredPart& part, char* dst, DType dtype);
  void release() noexcept;

  Slot slots_[2];
  int next_slot_ = 0;
  int64_t staging_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  int64_t bytes_uploaded_ = 0;
};

}  // namespace rose
