#include "engine/model/quantized_source.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "engine/common/error.h"
#include "engine/model/quant.h"
#include "kernels/common/counter_rng.h"

namespace rose {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Runs body(begin, end) over [0, count) split into about one range per hardware thread.
template <typename Body>
void parallel_rows(int64_t count, const Body& body) {
  const int64_t threads =
      std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(count, 1));
  const int64_t per = (count + threads - 1) / threads;
  std::vector<std::thread> workers;
  for (int64_t begin = per; begin < count; begin += per) {
    workers.emplace_back([&body, begin, end = std::min(count, begin + per)] { body(begin, end); });
  }
  body(0, std::min(count, per));
  for (std::thread& worker : workers) worker.join();
}

class QuantizedSource final : public WeightSource {
 public:
  QuantizedSource(std::unique_ptr<WeightSource> inner, GgmlType type)
      : inner_(std::move(inner)), type_(type), traits_(ggml_type_traits(type)) {
    for (const TensorSpec& spec : canonical_tensors(inner_->config())) {
      if (spec.shape.size() != 2 || !is_linear_matrix(inner_->config(), spec.name)) continue;
      if (spec.shape[1] % traits_.block_elems != 0) continue;  // stays dense
      shapes_[spec.name] = {spec.shape[0], spec.shape[1]};
    }
  }

  const ModelConfig& config() const override { return inner_->config(); }

  void read_f32(const std::string& name, std::span<float> dst) const override {
    auto it = shapes_.find(name);
    if (it == shapes_.end()) return inner_->read_f32(name, dst);
    ROSE_ASSERT(int64_t(dst.size()) == it->second.rows * it->second.cols);
    const std::vector<uint8_t>& bytes = blocks(name);
    parallel_rows(it->second.rows, [&](int64_t begin, int64_t end) {
      const int64_t cols = it->second.cols,
                    row_bytes = cols / traits_.block_elems * traits_.block_bytes;
      dequantize(type_, bytes.data() + begin * row_bytes,
                 dst.subspan(size_t(begin * cols), size_t((end - begin) * cols)));
    });
  }

  std::optional<SyntheticInit> synthetic(const std::string& name) const override {
    if (shapes_.count(name)) return std::nullopt;  // the quantized blocks, not the fp32 values
    return inner_->synthetic(name);
  }

  std::optional<std::vector<StoredPart>> stored_parts(const std::string& name) const override {
    auto it = shapes_.find(name);
    if (it == shapes_.end()) return inner_->stored_parts(name);
    const std::vector<uint8_t>& bytes = blocks(name);
    StoredPart part;
    part.type = type_;
    part.bytes = std::span<const uint8_t>(bytes);
    part.rows = it->second.rows;
    part.cols = it->second.cols;
    return std::vector<StoredPart>{part};
  }

 private:
  struct Shape {
    int64_t rows = 0, cols = 0;
  };

  // The tensor's blocks, made on first use: presets generate their fp32 rows range by range on
  // each thread (a llama-8b matrix is never whole in fp32); checkpoints are read whole, then
  // quantized in ranges.
  const std::vector<uint8_t>& blocks(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto cached = blocks_.find(name);
    if (cached != blocks_.end()) return cached->second;
    const Shape shape = shapes_.at(name);
    const int64_t row_bytes = shape.cols / traits_.block_elems * traits_.block_bytes;
    std::vector<uint8_t> bytes(size_t(shape.rows * row_bytes));
    const std::optional<SyntheticInit> init = inner_->synthetic(name);
    std::vector<float> whole;
    if (!init) {
      whole.resize(size_t(shape.rows * shape.cols));
      inner_->read_f32(name, whole);
    }
    parallel_rows(shape.rows, [&](int64_t begin, int64_t end) {
      const size_t count = size_t((end - begin) * shape.cols);
      std::vector<float> values;
      std::span<const float> src;
      if (init) {
        values.resize(count);
        for (size_t i = 0; i < count; ++i) {
          const uint64_t index = uint64_t(begin * shape.cols) + i;
          values[i] = init->kind == SyntheticInit::Kind::kConstant
                          ? init->value
                          : synthetic_uniform(init->seed, index, init->scale);
        }
        src = values;
      } else {
        src = std::span<const float>(whole).subspan(size_t(begin * shape.cols), count);
      }
      quantize(type_, src, bytes.data() + begin * row_bytes);
    });
    return blocks_.emplace(name, std::move(bytes)).first->second;
  }

  std::unique_ptr<WeightSource> inner_;
  GgmlType type_;
  GgmlTypeTraits traits_;
  std::map<std::string, Shape> shapes_;  // the tensors this source quantizes
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::vector<uint8_t>> blocks_;  // spans handed out stay valid
};

}  // namespace

bool is_linear_matrix(const ModelConfig& config, const std::string& name) {
  if (name == "lm_head.weight") return true;
  if (name == "tok_emb") return config.tie_word_embeddings;
  if (name.rfind("layers.", 0) != 0) return false;
  return ends_with(name, ".qkv.weight") || ends_with(name, ".o.weight") ||
         ends_with(name, ".up.weight") || ends_with(name, ".down.weight");
}

std::optional<GgmlType> parse_quantize_type(const std::string& text) {
  if (text == "q8_0") return GgmlType::kQ8_0;
  if (text == "q4_0") return GgmlType::kQ4_0;
  if (text == "q4_k") return GgmlType::kQ4_K;
  if (text == "q6_k") return GgmlType::kQ6_K;
  return std::nullopt;
}

std::unique_ptr<WeightSource> quantize_weights(std::unique_ptr<WeightSource> inner, GgmlType type) {
  if (!quantize_supported(type)) {
    usage_fail("--quantize {}: no quantizer for this type (q8_0, q4_0, q4_k or q6_k)",
               ggml_type_traits(type).name);
  }
  for (const TensorSpec& spec : canonical_tensors(inner->config())) {
    if (inner->stored_parts(spec.name)) {
      usage_fail(
          "--quantize: model {} already stores ggml blocks ({}); a GGUF keeps its own types "
          "(--dtype bf16 or fp16 dequantizes them)",
          inner->config().name, spec.name);
    }
  }
  return std::make_unique<QuantizedSource>(std::move(inner), type);
}

void WeightTypeCounts::add_matrix(const std::vector<GgmlType>& types) {
  std::set<std::string> names;  // a matrix counts once per type it holds
  for (GgmlType type : types) names.insert(ggml_type_traits(type).name);
  for (const std::string& name : names) ++counts_[name];
  ++ggml_matrices_;
}

std::string WeightTypeCounts::text() const {
  std::string text;
  for (const auto& [name, count] : counts_) {
    text += (text.empty() ? "" : ", ") + name + " x " + std::to_string(count);
  }
  return text;
}

std::string linear_weight_types(const WeightSource& weights) {
  WeightTypeCounts counts;
  for (const TensorSpec& spec : canonical_tensors(weights.config())) {
    if (spec.shape.size() != 2 || !is_linear_matrix(weights.config(), spec.name)) continue;
    const std::optional<std::vector<StoredPart>> parts = weights.stored_parts(spec.name);
    if (!parts) {
      counts.add_dense("dense");
      continue;
    }
    std::vector<GgmlType> types;
    for (const StoredPart& part : *parts) types.push_back(part.type);
    counts.add_matrix(types);
  }
  return counts.text();
}

bool has_quantized_linear(const WeightSource& weights) {
  for (const TensorSpec& spec : canonical_tensors(weights.config())) {
    if (spec.shape.size() != 2 || !is_linear_matrix(weights.config(), spec.name)) continue;
    const std::optional<std::vector<StoredPart>> parts = weights.stored_parts(spec.name);
    if (!parts) continue;
    for (const StoredPart& part : *parts) {
      if (ggml_type_traits(part.type).block_elems > 1) return true;
    }
  }
  return false;
}

}  // namespace rose
