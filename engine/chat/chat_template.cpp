#include "engine/chat/chat_template.h"

#include <ctime>

#include "engine/chat/jinja_eval.h"
#include "engine/chat/jinja_lexer.h"
#include "engine/chat/jinja_parser.h"

namespace rose {
namespace {

jinja::Value message_value(const ChatMessage& message) {
  return jinja::Value(jinja::ValueDict{{"role", jinja::Value(message.role)},
                                       {"content", jinja::Value(message.content)}});
}

// strftime_now(format): transformers formats the local time; tests fix the moment through options.
jinja::Value strftime_now_function(std::optional<std::tm> fixed_now) {
  return jinja::Value::function("strftime_now", [fixed_now](jinja::CallArgs& args) {
    jinja::Value format = args.get(0, "format");
    if (!format.is_string()) throw jinja::EvalError("strftime_now() needs a format string");
    std::tm moment{};
    if (fixed_now) {
      moment = *fixed_now;
    } else {
      std::time_t now = std::time(nullptr);
      localtime_r(&now, &moment);
    }
    char buffer[512];
    size_t length = std::strftime(buffer, sizeof buffer, format.as_string().c_str(), &moment);
    if (length == 0 && !format.as_string().empty())
      throw jinja::EvalError("strftime_now(): format too long");
    return jinja::Value(std::string(buffer, length));
  });
}

}  // namespace

std::string render_chat_template(std::string_view source, const std::string& source_name,
                                 std::span<const ChatMessage> messages,
                                 const ChatTemplateOptions& options) {
  std::vector<jinja::Token> tokens = jinja::tokenize(source, source_name);
  jinja::Body body = jinja::parse_template(tokens, source_name);
  jinja::ValueList message_values;
  for (const ChatMessage& message : messages) message_values.push_back(message_value(message));
  // The variables transformers' apply_chat_template passes when no tools or documents are given.
  jinja::ValueDict globals = {
      {"messages", jinja::Value(std::move(message_values))},
      {"tools", jinja::Value(jinja::None{})},
      {"documents", jinja::Value(jinja::None{})},
      {"add_generation_prompt", jinja::Value(options.add_generation_prompt)},
      {"bos_token", jinja::Value(options.bos_token)},
      {"eos_token", jinja::Value(options.eos_token)},
      {"raise_exception", jinja::Value::function("raise_exception",
                                                 [](jinja::CallArgs& args) -> jinja::Value {
                                                   throw jinja::TemplateRaised(
                                                       to_display_string(args.get(0, "message")));
                                                 })},
      {"strftime_now", strftime_now_function(options.now)},
  };
  jinja::RenderLimits limits;
  if (options.max_render_steps > 0) limits.max_steps = options.max_render_steps;
  return jinja::render(body, source_name, globals, limits);
}

}  // namespace rose
