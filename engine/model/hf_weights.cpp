#include "engine/model/hf_weights.h"

#include <algorithm>
#include <unordered_map>

#include "engine/common/error.h"
#include "engine/model/safetensors.h"

namespace rose {

namespace {

// One checkpoint tensor that supplies a contiguous run of a canonical tensor's rows.
struct Part {
  const SafetensorsFile* file;
  const TensorInfo* tensor;
  bool transpose;  // a GPT-2 Conv1D weight stored (in, out), canonical (out, in)
};

struct Mapping {
  int64_t numel = 0;
  std::vector<Part> parts;  // concatenated along rows, in order
};

// Writes the transpose of `src` (rows, cols) into `dst` (cols, rows), in tiles to stay in cache.
void transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile);
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * cols + c];
      }
    }
  }
}

class HfWeightSource final : public WeightSource {
 public:
  explicit HfWeightSource(const std::filesystem::path& folder)
      : config_(load_config_json(folder / "config.json")),
        checkpoint_(SafetensorsCheckpoint::open(folder)) {
    if (config_.arch == Arch::kGpt2) {
      map_gpt2();
    } else {
      map_llama();
    }
    // The maps above follow canonical_tensors(); a mismatch is a bug here, not a user error.
    for (const TensorSpec& spec : canonical_tensors(config_)) {
      auto it = tensors_.find(spec.name);
      ROSE_ASSERT(it != tensors_.end() && it->second.numel == spec.numel());
    }
    ROSE_ASSERT(tensors_.size() == canonical_tensors(config_).size());
  }

  const ModelConfig& config() const override { return config_; }

  void read_f32(const std::string& canonical_name, std::span<float> dst) const override {
    auto it = tensors_.find(canonical_name);
    if (it == tensors_.end()) {
      fail("{}: model '{}' has no canonical tensor '{}'", checkpoint_.source(), config_.name,
           canonical_name);
    }
    const Mapping& mapping = it->second;
    ROSE_ASSERT(int64_t(dst.size()) == mapping.numel);
    size_t offset = 0;
    std::vector<float> staging;
    for (const Part& part : mapping.parts) {
      const size_t n = size_t(part.tensor->numel());
      std::span<float> out = dst.subspan(offset, n);
      if (part.transpose) {
        staging.resize(n);
        part.file->read_f32(*part.tensor, staging);
        transpose(staging.data(), part.tensor->shape[0], part.tensor->shape[1], out.data());
      } else {
        part.file->read_f32(*part.tensor, out);
      }
      offset += n;
    }
  }

 private:
  // Finds `hf_name` and checks its dtype and shape; `shape` is as stored in the checkpoint.
  Part find(const std::string& hf_name, const std::vector<int64_t>& shape, bool transposed) const {
    const SafetensorsCheckpoint::Entry entry = checkpoint_.find(hf_name);
    if (!entry.tensor) {
      fail("{}: missing tensor '{}' (model type {} from config.json)", checkpoint_.source(),
           hf_name, arch_name(config_.arch));
    }
    const Dtype dtype = entry.tensor->dtype;
    if (dtype != Dtype::kF32 && dtype != Dtype::kF16 && dtype != Dtype::kBF16 &&
        dtype != Dtype::kF64) {
      fail("{}: tensor '{}' has dtype {}; weights must be F32, F16, BF16 or F64",
           entry.file->source(), hf_name, dtype_name(dtype));
    }
    if (entry.tensor->shape != shape) {
      fail("{}: tensor '{}' has shape {}, but config.json implies {}", entry.file->source(),
           hf_name, shape_string(entry.tensor->shape), shape_string(shape));
    }
    return {entry.file, entry.tensor, transposed};
  }

  void add(const std::string& canonical, std::vector<Part> parts) {
    Mapping mapping;
    for (const Part& part : parts) mapping.numel += part.tensor->numel();
    mapping.parts = std::move(parts);
    tensors_[canonical] = std::move(mapping);
  }

  // The tensor stored as-is.
  void direct(const std::string& canonical, const std::string& hf_name,
              const std::vector<int64_t>& shape) {
    add(canonical, {find(hf_name, shape, false)});
  }
  // A Conv1D weight: stored (in, out) = reversed canonical shape.
  void conv1d(const std::string& canonical, const std::string& hf_name, int64_t out, int64_t in) {
    add(canonical, {find(hf_name, {in, out}, true)});
  }

  std::string prefix_for(const std::string& with_prefix, const std::string& without) const {
    if (checkpoint_.find(with_prefix).tensor)
      return with_prefix.substr(0, with_prefix.size() - without.size());
    if (checkpoint_.find(without).tensor) return "";
    fail("{}: missing tensor '{}' (model type {} from config.json)", checkpoint_.source(),
         with_prefix, arch_name(config_.arch));
  }

  void map_gpt2() {
    const int64_t hidden = config_.hidden_size;
    const int64_t inter = config_.intermediate_size;
    const std::string p = prefix_for("transformer.wte.weight", "wte.weight");
    direct("tok_emb", p + "wte.weight", {config_.vocab_size, hidden});
    direct("pos_emb", p + "wpe.weight", {config_.max_position_embeddings, hidden});
    for (int layer = 0; layer < config_.num_layers; ++layer) {
      const std::string c = "layers." + std::to_string(layer) + ".";
      const std::string h = p + "h." + std::to_string(layer) + ".";
      direct(c + "attn_norm.weight", h + "ln_1.weight", {hidden});
      direct(c + "attn_norm.bias", h + "ln_1.bias", {hidden});
      conv1d(c + "qkv.weight", h + "attn.c_attn.weight", 3 * hidden, hidden);
      direct(c + "qkv.bias", h + "attn.c_attn.bias", {3 * hidden});
      conv1d(c + "o.weight", h + "attn.c_proj.weight", hidden, hidden);
      direct(c + "o.bias", h + "attn.c_proj.bias", {hidden});
      direct(c + "mlp_norm.weight", h + "ln_2.weight", {hidden});
      direct(c + "mlp_norm.bias", h + "ln_2.bias", {hidden});
      conv1d(c + "up.weight", h + "mlp.c_fc.weight", inter, hidden);
      direct(c + "up.bias", h + "mlp.c_fc.bias", {inter});
      conv1d(c + "down.weight", h + "mlp.c_proj.weight", hidden, inter);
      direct(c + "down.bias", h + "mlp.c_proj.bias", {hidden});
    }
    direct("final_norm.weight", p + "ln_f.weight", {hidden});
    direct("final_norm.bias", p + "ln_f.bias", {hidden});
    if (!config_.tie_word_embeddings) {
      direct("lm_head.weight", "lm_head.weight", {config_.vocab_size, hidden});
    }
  }

  void map_llama() {
    const int64_t hidden = config_.hidden_size;
    const int64_t inter = config_.intermediate_size;
    const int64_t q_dim = config_.q_dim();
    const int64_t kv_dim = config_.kv_dim();
    const std::string p = prefix_for("model.embed_tokens.weight", "embed_tokens.weight");
    direct("tok_emb", p + "embed_tokens.weight", {config_.vocab_size, hidden});
    for (int layer = 0; layer < config_.num_layers; ++layer) {
      const std::string c = "layers." + std::to_string(layer) + ".";
      const std::string h = p + "layers." + std::to_string(layer) + ".";
      direct(c + "attn_norm.weight", h + "input_layernorm.weight", {hidden});
      add(c + "qkv.weight", {find(h + "self_attn.q_proj.weight", {q_dim, hidden}, false),
                             find(h + "self_attn.k_proj.weight", {kv_dim, hidden}, false),
                             find(h + "self_attn.v_proj.weight", {kv_dim, hidden}, false)});
      if (config_.qkv_bias) {
        add(c + "qkv.bias", {find(h + "self_attn.q_proj.bias", {q_dim}, false),
                             find(h + "self_attn.k_proj.bias", {kv_dim}, false),
                             find(h + "self_attn.v_proj.bias", {kv_dim}, false)});
      }
      direct(c + "o.weight", h + "self_attn.o_proj.weight", {hidden, q_dim});
      direct(c + "mlp_norm.weight", h + "post_attention_layernorm.weight", {hidden});
      add(c + "up.weight", {find(h + "mlp.gate_proj.weight", {inter, hidden}, false),
                            find(h + "mlp.up_proj.weight", {inter, hidden}, false)});
      direct(c + "down.weight", h + "mlp.down_proj.weight", {hidden, inter});
    }
    direct("final_norm.weight", p + "norm.weight", {hidden});
    if (!config_.tie_word_embeddings) {
      direct("lm_head.weight", "lm_head.weight", {config_.vocab_size, hidden});
    }
  }

  ModelConfig config_;
  SafetensorsCheckpoint checkpoint_;
  std::unordered_map<std::string, Mapping> tensors_;
};

}  // namespace

std::unique_ptr<WeightSource> open_hf_model(const std::filesystem::path& folder) {
  return std::make_unique<HfWeightSource>(folder);
}

}  // namespace rose
