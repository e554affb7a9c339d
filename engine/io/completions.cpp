#include "engine/io/completions.h"

#include <fmt/format.h>

#include <cmath>

namespace rose {

namespace {

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  out += ']';
  return out;
}

// Milliseconds with microsecond resolution; a request that never produced a token has no time.
std::string ms_json(double ms) { return std::isfinite(ms) ? fmt::format("{:.3f}", ms) : "null"; }

}  // namespace

std::string completion_json_line(const RequestSpec& spec, const Completion& c,
                                 const std::string& model, int index, int64_t created) {
  if (!spec.custom_id) {
    return fmt::format(
        R"({{"id":{},"prompt_tokens":{},"text":{},"token_ids":{},"finish_reason":{},)"
        R"("cached_tokens":{},"ttft_ms":{},"e2el_ms":{}{}}})",
        json_quote(spec.id), c.prompt_tokens, json_quote(c.text), ids_json(c.token_ids),
        json_quote(c.finish_reason), c.cached_tokens, ms_json(c.ttft_ms), ms_json(c.e2el_ms),
        c.error.empty() ? "" : ",\"error\":" + json_quote(c.error));
  }
  if (!c.error.empty()) {
    return fmt::format(R"({{"id":"batch_req_{}","custom_id":{},"response":null,)"
                       R"("error":{{"code":"generation_error","message":{}}}}})",
                       index, json_quote(*spec.custom_id), json_quote(c.error));
  }
  const int completion_tokens = static_cast<int>(c.token_ids.size());
  const std::string choice =
      spec.openai_chat
          ? fmt::format(R"({{"index":0,"message":{{"role":"assistant","content":{}}},)"
                        R"("logprobs":null,"finish_reason":{}}})",
                        json_quote(c.text), json_quote(c.finish_reason))
          : fmt::format(R"({{"index":0,"text":{},"logprobs":null,"finish_reason":{}}})",
                        json_quote(c.text), json_quote(c.finish_reason));
  const std::string body = fmt::format(
      R"({{"id":"{}-{}","object":"{}","created":{},"model":{},"choices":[{}],)"
      R"("usage":{{"prompt_tokens":{},"completion_tokens":{},"total_tokens":{},)"
      R"("prompt_tokens_details":{{"cached_tokens":{}}}}}}})",
      spec.openai_chat ? "chatcmpl" : "cmpl", index,
      spec.openai_chat ? "chat.completion" : "text_completion", created, json_quote(model), choice,
      c.prompt_tokens, completion_tokens, c.prompt_tokens + completion_tokens, c.cached_tokens);
  return fmt::format(R"({{"id":"batch_req_{}","custom_id":{},"response":{{"status_code":200,)"
                     R"("request_id":"req_{}","body":{}}},"error":null}})",
                     index, json_quote(*spec.custom_id), index, body);
}

std::string invalid_line_json(const SkippedLine& skipped, bool openai_shape, int index) {
  if (openai_shape) {
    return fmt::format(R"({{"id":"batch_req_{}","custom_id":null,"response":null,)"
                       R"("error":{{"code":"invalid_request","message":{}}}}})",
                       index, json_quote(skipped.message));
  }
  return fmt::format(R"({{"id":"line-{}","finish_reason":"error","error":{}}})", skipped.line,
                     json_quote(skipped.message));
}

}  // namespace rose
