#pragma once
// Unicode Normalization Form C, for tokenizer.json's {"type": "NFC"} normalizer (Qwen2 uses it).
// Data and algorithm: utf8proc (Debian's libutf8proc-dev).
#include <string>
#include <string_view>

namespace rose {

// Invalid UTF-8 bytes pass through unchanged (and block composition across them).
std::string to_nfc(std::string_view text);

}  // namespace rose
