#include "engine/common/shell_quote.h"

#include <string_view>

namespace rose {

std::string join_command(int argc, const char* const* argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) out += ' ';
    const std::string_view arg = argv[i];
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789-_./=:,%+@") == std::string_view::npos;
    if (plain) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char c : arg) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

}  // namespace rose
