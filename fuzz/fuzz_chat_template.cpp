// libFuzzer entry over chat-template text: rendering a fixed conversation must either give a
// string or throw rose::Error (bad syntax, unsupported construct, raise_exception, step limit).
// A crash, a sanitizer report, a hang or another exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<rose::ChatMessage> kMessages = {
      {"system", "Be brief."}, {"user", "Hi <b>"}, {"assistant", "Hello"}, {"user", "ünï"}};
  rose::ChatTemplateOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.now = std::tm{};
  options.max_render_steps = 200'000;  // enough for real templates; keeps each input quick
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  try {
    rose::render_chat_template(source, "fuzz.jinja", kMessages, options);
  } catch (const rose::Error&) {
  }
  return 0;
}
