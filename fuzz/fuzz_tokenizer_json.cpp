// libFuzzer: bytes as tokenizer.json content, byte-level or SentencePiece-style (the llama2 and
// mistral seeds reach Metaspace, Prepend/Replace, byte fallback and the decoder Sequence). A file
// either loads or fails with rose::Error; a loaded tokenizer must encode and decode a fixed text,
// with special tokens skipped or kept, without any other exception or crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/common/error.h"
#include "engine/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view content(reinterpret_cast<const char*>(data), size);
  try {
    const auto tokenizer = rose::load_tokenizer_json_from_string(content, "fuzz.json");
    const std::string text =
        "Hello, world! It's 2024: naïve café, 東京 😀👨‍👩‍👧 <|endoftext|>\n\n  "
        "\t12345 "
        "don'T";
    const auto ids = tokenizer->encode(text);
    for (int32_t id : ids) {
      if (id < 0 || id >= tokenizer->vocab_size()) __builtin_trap();  // ids must be in range
    }
    rose::IncrementalDetokenizer detokenizer(*tokenizer);
    std::string streamed;
    for (int32_t id : ids) streamed += detokenizer.push(id);
    streamed += detokenizer.flush();
    if (streamed != tokenizer->decode(ids)) __builtin_trap();
    // The same with special tokens kept, and with the prefix/suffix the file asks for.
    rose::IncrementalDetokenizer keeping(*tokenizer, false);
    streamed.clear();
    for (int32_t id : ids) streamed += keeping.push(id);
    streamed += keeping.flush();
    if (streamed != tokenizer->decode(ids, false)) __builtin_trap();
    for (int32_t id : tokenizer->encode(text, true)) {
      if (id < 0 || id >= tokenizer->vocab_size()) __builtin_trap();
    }
  } catch (const rose::Error&) {
    // The expected way to reject a bad file; any other exception escapes and is reported.
  }
  return 0;
}
