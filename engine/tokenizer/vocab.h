#pragma once
// A tokenizer as plain tables, the form GGUF metadata carries it in (tokenizer.ggml.*): the GGUF
// reader fills one, and the tokenizer builder turns it into a Tokenizer.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rose {

struct TokenizerVocab {
  std::string model;  // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;    // tokenizer.ggml.pre: the pre-tokenizer name ("smollm", "llama-bpe", ...)
  std::vector<std::string> tokens;   // id -> token text as stored
  std::vector<float> scores;         // per token (SentencePiece merge priorities); may be empty
  std::vector<int32_t> token_types;  // per token: 1 normal, 2 unknown, 3 control, 4 user, 6 byte
  std::vector<std::string> merges;   // "a b" per line, highest priority first; may be empty
  std::optional<int32_t> bos_id, eos_id, eot_id, unk_id, pad_id;
  bool add_bos = false;  // tokenizer.ggml.add_bos_token
  bool add_eos = false;
  bool add_space_prefix = false;  // SentencePiece: prepend "▁" to the text
  std::string source;             // names the file in error messages
};

}  // namespace rose
