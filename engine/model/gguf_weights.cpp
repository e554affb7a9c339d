// GgufModel::weights: GGUF tensor names mapped onto the canonical layout (weights.h), dequantized
// to fp32 on read. GGUF stores matrices with ne0 = in_features, so a [in, out] GGUF tensor is
// already the (out, in) nn.Linear layout: no transposes, only the llama q/k row un-permutation.
#include <algorithm>
#include <unordered_map>

#include "engine/common/error.h"
#include "engine/model/gguf_model.h"

namespace rose {

namespace {

// One GGUF tensor supplying a contiguous run of a canonical tensor's rows.
struct Part {
  const GgufTensor* tensor;
  int unpermute_heads;  // > 0: undo the converter's q/k row permutation over this many heads
};

struct Mapping {
  int64_t numel = 0;
  std::vector<Part> parts;
};

// Undoes the converter's q/k row permutation (unpermuted_row in weights.h). `src` and `dst` are
// (rows, cols).
void unpermute_rows(const float* src, int64_t rows, int64_t cols, int heads, float* dst) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* from = src + row * cols;
    std::copy(from, from + cols, dst + unpermuted_row(row, rows, heads) * cols);
  }
}

class GgufWeightSource final : public WeightSource {
 public:
  explicit GgufWeightSource(std::shared_ptr<const GgufModel> model)
      : model_(std::move(model)), file_(model_->file()), config_(model_->config()) {
    const std::string arch = file_.get_string("general.architecture");
    permute_qk_ = arch == "llama" || arch == "mistral";
    if (config_.arch == Arch::kGpt2) {
      map_gpt2();
    } else {
      map_llama();
    }
    for (const TensorSpec& spec : canonical_tensors(config_)) {
      auto it = tensors_.find(spec.name);
      ROSE_ASSERT(it != tensors_.end() && it->second.numel == spec.numel());
    }
  }

  const ModelConfig& config() const override { return config_; }

  void read_f32(const std::string& canonical_name, std::span<float> dst) const override {
    auto it = tensors_.find(canonical_name);
    if (it == tensors_.end()) {
      fail("{}: model '{}' has no canonical tensor '{}'", file_.source(), config_.name,
           canonical_name);
    }
    ROSE_ASSERT(int64_t(dst.size()) == it->second.numel);
    size_t offset = 0;
    std::vector<float> staging;
    for (const Part& part : it->second.parts) {
      const GgufTensor& tensor = *part.tensor;
      std::span<float> out = dst.subspan(offset, size_t(tensor.numel()));
      if (part.unpermute_heads > 0) {
        staging.resize(out.size());
        file_.read_f32(tensor, staging);
        unpermute_rows(staging.data(), tensor.rows(), tensor.dims[0], part.unpermute_heads,
                       out.data());
      } else {
        file_.read_f32(tensor, out);
      }
      offset += out.size();
    }
  }

  std::optional<std::vector<StoredPart>> stored_parts(
      const std::string& canonical_name) const override {
    auto it = tensors_.find(canonical_name);
    if (it == tensors_.end()) return std::nullopt;  // read_f32 reports the missing name
    std::vector<StoredPart> parts;
    for (const Part& part : it->second.parts) {
      const GgufTensor& tensor = *part.tensor;
      parts.push_back({tensor.type, std::span<const uint8_t>(tensor.data, size_t(tensor.bytes)),
                       tensor.rows(), tensor.dims[0], part.unpermute_heads});
    }
    return parts;
  }

 private:
  // `shape` is canonical (rows, cols) or (n); the GGUF dims are its reverse.
  Part find(const std::string& name, std::vector<int64_t> shape, int unpermute_heads = 0) const {
    const GgufTensor* tensor = file_.find_tensor(name);
    if (!tensor) {
      fail("{}: missing tensor '{}' (architecture {})", file_.source(), name,
           arch_name(config_.arch));
    }
    std::reverse(shape.begin(), shape.end());
    if (tensor->dims != shape) {
      fail("{}: tensor '{}' has dims {}, but the metadata implies {}", file_.source(), name,
           shape_text(tensor->dims), shape_text(shape));
    }
    if (unpermute_heads > 0 && tensor->rows() % (2 * unpermute_heads) != 0) {
      fail("{}: tensor '{}': {} rows do not split into {} heads of even size", file_.source(), name,
           tensor->rows(), unpermute_heads);
    }
    return {tensor, unpermute_heads};
  }

  static std::string shape_text(const std::vector<int64_t>& dims) {
    std::string text = "[";
    for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
    return text + "]";
  }

  void add(const std::string& canonical, std::vector<Part> parts) {
    Mapping mapping;
    for (const Part& part : parts) mapping.numel += part.tensor->numel();
    mapping.parts = std::move(parts);
    tensors_[canonical] = std::move(mapping);
  }
  void direct(const std::string& canonical, const std::string& name, std::vector<int64_t> shape) {
    add(canonical, {find(name, std::move(shape))});
  }

  void map_llama() {
    const int64_t hidden = config_.hidden_size, inter = config_.intermediate_size;
    const int64_t q_dim = config_.q_dim(), kv_dim = config_.kv_dim();
    const int q_heads = permute_qk_ ? config_.num_heads : 0;
    const int k_heads = permute_qk_ ? config_.num_kv_heads : 0;
    direct("tok_emb", "token_embd.weight", {config_.vocab_size, hidden});
    for (int layer = 0; layer < config_.num_layers; ++layer) {
      const std::string c = "layers." + std::to_string(layer) + ".";
      const std::string g = "blk." + std::to_string(layer) + ".";
      direct(c + "attn_norm.weight", g + "attn_norm.weight", {hidden});
      add(c + "qkv.weight", {find(g + "attn_q.weight", {q_dim, hidden}, q_heads),
                             find(g + "attn_k.weight", {kv_dim, hidden}, k_heads),
                             find(g + "attn_v.weight", {kv_dim, hidden})});
      if (config_.qkv_bias) {
        add(c + "qkv.bias",
            {find(g + "attn_q.bias", {q_dim}, q_heads), find(g + "attn_k.bias", {kv_dim}, k_heads),
             find(g + "attn_v.bias", {kv_dim})});
      }
      direct(c + "o.weight", g + "attn_output.weight", {hidden, q_dim});
      direct(c + "mlp_norm.weight", g + "ffn_norm.weight", {hidden});
      add(c + "up.weight", {find(g + "ffn_gate.weight", {inter, hidden}),
                            find(g + "ffn_up.weight", {inter, hidden})});
      direct(c + "down.weight", g + "ffn_down.weight", {hidden, inter});
    }
    direct("final_norm.weight", "output_norm.weight", {hidden});
    if (!config_.tie_word_embeddings) {
      direct("lm_head.weight", "output.weight", {config_.vocab_size, hidden});
    }
  }

  // The converter transposes GPT-2's Conv1D weights into nn.Linear layout (GPT2Model in
  // convert_hf_to_gguf.py), so they map like any other matrix.
  void map_gpt2() {
    const int64_t hidden = config_.hidden_size, inter = config_.intermediate_size;
    direct("tok_emb", "token_embd.weight", {config_.vocab_size, hidden});
    direct("pos_emb", "position_embd.weight", {config_.max_position_embeddings, hidden});
    for (int layer = 0; layer < config_.num_layers; ++layer) {
      const std::string c = "layers." + std::to_string(layer) + ".";
      const std::string g = "blk." + std::to_string(layer) + ".";
      direct(c + "attn_norm.weight", g + "attn_norm.weight", {hidden});
      direct(c + "attn_norm.bias", g + "attn_norm.bias", {hidden});
      direct(c + "qkv.weight", g + "attn_qkv.weight", {3 * hidden, hidden});
      direct(c + "qkv.bias", g + "attn_qkv.bias", {3 * hidden});
      direct(c + "o.weight", g + "attn_output.weight", {hidden, hidden});
      direct(c + "o.bias", g + "attn_output.bias", {hidden});
      direct(c + "mlp_norm.weight", g + "ffn_norm.weight", {hidden});
      direct(c + "mlp_norm.bias", g + "ffn_norm.bias", {hidden});
      direct(c + "up.weight", g + "ffn_up.weight", {inter, hidden});
      direct(c + "up.bias", g + "ffn_up.bias", {inter});
      direct(c + "down.weight", g + "ffn_down.weight", {hidden, inter});
      direct(c + "down.bias", g + "ffn_down.bias", {hidden});
    }
    direct("final_norm.weight", "output_norm.weight", {hidden});
    direct("final_norm.bias", "output_norm.bias", {hidden});
    if (!config_.tie_word_embeddings) {
      direct("lm_head.weight", "output.weight", {config_.vocab_size, hidden});
    }
  }

  std::shared_ptr<const GgufModel> model_;  // keeps the mapping alive
  const GgufFile& file_;
  const ModelConfig& config_;
  bool permute_qk_ = false;
  std::unordered_map<std::string, Mapping> tensors_;
};

}  // namespace

std::unique_ptr<WeightSource> GgufModel::weights(std::shared_ptr<const GgufModel> model) {
  return std::make_unique<GgufWeightSource>(std::move(model));
}

}  // namespace rose
