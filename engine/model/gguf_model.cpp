#include "engine/model/gguf_model.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "engine/common/error.h"

namespace rose {

namespace {

class MetadataReader {
 public:
  MetadataReader(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  std::string key(const char* suffix) const { return arch_ + "." + suffix; }
  int get_int(const char* suffix) const {
    return checked(key(suffix), file_.get_uint(key(suffix)));
  }
  std::optional<int> find_int(const char* suffix) const {
    const auto value = file_.find_uint(key(suffix));
    if (!value) return std::nullopt;
    return checked(key(suffix), *value);
  }

 private:
  int checked(const std::string& key, uint64_t value) const {
    if (value > uint64_t(std::numeric_limits<int>::max())) {
      fail("{}: metadata '{}' = {} is too large", file_.source(), key, value);
    }
    return int(value);
  }
  const GgufFile& file_;
  std::string arch_;
};

std::optional<int32_t> token_id(const GgufFile& file, const char* key, size_t vocab_size) {
  const auto id = file.find_uint(key);
  // llama.cpp ignores an id outside the vocabulary (with a warning); so do we.
  if (!id || *id >= vocab_size) return std::nullopt;
  return int32_t(*id);
}

void read_llama_hparams(const GgufFile& file, const MetadataReader& meta, ModelConfig& c) {
  c.norm_eps = float(file.get_float(meta.key("attention.layer_norm_rms_epsilon")));
  c.rope_theta = float(file.find_float(meta.key("rope.freq_base")).value_or(10000.0));
  if (const auto rot = meta.find_int("rope.dimension_count"); rot && *rot != c.head_dim) {
    fail("{}: metadata '{}' = {}: partial rotary embeddings (head_dim {}) are not supported",
         file.source(), meta.key("rope.dimension_count"), *rot, c.head_dim);
  }
  const auto scaling = file.find_string(meta.key("rope.scaling.type"));
  if (scaling && *scaling != "none") {
    fail("{}: metadata '{}' = '{}': RoPE scaling is not supported for GGUF files", file.source(),
         meta.key("rope.scaling.type"), *scaling);
  }
  if (file.find_tensor("rope_freqs.weight")) {
    fail("{}: tensor 'rope_freqs.weight': per-frequency RoPE factors are not supported",
         file.source());
  }
  c.qkv_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& file) {
  const std::string arch = file.get_string("general.architecture");
  ModelConfig c;
  if (arch == "llama" || arch == "mistral" || arch == "qwen2") {
    c.arch = Arch::kLlama;
  } else if (arch == "gpt2") {
    c.arch = Arch::kGpt2;
  } else {
    fail("{}: general.architecture '{}' is not supported (llama, mistral, qwen2, gpt2)",
         file.source(), arch);
  }
  const MetadataReader meta(file, arch);
  c.name = std::filesystem::path(file.source()).stem().string();
  c.num_layers = meta.get_int("block_count");
  c.hidden_size = meta.get_int("embedding_length");
  c.intermediate_size = meta.get_int("feed_forward_length");
  c.num_heads = meta.get_int("attention.head_count");
  c.num_kv_heads = meta.find_int("attention.head_count_kv").value_or(c.num_heads);
  c.max_position_embeddings = meta.get_int("context_length");
  if (c.num_heads <= 0)
    fail("{}: metadata '{}' must be positive", file.source(), meta.key("attention.head_count"));
  c.head_dim = meta.find_int("attention.key_length").value_or(c.hidden_size / c.num_heads);
  const GgufTensor& embedding = file.tensor("token_embd.weight");
  if (embedding.dims.size() != 2 || embedding.dims[1] > std::numeric_limits<int>::max()) {
    fail("{}: tensor 'token_embd.weight' must be a [hidden, vocab] matrix", file.source());
  }
  c.vocab_size = int(embedding.dims[1]);
  if (c.arch == Arch::kGpt2) {
    c.norm_eps = float(file.get_float(meta.key("attention.layer_norm_epsilon")));
    c.qkv_bias = true;
  } else {
    read_llama_hparams(file, meta, c);
  }
  c.tie_word_embeddings = file.find_tensor("output.weight") == nullptr;
  const size_t vocab = size_t(c.vocab_size);
  c.bos_token_id = token_id(file, "tokenizer.ggml.bos_token_id", vocab).value_or(-1);
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    const auto id = token_id(file, key, vocab);
    if (id &&
        std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), *id) == c.eos_token_ids.end()) {
      c.eos_token_ids.push_back(*id);
    }
  }
  c.validate(file.source());
  return c;
}

TokenizerVocab read_gguf_vocab(const GgufFile& file) {
  TokenizerVocab vocab;
  vocab.source = file.source();
  vocab.model = file.get_string("tokenizer.ggml.model");
  vocab.pre = file.find_string("tokenizer.ggml.pre").value_or("");
  vocab.tokens = file.get_string_array("tokenizer.ggml.tokens");
  const size_t n = vocab.tokens.size();
  if (file.find("tokenizer.ggml.scores"))
    vocab.scores = file.get_f32_array("tokenizer.ggml.scores");
  if (file.find("tokenizer.ggml.token_type")) {
    vocab.token_types = file.get_i32_array("tokenizer.ggml.token_type");
  }
  if (file.find("tokenizer.ggml.merges")) {
    vocab.merges = file.get_string_array("tokenizer.ggml.merges");
  }
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    fail("{}: metadata 'tokenizer.ggml.scores' has {} entries for {} tokens", file.source(),
         vocab.scores.size(), n);
  }
  if (!vocab.token_types.empty() && vocab.token_types.size() != n) {
    fail("{}: metadata 'tokenizer.ggml.token_type' has {} entries for {} tokens", file.source(),
         vocab.token_types.size(), n);
  }
  vocab.bos_id = token_id(file, "tokenizer.ggml.bos_token_id", n);
  vocab.eos_id = token_id(file, "tokenizer.ggml.eos_token_id", n);
  vocab.eot_id = token_id(file, "tokenizer.ggml.eot_token_id", n);
  vocab.unk_id = token_id(file, "tokenizer.ggml.unknown_token_id", n);
  vocab.pad_id = token_id(file, "tokenizer.ggml.padding_token_id", n);
  const bool sentencepiece = vocab.model == "llama";
  vocab.add_bos = file.find_bool("tokenizer.ggml.add_bos_token").value_or(sentencepiece);
  vocab.add_eos = file.find_bool("tokenizer.ggml.add_eos_token").value_or(false);
  vocab.add_space_prefix =
      file.find_bool("tokenizer.ggml.add_space_prefix").value_or(sentencepiece);
  return vocab;
}

std::shared_ptr<const GgufModel> GgufModel::open(const std::filesystem::path& path) {
  GgufFile file = GgufFile::open(path);
  ModelConfig config = gguf_model_config(file);
  return std::shared_ptr<const GgufModel>(new GgufModel(std::move(file), std::move(config)));
}

std::optional<std::string> GgufModel::chat_template() const {
  return file_.find_string("tokenizer.chat_template");
}

std::vector<int> GgufModel::end_ids() const { return config_.eos_token_ids; }

std::vector<std::pair<std::string, std::string>> GgufModel::summary() const {
  std::map<std::string, int> type_counts;
  for (const GgufTensor& tensor : file_.tensors()) {
    ++type_counts[ggml_type_name(uint32_t(tensor.type))];
  }
  std::string types;
  for (const auto& [name, count] : type_counts) {
    types += fmt::format("{}{} x{}", types.empty() ? "" : ", ", name, count);
  }
  const ModelConfig& c = config_;
  const auto tokenizer = file_.find_string("tokenizer.ggml.model");
  return {
      {"format", fmt::format("GGUF v{}, alignment {}", file_.version(), file_.alignment())},
      {"architecture",
       fmt::format("{} ({})", file_.get_string("general.architecture"), arch_name(c.arch))},
      {"shape", fmt::format("{} layers, hidden {}, heads {} / kv {}, head_dim {}, intermediate {}, "
                            "vocab {}, context {}",
                            c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim,
                            c.intermediate_size, c.vocab_size, c.max_position_embeddings)},
      {"tied embeddings", c.tie_word_embeddings ? "yes" : "no"},
      {"tensors", std::to_string(file_.tensors().size())},
      {"quantization", types},
      {"tokenizer", tokenizer ? fmt::format("{} (pre '{}')", *tokenizer,
                                            file_.find_string("tokenizer.ggml.pre").value_or(""))
                              : std::string("none")},
      {"chat template", chat_template() ? "yes (tokenizer.chat_template)" : "none"},
  };
}

std::unique_ptr<WeightSource> open_gguf_weights(const std::filesystem::path& path) {
  return GgufModel::weights(GgufModel::open(path));
}

}  // namespace rose
