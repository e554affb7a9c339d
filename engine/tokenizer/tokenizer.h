#pragma once
// Text <-> token ids. Two kinds: the byte tokenizer of the presets (id = byte value) and BPE, from
// a Hugging Face tokenizer.json or GGUF metadata: byte-level (GPT-2, Llama-3, Qwen2, SmolLM) or
// SentencePiece-style (Llama-2, Mistral, TinyLlama: metaspace, byte-fallback tokens).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rose {

struct TokenizerVocab;

class Tokenizer {
 public:
  // What a tokenizer adds around a sequence and which ids decode may leave out; set by loaders.
  struct SpecialTokens {
    std::vector<int32_t> prefix;  // encode(text, true) puts these first (BOS)
    std::vector<int32_t> suffix;  // and these last (EOS, where the file asks for it)
    std::optional<int32_t> bos, eos;
    std::vector<char> special;  // (vocab_size or less,) 1: a control token, left out by decode
    // The decoder drops one leading space of the text (the space SentencePiece put first).
    bool strip_leading_space = false;
  };

  virtual ~Tokenizer() = default;
  // The library's encode(add_special_tokens=False): special/added tokens in the text are
  // recognised and emitted as their ids, nothing is added around the text.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // With add_special, the prefix (BOS) and suffix the tokenizer file asks for are added. A
  // rendered chat template usually writes BOS itself: encode it with add_special false.
  std::vector<int32_t> encode(std::string_view text, bool add_special) const;
  // The raw bytes a token stands for (may be part of a UTF-8 character); "" for ids it does not
  // know.
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual int vocab_size() const = 0;
  virtual std::string kind() const = 0;  // "byte" or "bpe"
  // Concatenated bytes of the tokens, with invalid UTF-8 replaced by U+FFFD; special (control)
  // tokens left out unless skip_special_tokens is false.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = true) const;

  bool is_special(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < special_.special.size() && special_.special[id];
  }
  bool adds_bos() const { return special_.bos && !special_.prefix.empty(); }
  std::optional<int32_t> bos_id() const { return special_.bos; }
  std::optional<int32_t> eos_id() const { return special_.eos; }
  const SpecialTokens& special_tokens() const { return special_; }

 protected:
  SpecialTokens special_;
};

// Ids 0..255 are the bytes; ids from 256 up (presets have large vocabularies and synthetic weights
// sample them) decode to nothing, because they stand for no text.
std::unique_ptr<Tokenizer> make_byte_tokenizer(int vocab_size);

// Loads tokenizer.json. Errors name the file and the offending field.
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::filesystem::path& path);
// The same from the file's content; `source_name` stands for the file in error messages.
std::unique_ptr<Tokenizer> load_tokenizer_json_from_string(std::string_view content,
                                                           const std::string& source_name);

// Builds the tokenizer GGUF metadata describes: model "gpt2" (byte-level BPE, pre-tokenizer chosen
// by the pre name) or "llama" (SentencePiece: scores as merge priorities, byte tokens). Control,
// user-defined and unknown tokens are matched as special tokens in text. Errors name vocab.source.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerVocab& vocab);

// Streams text out of a growing id sequence without ever emitting half a UTF-8 character: bytes of
// an incomplete character are held back until the character completes (or flush() is called, when
// they come out as U+FFFD).
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = true)
      : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}
  std::string push(int32_t id);  // the text that became complete with this token
  std::string flush();           // whatever is held back, invalid bytes replaced

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  bool started_ = false;  // some byte has come out: the leading-space rule no longer applies
  std::string pending_;   // bytes of an unfinished UTF-8 character
};

}  // namespace rose
