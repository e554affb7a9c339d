#pragma once
// A GGUF model file opened once: its ModelConfig, weights under the canonical names of
// engine/model/weights.h (llama's q/k rows un-permuted), tokenizer tables and chat template.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/gguf.h"
#include "engine/model/weights.h"
#include "engine/tokenizer/vocab.h"

namespace rose {

// The model shape from {arch}.* metadata (architectures llama, mistral, qwen2 and gpt2). Errors
// name the file and the key.
ModelConfig gguf_model_config(const GgufFile& file);

// tokenizer.ggml.* as plain tables (tokens required; the rest optional). Defaults when a key is
// absent follow llama.cpp: add_bos and add_space_prefix are on for SentencePiece ("llama") vocabs.
TokenizerVocab read_gguf_vocab(const GgufFile& file);

class GgufModel {
 public:
  static std::shared_ptr<const GgufModel> open(const std::filesystem::path& path);

  const GgufFile& file() const { return file_; }
  const ModelConfig& config() const { return config_; }
  TokenizerVocab vocab() const { return read_gguf_vocab(file_); }
  // tokenizer.chat_template, if the file has one.
  std::optional<std::string> chat_template() const;
  // eos, eot and eom ids from the metadata, deduplicated, those inside the vocabulary.
  std::vector<int> end_ids() const;
  // (label, value) rows for `roseinfer info`: format, architecture, shape, tensor count, the
  // quantization types with their tensor counts, tokenizer and chat template.
  std::vector<std::pair<std::string, std::string>> summary() const;
  // A WeightSource sharing this mapping.
  static std::unique_ptr<WeightSource> weights(std::shared_ptr<const GgufModel> model);

 private:
  GgufModel(GgufFile file, ModelConfig config)
      : file_(std::move(file)), config_(std::move(config)) {}
  GgufFile file_;
  ModelConfig config_;
};

std::unique_ptr<WeightSource> open_gguf_weights(const std::filesystem::path& path);

}  // namespace rose
