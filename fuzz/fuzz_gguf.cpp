// libFuzzer entry over the bytes of a GGUF file: parsing must either succeed, after which every
// tensor lies inside the input and dequantizes without reading past it, and the model metadata
// reads either work or throw, or throw rose::Error. Anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/common/error.h"
#include "engine/model/gguf.h"
#include "engine/model/gguf_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const rose::GgufFile file =
        rose::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
    std::vector<float> values;
    for (const rose::GgufTensor& tensor : file.tensors()) {
      if (tensor.bytes && (tensor.data < data || tensor.data + tensor.bytes > data + size)) {
        __builtin_trap();
      }
      if (tensor.numel() > (int64_t(1) << 24)) continue;  // in bounds already; skip the memory
      values.resize(size_t(tensor.numel()));
      file.read_f32(tensor, values);
    }
    try {
      (void)rose::read_gguf_vocab(file);
    } catch (const rose::Error&) {
    }
    (void)rose::gguf_model_config(file);
  } catch (const rose::Error&) {
    // Rejecting bad input with a named error is the expected outcome.
  }
  return 0;
}
