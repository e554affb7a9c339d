#pragma once
// A compiled PCRE2 pattern (8-bit, UTF + UCP, JIT when available) for pre-tokenizer splits.
// Hugging Face tokenizers runs these patterns on Oniguruma; PCRE2 has the same \p{..} classes,
// look-ahead and (?i:..) groups, which std::regex lacks.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pcre2_real_code_8;

namespace rose {

class Regex {
 public:
  // Throws rose::Error with `where` (file and field) and PCRE2's message when it does not compile.
  Regex(std::string_view pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [begin, end) of the successive non-empty, non-overlapping matches in text (which
  // may hold invalid UTF-8: such bytes never match). Safe to call from several threads.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const;

  // Whether the pattern matches somewhere in text.
  bool search(std::string_view text) const;

 private:
  pcre2_real_code_8* code_ = nullptr;
};

}  // namespace rose
