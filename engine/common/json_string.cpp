#include "engine/common/json_string.h"

#include <fmt/format.h>

#include "engine/common/utf8.h"

namespace rose {

namespace {

// The escape for a byte JSON does not allow raw, or null when it may appear as is.
const char* short_escape(unsigned char c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    default:
      return nullptr;
  }
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (const char* escape = short_escape(c)) {
      out += escape;
      ++i;
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
      ++i;
    } else if (const utf8::Scan scan = utf8::scan(s.substr(i)); scan.kind == utf8::Scan::kValid) {
      out.append(s.substr(i, scan.length));
      i += scan.length;
    } else {
      out += utf8::kReplacement;
      ++i;
    }
  }
  out += '"';
}

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_json_string(out, s);
  return out;
}

}  // namespace rose
