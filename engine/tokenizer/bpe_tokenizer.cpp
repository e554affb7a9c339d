// Hugging Face tokenizer.json byte-level BPE (GPT-2, Llama-3, Qwen2). The encode pipeline follows
// the tokenizers library step by step so the ids match it exactly:
//   1. split added tokens out of the raw text (non-normalized ones first, then normalized ones in
//      the remaining pieces; leftmost-longest; single_word / lstrip / rstrip as the library does),
//   2. pre-tokenize each remaining piece (Split regexes, then ByteLevel: prefix space, GPT-2
//   regex),
//   3. BPE each pre-token: one symbol per byte, merge the lowest-ranked adjacent pair (leftmost on
//      ties) until no pair is ranked; ignore_merges emits a pre-token that is a vocab entry whole.
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <mutex>
#include <optional>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "engine/common/error.h"
#include "engine/common/utf8.h"
#include "engine/tokenizer/nfc.h"
#include "engine/tokenizer/regex.h"
#include "engine/tokenizer/tokenizer.h"

namespace rose {

namespace {

// GPT-2's pattern, built into the ByteLevel pre-tokenizer when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Larger than any released vocabulary; bounds the id table a malformed file can make us allocate.
constexpr int64_t kMaxTokenId = (int64_t{1} << 22) - 1;
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kWordCacheCapacity = size_t{1} << 16;

// The byte-level alphabet: every byte is shown as a printable code point so BPE vocabularies can
// be JSON strings. Printable Latin-1 bytes stand for themselves; the other 68 bytes, in ascending
// order, map to U+0100 + n (space -> U+0120, newline -> U+010A).
struct ByteLevelAlphabet {
  std::array<std::string, 256> byte_to_utf8;  // (256,) UTF-8 of the code point standing for a byte
  std::array<int16_t, 0x144> code_point_to_byte;  // (U+0000..U+0143,) the byte, or -1

  ByteLevelAlphabet() {
    code_point_to_byte.fill(-1);
    int next_extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      const char32_t cp = printable ? static_cast<char32_t>(b) : 0x100 + next_extra++;
      utf8::append_code_point(byte_to_utf8[b], cp);
      code_point_to_byte[cp] = static_cast<int16_t>(b);
    }
  }

  std::string encode(std::string_view bytes) const {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) out += byte_to_utf8[static_cast<uint8_t>(c)];
    return out;
  }

  // The ByteLevel decoder's rule: a token whose every character is in the alphabet stands for
  // those bytes; any other token (e.g. an added token with a space) stands for its own UTF-8.
  std::string decode(std::string_view token) const {
    std::string bytes;
    size_t i = 0;
    while (i < token.size()) {
      const utf8::Scan s = utf8::scan(token.substr(i));
      if (s.kind != utf8::Scan::kValid || s.code_point >= code_point_to_byte.size() ||
          code_point_to_byte[s.code_point] < 0) {
        return std::string(token);
      }
      bytes.push_back(static_cast<char>(code_point_to_byte[s.code_point]));
      i += s.length;
    }
    return bytes;
  }
};

const ByteLevelAlphabet& byte_level_alphabet() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

// Rust's char::is_whitespace (the Unicode White_Space property), used by lstrip / rstrip.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// The regex crate's Unicode \w, used by single_word.
bool is_word_character(char32_t c) {
  if (c < 0x80) return std::isalnum(static_cast<int>(c)) || c == '_';
  static const Regex word(R"(\A[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]\z)", false,
                          "tokenizer word class");
  std::string encoded;
  utf8::append_code_point(encoded, c);
  return word.search(encoded);
}

// The last character of text, when text ends in a valid one.
std::optional<std::pair<size_t, char32_t>> last_character(std::string_view text) {
  for (size_t back = 1; back <= 4 && back <= text.size(); ++back) {
    const size_t start = text.size() - back;
    const auto lead = static_cast<uint8_t>(text[start]);
    if ((lead & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const utf8::Scan s = utf8::scan(text.substr(start));
    if (s.kind == utf8::Scan::kValid && s.length == back) return std::pair{start, s.code_point};
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<char32_t> first_character(std::string_view text) {
  if (text.empty()) return std::nullopt;
  const utf8::Scan s = utf8::scan(text);
  if (s.kind != utf8::Scan::kValid) return std::nullopt;
  return s.code_point;
}

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

  void add(const AddedToken* token) {
    by_first_byte[static_cast<uint8_t>(token->content[0])].push_back(token);
    empty = false;
  }
  void finish() {
    for (auto& bucket : by_first_byte) {
      std::stable_sort(bucket.begin(), bucket.end(), [](const AddedToken* a, const AddedToken* b) {
        return a->content.size() > b->content.size();
      });
    }
  }
  // The leftmost-longest match at or after `from`.
  std::optional<std::pair<size_t, const AddedToken*>> find(std::string_view text,
                                                           size_t from) const {
    for (size_t pos = from; pos < text.size(); ++pos) {
      for (const AddedToken* token : by_first_byte[static_cast<uint8_t>(text[pos])]) {
        if (text.substr(pos).starts_with(token->content)) return std::pair{pos, token};
      }
    }
    return std::nullopt;
  }
};

struct Segment {
  std::string_view text;
  int32_t added_id;  // -1: ordinary text still to pre-tokenize
};

struct PreTokenizerStep {
  std::unique_ptr<Regex> split;  // Split's pattern, or GPT-2's for ByteLevel with use_regex
  bool byte_level = false;
  bool add_prefix_space = false;
};

struct Merge {
  int32_t rank;
  int32_t new_id;
};

class BpeTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string token_bytes(int32_t id) const override {
    if (id < 0 || id >= vocab_size_) return {};
    const size_t i = static_cast<size_t>(id);
    return token_bytes_.substr(token_offsets_[i], token_offsets_[i + 1] - token_offsets_[i]);
  }
  int vocab_size() const override { return vocab_size_; }
  std::string kind() const override { return "bpe"; }

 private:
  friend class TokenizerJsonLoader;

  void split_added_tokens(std::string_view text, const AddedTokenMatcher& matcher,
                          std::vector<Segment>& out) const;
  void pre_tokenize(std::string_view text, std::vector<std::string>& pre_tokens) const;
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const;
  std::vector<int32_t> merge_word(std::string_view word) const;
  const Merge* find_merge(int32_t left, int32_t right) const {
    auto it = merges_.find((static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
                           static_cast<uint32_t>(right));
    return it == merges_.end() ? nullptr : &it->second;
  }

  int vocab_size_ = 0;
  std::unordered_map<std::string, int32_t> vocab_;  // byte-level token string -> id (model only)
  std::unordered_map<uint64_t, Merge> merges_;      // (left id << 32 | right id) -> merge
  std::array<int32_t, 256> byte_ids_{};             // (256,) id of each single-byte token, or -1
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  bool nfc_ = false;  // the normalizer: NFC or nothing
  std::vector<PreTokenizerStep> pre_tokenizer_;
  std::vector<AddedToken> added_tokens_;
  AddedTokenMatcher raw_added_;          // normalized: false, matched on the raw text
  AddedTokenMatcher normalized_added_;   // normalized: true, matched after normalization
  std::string token_bytes_;              // bytes of every id, concatenated
  std::vector<uint32_t> token_offsets_;  // (vocab_size + 1,) where each id's bytes start

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> word_cache_;
};

void BpeTokenizer::split_added_tokens(std::string_view text, const AddedTokenMatcher& matcher,
                                      std::vector<Segment>& out) const {
  if (matcher.empty) {
    if (!text.empty()) out.push_back({text, -1});
    return;
  }
  size_t search_from = 0;  // where the automaton resumes: after the last match, kept or not
  size_t emitted_to = 0;   // text before this is already in `out`
  while (auto match = matcher.find(text, search_from)) {
    const AddedToken& token = *match->second;
    size_t start = match->first;
    size_t stop = start + token.content.size();
    search_from = stop;
    if (token.single_word) {
      const auto before = last_character(text.substr(0, start));
      const auto after = first_character(text.substr(stop));
      const bool word_before = before && is_word_character(before->second);
      const bool word_after = after && is_word_character(*after);
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > emitted_to) {
        const auto c = last_character(text.substr(0, new_start));
        if (!c || !is_white_space(c->second)) break;
        new_start = c->first;
      }
      start = new_start;
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        const utf8::Scan s = utf8::scan(text.substr(stop));
        if (s.kind != utf8::Scan::kValid || !is_white_space(s.code_point)) break;
        stop += s.length;
      }
      search_from = stop;
    }
    if (emitted_to < start) out.push_back({text.substr(emitted_to, start - emitted_to), -1});
    out.push_back({text.substr(start, stop - start), token.id});
    emitted_to = stop;
  }
  if (emitted_to < text.size()) out.push_back({text.substr(emitted_to), -1});
}

void BpeTokenizer::pre_tokenize(std::string_view text, std::vector<std::string>& pre_tokens) const {
  std::vector<std::string> pieces{std::string(text)}, next;
  std::vector<std::pair<size_t, size_t>> matches;
  for (const PreTokenizerStep& step : pre_tokenizer_) {
    next.clear();
    for (std::string& piece : pieces) {
      if (step.add_prefix_space && piece[0] != ' ') piece.insert(0, 1, ' ');
      if (!step.split) {
        next.push_back(std::move(piece));
        continue;
      }
      // Isolated: matches and the gaps between them are pieces of their own (so invert does not
      // matter); empty pieces are dropped.
      matches.clear();
      step.split->find_all(piece, matches);
      size_t at = 0;
      for (auto [begin, end] : matches) {
        if (begin > at) next.push_back(piece.substr(at, begin - at));
        next.push_back(piece.substr(begin, end - begin));
        at = end;
      }
      if (at < piece.size()) next.push_back(piece.substr(at));
    }
    pieces.swap(next);
  }
  for (std::string& piece : pieces) pre_tokens.push_back(std::move(piece));
}

std::vector<int32_t> BpeTokenizer::merge_word(std::string_view word) const {
  if (ignore_merges_) {
    auto it = vocab_.find(byte_level_alphabet().encode(word));
    if (it != vocab_.end()) return {it->second};
  }
  // One symbol per byte. Bytes missing from the vocabulary become unk (fused when fuse_unk), or
  // vanish when there is no unk token, as in the library.
  std::vector<int32_t> symbols;  // (<= word bytes,) token ids
  symbols.reserve(word.size());
  bool pending_unk = false;
  for (char c : word) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id >= 0) {
      if (pending_unk) symbols.push_back(unk_id_);
      pending_unk = false;
      symbols.push_back(id);
    } else if (unk_id_ >= 0) {
      if (pending_unk && !fuse_unk_) symbols.push_back(unk_id_);
      pending_unk = true;
    }
  }
  if (pending_unk) symbols.push_back(unk_id_);
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return symbols;

  // Doubly linked symbols; a min-heap of candidate merges by (rank, position). A stale candidate
  // is skipped when its pair no longer produces the same id, exactly the library's check.
  std::vector<int> prev(n), next(n);  // (n,) neighbours, -1 at the ends
  std::vector<char> alive(n, 1);      // (n,)
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  for (int i = 0; i + 1 < n; ++i) {
    if (const Merge* m = find_merge(symbols[i], symbols[i + 1]))
      queue.push({m->rank, i, m->new_id});
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const int right = next[top.pos];
    const Merge* m = find_merge(symbols[top.pos], symbols[right]);
    if (m == nullptr || m->new_id != top.new_id) continue;
    symbols[top.pos] = top.new_id;
    alive[right] = 0;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    if (prev[top.pos] >= 0) {
      const int left = prev[top.pos];
      if (const Merge* pm = find_merge(symbols[left], symbols[top.pos])) {
        queue.push({pm->rank, left, pm->new_id});
      }
    }
    if (next[top.pos] >= 0) {
      if (const Merge* nm = find_merge(symbols[top.pos], symbols[next[top.pos]])) {
        queue.push({nm->rank, top.pos, nm->new_id});
      }
    }
  }
  std::vector<int32_t> ids;
  for (int i = 0; i >= 0; i = next[i]) ids.push_back(symbols[i]);
  return ids;
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& ids) const {
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    auto it = word_cache_.find(std::string(word));
    if (it != word_cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> word_ids = merge_word(word);
  ids.insert(ids.end(), word_ids.begin(), word_ids.end());
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    // A simple bound: start over when full. Prompts repeat few distinct words.
    if (word_cache_.size() >= kWordCacheCapacity) word_cache_.clear();
    word_cache_.emplace(std::string(word), std::move(word_ids));
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  std::vector<Segment> raw_segments, segments;
  std::vector<std::string> pre_tokens;
  split_added_tokens(text, raw_added_, raw_segments);
  for (const Segment& raw : raw_segments) {
    if (raw.added_id >= 0) {
      ids.push_back(raw.added_id);
      continue;
    }
    segments.clear();
    const std::string normalized = nfc_ ? to_nfc(raw.text) : std::string();
    split_added_tokens(nfc_ ? std::string_view(normalized) : raw.text, normalized_added_, segments);
    for (const Segment& segment : segments) {
      if (segment.added_id >= 0) {
        ids.push_back(segment.added_id);
        continue;
      }
      pre_tokens.clear();
      pre_tokenize(segment.text, pre_tokens);
      for (const std::string& word : pre_tokens) encode_word(word, ids);
    }
  }
  return ids;
}

// ---- loading ----

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

std::string shorten(std::string_view text) {
  constexpr size_t kMax = 40;
  if (text.size() <= kMax) return std::string(text);
  size_t cut = kMax;
  while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

const char* type_name(element e) {
  switch (e.type()) {
    case element_type::ARRAY:
      return "an array";
    case element_type::OBJECT:
      return "an object";
    case element_type::INT64:
    case element_type::UINT64:
      return "an integer";
    case element_type::DOUBLE:
      return "a number";
    case element_type::STRING:
      return "a string";
    case element_type::BOOL:
      return "a boolean";
    case element_type::NULL_VALUE:
      return "null";
  }
  return "a value";
}

class TokenizerJsonLoader {
 public:
  explicit TokenizerJsonLoader(std::string source) : source_(std::move(source)) {}

  std::unique_ptr<Tokenizer> load(std::string_view content);

 private:
  template <typename... Args>
  [[noreturn]] void error(std::string_view field, fmt::format_string<Args...> format,
                          Args&&... args) const {
    fail("{}: {}: {}", source_, field, fmt::format(format, std::forward<Args>(args)...));
  }
  object as_object(element e, std::string_view field) const {
    if (!e.is_object()) error(field, "expected an object, got {}", type_name(e));
    return object(e);
  }
  array as_array(element e, std::string_view field) const {
    if (!e.is_array()) error(field, "expected an array, got {}", type_name(e));
    return array(e);
  }
  std::string_view as_string(element e, std::string_view field) const {
    if (!e.is_string()) error(field, "expected a string, got {}", type_name(e));
    return std::string_view(e);
  }
  bool as_bool(element e, std::string_view field) const {
    if (!e.is_bool()) error(field, "expected true or false, got {}", type_name(e));
    return bool(e);
  }
  int32_t as_id(element e, std::string_view field) const {
    int64_t value = 0;
    if (e.is_int64()) {
      value = int64_t(e);
    } else if (e.is_uint64()) {
      value = kMaxTokenId + 1;
    } else {
      error(field, "expected an integer token id, got {}", type_name(e));
    }
    if (value < 0 || value > kMaxTokenId) {
      error(field, "token id {} is out of range (0..{})", value, kMaxTokenId);
    }
    return static_cast<int32_t>(value);
  }
  // The member, or nothing when it is missing or null.
  std::optional<element> member(object o, std::string_view key) const {
    element value;
    if (o.at_key(key).get(value) != simdjson::SUCCESS || value.is_null()) return std::nullopt;
    return value;
  }
  element required(object o, std::string_view key, std::string_view field) const {
    auto value = member(o, key);
    if (!value) error(field, "missing field '{}'", key);
    return *value;
  }
  bool optional_bool(object o, std::string_view key, const std::string& field,
                     bool fallback) const {
    auto value = member(o, key);
    return value ? as_bool(*value, field + "." + std::string(key)) : fallback;
  }

  void load_model(element e);
  void load_added_tokens(element e);
  void load_pre_tokenizer(element e, const std::string& field);
  void load_normalizer(element e, const std::string& field);
  void check_decoder(element e) const;
  void build_token_table();

  std::string source_;
  std::unique_ptr<BpeTokenizer> tokenizer_;
  std::unordered_map<int32_t, std::string> vocab_by_id_;
  bool seen_byte_level_ = false;
};

void TokenizerJsonLoader::load_model(element e) {
  BpeTokenizer& t = *tokenizer_;
  object model = as_object(e, "model");
  const std::string_view type = as_string(required(model, "type", "model"), "model.type");
  if (type != "BPE") error("model.type", "'{}' is not supported (only BPE)", shorten(type));

  if (auto dropout = member(model, "dropout")) {
    if (!dropout->is_number() || double(*dropout) != 0.0) {
      error("model.dropout", "BPE dropout is not supported (it makes encoding random)");
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (auto value = member(model, key)) {
      if (!as_string(*value, std::string("model.") + key).empty()) {
        error(std::string("model.") + key, "not supported by byte-level BPE (expected null)");
      }
    }
  }
  if (optional_bool(model, "byte_fallback", "model", false)) {
    error("model.byte_fallback", "not supported (byte-level BPE covers every byte already)");
  }
  t.fuse_unk_ = optional_bool(model, "fuse_unk", "model", false);
  t.ignore_merges_ = optional_bool(model, "ignore_merges", "model", false);

  object vocab = as_object(required(model, "vocab", "model"), "model.vocab");
  t.vocab_.reserve(vocab.size());
  for (auto [key, value] : vocab) {
    const std::string field = fmt::format("model.vocab[\"{}\"]", shorten(key));
    const int32_t id = as_id(value, field);
    auto [it, inserted] = vocab_by_id_.emplace(id, std::string(key));
    if (!inserted) {
      error(field, "id {} is already used by \"{}\"", id, shorten(it->second));
    }
    if (!t.vocab_.emplace(std::string(key), id).second) error(field, "token appears twice");
    t.vocab_size_ = std::max(t.vocab_size_, id + 1);
  }

  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  for (int b = 0; b < 256; ++b) {
    auto it = t.vocab_.find(alphabet.byte_to_utf8[b]);
    t.byte_ids_[b] = it == t.vocab_.end() ? -1 : it->second;
  }

  if (auto unk = member(model, "unk_token")) {
    const std::string_view unk_token = as_string(*unk, "model.unk_token");
    auto it = t.vocab_.find(std::string(unk_token));
    if (it == t.vocab_.end()) {
      error("model.unk_token", "\"{}\" is not in model.vocab", shorten(unk_token));
    }
    t.unk_id_ = it->second;
  }

  array merges = as_array(required(model, "merges", "model"), "model.merges");
  t.merges_.reserve(merges.size());
  std::optional<bool> pair_format;  // the two formats cannot be mixed in one list
  int32_t rank = 0;
  for (element merge : merges) {
    const std::string field = fmt::format("model.merges[{}]", rank);
    std::string_view left, right;
    if (merge.is_string()) {
      const std::string_view line = std::string_view(merge);
      if (pair_format.value_or(false)) error(field, "a \"a b\" string among [\"a\", \"b\"] pairs");
      pair_format = false;
      if (line.starts_with("#version")) {  // a header line of old merges.txt files
        ++rank;
        continue;
      }
      const size_t space = line.find(' ');
      if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
        error(field, "\"{}\" is not two tokens separated by one space", shorten(line));
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array()) {
      if (!pair_format.value_or(true)) error(field, "a [\"a\", \"b\"] pair among \"a b\" strings");
      pair_format = true;
      array pair = array(merge);
      if (pair.size() != 2)
        error(field, "expected a pair of two tokens, got {} items", pair.size());
      left = as_string(pair.at(0).value_unsafe(), field + "[0]");
      right = as_string(pair.at(1).value_unsafe(), field + "[1]");
    } else {
      error(field, "expected \"a b\" or [\"a\", \"b\"], got {}", type_name(merge));
    }
    auto left_it = t.vocab_.find(std::string(left));
    if (left_it == t.vocab_.end())
      error(field, "token \"{}\" is not in model.vocab", shorten(left));
    auto right_it = t.vocab_.find(std::string(right));
    if (right_it == t.vocab_.end()) {
      error(field, "token \"{}\" is not in model.vocab", shorten(right));
    }
    const std::string merged = std::string(left) + std::string(right);
    auto merged_it = t.vocab_.find(merged);
    if (merged_it == t.vocab_.end()) {
      error(field, "merged token \"{}\" is not in model.vocab", shorten(merged));
    }
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left_it->second)) << 32) |
                         static_cast<uint32_t>(right_it->second);
    // A repeated pair takes its later rank, as in the library (its map insert overwrites).
    t.merges_[key] = Merge{rank, merged_it->second};
    ++rank;
  }
}

void TokenizerJsonLoader::load_added_tokens(element e) {
  BpeTokenizer& t = *tokenizer_;
  array list = as_array(e, "added_tokens");
  std::unordered_map<std::string, int32_t> by_content;
  std::unordered_map<int32_t, std::string> by_id;
  size_t index = 0;
  for (element item : list) {
    const std::string field = fmt::format("added_tokens[{}]", index++);
    object o = as_object(item, field);
    AddedToken token;
    token.id = as_id(required(o, "id", field), field + ".id");
    token.content = std::string(as_string(required(o, "content", field), field + ".content"));
    if (token.content.empty()) error(field + ".content", "an added token cannot be empty");
    token.special = optional_bool(o, "special", field, false);
    token.lstrip = optional_bool(o, "lstrip", field, false);
    token.rstrip = optional_bool(o, "rstrip", field, false);
    token.single_word = optional_bool(o, "single_word", field, false);
    token.normalized = optional_bool(o, "normalized", field, !token.special);
    if (!by_content.emplace(token.content, token.id).second) {
      error(field + ".content", "\"{}\" is listed twice", shorten(token.content));
    }
    if (!by_id.emplace(token.id, token.content).second) {
      error(field + ".id", "id {} is already used by added token \"{}\"", token.id,
            shorten(by_id[token.id]));
    }
    // An added token may also be a vocab entry (GPT-2's <|endoftext|>), but then with the same id.
    auto vocab_it = t.vocab_.find(token.content);
    if (vocab_it != t.vocab_.end() && vocab_it->second != token.id) {
      error(field + ".id", "{} but model.vocab has \"{}\" as {}", token.id, shorten(token.content),
            vocab_it->second);
    }
    auto id_it = vocab_by_id_.find(token.id);
    if (id_it != vocab_by_id_.end() && id_it->second != token.content) {
      error(field + ".id", "{} is model.vocab's \"{}\", not \"{}\"", token.id,
            shorten(id_it->second), shorten(token.content));
    }
    t.vocab_size_ = std::max(t.vocab_size_, token.id + 1);
    t.added_tokens_.push_back(std::move(token));
  }
  for (const AddedToken& token : t.added_tokens_) {
    (token.normalized ? t.normalized_added_ : t.raw_added_).add(&token);
  }
  t.raw_added_.finish();
  t.normalized_added_.finish();
}

void TokenizerJsonLoader::load_pre_tokenizer(element e, const std::string& field) {
  object o = as_object(e, field);
  const std::string_view type = as_string(required(o, "type", field), field + ".type");
  if (type == "Sequence") {
    array steps = as_array(required(o, "pretokenizers", field), field + ".pretokenizers");
    size_t index = 0;
    for (element step : steps) {
      load_pre_tokenizer(step, fmt::format("{}.pretokenizers[{}]", field, index++));
    }
  } else if (type == "ByteLevel") {
    // Splits after the byte-to-character mapping would see mapped text; no released tokenizer
    // does that, so it is refused rather than emulated.
    if (seen_byte_level_) error(field, "only one ByteLevel pre-tokenizer is supported");
    seen_byte_level_ = true;
    PreTokenizerStep step;
    step.byte_level = true;
    step.add_prefix_space = optional_bool(o, "add_prefix_space", field, true);
    if (optional_bool(o, "use_regex", field, true)) {
      step.split = std::make_unique<Regex>(kGpt2Pattern, false, source_ + ": " + field);
    }
    tokenizer_->pre_tokenizer_.push_back(std::move(step));
  } else if (type == "Split") {
    if (seen_byte_level_)
      error(field, "a Split after the ByteLevel pre-tokenizer is not supported");
    const std::string_view behavior =
        as_string(required(o, "behavior", field), field + ".behavior");
    if (behavior != "Isolated") {
      error(field + ".behavior", "'{}' is not supported (only Isolated)", shorten(behavior));
    }
    optional_bool(o, "invert", field, false);  // Isolated keeps both sides: invert changes nothing
    object pattern = as_object(required(o, "pattern", field), field + ".pattern");
    PreTokenizerStep step;
    if (auto regex = member(pattern, "Regex")) {
      const std::string where = field + ".pattern.Regex";
      step.split = std::make_unique<Regex>(as_string(*regex, where), false, source_ + ": " + where);
    } else if (auto literal = member(pattern, "String")) {
      const std::string where = field + ".pattern.String";
      const std::string_view text = as_string(*literal, where);
      if (!text.empty()) step.split = std::make_unique<Regex>(text, true, source_ + ": " + where);
    } else {
      error(field + ".pattern", "expected {{\"Regex\": ...}} or {{\"String\": ...}}");
    }
    tokenizer_->pre_tokenizer_.push_back(std::move(step));
  } else {
    error(field + ".type", "pre-tokenizer '{}' is not supported (ByteLevel, Split, Sequence)",
          shorten(type));
  }
}

void TokenizerJsonLoader::load_normalizer(element e, const std::string& field) {
  if (e.is_null()) return;
  object o = as_object(e, field);
  const std::string_view type = as_string(required(o, "type", field), field + ".type");
  if (type == "Sequence") {
    array steps = as_array(required(o, "normalizers", field), field + ".normalizers");
    size_t index = 0;
    for (element step : steps) {
      load_normalizer(step, fmt::format("{}.normalizers[{}]", field, index++));
    }
    return;
  }
  if (type == "NFC") {
    // NFC is idempotent, so a repeated one changes nothing.
    tokenizer_->nfc_ = true;
    return;
  }
  error(field + ".type", "normalizer '{}' is not supported (only NFC or null)", shorten(type));
}

void TokenizerJsonLoader::check_decoder(element e) const {
  object o = as_object(e, "decoder");
  const std::string_view type = as_string(required(o, "type", "decoder"), "decoder.type");
  if (type != "ByteLevel") {
    error("decoder.type", "decoder '{}' is not supported (only ByteLevel)", shorten(type));
  }
}

void TokenizerJsonLoader::build_token_table() {
  BpeTokenizer& t = *tokenizer_;
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  std::vector<const std::string*> token_of_id(static_cast<size_t>(t.vocab_size_), nullptr);
  for (const auto& [id, token] : vocab_by_id_) token_of_id[id] = &token;
  // Added tokens win over model entries for decoding, as in the library.
  for (const AddedToken& token : t.added_tokens_) token_of_id[token.id] = &token.content;
  t.token_offsets_.assign(token_of_id.size() + 1, 0);
  for (size_t id = 0; id < token_of_id.size(); ++id) {
    if (token_of_id[id] != nullptr) t.token_bytes_ += alphabet.decode(*token_of_id[id]);
    if (t.token_bytes_.size() > UINT32_MAX) fail("{}: the vocabulary is too large", source_);
    t.token_offsets_[id + 1] = static_cast<uint32_t>(t.token_bytes_.size());
  }
}

std::unique_ptr<Tokenizer> TokenizerJsonLoader::load(std::string_view content) {
  simdjson::dom::parser parser;
  element root;
  if (auto err = parser.parse(content.data(), content.size()).get(root)) {
    fail("{}: not valid JSON: {}", source_, simdjson::error_message(err));
  }
  object top = as_object(root, "(top level)");
  tokenizer_ = std::make_unique<BpeTokenizer>();
  load_model(required(top, "model", "(top level)"));
  if (auto added = member(top, "added_tokens")) load_added_tokens(*added);
  if (auto normalizer = member(top, "normalizer")) load_normalizer(*normalizer, "normalizer");
  auto pre_tokenizer = member(top, "pre_tokenizer");
  if (!pre_tokenizer) error("pre_tokenizer", "missing: byte-level BPE needs a ByteLevel one");
  load_pre_tokenizer(*pre_tokenizer, "pre_tokenizer");
  if (!seen_byte_level_)
    error("pre_tokenizer", "has no ByteLevel step (needed for byte-level BPE)");
  // The post-processor only adds special tokens around a sequence (Llama-3's BOS): encode() here
  // is the library's encode(add_special_tokens=False), so it is accepted and not applied.
  if (auto post = member(top, "post_processor")) as_object(*post, "post_processor");
  auto decoder = member(top, "decoder");
  if (!decoder) error("decoder", "missing: byte-level BPE needs the ByteLevel decoder");
  check_decoder(*decoder);
  if (tokenizer_->vocab_size_ == 0) error("model.vocab", "is empty");
  build_token_table();
  return std::move(tokenizer_);
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer_json_from_string(std::string_view content,
                                                           const std::string& source_name) {
  return TokenizerJsonLoader(source_name).load(content);
}

std::unique_ptr<Tokenizer> load_tokenizer_json(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("{}: cannot open the tokenizer file", path.string());
  std::ostringstream content;
  content << file.rdbuf();
  if (file.bad()) fail("{}: cannot read the tokenizer file", path.string());
  return load_tokenizer_json_from_string(content.str(), path.string());
}

}  // namespace rose
