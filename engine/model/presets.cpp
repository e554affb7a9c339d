#include "engine/model/presets.h"

#include <cmath>
#include <unordered_map>

#include "engine/common/error.h"
#include "kernels/common/counter_rng.h"

namespace rose {

namespace {

struct Preset {
  const char* name;
  uint64_t seed;
  ModelConfig (*make)();
};

ModelConfig make_tiny() {
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.vocab_size = 512;
  c.hidden_size = 256;
  c.intermediate_size = 688;
  c.num_layers = 4;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.max_position_embeddings = 2048;
  c.norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.tie_word_embeddings = true;
  c.bos_token_id = -1;
  c.eos_token_ids = {256};
  return c;
}

// GPT-2 124M.
ModelConfig make_gpt2() {
  ModelConfig c;
  c.arch = Arch::kGpt2;
  c.vocab_size = 50257;
  c.hidden_size = 768;
  c.intermediate_size = 4 * 768;
  c.num_layers = 12;
  c.num_heads = 12;
  c.num_kv_heads = 12;
  c.head_dim = 64;
  c.max_position_embeddings = 1024;
  c.norm_eps = 1e-5f;
  c.tie_word_embeddings = true;
  c.qkv_bias = true;
  c.bos_token_id = -1;
  c.eos_token_ids = {50256};
  return c;
}

// Llama-3.2-1B.
ModelConfig make_llama_1b() {
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.vocab_size = 128256;
  c.hidden_size = 2048;
  c.intermediate_size = 8192;
  c.num_layers = 16;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 64;
  c.max_position_embeddings = 131072;
  c.norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.rope_scaling = {"llama3", 32.0f, 1.0f, 4.0f, 8192};
  c.tie_word_embeddings = true;
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001};
  return c;
}

// Llama-3-8B.
ModelConfig make_llama_8b() {
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 8192;
  c.norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.tie_word_embeddings = false;
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001};
  return c;
}

// Llama-3-70B: 141 GB of bf16 weights, more than one GPU holds (--tensor-parallel 2 on two H200s).
ModelConfig make_llama_70b() {
  ModelConfig c = make_llama_8b();
  c.hidden_size = 8192;
  c.intermediate_size = 28672;
  c.num_layers = 80;
  c.num_heads = 64;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  return c;
}

constexpr Preset kPresets[] = {
    {"tiny", 0x7469'6E79'0000'0001ull, make_tiny},
    {"gpt2", 0x6770'7432'0000'0002ull, make_gpt2},
    {"llama-1b", 0x6C6C'3162'0000'0003ull, make_llama_1b},
    {"llama-8b", 0x6C6C'3862'0000'0004ull, make_llama_8b},
    {"llama-70b", 0x6C6C'3730'6200'0005ull, make_llama_70b},
};

const Preset* find_preset(std::string_view name) {
  for (const Preset& preset : kPresets) {
    if (name == preset.name) return &preset;
  }
  return nullptr;
}

bool ends_with(const std::string& text, std::string_view suffix) { return text.ends_with(suffix); }

class SyntheticWeightSource final : public WeightSource {
 public:
  SyntheticWeightSource(ModelConfig config, uint64_t seed) : config_(std::move(config)) {
    const std::vector<TensorSpec> specs = canonical_tensors(config_);
    for (size_t i = 0; i < specs.size(); ++i) {
      tensors_.emplace(specs[i].name,
                       Entry{specs[i].numel(), synthetic_init(config_, specs[i], i, seed)});
    }
  }

  const ModelConfig& config() const override { return config_; }

  void read_f32(const std::string& canonical_name, std::span<float> dst) const override {
    const Entry& entry = lookup(canonical_name);
    ROSE_ASSERT(int64_t(dst.size()) == entry.numel);
    const SyntheticInit& init = entry.init;
    if (init.kind == SyntheticInit::Kind::kConstant) {
      for (float& value : dst) value = init.value;
      return;
    }
    for (size_t i = 0; i < dst.size(); ++i) dst[i] = synthetic_uniform(init.seed, i, init.scale);
  }

  std::optional<SyntheticInit> synthetic(const std::string& canonical_name) const override {
    return lookup(canonical_name).init;
  }

 private:
  struct Entry {
    int64_t numel;
    SyntheticInit init;
  };
  const Entry& lookup(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) fail("preset '{}': no tensor '{}'", config_.name, name);
    return it->second;
  }

  ModelConfig config_;
  std::unordered_map<std::string, Entry> tensors_;
};

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& preset : kPresets) names.emplace_back(preset.name);
  return names;
}

std::string preset_names_text() {
  std::string text;
  for (const Preset& preset : kPresets) {
    if (!text.empty()) text += ", ";
    text += preset.name;
  }
  return text;
}

std::optional<ModelConfig> preset_config(std::string_view name) {
  const Preset* preset = find_preset(name);
  if (!preset) return std::nullopt;
  ModelConfig config = preset->make();
  config.name = preset->name;
  config.synthetic_weights = true;
  config.validate(std::string("preset ") + preset->name);
  return config;
}

uint64_t preset_seed(std::string_view name) {
  const Preset* preset = find_preset(name);
  if (!preset) fail("unknown preset '{}' (presets: {})", name, preset_names_text());
  return preset->seed;
}

uint64_t synthetic_tensor_seed(uint64_t preset_seed, size_t tensor_index) {
  return mix64(preset_seed ^ mix64(0xA0761D6478BD642Full + uint64_t(tensor_index)));
}

SyntheticInit synthetic_init(const ModelConfig& config, const TensorSpec& spec, size_t tensor_index,
                             uint64_t preset_seed) {
  SyntheticInit init;
  if (ends_with(spec.name, "norm.weight")) {
    init.kind = SyntheticInit::Kind::kConstant;
    init.value = 1.0f;
    return init;
  }
  if (ends_with(spec.name, ".bias")) {
    init.kind = SyntheticInit::Kind::kConstant;
    init.value = 0.0f;
    return init;
  }
  init.kind = SyntheticInit::Kind::kUniform;
  init.seed = synthetic_tensor_seed(preset_seed, tensor_index);
  // Embeddings feed a norm (or, tied, the logits): +-1/sqrt(hidden) keeps tied logits O(1) at any
  // width. Matrices (out, in): +-1/sqrt(in) keeps each projection's output O(1).
  const bool embedding = spec.name == "tok_emb" || spec.name == "pos_emb";
  const int64_t fan_in = embedding ? config.hidden_size : spec.shape.back();
  init.scale = 1.0f / std::sqrt(float(fan_in));
  return init;
}

std::unique_ptr<WeightSource> open_preset(std::string_view name) {
  std::optional<ModelConfig> config = preset_config(name);
  if (!config) return nullptr;
  return std::make_unique<SyntheticWeightSource>(std::move(*config), preset_seed(name));
}

}  // namespace rose
