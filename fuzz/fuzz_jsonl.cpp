// libFuzzer entry over the bytes of a prompt file: parsing must either succeed with requests that
// satisfy every documented bound, or throw rose::Error. Accepted requests are also rendered as
// completion lines, which must be valid JSON. Anything else (a crash, a sanitizer report, another
// exception) is a bug.
#include <simdjson.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/common/error.h"
#include "engine/io/completions.h"
#include "engine/io/prompts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the mode, so both the stop-at-first-error and the skipping paths run.
  const bool skip_invalid = data[0] & 1;
  const std::string_view content(reinterpret_cast<const char*>(data) + 1, size - 1);
  rose::PromptFile file;
  try {
    file = rose::parse_prompt_jsonl(content, "fuzz.jsonl", skip_invalid);
  } catch (const rose::Error&) {
    return 0;  // rejecting bad input with a named error is the expected outcome
  }
  if (file.requests.empty()) __builtin_trap();
  if (!skip_invalid && !file.skipped.empty()) __builtin_trap();
  simdjson::dom::parser parser;
  int index = 0;
  for (const rose::RequestSpec& r : file.requests) {
    // Exactly one of a prompt text, token ids or chat messages.
    const int inputs =
        int(r.prompt.has_value()) + int(r.prompt_token_ids.has_value()) + int(!r.messages.empty());
    if (inputs != 1) __builtin_trap();
    if (r.prompt && r.prompt->empty()) __builtin_trap();
    if (r.prompt_token_ids && r.prompt_token_ids->empty()) __builtin_trap();
    if (r.prompt_token_ids) {
      for (int32_t id : *r.prompt_token_ids) {
        if (id < 0) __builtin_trap();
      }
    }
    if (r.max_tokens && *r.max_tokens < 1) __builtin_trap();
    if (r.temperature && !(*r.temperature >= 0)) __builtin_trap();
    if (r.top_k && *r.top_k < 0) __builtin_trap();
    if (r.top_p && !(*r.top_p > 0 && *r.top_p <= 1)) __builtin_trap();
    if (r.arrival_time && !(*r.arrival_time >= 0 && std::isfinite(*r.arrival_time)))
      __builtin_trap();
    if (r.line < 1 || r.id.empty()) __builtin_trap();

    rose::Completion c;
    c.text = r.prompt.value_or("");  // valid UTF-8, as decoded text is
    c.finish_reason = "length";
    const std::string line = rose::completion_json_line(r, c, "fuzz", index++, 0);
    simdjson::dom::element parsed;
    if (parser.parse(line).get(parsed)) __builtin_trap();
  }
  return 0;
}
