#pragma once
// Output of `roseinfer run`: one JSON line per request, in input order. roseinfer's own shape:
//   {"id", "prompt_tokens", "text", "token_ids", "finish_reason", "cached_tokens", "ttft_ms",
//    "e2el_ms"}
// and for OpenAI batch input lines the batch output shape:
//   {"id": "batch_req_N", "custom_id", "response": {"status_code": 200, "request_id": "req_N",
//    "body": {"id", "object": "text_completion" | "chat.completion", "created", "model",
//    "choices": [{"index": 0, "text" | "message": {"role": "assistant", "content"},
//    "logprobs": null, "finish_reason"}], "usage": {"prompt_tokens", "completion_tokens",
//    "total_tokens", "prompt_tokens_details": {"cached_tokens"}}}}, "error": null}
// A request that failed (finish_reason "error") adds "error": message to roseinfer's shape, and in
// the batch shape has "response": null, "error": {"code": "generation_error", "message"}.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/json_string.h"  // json_quote
#include "engine/io/prompts.h"

namespace rose {

struct Completion {
  int prompt_tokens = 0;
  std::string text;  // valid UTF-8 (the tokenizer's decode replaces invalid bytes)
  std::vector<int32_t> token_ids;
  std::string finish_reason;  // "length", "stop" or "error"
  std::string error;          // why the request failed (finish_reason "error"); empty otherwise
  int cached_tokens = 0;
  double ttft_ms = 0;
  double e2el_ms = 0;
};

// `index` is the request's position in the output (names the OpenAI batch ids); `created` is the
// Unix time stamped into OpenAI bodies. No trailing newline.
std::string completion_json_line(const RequestSpec& spec, const Completion& completion,
                                 const std::string& model, int index, int64_t created);

// The output line standing for a bad input line skipped with --skip-invalid, so the output keeps
// one line per input line: {"id": "line-N", "finish_reason": "error", "error": message}, or in the
// batch shape {"id": "batch_req_N", "custom_id": null, "response": null, "error": {"code":
// "invalid_request", "message"}}.
std::string invalid_line_json(const SkippedLine& skipped, bool openai_shape, int index);

}  // namespace rose
