#include "engine/tokenizer/nfc.h"

#include <utf8proc.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "engine/common/utf8.h"
#include "kernels/common/error.h"

namespace rose {

namespace {

// Appends the NFC of a run of valid UTF-8 (no byte of it fails utf8::scan).
void append_nfc(std::string& out, std::string_view valid) {
  if (valid.empty()) return;
  utf8proc_uint8_t* result = nullptr;
  // No UTF8PROC_NULLTERM: the length bounds the input, so NUL bytes are ordinary characters.
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                   static_cast<utf8proc_ssize_t>(valid.size()), &result,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(result, &std::free);
  if (n == UTF8PROC_ERROR_NOMEM) throw std::bad_alloc();
  // utf8::scan and utf8proc agree on what is valid UTF-8 (both reject overlongs, surrogates and
  // code points above U+10FFFF), so no other error can happen here.
  ROSE_ASSERT(n >= 0);
  out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
}

}  // namespace

std::string to_nfc(std::string_view text) {
  // Text below U+0300 is already NFC and composes with nothing before it: the common case.
  bool simple = true;
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0xCC) {
      simple = false;
      break;
    }
  }
  if (simple) return std::string(text);

  // utf8proc rejects a whole string with any invalid byte in it, where we keep such bytes as they
  // are (test_tokenizer.cpp "NFC matches Python's unicodedata": "e\xFF\xCC\x81" stays as it is).
  // So each maximal valid run is normalized on its own and invalid bytes are copied between them:
  // an invalid byte acts as a starter that composes with nothing (as in the hand-written
  // normalizer this replaces), so nothing composes or reorders across it.
  std::string out;
  out.reserve(text.size());
  size_t run_start = 0;
  for (size_t i = 0; i < text.size();) {
    const utf8::Scan s = utf8::scan(text.substr(i));
    if (s.kind != utf8::Scan::kValid) {
      append_nfc(out, text.substr(run_start, i - run_start));
      out.append(text.substr(i, s.length));
      run_start = i + s.length;
    }
    i += s.length;
  }
  append_nfc(out, text.substr(run_start));
  return out;
}

}  // namespace rose
