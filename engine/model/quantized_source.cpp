#include "engine/model/quantized_source.h"

#include <algorithm>
#include <cctype>
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

// One run of a quantized tensor: its first row, row count, type and where its blocks start.
struct RunLayout {
  int64_t row_begin = 0;
  int64_t rows = 0;
  GgmlType type = GgmlType::kF32;
  int64_t byte_begin = 0;
  int64_t row_bytes = 0;
};

class QuantizedSource final : public WeightSource {
 public:
  QuantizedSource(std::unique_ptr<WeightSource> inner, const QuantizeScheme& scheme)
      : inner_(std::move(inner)) {
    for (const TensorSpec& spec : canonical_tensors(inner_->config())) {
      if (spec.shape.size() != 2 || !is_linear_matrix(inner_->config(), spec.name)) continue;
      const int64_t rows = spec.shape[0], cols = spec.shape[1];
      Layout layout{rows, cols, {}, 0};
      for (const QuantizedRun& run : scheme.runs(inner_->config(), spec.name, rows, cols)) {
        const GgmlTypeTraits& traits = ggml_type_traits(run.type);
        const int64_t row_bytes = cols / traits.block_elems * traits.block_bytes;
        const int64_t row_begin =
            layout.runs.empty() ? 0 : layout.runs.back().row_begin + layout.runs.back().rows;
        layout.runs.push_back({row_begin, run.rows, run.type, layout.bytes, row_bytes});
        layout.bytes += run.rows * row_bytes;
      }
      if (!layout.runs.empty()) layouts_[spec.name] = std::move(layout);
    }
  }

  const ModelConfig& config() const override { return inner_->config(); }

  void read_f32(const std::string& name, std::span<float> dst) const override {
    auto it = layouts_.find(name);
    if (it == layouts_.end()) return inner_->read_f32(name, dst);
    const Layout& layout = it->second;
    ROSE_ASSERT(int64_t(dst.size()) == layout.rows * layout.cols);
    const std::vector<uint8_t>& bytes = blocks(name);
    for (const RunLayout& run : layout.runs) {
      parallel_rows(run.rows, [&](int64_t begin, int64_t end) {
        dequantize(run.type, bytes.data() + run.byte_begin + begin * run.row_bytes,
                   dst.subspan(size_t((run.row_begin + begin) * layout.cols),
                               size_t((end - begin) * layout.cols)));
      });
    }
  }

  std::optional<SyntheticInit> synthetic(const std::string& name) const override {
    if (layouts_.count(name)) return std::nullopt;  // the quantized blocks, not the fp32 values
    return inner_->synthetic(name);
  }

  std::optional<std::vector<StoredPart>> stored_parts(const std::string& name) const override {
    auto it = layouts_.find(name);
    if (it == layouts_.end()) return inner_->stored_parts(name);
    const std::vector<uint8_t>& bytes = blocks(name);
    std::vector<StoredPart> parts;
    for (const RunLayout& run : it->second.runs) {
      StoredPart part;
      part.type = run.type;
      part.bytes = std::span<const uint8_t>(bytes).subspan(size_t(run.byte_begin),
                                                           size_t(run.rows * run.row_bytes));
      part.rows = run.rows;
      part.cols = it->second.cols;
      parts.push_back(part);
    }
    return parts;
  }

 private:
  struct Layout {
    int64_t rows = 0, cols = 0;
    std::vector<RunLayout> runs;  // in row order, covering every row
    int64_t bytes = 0;            // of all runs' blocks
  };

  // The tensor's blocks, made on first use: presets generate their fp32 rows range by range on
  // each thread (a llama-8b matrix is never whole in fp32); checkpoints are read whole, then
  // quantized in ranges.
  const std::vector<uint8_t>& blocks(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto cached = blocks_.find(name);
    if (cached != blocks_.end()) return cached->second;
    const Layout& layout = layouts_.at(name);
    std::vector<uint8_t> bytes(size_t(layout.bytes));
    const std::optional<SyntheticInit> init = inner_->synthetic(name);
    std::vector<float> whole;
    if (!init) {
      whole.resize(size_t(layout.rows * layout.cols));
      inner_->read_f32(name, whole);
    }
    for (const RunLayout& run : layout.runs) {
      parallel_rows(run.rows, [&](int64_t begin, int64_t end) {
        const int64_t first = (run.row_begin + begin) * layout.cols;  // element index
        const size_t count = size_t((end - begin) * layout.cols);
        std::vector<float> values;
        std::span<const float> src;
        if (init) {
          values.resize(count);
          for (size_t i = 0; i < count; ++i) {
            const uint64_t index = uint64_t(first) + i;
            values[i] = init->kind == SyntheticInit::Kind::kConstant
                            ? init->value
                            : synthetic_uniform(init->seed, index, init->scale);
          }
          src = values;
        } else {
          src = std::span<const float>(whole).subspan(size_t(first), count);
        }
        quantize(run.type, src, bytes.data() + run.byte_begin + begin * run.row_bytes);
      });
    }
    return blocks_.emplace(name, std::move(bytes)).first->second;
  }

  std::unique_ptr<WeightSource> inner_;
  std::map<std::string, Layout> layouts_;  // the tensors this source quantizes
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::vector<uint8_t>> blocks_;  // spans handed out stay valid
};

// Whether rows of `cols` elements are whole blocks of `type`.
bool whole_blocks(GgmlType type, int64_t cols) {
  return cols % ggml_type_traits(type).block_elems == 0;
}

// The layer number of "layers.<i>.<rest>", or -1.
int layer_of(const std::string& name) {
  if (name.rfind("layers.", 0) != 0) return -1;
  const size_t dot = name.find('.', 7);
  if (dot == std::string::npos) return -1;
  return std::stoi(name.substr(7, dot - 7));
}

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

bool use_more_bits(int layer, int num_layers) {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 || (layer - num_layers / 8) % 3 == 2;
}

QuantizeScheme QuantizeScheme::single(GgmlType type) {
  QuantizeScheme scheme;
  scheme.type_ = type;
  std::string name = ggml_type_traits(type).name;
  for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  scheme.name_ = name;
  return scheme;
}

std::optional<QuantizeScheme> QuantizeScheme::parse(const std::string& text) {
  if (const std::optional<GgmlType> type = parse_quantize_type(text)) return single(*type);
  if (text != "q4_k_m") return std::nullopt;
  QuantizeScheme scheme;
  scheme.name_ = text;
  scheme.q4_k_m_ = true;
  return scheme;
}

std::vector<GgmlType> QuantizeScheme::types() const {
  if (q4_k_m_) return {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0};
  return {type_};
}

std::vector<QuantizedRun> QuantizeScheme::runs(const ModelConfig& config, const std::string& name,
                                               int64_t rows, int64_t cols) const {
  if (!is_linear_matrix(config, name)) return {};
  if (!q4_k_m_) {
    if (!whole_blocks(type_, cols)) return {};  // stays dense
    return {{rows, type_}};
  }
  // Q4_K_M (the class comment). tok_emb is a linear matrix only as the tied lm_head.
  if (name == "lm_head.weight" || name == "tok_emb") {
    for (GgmlType type : {GgmlType::kQ6_K, GgmlType::kQ8_0}) {
      if (whole_blocks(type, cols)) return {{rows, type}};
    }
    return {};
  }
  if (!whole_blocks(GgmlType::kQ4_K, cols)) return {};  // Q6_K's blocks are as wide
  const int layer = layer_of(name);
  const GgmlType more = use_more_bits(layer, config.num_layers) ? GgmlType::kQ6_K : GgmlType::kQ4_K;
  if (ends_with(name, ".down.weight")) return {{rows, more}};
  if (ends_with(name, ".qkv.weight") && more != GgmlType::kQ4_K) {
    const int64_t v_rows = config.kv_dim();
    return {{rows - v_rows, GgmlType::kQ4_K}, {v_rows, more}};
  }
  return {{rows, GgmlType::kQ4_K}};
}

std::unique_ptr<WeightSource> quantize_weights(std::unique_ptr<WeightSource> inner,
                                               const QuantizeScheme& scheme) {
  for (GgmlType type : scheme.types()) {
    if (!quantize_supported(type)) {
      usage_fail("--quantize {}: no quantizer for {} (q8_0, q4_0, q4_k, q6_k or q4_k_m)",
                 scheme.name(), ggml_type_traits(type).name);
    }
  }
  for (const TensorSpec& spec : canonical_tensors(inner->config())) {
    if (inner->stored_parts(spec.name)) {
      usage_fail(
          "--quantize: model {} already stores ggml blocks ({}); a GGUF keeps its own types "
          "(--dtype bf16 or fp16 dequantizes them)",
          inner->config().name, spec.name);
    }
  }
  return std::make_unique<QuantizedSource>(std::move(inner), scheme);
}

std::unique_ptr<WeightSource> quantize_weights(std::unique_ptr<WeightSource> inner, GgmlType type) {
  return quantize_weights(std::move(inner), QuantizeScheme::single(type));
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
