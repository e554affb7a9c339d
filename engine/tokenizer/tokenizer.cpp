#include "engine/tokenizer/tokenizer.h"

#include "engine/common/error.h"
#include "engine/common/utf8.h"

namespace rose {

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> body = encode(text);
  if (!add_special) return body;
  std::vector<int32_t> ids = special_.prefix;
  ids.insert(ids.end(), body.begin(), body.end());
  ids.insert(ids.end(), special_.suffix.begin(), special_.suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (!skip_special_tokens || !is_special(id)) bytes += token_bytes(id);
  }
  // As the library: special tokens are dropped before the decoder strips the leading space.
  if (special_.strip_leading_space && bytes.starts_with(' ')) bytes.erase(0, 1);
  std::string text;
  text.reserve(bytes.size());
  utf8::append_lossy(text, bytes);
  return text;
}

std::string IncrementalDetokenizer::push(int32_t id) {
  if (skip_special_tokens_ && tokenizer_->is_special(id)) return {};
  std::string bytes = tokenizer_->token_bytes(id);
  if (!started_ && !bytes.empty()) {
    started_ = true;
    if (tokenizer_->special_tokens().strip_leading_space && bytes[0] == ' ') bytes.erase(0, 1);
  }
  pending_ += bytes;
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
