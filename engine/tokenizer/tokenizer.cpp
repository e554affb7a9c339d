#include "engine/tokenizer/tokenizer.h"

#include "engine/common/error.h"
#include "engine/common/utf8.h"

namespace rose {

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids) bytes += token_bytes(id);
  std::string text;
  text.reserve(bytes.size());
  utf8::append_lossy(text, bytes);
  return text;
}

std::string IncrementalDetokenizer::push(int32_t id) {
  pending_ += tokenizer_->token_bytes(id);
  // Everything before a trailing, still completable character decodes the same way now as it
  // will in the full text, so it can go out; invalid bytes inside it become U+FFFD right away.
  const size_t ready = utf8::complete_prefix_length(pending_);
  std::string text;
  utf8::append_lossy(text, std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return text;
}

std::string IncrementalDetokenizer::flush() {
  std::string text;
  utf8::append_lossy(text, pending_);
  pending_.clear();
  return text;
}

namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  explicit ByteTokenizer(int vocab_size) : vocab_size_(vocab_size) {}

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<uint8_t>(text[i]);
    return ids;
  }
  std::string token_bytes(int32_t id) const override {
    if (id < 0 || id > 255) return {};
    return std::string(1, static_cast<char>(id));
  }
  int vocab_size() const override { return vocab_size_; }
  std::string kind() const override { return "byte"; }

 private:
  int vocab_size_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer(int vocab_size) {
  // Every byte must have an id the model can embed.
  if (vocab_size < 256)
    fail("byte tokenizer: vocab_size {} is below 256 (one id per byte)", vocab_size);
  return std::make_unique<ByteTokenizer>(vocab_size);
}

}  // namespace rose
