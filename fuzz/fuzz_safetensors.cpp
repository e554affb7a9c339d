// libFuzzer entry over the bytes of a safetensors file: parsing must either succeed, after which
// every tensor's bytes lie inside the input and convert without reading past them, or throw
// rose::Error. Anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/common/error.h"
#include "engine/model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const rose::SafetensorsFile file =
        rose::SafetensorsFile::parse(std::span<const uint8_t>(data, size), "fuzz.safetensors");
    std::vector<float> values;
    for (const rose::TensorInfo& tensor : file.tensors()) {
      const std::span<const uint8_t> bytes = file.data(tensor);
      // A validated tensor lies inside the input buffer.
      if (bytes.size() && (bytes.data() < data || bytes.data() + bytes.size() > data + size)) {
        __builtin_trap();
      }
      values.resize(size_t(tensor.numel()));
      file.read_f32(tensor, values);
    }
    (void)file.find("w");
  } catch (const rose::Error&) {
    // Rejecting bad input with a named error is the expected outcome.
  }
  return 0;
}
