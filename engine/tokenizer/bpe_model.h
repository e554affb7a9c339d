#pragma once
// The BPE tokenizer's tables, shared by its two builders: tokenizer.json (bpe_tokenizer.cpp) and
// GGUF metadata (vocab_tokenizer.cpp). Internal to engine/tokenizer.
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/tokenizer/regex.h"
#include "engine/tokenizer/tokenizer.h"

namespace rose {

// GPT-2's pattern, built into the ByteLevel pre-tokenizer when use_regex is true.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// SentencePiece's stand-in for a space: U+2581 LOWER ONE EIGHTH BLOCK.
inline constexpr std::string_view kMetaspace = "\xE2\x96\x81";

// The byte-level alphabet's UTF-8 spelling of each byte (GPT-2: space -> U+0120).
const std::string& byte_level_char(uint8_t byte);
// The bytes a byte-level token stands for; a token with any character outside the alphabet
// stands for its own UTF-8 (the ByteLevel decoder's rule).
std::string byte_level_decode(std::string_view token);

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// Added tokens grouped by first byte, longest first, so the first hit at a position is the
// leftmost-longest match the library's Aho-Corasick automaton reports.
struct AddedTokenMatcher {
  std::array<std::vector<const AddedToken*>, 256> by_first_byte;
  bool empty = true;

  void add(const AddedToken* token);
  void finish();
  // The leftmost-longest match at or after `from`.
  std::optional<std::pair<size_t, const AddedToken*>> find(std::string_view text,
                                                           size_t from) const;
};

struct NormalizerStep {
  enum Kind { kNfc, kPrepend, kReplace } kind = kNfc;
  std::string text;                // kPrepend: what to put first; kReplace: the literal pattern
  std::unique_ptr<Regex> pattern;  // kReplace with a regex pattern (text unused then)
  std::string replacement;         // kReplace
};

struct PreTokenizerStep {
  std::unique_ptr<Regex> split;  // Split's pattern, or GPT-2's for ByteLevel with use_regex
  bool byte_level = false;
  bool add_prefix_space = false;  // ByteLevel
  // Metaspace: spaces become "▁"; a "▁" goes first (always, or only on the text's first piece);
  // split_on_metaspace cuts before every "▁".
  bool metaspace = false;
  enum Prepend { kAlways, kFirst, kNever } prepend = kAlways;
  bool split_on_metaspace = false;
};

struct Merge {
  int32_t rank;
  int32_t new_id;
};

// How stored token text turns into the bytes it stands for (the decoder, applied per token).
struct TokenDecoder {
  bool byte_level = false;                                        // the ByteLevel alphabet
  bool byte_fallback = false;                                     // "<0xNN>" -> that byte
  std::vector<std::pair<std::string, std::string>> replacements;  // Replace: (from, to), in order
  bool strip_leading_space = false;  // Strip(" ", 1, 0) after Fuse, or Metaspace's prefix rule
};

// Lets the vocabulary be searched with a string_view, without building a std::string per lookup
// (loading a 280k-merge file does three lookups per merge).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
using VocabMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct BpeTables {
  int vocab_size = 0;
  // Byte-level (GPT-2): symbols are bytes spelled in the ByteLevel alphabet. Otherwise
  // SentencePiece-style: symbols are characters, with "<0xNN>" tokens for missing ones.
  bool byte_level = true;
  VocabMap vocab;                              // token text as stored -> id (model only)
  std::unordered_map<uint64_t, Merge> merges;  // (left id << 32 | right id) -> merge
  // (256,) byte-level: the id of each byte's token; otherwise the id of "<0xNN>" under
  // byte_fallback; -1 where there is none.
  std::array<int32_t, 256> byte_ids{};
  int32_t unk_id = -1;
  bool fuse_unk = false;
  bool ignore_merges = false;
  bool byte_fallback = false;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  std::vector<AddedToken> added_tokens;
};

struct Segment {
  std::string_view text;
  int32_t added_id;  // -1: ordinary text still to pre-tokenize
};

class BpeTokenizer final : public Tokenizer {
 public:
  // token_text: (vocab_size,) each id's stored text ("" for ids without one).
  BpeTokenizer(BpeTables tables, const std::vector<std::string>& token_text,
               const TokenDecoder& decoder, SpecialTokens special);

  using Tokenizer::encode;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string token_bytes(int32_t id) const override {
    if (id < 0 || id >= t_.vocab_size) return {};
    const size_t i = static_cast<size_t>(id);
    return token_bytes_.substr(token_offsets_[i], token_offsets_[i + 1] - token_offsets_[i]);
  }
  int vocab_size() const override { return t_.vocab_size; }
  std::string kind() const override { return "bpe"; }

 private:
  void split_added_tokens(std::string_view text, const AddedTokenMatcher& matcher,
                          std::vector<Segment>& out) const;
  std::string normalize(std::string_view text) const;
  void pre_tokenize(std::string_view text, bool text_start,
                    std::vector<std::string>& pre_tokens) const;
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const;
  std::vector<int32_t> initial_symbols(std::string_view word) const;
  std::vector<int32_t> merge_word(std::string_view word) const;
  const Merge* find_merge(int32_t left, int32_t right) const {
    auto it = t_.merges.find((static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
                             static_cast<uint32_t>(right));
    return it == t_.merges.end() ? nullptr : &it->second;
  }

  BpeTables t_;
  AddedTokenMatcher raw_added_;          // normalized: false, matched on the raw text
  AddedTokenMatcher normalized_added_;   // normalized: true, matched after normalization
  std::string token_bytes_;              // bytes of every id, concatenated
  std::vector<uint32_t> token_offsets_;  // (vocab_size + 1,) where each id's bytes start

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> word_cache_;
};

}  // namespace rose
