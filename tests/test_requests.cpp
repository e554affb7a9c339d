// Request preparation (engine/io/requests.h) and the model bundle (engine/model/bundle.h): chat
// messages rendered late, defaults and seeds, the one token-id range check, the context limit.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/io/requests.h"
#include "engine/model/bundle.h"
#include "tests/test_util.h"

using namespace rose;

namespace {

const ModelBundle& tiny() {
  static const ModelBundle bundle = open_model_bundle("tiny");
  return bundle;
}

RequestSpec line(int number) {
  RequestSpec spec;
  spec.line = number;
  spec.id = "line-" + std::to_string(number);
  return spec;
}

}  // namespace

TEST_CASE("a preset's bundle has the byte tokenizer, the plain template and the model's end set") {
  const ModelBundle& b = tiny();
  REQUIRE(b.tokenizer != nullptr);
  CHECK(b.tokenizer_source == "preset");
  CHECK(b.format == "preset");
  // The built-in template renders exactly what render_plain_chat writes.
  RequestSpec chat;
  chat.messages = {{"system", "Be brief."}, {"user", "Hi!"}};
  CHECK(rose::render_prompt_text(chat, b, "t") == render_plain_chat(chat.messages));
  CHECK(b.name == "tiny");
  CHECK(b.eos_ids ==
        std::vector<int32_t>(b.config().eos_token_ids.begin(), b.config().eos_token_ids.end()));
}

TEST_CASE("plain chat rendering") {
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi!"}};
  CHECK(render_plain_chat(messages) == "system: Be brief.\nuser: Hi!\nassistant:");
}

TEST_CASE("messages, text and ids become requests with defaults and per-index seeds") {
  std::vector<RequestSpec> specs(3);
  specs[0] = line(1);
  specs[0].messages = {{"user", "Hi"}};
  specs[1] = line(2);
  specs[1].prompt = "user: Hi\nassistant:";
  specs[1].max_tokens = 3;
  specs[1].seed = 77;
  specs[2] = line(3);
  specs[2].prompt_token_ids = std::vector<int32_t>{1, 2, 3};
  RequestDefaults defaults;
  defaults.max_tokens = 5;
  defaults.temperature = 0.5f;
  const std::vector<EngineRequest> r =
      prepare_requests(specs, "p.jsonl", tiny(), defaults, 10, 512);
  REQUIRE(r.size() == 3);
  CHECK(r[0].prompt == r[1].prompt);  // the chat renders to the same text
  CHECK(r[0].max_tokens == 5);
  CHECK(r[1].max_tokens == 3);
  CHECK(r[0].sampling.seed == 10);
  CHECK(r[1].sampling.seed == 77);
  CHECK(r[2].sampling.seed == 12);
  CHECK(r[2].prompt == std::vector<int32_t>{1, 2, 3});
  CHECK(r[2].sampling.temperature == doctest::Approx(0.5));
}

TEST_CASE("ids outside the vocabulary and prompts over the context are refused once, here") {
  std::vector<RequestSpec> specs(1, line(4));
  specs[0].prompt_token_ids = std::vector<int32_t>{1, tiny().config().vocab_size};
  CHECK(rose::test::contains(
      rose::test::error_of([&] { prepare_requests(specs, "p.jsonl", tiny(), {}, 0, 512); }),
      "p.jsonl:4: field 'prompt_token_ids[1]': token id"));
  specs[0].prompt_token_ids = std::vector<int32_t>{1, -1};
  CHECK_THROWS_AS(prepare_requests(specs, "p.jsonl", tiny(), {}, 0, 512), Error);
  specs[0].prompt_token_ids = std::vector<int32_t>(10, 1);
  CHECK(rose::test::contains(
      rose::test::error_of([&] { prepare_requests(specs, "p.jsonl", tiny(), {}, 0, 20); }),
      "more than the context length 20"));
}

TEST_CASE("a folder's chat template, special-token texts and generation_config end ids") {
  rose::test::TempDir dir("bundle_folder", "tiny-llama");
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.json"}) {
    std::filesystem::copy_file(std::filesystem::path("tests/fixtures/models/tiny-llama") / name,
                               dir.path / name);
  }
  const auto write = [&](const char* name, const std::string& text) {
    std::ofstream(dir.path / name) << text;
  };
  // No template yet: a messages line is refused with a message that says what to do.
  {
    const ModelBundle b = open_model_bundle(dir.path.string());
    RequestSpec chat = line(3);
    chat.messages = {{"user", "Hi"}};
    const std::string message = rose::test::error_of([&] { render_prompt_text(chat, b, "p:3"); });
    CHECK(rose::test::contains(message, "p:3: field 'messages'"));
    CHECK(rose::test::contains(message, "--chat-template"));
  }
  write("tokenizer_config.json",
        R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>", "chat_template": )"
        R"("{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }})"
        R"({% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"})");
  write("generation_config.json", R"({"eos_token_id": [7, 9]})");
  const ModelBundle b = open_model_bundle(dir.path.string());
  CHECK(b.format == "safetensors");
  CHECK(b.bos_token == "<s>");
  CHECK(b.eos_token == "</s>");
  CHECK(rose::test::contains(b.chat_template_source, "tokenizer_config.json"));
  CHECK(std::find(b.eos_ids.begin(), b.eos_ids.end(), 7) != b.eos_ids.end());
  CHECK(std::find(b.eos_ids.begin(), b.eos_ids.end(), 9) != b.eos_ids.end());
  RequestSpec chat = line(4);
  chat.messages = {{"user", "Hi"}};
  CHECK(render_prompt_text(chat, b, "p:4") == "<s>[user] Hi</s>[assistant]");

  // A template that raises fails the request with the template's own message.
  write("chat_template.jinja", "{{ raise_exception('roles must alternate') }}");
  std::filesystem::remove(dir.path / "tokenizer_config.json");
  const ModelBundle raising = open_model_bundle(dir.path.string());
  const std::string message =
      rose::test::error_of([&] { render_prompt_text(chat, raising, "p:4"); });
  CHECK(rose::test::contains(message, "p:4: field 'messages'"));
  CHECK(rose::test::contains(message, "roles must alternate"));

  // --chat-template overrides the model's own.
  write("override.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}!");
  const ModelBundle overridden =
      open_model_bundle(dir.path.string(), {(dir.path / "override.jinja").string()});
  CHECK(render_prompt_text(chat, overridden, "p:4") == "Hi!");
}

TEST_CASE("stop strings and skip_special_tokens shape the completion text") {
  const ModelBundle& b = tiny();  // byte tokenizer: id = byte
  RequestSpec spec = line(1);
  const std::string text = "one\ntwo\n\nthree";
  const std::vector<int32_t> ids(text.begin(), text.end());
  CHECK(completion_text(spec, b, ids) == text);
  spec.stop = {"\n\n", "wo"};
  CHECK(completion_text(spec, b, ids) == "one\nt");  // cut before the earliest stop string
}
