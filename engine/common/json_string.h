#pragma once
// The one JSON string writer: results files, completions and safetensors headers all quote with it.
#include <string>
#include <string_view>

namespace rose {

// Appends `s` as a JSON string literal (with quotes). Control characters are escaped; invalid UTF-8
// (a path or an argument can hold any bytes) becomes U+FFFD, one per bad byte, so the output
// always parses.
void append_json_string(std::string& out, std::string_view s);
std::string json_quote(std::string_view s);

}  // namespace rose
