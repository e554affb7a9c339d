#pragma once
// Tests' decoder of WeightSource::stored_parts: the canonical tensor's fp32 values the parts
// hold (each part's blocks dequantized, its rows un-permuted), to compare with read_f32.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "engine/model/quant.h"
#include "engine/model/weights.h"

namespace rose::test {

inline std::vector<float> from_stored_parts(const std::vector<StoredPart>& parts) {
  std::vector<float> out, part_values;
  for (const StoredPart& part : parts) {
    const auto& traits = ggml_type_traits(part.type);
    REQUIRE(part.cols % traits.block_elems == 0);
    REQUIRE(int64_t(part.bytes.size()) ==
            part.rows * part.cols / traits.block_elems * traits.block_bytes);
    part_values.resize(size_t(part.rows * part.cols));
    dequantize(part.type, part.bytes.data(), part_values);
    const size_t base = out.size();
    out.resize(base + part_values.size());
    for (int64_t row = 0; row < part.rows; ++row) {
      const int64_t to = unpermuted_row(row, part.rows, part.unpermute_heads);
      std::copy_n(part_values.begin() + row * part.cols, part.cols,
                  out.begin() + long(base) + to * part.cols);
    }
  }
  return out;
}

}  // namespace rose::test
