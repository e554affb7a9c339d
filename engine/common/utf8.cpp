#include "engine/common/utf8.h"

#include <cstdint>

namespace rose::utf8 {

Scan scan(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) return {Scan::kValid, 1, lead};
  // Expected length and the allowed range of the second byte (Unicode table 3-7): this excludes
  // overlong forms, surrogates and code points above U+10FFFF at the earliest byte possible.
  size_t need;
  uint8_t second_lo = 0x80, second_hi = 0xBF;
  char32_t code_point;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
    code_point = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    code_point = lead & 0x0F;
    if (lead == 0xE0) second_lo = 0xA0;
    if (lead == 0xED) second_hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    code_point = lead & 0x07;
    if (lead == 0xF0) second_lo = 0x90;
    if (lead == 0xF4) second_hi = 0x8F;
  } else {
    return {Scan::kInvalid, 1, 0};
  }
  size_t i = 1;
  for (; i < need; ++i) {
    if (i >= text.size()) return {Scan::kTruncated, i, 0};
    const uint8_t lo = i == 1 ? second_lo : 0x80;
    const uint8_t hi = i == 1 ? second_hi : 0xBF;
    if (byte(i) < lo || byte(i) > hi) return {Scan::kInvalid, i, 0};
    code_point = (code_point << 6) | (byte(i) & 0x3F);
  }
  return {Scan::kValid, need, code_point};
}

void append_lossy(std::string& out, std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    const Scan s = scan(bytes.substr(i));
    if (s.kind == Scan::kValid) {
      out.append(bytes.substr(i, s.length));
    } else {
      out.append(kReplacement);
    }
    i += s.length;
  }
}

size_t complete_prefix_length(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    const Scan s = scan(bytes.substr(i));
    if (s.kind == Scan::kTruncated) return i;
    i += s.length;
  }
  return i;
}

bool is_valid(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    const Scan s = scan(bytes.substr(i));
    if (s.kind != Scan::kValid) return false;
    i += s.length;
  }
  return true;
}

void append_code_point(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace rose::utf8
