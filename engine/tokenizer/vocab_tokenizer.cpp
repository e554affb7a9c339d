// Tokenizers from GGUF metadata (tokenizer.ggml.*): the BPE of bpe_model.h with its tables filled
// the way llama.cpp reads them (src/llama-vocab.cpp), which is also what Hugging Face's converters
// produce for the same models:
//   "gpt2":  byte-level BPE; tokens in the ByteLevel alphabet, ranked "a b" merges, and the
//            pre-tokenizer regexes chosen by the tokenizer.ggml.pre name.
//   "llama": SentencePiece; tokens with "▁" for spaces and "<0xNN>" byte tokens, and no merge
//            list: any two adjacent pieces whose concatenation is a token may merge, the one with
//            the highest score first (leftmost on ties).
#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

#include "engine/common/error.h"
#include "engine/common/utf8.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace rose {

namespace {

// GGUF token types (gguf.md).
constexpr int32_t kTypeNormal = 1;
constexpr int32_t kTypeUnknown = 2;
constexpr int32_t kTypeControl = 3;
constexpr int32_t kTypeUserDefined = 4;

constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The byte-level pre-tokenizer a pre name stands for: Split patterns run first (each re-splits
// the pieces of the one before), then ByteLevel, with GPT-2's regex when gpt2_regex.
struct PreTokenizerRecipe {
  std::vector<std::string_view> splits;
  bool gpt2_regex = false;
  bool ignore_merges = false;
};

std::optional<PreTokenizerRecipe> recipe_for(std::string_view pre) {
  static const std::map<std::string_view, PreTokenizerRecipe> recipes = [] {
    std::map<std::string_view, PreTokenizerRecipe> m;
    const PreTokenizerRecipe gpt2{{}, true, false};
    const PreTokenizerRecipe digits_then_gpt2{{R"(\p{N})"}, true, false};
    const PreTokenizerRecipe llama3{{kLlama3Pattern}, false, true};
    const PreTokenizerRecipe qwen2{{kQwen2Pattern}, false, false};
    // llama.cpp's "default" regex list differs in detail; GPT-2's is what files without a
    // pre name were converted with.
    for (auto name : {"", "default", "gpt2", "gpt-2", "phi-2"}) m[name] = gpt2;
    for (auto name : {"smollm", "starcoder", "refact", "command-r"}) m[name] = digits_then_gpt2;
    for (auto name : {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"}) m[name] = llama3;
    for (auto name : {"qwen2", "deepseek-r1-qwen", "megrez"}) m[name] = qwen2;
    return m;
  }();
  auto it = recipes.find(pre);
  if (it == recipes.end()) return std::nullopt;
  return it->second;
}

class VocabTokenizerBuilder {
 public:
  explicit VocabTokenizerBuilder(const TokenizerVocab& vocab) : v_(vocab) {}

  std::unique_ptr<Tokenizer> build() {
    check_tables();
    if (v_.model == "gpt2") {
      byte_level_tables();
    } else if (v_.model == "llama") {
      sentencepiece_tables();
    } else {
      error("tokenizer.ggml.model", "'{}' is not supported (gpt2 or llama)", v_.model);
    }
    Tokenizer::SpecialTokens special;
    special.bos = checked_id(v_.bos_id, "tokenizer.ggml.bos_token_id");
    special.eos = checked_id(v_.eos_id, "tokenizer.ggml.eos_token_id");
    if (v_.add_bos && special.bos) special.prefix.push_back(*special.bos);
    if (v_.add_eos && special.eos) special.suffix.push_back(*special.eos);
    special.special.assign(v_.tokens.size(), 0);
    for (size_t id = 0; id < v_.tokens.size(); ++id) {
      const int32_t type = type_of(id);
      special.special[id] = type == kTypeControl || type == kTypeUnknown;
    }
    try {
      return std::make_unique<BpeTokenizer>(std::move(t_), v_.tokens, decoder_, std::move(special));
    } catch (const Error& e) {
      fail("{}: {}", v_.source, e.what());
    }
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(std::string_view field, fmt::format_string<Args...> format,
                          Args&&... args) const {
    fail("{}: {}: {}", v_.source, field, fmt::format(format, std::forward<Args>(args)...));
  }

  int32_t type_of(size_t id) const {
    return v_.token_types.empty() ? kTypeNormal : v_.token_types[id];
  }

  std::optional<int32_t> checked_id(std::optional<int32_t> id, std::string_view field) const {
    if (id && (*id < 0 || static_cast<size_t>(*id) >= v_.tokens.size())) {
      error(field, "id {} is outside the vocabulary ({} tokens)", *id, v_.tokens.size());
    }
    return id;
  }

  void check_tables();
  void common_tables();
  void byte_level_tables();
  void sentencepiece_tables();

  const TokenizerVocab& v_;
  BpeTables t_;
  TokenDecoder decoder_;
};

void VocabTokenizerBuilder::check_tables() {
  // Far above any released vocabulary; bounds what a hostile file can make us build.
  constexpr size_t kMaxTokens = size_t{1} << 22;
  if (v_.tokens.empty()) error("tokenizer.ggml.tokens", "is empty");
  if (v_.tokens.size() > kMaxTokens) {
    error("tokenizer.ggml.tokens", "{} tokens is more than {}", v_.tokens.size(), kMaxTokens);
  }
  if (!v_.token_types.empty() && v_.token_types.size() != v_.tokens.size()) {
    error("tokenizer.ggml.token_type", "{} entries for {} tokens", v_.token_types.size(),
          v_.tokens.size());
  }
  if (!v_.scores.empty() && v_.scores.size() != v_.tokens.size()) {
    error("tokenizer.ggml.scores", "{} entries for {} tokens", v_.scores.size(), v_.tokens.size());
  }
  for (size_t id = 0; id < v_.scores.size(); ++id) {
    if (std::isnan(v_.scores[id])) error(fmt::format("tokenizer.ggml.scores[{}]", id), "is NaN");
  }
}

// Vocabulary, unk and the tokens matched whole in text (control, user-defined, unknown: as
// llama.cpp does when it parses special tokens).
void VocabTokenizerBuilder::common_tables() {
  t_.vocab_size = static_cast<int>(v_.tokens.size());
  t_.vocab.reserve(v_.tokens.size());
  for (size_t id = 0; id < v_.tokens.size(); ++id) {
    // A repeated text keeps its first id; the later one can still be decoded.
    t_.vocab.emplace(v_.tokens[id], static_cast<int32_t>(id));
    const int32_t type = type_of(id);
    if (type == kTypeUnknown && t_.unk_id < 0) t_.unk_id = static_cast<int32_t>(id);
    if ((type == kTypeControl || type == kTypeUnknown || type == kTypeUserDefined) &&
        !v_.tokens[id].empty()) {
      AddedToken token;
      token.content = v_.tokens[id];
      token.id = static_cast<int32_t>(id);
      token.special = type != kTypeUserDefined;
      t_.added_tokens.push_back(std::move(token));
    }
  }
  if (auto unk = checked_id(v_.unk_id, "tokenizer.ggml.unknown_token_id")) t_.unk_id = *unk;
}

void VocabTokenizerBuilder::byte_level_tables() {
  const auto recipe = recipe_for(v_.pre);
  if (!recipe) {
    error("tokenizer.ggml.pre",
          "'{}' is not a pre-tokenizer roseinfer knows (smollm, llama-bpe, llama3, qwen2, gpt2, "
          "default, ...)",
          v_.pre);
  }
  common_tables();
  t_.byte_level = true;
  t_.ignore_merges = recipe->ignore_merges;
  for (std::string_view pattern : recipe->splits) {
    PreTokenizerStep step;
    step.split = std::make_unique<Regex>(pattern, false, v_.source + ": tokenizer.ggml.pre");
    t_.pre_tokenizer.push_back(std::move(step));
  }
  PreTokenizerStep byte_level;
  byte_level.byte_level = true;
  if (recipe->gpt2_regex) {
    byte_level.split = std::make_unique<Regex>(kGpt2Pattern, false, v_.source);
  }
  t_.pre_tokenizer.push_back(std::move(byte_level));
  decoder_.byte_level = true;
  for (int b = 0; b < 256; ++b) {
    auto it = t_.vocab.find(byte_level_char(static_cast<uint8_t>(b)));
    t_.byte_ids[b] = it == t_.vocab.end() ? -1 : it->second;
  }
  if (v_.merges.empty()) error("tokenizer.ggml.merges", "missing: byte-level BPE needs them");
  t_.merges.reserve(v_.merges.size());
  for (size_t rank = 0; rank < v_.merges.size(); ++rank) {
    const std::string& line = v_.merges[rank];
    const std::string field = fmt::format("tokenizer.ggml.merges[{}]", rank);
    // llama.cpp splits at the first space after the first byte, so a left part may be " ".
    const size_t space = line.size() > 1 ? line.find(' ', 1) : std::string::npos;
    if (space == std::string::npos) error(field, "\"{}\" has no space between two tokens", line);
    const std::string left = line.substr(0, space), right = line.substr(space + 1);
    auto left_it = t_.vocab.find(left), right_it = t_.vocab.find(right);
    auto merged_it = t_.vocab.find(left + right);
    if (left_it == t_.vocab.end() || right_it == t_.vocab.end() || merged_it == t_.vocab.end()) {
      error(field, "\"{}\": a part or the merged token is not in tokenizer.ggml.tokens", line);
    }
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(left_it->second)) << 32) |
                         static_cast<uint32_t>(right_it->second);
    t_.merges[key] = Merge{static_cast<int32_t>(rank), merged_it->second};
  }
}

void VocabTokenizerBuilder::sentencepiece_tables() {
  if (v_.scores.empty()) error("tokenizer.ggml.scores", "missing: SentencePiece needs them");
  common_tables();
  t_.byte_level = false;
  t_.byte_fallback = true;
  if (v_.add_space_prefix) {
    NormalizerStep prepend;
    prepend.kind = NormalizerStep::kPrepend;
    prepend.text = kMetaspace;
    t_.normalizer.push_back(std::move(prepend));
  }
  NormalizerStep spaces;
  spaces.kind = NormalizerStep::kReplace;
  spaces.text = " ";
  spaces.replacement = kMetaspace;
  t_.normalizer.push_back(std::move(spaces));
  decoder_.replacements.emplace_back(kMetaspace, " ");
  decoder_.byte_fallback = true;
  decoder_.strip_leading_space = v_.add_space_prefix;
  for (int b = 0; b < 256; ++b) {
    auto it = t_.vocab.find(fmt::format("<0x{:02X}>", b));
    t_.byte_ids[b] = it == t_.vocab.end() ? -1 : it->second;
  }
  // A merge's rank is its result's place among the distinct scores, highest first: equal scores
  // share a rank, so the leftmost pair wins between them, as in llama.cpp.
  std::vector<float> distinct(v_.scores.begin(), v_.scores.end());
  std::sort(distinct.begin(), distinct.end(), std::greater<float>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  for (size_t id = 0; id < v_.tokens.size(); ++id) {
    const std::string& text = v_.tokens[id];
    if (t_.vocab.find(text)->second != static_cast<int32_t>(id)) continue;  // a repeated text
    const auto place =
        std::lower_bound(distinct.begin(), distinct.end(), v_.scores[id], std::greater<float>());
    const Merge merge{static_cast<int32_t>(place - distinct.begin()), static_cast<int32_t>(id)};
    for (size_t cut = 1; cut < text.size(); ++cut) {
      if ((static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) continue;  // inside a character
      auto left = t_.vocab.find(text.substr(0, cut));
      if (left == t_.vocab.end()) continue;
      auto right = t_.vocab.find(text.substr(cut));
      if (right == t_.vocab.end()) continue;
      t_.merges[(static_cast<uint64_t>(static_cast<uint32_t>(left->second)) << 32) |
                static_cast<uint32_t>(right->second)] = merge;
    }
  }
}

}  // namespace

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerVocab& vocab) {
  return VocabTokenizerBuilder(vocab).build();
}

}  // namespace rose
