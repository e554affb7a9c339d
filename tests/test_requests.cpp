// Request preparation (engine/io/requests.h) and the model bundle (engine/model/bundle.h): chat
// messages rendered late, defaults and seeds, the one token-id range check, the context limit.
#include <doctest/doctest.h>

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

TEST_CASE("a preset's bundle has the byte tokenizer, no template and the model's end set") {
  const ModelBundle& b = tiny();
  REQUIRE(b.tokenizer != nullptr);
  CHECK(b.tokenizer_source == "preset");
  CHECK(b.chat_template.empty());
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
