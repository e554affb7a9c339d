#pragma once
// Text <-> token ids. Two kinds: the byte tokenizer of the presets (id = byte value) and Hugging
// Face tokenizer.json byte-level BPE (GPT-2, Llama-3, Qwen2).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rose {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Special/added tokens in the text are recognised and emitted as their ids.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The raw bytes a token stands for (may be part of a UTF-8 character); "" for ids it does not
  // know.
  virtual std::string token_bytes(int32_t id) const = 0;
  virtual int vocab_size() const = 0;
  virtual std::string kind() const = 0;  // "byte" or "bpe"
  // Concatenated bytes of the tokens, with invalid UTF-8 replaced by U+FFFD.
  std::string decode(std::span<const int32_t> ids) const;
};

// Ids 0..255 are the bytes; ids from 256 up (presets have large vocabularies and synthetic weights
// sample them) decode to nothing, because they stand for no text.
std::unique_ptr<Tokenizer> make_byte_tokenizer(int vocab_size);

// Loads tokenizer.json. Errors name the file and the offending field.
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::filesystem::path& path);
// The same from the file's content; `source_name` stands for the file in error messages.
std::unique_ptr<Tokenizer> load_tokenizer_json_from_string(std::string_view content,
                                                           const std::string& source_name);

// Streams text out of a growing id sequence without ever emitting half a UTF-8 character: bytes of
// an incomplete character are held back until the character completes (or flush() is called, when
// they come out as U+FFFD).
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  std::string push(int32_t id);  // the text that became complete with this token
  std::string flush();           // whatever is held back, invalid bytes replaced

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;  // bytes of an unfinished UTF-8 character
};

}  // namespace rose
