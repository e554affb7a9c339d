#include "engine/common/json_parse.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace rose {

namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// An integer literal's digits fit 64 bits when they are at most 19 digits (< 10^19), or 20 digits
// not above UINT64_MAX; negative ones must also fit int64 (|x| <= 9223372036854775808).
bool fits_64_bits(std::string_view digits, bool negative) {
  const std::string_view limit = negative ? "9223372036854775808" : "18446744073709551615";
  if (digits.size() != limit.size()) return digits.size() < limit.size();
  return digits <= limit;
}

// Index one past the JSON string starting at text[begin] == '"' (or text.size() if unterminated).
size_t skip_string(std::string_view text, size_t begin) {
  size_t at = begin + 1;
  while (at < text.size() && text[at] != '"') at += text[at] == '\\' ? 2 : 1;
  return std::min(at + 1, text.size());
}

}  // namespace

std::string widen_big_json_integers(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  size_t at = 0;
  while (at < text.size()) {
    if (text[at] == '"') {
      const size_t end = skip_string(text, at);
      out.append(text.substr(at, end - at));
      at = end;
      continue;
    }
    const bool negative = text[at] == '-' && at + 1 < text.size() && is_digit(text[at + 1]);
    if (!negative && !is_digit(text[at])) {
      out.push_back(text[at++]);
      continue;
    }
    const size_t begin = at + (negative ? 1 : 0);
    size_t end = begin;
    while (end < text.size() && is_digit(text[end])) ++end;
    out.append(text.substr(at, end - at));
    const bool is_float =
        end < text.size() && (text[end] == '.' || text[end] == 'e' || text[end] == 'E');
    if (!is_float && !fits_64_bits(text.substr(begin, end - begin), negative)) out += ".0";
    at = end;
  }
  return out;
}

simdjson::error_code parse_json_widening(simdjson::dom::parser& parser, std::string_view text,
                                         simdjson::dom::element& root) {
  simdjson::error_code error = parser.parse(text.data(), text.size()).get(root);
  if (error != simdjson::NUMBER_ERROR) return error;
  const std::string widened = widen_big_json_integers(text);
  return parser.parse(widened.data(), widened.size()).get(root);
}

}  // namespace rose
