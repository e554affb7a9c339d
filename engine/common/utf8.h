#pragma once
// The one UTF-8 decoder: tokenizers, prompt-file checks and JSON writers all scan with it. Invalid
// input is handled the way Rust's
// String::from_utf8_lossy does it (what Hugging Face tokenizers' decoders use): each maximal
// subpart of an ill-formed sequence becomes one U+FFFD, so our decode matches theirs byte for byte.
#include <cstddef>
#include <string>
#include <string_view>

namespace rose::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

struct Scan {
  enum Kind { kValid, kInvalid, kTruncated } kind;
  size_t length;        // bytes consumed: the character, or the maximal invalid subpart (>= 1)
  char32_t code_point;  // only for kValid
};

// Looks at the character starting at text[0] (text must not be empty). kTruncated: the bytes up to
// the end of text are a valid start of a character that needs more bytes.
Scan scan(std::string_view text);

// Appends bytes with every ill-formed subsequence replaced by U+FFFD.
void append_lossy(std::string& out, std::string_view bytes);

// Length of the prefix of bytes that can be decoded now: everything except a trailing, still
// completable character start (at most 3 bytes).
size_t complete_prefix_length(std::string_view bytes);

bool is_valid(std::string_view bytes);

void append_code_point(std::string& out, char32_t code_point);

}  // namespace rose::utf8
