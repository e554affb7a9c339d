// BPE as the Hugging Face tokenizers library runs it, and its tokenizer.json loader. The encode
// pipeline follows the library step by step so the ids match it exactly:
//   1. split added tokens out of the raw text (non-normalized ones first, then normalized ones in
//      the normalized remaining pieces; leftmost-longest; single_word / lstrip / rstrip),
//   2. normalize (NFC, Prepend, Replace) and pre-tokenize each remaining piece (Split regexes,
//      then ByteLevel: prefix space, GPT-2 regex; or Metaspace: spaces as "▁"),
//   3. BPE each pre-token: one symbol per byte (byte-level) or per character (SentencePiece-style,
//      "<0xNN>" tokens for characters not in the vocabulary), then merge the lowest-ranked
//      adjacent pair (leftmost on ties) until no pair is ranked; ignore_merges emits a pre-token
//      that is a vocab entry whole.
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
#include "engine/common/json_parse.h"
#include "engine/common/utf8.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/nfc.h"
#include "engine/tokenizer/regex.h"
#include "engine/tokenizer/tokenizer.h"

namespace rose {

namespace {

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

// One token's bytes under the decoder: each step applied to the token on its own, as the
// library's decode chain does before Fuse.
std::string decode_token(std::string_view text, const TokenDecoder& decoder) {
  std::string token(text);
  for (const auto& [from, to] : decoder.replacements) {
    std::string replaced;
    size_t at = 0;
    for (size_t hit; (hit = token.find(from, at)) != std::string::npos; at = hit + from.size()) {
      replaced.append(token, at, hit - at);
      replaced += to;
    }
    replaced.append(token, at);
    token.swap(replaced);
  }
  if (decoder.byte_fallback && token.size() == 6 && token.starts_with("<0x") && token[5] == '>' &&
      std::isxdigit(static_cast<uint8_t>(token[3])) &&
      std::isxdigit(static_cast<uint8_t>(token[4]))) {
    return std::string(1, static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16)));
  }
  return decoder.byte_level ? byte_level_alphabet().decode(token) : token;
}

}  // namespace

const std::string& byte_level_char(uint8_t byte) {
  return byte_level_alphabet().byte_to_utf8[byte];
}

std::string byte_level_decode(std::string_view token) {
  return byte_level_alphabet().decode(token);
}

void AddedTokenMatcher::add(const AddedToken* token) {
  by_first_byte[static_cast<uint8_t>(token->content[0])].push_back(token);
  empty = false;
}

void AddedTokenMatcher::finish() {
  for (auto& bucket : by_first_byte) {
    std::stable_sort(bucket.begin(), bucket.end(), [](const AddedToken* a, const AddedToken* b) {
      return a->content.size() > b->content.size();
    });
  }
}

std::optional<std::pair<size_t, const AddedToken*>> AddedTokenMatcher::find(std::string_view text,
                                                                            size_t from) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    for (const AddedToken* token : by_first_byte[static_cast<uint8_t>(text[pos])]) {
      if (text.substr(pos).starts_with(token->content)) return std::pair{pos, token};
    }
  }
  return std::nullopt;
}

BpeTokenizer::BpeTokenizer(BpeTables tables, const std::vector<std::string>& token_text,
                           const TokenDecoder& decoder, SpecialTokens special)
    : t_(std::move(tables)) {
  special_ = std::move(special);
  special_.strip_leading_space = decoder.strip_leading_space;
  for (const AddedToken& token : t_.added_tokens) {
    (token.normalized ? normalized_added_ : raw_added_).add(&token);
  }
  raw_added_.finish();
  normalized_added_.finish();
  token_offsets_.assign(static_cast<size_t>(t_.vocab_size) + 1, 0);
  for (size_t id = 0; id < static_cast<size_t>(t_.vocab_size); ++id) {
    if (id < token_text.size()) token_bytes_ += decode_token(token_text[id], decoder);
    if (token_bytes_.size() > UINT32_MAX) fail("the vocabulary is too large");
    token_offsets_[id + 1] = static_cast<uint32_t>(token_bytes_.size());
  }
}

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

std::string BpeTokenizer::normalize(std::string_view text) const {
  std::string out(text);
  for (const NormalizerStep& step : t_.normalizer) {
    if (step.kind == NormalizerStep::kNfc) {
      out = to_nfc(out);
    } else if (step.kind == NormalizerStep::kPrepend) {
      if (!out.empty()) out.insert(0, step.text);
    } else {
      std::vector<std::pair<size_t, size_t>> matches;
      if (step.pattern) {
        step.pattern->find_all(out, matches);
      } else {
        for (size_t at = 0; (at = out.find(step.text, at)) != std::string::npos;
             at += step.text.size()) {
          matches.emplace_back(at, at + step.text.size());
        }
      }
      std::string replaced;
      size_t at = 0;
      for (auto [begin, end] : matches) {
        replaced.append(out, at, begin - at);
        replaced += step.replacement;
        at = end;
      }
      replaced.append(out, at);
      out.swap(replaced);
    }
  }
  return out;
}

namespace {

// Metaspace: spaces become "▁", a "▁" is put first when the scheme asks, and with split each
// "▁" starts a new piece (the library's MergedWithNext).
void metaspace_pieces(std::string& piece, const PreTokenizerStep& step, bool text_start,
                      std::vector<std::string>& out) {
  std::string replaced;
  for (char c : piece) {
    if (c == ' ') {
      replaced += kMetaspace;
    } else {
      replaced.push_back(c);
    }
  }
  const bool prepend = step.prepend == PreTokenizerStep::kAlways ||
                       (step.prepend == PreTokenizerStep::kFirst && text_start);
  if (prepend && !replaced.starts_with(kMetaspace)) replaced.insert(0, kMetaspace);
  if (!step.split_on_metaspace) {
    out.push_back(std::move(replaced));
    return;
  }
  size_t begin = 0;
  for (size_t at = replaced.find(kMetaspace, 1); at != std::string::npos;
       at = replaced.find(kMetaspace, at + 1)) {
    if (at > begin) out.push_back(replaced.substr(begin, at - begin));
    begin = at;
  }
  if (begin < replaced.size()) out.push_back(replaced.substr(begin));
}

}  // namespace

void BpeTokenizer::pre_tokenize(std::string_view text, bool text_start,
                                std::vector<std::string>& pre_tokens) const {
  std::vector<std::string> pieces{std::string(text)}, next;
  std::vector<std::pair<size_t, size_t>> matches;
  for (const PreTokenizerStep& step : t_.pre_tokenizer) {
    next.clear();
    for (size_t index = 0; index < pieces.size(); ++index) {
      std::string& piece = pieces[index];
      if (step.metaspace) {
        metaspace_pieces(piece, step, text_start && index == 0, next);
        continue;
      }
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

std::vector<int32_t> BpeTokenizer::initial_symbols(std::string_view word) const {
  // One symbol per byte (byte-level) or character. A unit missing from the vocabulary becomes
  // its "<0xNN>" byte tokens under byte_fallback, else unk (fused when fuse_unk), else vanishes,
  // as in the library (which adds byte tokens without flushing a pending unk first).
  std::vector<int32_t> symbols;  // (<= word bytes,) token ids
  symbols.reserve(word.size());
  bool pending_unk = false;
  size_t at = 0;
  while (at < word.size()) {
    size_t length = 1;
    int32_t id = -1;
    if (t_.byte_level) {
      id = t_.byte_ids[static_cast<uint8_t>(word[at])];
    } else {
      const utf8::Scan s = utf8::scan(word.substr(at));
      length = s.kind == utf8::Scan::kValid ? s.length : 1;
      auto it = t_.vocab.find(word.substr(at, length));
      if (it != t_.vocab.end()) id = it->second;
    }
    const std::string_view unit = word.substr(at, length);
    at += length;
    if (id >= 0) {
      if (pending_unk) symbols.push_back(t_.unk_id);
      pending_unk = false;
      symbols.push_back(id);
      continue;
    }
    if (t_.byte_fallback && std::all_of(unit.begin(), unit.end(), [&](char c) {
          return t_.byte_ids[static_cast<uint8_t>(c)] >= 0;
        })) {
      for (char c : unit) symbols.push_back(t_.byte_ids[static_cast<uint8_t>(c)]);
      continue;
    }
    if (t_.unk_id >= 0) {
      if (pending_unk && !t_.fuse_unk) symbols.push_back(t_.unk_id);
      pending_unk = true;
    }
  }
  if (pending_unk) symbols.push_back(t_.unk_id);
  return symbols;
}

std::vector<int32_t> BpeTokenizer::merge_word(std::string_view word) const {
  if (t_.ignore_merges) {
    std::string key;
    if (t_.byte_level) {
      for (char c : word) key += byte_level_char(static_cast<uint8_t>(c));
    } else {
      key = word;
    }
    auto it = t_.vocab.find(key);
    if (it != t_.vocab.end()) return {it->second};
  }
  std::vector<int32_t> symbols = initial_symbols(word);
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
    const std::string normalized = normalize(raw.text);
    split_added_tokens(normalized, normalized_added_, segments);
    for (const Segment& segment : segments) {
      if (segment.added_id >= 0) {
        ids.push_back(segment.added_id);
        continue;
      }
      // Metaspace's "first" scheme: only the piece the whole text starts with gets a "▁".
      const bool text_start =
          raw.text.data() == text.data() && segment.text.data() == normalized.data();
      pre_tokens.clear();
      pre_tokenize(segment.text, text_start, pre_tokens);
      for (const std::string& word : pre_tokens) encode_word(word, ids);
    }
  }
  return ids;
}

// ---- loading ----

namespace {

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
  void load_merges(object model);
  void load_added_tokens(element e);
  void load_pre_tokenizer(element e, const std::string& field);
  void load_normalizer(element e, const std::string& field);
  void load_decoder(element e, const std::string& field);
  void load_post_processor(element e, const std::string& field);
  void choose_family();
  PreTokenizerStep metaspace_step(object o, const std::string& field);
  std::vector<std::string> token_text() const;

  std::string source_;
  BpeTables tables_;
  TokenDecoder decoder_;
  Tokenizer::SpecialTokens special_;
  std::unordered_map<int32_t, std::string> vocab_by_id_;
  bool seen_byte_level_ = false;
  bool seen_metaspace_ = false;
  bool spaces_as_metaspace_ = false;  // a Replace(" ", "▁") normalizer (SentencePiece-style)
  bool seen_fuse_ = false;
};

void TokenizerJsonLoader::load_model(element e) {
  BpeTables& t = tables_;
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
        error(std::string("model.") + key, "not supported (expected null)");
      }
    }
  }
  // Byte-level BPE has every byte in its vocabulary already, so there the flag changes nothing.
  t.byte_fallback = optional_bool(model, "byte_fallback", "model", false);
  t.fuse_unk = optional_bool(model, "fuse_unk", "model", false);
  t.ignore_merges = optional_bool(model, "ignore_merges", "model", false);

  object vocab = as_object(required(model, "vocab", "model"), "model.vocab");
  t.vocab.reserve(vocab.size());
  vocab_by_id_.reserve(vocab.size());
  for (auto [entry_key, value] : vocab) {
    // clang 14 (the fuzz build's compiler) cannot capture a structured binding in a lambda.
    const std::string_view key = entry_key;
    // Formatted only for an error, as in load_merges.
    const auto field = [&] { return fmt::format("model.vocab[\"{}\"]", shorten(key)); };
    const bool plain_id = value.is_int64() && int64_t(value) >= 0 && int64_t(value) <= kMaxTokenId;
    const int32_t id = plain_id ? static_cast<int32_t>(int64_t(value)) : as_id(value, field());
    auto [it, inserted] = vocab_by_id_.emplace(id, std::string(key));
    if (!inserted) {
      error(field(), "id {} is already used by \"{}\"", id, shorten(it->second));
    }
    if (!t.vocab.emplace(std::string(key), id).second) error(field(), "token appears twice");
    t.vocab_size = std::max(t.vocab_size, id + 1);
  }

  if (auto unk = member(model, "unk_token")) {
    const std::string_view unk_token = as_string(*unk, "model.unk_token");
    auto it = t.vocab.find(unk_token);
    if (it == t.vocab.end()) {
      error("model.unk_token", "\"{}\" is not in model.vocab", shorten(unk_token));
    }
    t.unk_id = it->second;
  }
  load_merges(model);
}

void TokenizerJsonLoader::load_merges(object model) {
  BpeTables& t = tables_;
  array merges = as_array(required(model, "merges", "model"), "model.merges");
  t.merges.reserve(merges.size());
  std::optional<bool> pair_format;  // the two formats cannot be mixed in one list
  int32_t rank = 0;
  std::string merged;  // reused: one allocation for the whole list
  // The field name is only formatted for an error: a 280k-merge file should not pay for it.
  const auto field = [&] { return fmt::format("model.merges[{}]", rank); };
  for (element merge : merges) {
    std::string_view left, right;
    if (merge.is_string()) {
      const std::string_view line = std::string_view(merge);
      if (pair_format.value_or(false))
        error(field(), "a \"a b\" string among [\"a\", \"b\"] pairs");
      pair_format = false;
      if (line.starts_with("#version")) {  // a header line of old merges.txt files
        ++rank;
        continue;
      }
      const size_t space = line.find(' ');
      if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
        error(field(), "\"{}\" is not two tokens separated by one space", shorten(line));
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array()) {
      if (!pair_format.value_or(true))
        error(field(), "a [\"a\", \"b\"] pair among \"a b\" strings");
      pair_format = true;
      array pair = array(merge);
      if (pair.size() != 2)
        error(field(), "expected a pair of two tokens, got {} items", pair.size());
      const element first = pair.at(0).value_unsafe(), second = pair.at(1).value_unsafe();
      if (!first.is_string()) as_string(first, field() + "[0]");
      if (!second.is_string()) as_string(second, field() + "[1]");
      left = std::string_view(first);
      right = std::string_view(second);
    } else {
      error(field(), "expected \"a b\" or [\"a\", \"b\"], got {}", type_name(merge));
    }
    auto left_it = t.vocab.find(left);
    if (left_it == t.vocab.end())
      error(field(), "token \"{}\" is not in model.vocab", shorten(left));
    auto right_it = t.vocab.find(right);
    if (right_it == t.vocab.end()) {
      error(field(), "token \"{}\" is not in model.vocab", shorten(right));
    }
    merged.assign(left).append(right);
    auto merged_it = t.vocab.find(merged);
    if (merged_it == t.vocab.end()) {
      error(field(), "merged token \"{}\" is not in model.vocab", shorten(merged));
    }
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left_it->second)) << 32) |
                         static_cast<uint32_t>(right_it->second);
    // A repeated pair takes its later rank, as in the library (its map insert overwrites).
    t.merges[key] = Merge{rank, merged_it->second};
    ++rank;
  }
}

void TokenizerJsonLoader::load_added_tokens(element e) {
  BpeTables& t = tables_;
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
    auto vocab_it = t.vocab.find(token.content);
    if (vocab_it != t.vocab.end() && vocab_it->second != token.id) {
      error(field + ".id", "{} but model.vocab has \"{}\" as {}", token.id, shorten(token.content),
            vocab_it->second);
    }
    auto id_it = vocab_by_id_.find(token.id);
    if (id_it != vocab_by_id_.end() && id_it->second != token.content) {
      error(field + ".id", "{} is model.vocab's \"{}\", not \"{}\"", token.id,
            shorten(id_it->second), shorten(token.content));
    }
    t.vocab_size = std::max(t.vocab_size, token.id + 1);
    t.added_tokens.push_back(std::move(token));
  }
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
    tables_.pre_tokenizer.push_back(std::move(step));
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
    tables_.pre_tokenizer.push_back(std::move(step));
  } else if (type == "Metaspace") {
    tables_.pre_tokenizer.push_back(metaspace_step(o, field));
  } else {
    error(field + ".type",
          "pre-tokenizer '{}' is not supported (ByteLevel, Metaspace, Split, Sequence)",
          shorten(type));
  }
}

PreTokenizerStep TokenizerJsonLoader::metaspace_step(object o, const std::string& field) {
  if (seen_metaspace_) error(field, "only one Metaspace pre-tokenizer is supported");
  seen_metaspace_ = true;
  const std::string_view replacement =
      as_string(required(o, "replacement", field), field + ".replacement");
  if (replacement != kMetaspace) {
    error(field + ".replacement", "'{}' is not supported (only \"\u2581\")", shorten(replacement));
  }
  PreTokenizerStep step;
  step.metaspace = true;
  step.split_on_metaspace = optional_bool(o, "split", field, true);
  step.prepend = optional_bool(o, "add_prefix_space", field, true) ? PreTokenizerStep::kAlways
                                                                   : PreTokenizerStep::kNever;
  if (auto scheme = member(o, "prepend_scheme")) {
    const std::string_view name = as_string(*scheme, field + ".prepend_scheme");
    if (name == "always") {
      step.prepend = PreTokenizerStep::kAlways;
    } else if (name == "first") {
      step.prepend = PreTokenizerStep::kFirst;
    } else if (name == "never") {
      step.prepend = PreTokenizerStep::kNever;
    } else {
      error(field + ".prepend_scheme", "'{}' is not one of always, first, never", shorten(name));
    }
  }
  return step;
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
  NormalizerStep step;
  if (type == "NFC") {
    step.kind = NormalizerStep::kNfc;
  } else if (type == "Prepend") {
    step.kind = NormalizerStep::kPrepend;
    step.text = as_string(required(o, "prepend", field), field + ".prepend");
  } else if (type == "Replace") {
    step.kind = NormalizerStep::kReplace;
    step.replacement = as_string(required(o, "content", field), field + ".content");
    object pattern = as_object(required(o, "pattern", field), field + ".pattern");
    if (auto regex = member(pattern, "Regex")) {
      const std::string where = field + ".pattern.Regex";
      step.pattern =
          std::make_unique<Regex>(as_string(*regex, where), false, source_ + ": " + where);
    } else if (auto literal = member(pattern, "String")) {
      step.text = as_string(*literal, field + ".pattern.String");
      if (step.text.empty()) error(field + ".pattern.String", "an empty pattern");
      if (step.text == " " && step.replacement == kMetaspace) spaces_as_metaspace_ = true;
    } else {
      error(field + ".pattern", "expected {{\"Regex\": ...}} or {{\"String\": ...}}");
    }
  } else {
    error(field + ".type", "normalizer '{}' is not supported (NFC, Prepend, Replace, Sequence)",
          shorten(type));
  }
  tables_.normalizer.push_back(std::move(step));
}

void TokenizerJsonLoader::load_decoder(element e, const std::string& field) {
  object o = as_object(e, field);
  const std::string_view type = as_string(required(o, "type", field), field + ".type");
  if (type == "Sequence") {
    array steps = as_array(required(o, "decoders", field), field + ".decoders");
    size_t index = 0;
    for (element step : steps) load_decoder(step, fmt::format("{}.decoders[{}]", field, index++));
  } else if (type == "ByteLevel") {
    decoder_.byte_level = true;
  } else if (type == "ByteFallback") {
    decoder_.byte_fallback = true;
  } else if (type == "Fuse") {
    seen_fuse_ = true;
  } else if (type == "Replace") {
    object pattern = as_object(required(o, "pattern", field), field + ".pattern");
    const std::string_view from =
        as_string(required(pattern, "String", field + ".pattern"), field + ".pattern.String");
    if (from.empty()) error(field + ".pattern.String", "an empty pattern");
    const std::string_view to = as_string(required(o, "content", field), field + ".content");
    decoder_.replacements.emplace_back(from, to);
  } else if (type == "Strip") {
    // Strip runs per token; only after Fuse is that the whole text, the one case files use.
    const std::string_view content = as_string(required(o, "content", field), field + ".content");
    const element start = required(o, "start", field), stop = required(o, "stop", field);
    const bool leading_space = content == " " && start.is_int64() && int64_t(start) <= 1 &&
                               stop.is_int64() && int64_t(stop) == 0;
    if (!seen_fuse_ || !leading_space || int64_t(start) < 0) {
      error(field, "only Strip(\" \", start 0 or 1, stop 0) after Fuse is supported");
    }
    if (int64_t(start) == 1) decoder_.strip_leading_space = true;
  } else if (type == "Metaspace") {
    const std::string_view replacement =
        as_string(required(o, "replacement", field), field + ".replacement");
    decoder_.replacements.emplace_back(replacement, " ");
    bool prepends = optional_bool(o, "add_prefix_space", field, true);
    if (auto scheme = member(o, "prepend_scheme")) {
      prepends = as_string(*scheme, field + ".prepend_scheme") != "never";
    }
    decoder_.strip_leading_space = prepends;
  } else {
    error(field + ".type",
          "decoder '{}' is not supported (ByteLevel, Metaspace, Replace, ByteFallback, Fuse, "
          "Strip, Sequence)",
          shorten(type));
  }
}

// TemplateProcessing's single-sequence template gives the ids encode(text, true) adds.
void TokenizerJsonLoader::load_post_processor(element e, const std::string& field) {
  object o = as_object(e, field);
  const std::string_view type = as_string(required(o, "type", field), field + ".type");
  if (type == "Sequence") {
    array steps = as_array(required(o, "processors", field), field + ".processors");
    size_t index = 0;
    for (element step : steps) {
      load_post_processor(step, fmt::format("{}.processors[{}]", field, index++));
    }
    return;
  }
  if (type == "ByteLevel") return;  // it only trims offsets
  if (type != "TemplateProcessing") {
    error(field + ".type", "post-processor '{}' is not supported (TemplateProcessing, ByteLevel)",
          shorten(type));
  }
  object specials = as_object(required(o, "special_tokens", field), field + ".special_tokens");
  array single = as_array(required(o, "single", field), field + ".single");
  special_.prefix.clear();
  special_.suffix.clear();
  bool after_text = false;
  size_t index = 0;
  for (element item : single) {
    const std::string where = fmt::format("{}.single[{}]", field, index++);
    object piece = as_object(item, where);
    if (member(piece, "Sequence")) {
      after_text = true;
      continue;
    }
    object token = as_object(required(piece, "SpecialToken", where), where + ".SpecialToken");
    const std::string_view name = as_string(required(token, "id", where), where + ".id");
    auto entry = member(specials, name);
    if (!entry) error(where + ".id", "\"{}\" is not in special_tokens", shorten(name));
    const std::string ids_field =
        fmt::format("{}.special_tokens[\"{}\"].ids", field, shorten(name));
    for (element id :
         as_array(required(as_object(*entry, ids_field), "ids", ids_field), ids_field)) {
      const int32_t value = as_id(id, ids_field);
      if (value >= tables_.vocab_size) error(ids_field, "id {} is not in the vocabulary", value);
      (after_text ? special_.suffix : special_.prefix).push_back(value);
    }
  }
  if (special_.prefix.size() == 1) special_.bos = special_.prefix[0];
  if (special_.suffix.size() == 1) special_.eos = special_.suffix[0];
}

// Byte-level when a ByteLevel pre-tokenizer is there; SentencePiece-style when spaces become "▁"
// (a Metaspace pre-tokenizer or a Replace normalizer); anything else is a family we do not know.
void TokenizerJsonLoader::choose_family() {
  BpeTables& t = tables_;
  if (seen_byte_level_ && (seen_metaspace_ || spaces_as_metaspace_)) {
    error("pre_tokenizer", "mixes ByteLevel with SentencePiece's \"\u2581\" spaces");
  }
  if (!seen_byte_level_ && !seen_metaspace_ && !spaces_as_metaspace_) {
    error("pre_tokenizer",
          "has no ByteLevel or Metaspace step, and no normalizer writes spaces as \"\u2581\": "
          "not a tokenizer family roseinfer knows (byte-level or SentencePiece-style BPE)");
  }
  t.byte_level = seen_byte_level_;
  if (t.byte_level != decoder_.byte_level) {
    error("decoder", "{}",
          t.byte_level ? "byte-level BPE needs the ByteLevel decoder"
                       : "a ByteLevel decoder on SentencePiece-style BPE");
  }
  t.byte_ids.fill(-1);
  for (int b = 0; b < 256; ++b) {
    const std::string text =
        t.byte_level ? byte_level_char(static_cast<uint8_t>(b)) : fmt::format("<0x{:02X}>", b);
    auto it = t.vocab.find(text);
    if (it != t.vocab.end()) t.byte_ids[b] = it->second;
  }
}

std::vector<std::string> TokenizerJsonLoader::token_text() const {
  std::vector<std::string> text(static_cast<size_t>(tables_.vocab_size));
  for (const auto& [id, token] : vocab_by_id_) text[id] = token;
  // Added tokens win over model entries for decoding, as in the library.
  for (const AddedToken& token : tables_.added_tokens) text[token.id] = token.content;
  return text;
}

std::unique_ptr<Tokenizer> TokenizerJsonLoader::load(std::string_view content) {
  simdjson::dom::parser parser;
  element root;
  if (auto err = parse_json_widening(parser, content, root)) {
    fail("{}: not valid JSON: {}", source_, simdjson::error_message(err));
  }
  object top = as_object(root, "(top level)");
  load_model(required(top, "model", "(top level)"));
  if (auto added = member(top, "added_tokens")) load_added_tokens(*added);
  if (tables_.vocab_size == 0) error("model.vocab", "is empty");
  if (auto normalizer = member(top, "normalizer")) load_normalizer(*normalizer, "normalizer");
  if (auto pre_tokenizer = member(top, "pre_tokenizer")) {
    load_pre_tokenizer(*pre_tokenizer, "pre_tokenizer");
  }
  auto decoder = member(top, "decoder");
  if (!decoder) error("decoder", "missing: the decoder says how tokens become text");
  load_decoder(*decoder, "decoder");
  choose_family();
  if (auto post = member(top, "post_processor")) load_post_processor(*post, "post_processor");
  special_.special.assign(static_cast<size_t>(tables_.vocab_size), 0);
  for (const AddedToken& token : tables_.added_tokens) special_.special[token.id] = token.special;
  const std::vector<std::string> text = token_text();
  try {
    return std::make_unique<BpeTokenizer>(std::move(tables_), text, decoder_, std::move(special_));
  } catch (const Error& e) {
    fail("{}: {}", source_, e.what());
  }
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
