#pragma once
// Unicode Normalization Form C, for tokenizer.json's {"type": "NFC"} normalizer (Qwen2 uses it).
// Data: nfc_tables.h, generated from Python's unicodedata by scripts/make_tokenizer_fixtures.py.
#include <string>
#include <string_view>

namespace rose {

// Invalid UTF-8 bytes pass through unchanged (and block composition across them).
std::string to_nfc(std::string_view text);

}  // namespace rose
