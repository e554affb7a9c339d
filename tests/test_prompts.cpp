// Prompt-file parsing and completion output lines: every field, OpenAI batch lines, and every error
// naming the file, line and field. The expected values are written out by hand from the inputs.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/common/error.h"
#include "engine/io/completions.h"
#include "engine/io/prompts.h"
#include "engine/io/requests.h"

using namespace rose;

namespace {

// The message of the rose::Error that parsing `content` throws ("" if none).
std::string parse_error(const std::string& content) {
  try {
    parse_prompt_jsonl(content, "p.jsonl", false);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("every roseinfer field is read") {
  const std::string content =
      R"({"id": "a", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_k": 40, )"
      R"("top_p": 0.9, "seed": 18446744073709551615, "ignore_eos": true, "arrival_time": 1.25})"
      "\n"
      R"({"id": 42, "prompt_token_ids": [1, 2, 2147483647], "temperature": 0, "top_p": 1, "seed": 3})"
      "\n"
      R"({"prompt": "no id", "unknown_field": {"nested": [1, 2]}, "max_tokens": 1})"
      "\n";
  const PromptFile file = parse_prompt_jsonl(content, "p.jsonl", false);
  REQUIRE(file.requests.size() == 3);
  CHECK(file.skipped.empty());

  const RequestSpec& a = file.requests[0];
  CHECK(a.id == "a");
  CHECK(a.line == 1);
  CHECK(a.prompt == std::optional<std::string>("Hello"));
  CHECK_FALSE(a.prompt_token_ids.has_value());
  CHECK(a.max_tokens == 7);
  CHECK(a.temperature == doctest::Approx(0.5));
  CHECK(a.top_k == 40);
  CHECK(a.top_p == doctest::Approx(0.9));
  CHECK(a.seed == UINT64_MAX);
  CHECK(a.ignore_eos == true);
  CHECK(a.arrival_time == doctest::Approx(1.25));
  CHECK_FALSE(a.custom_id.has_value());
  CHECK_FALSE(a.openai_chat);

  const RequestSpec& b = file.requests[1];
  CHECK(b.id == "42");
  CHECK(b.line == 2);
  CHECK_FALSE(b.prompt.has_value());
  REQUIRE(b.prompt_token_ids.has_value());
  CHECK(*b.prompt_token_ids == std::vector<int32_t>{1, 2, 2147483647});
  CHECK(b.temperature == 0.0f);
  CHECK(b.top_p == 1.0f);
  CHECK(b.seed == 3u);
  CHECK_FALSE(b.max_tokens.has_value());
  CHECK_FALSE(b.top_k.has_value());
  CHECK_FALSE(b.ignore_eos.has_value());
  CHECK_FALSE(b.arrival_time.has_value());

  const RequestSpec& c = file.requests[2];
  CHECK(c.id == "line-3");  // no id: named after its line
  CHECK(c.max_tokens == 1);
}

TEST_CASE("OpenAI batch lines: completions and chat") {
  const std::string content =
      R"({"custom_id": "req-1", "method": "POST", "url": "/v1/completions", )"
      R"("body": {"model": "x", "prompt": "Once", "max_tokens": 5, "temperature": 0.7, "top_p": 0.5, "seed": 9}})"
      "\n"
      R"({"custom_id": "req-2", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [)"
      R"({"role": "system", "content": "Be brief."}, )"
      R"({"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": {}}, {"type": "text", "text": "!"}]}], )"
      R"("max_completion_tokens": 3}})"
      "\n"
      R"({"custom_id": "req-3", "body": {"prompt": [5, 6, 7]}})"
      "\n";
  const PromptFile file = parse_prompt_jsonl(content, "batch.jsonl", false);
  REQUIRE(file.requests.size() == 3);

  const RequestSpec& r1 = file.requests[0];
  CHECK(r1.custom_id == std::optional<std::string>("req-1"));
  CHECK(r1.id == "req-1");
  CHECK(r1.prompt == std::optional<std::string>("Once"));
  CHECK(r1.max_tokens == 5);
  CHECK(r1.temperature == doctest::Approx(0.7));
  CHECK(r1.top_p == doctest::Approx(0.5));
  CHECK(r1.seed == 9u);
  CHECK_FALSE(r1.openai_chat);

  const RequestSpec& r2 = file.requests[1];
  CHECK(r2.openai_chat);
  CHECK_FALSE(r2.prompt.has_value());  // the messages wait for the model's template
  CHECK(render_plain_chat(r2.messages) == "system: Be brief.\nuser: Hi!\nassistant:");
  CHECK(r2.max_tokens == 3);

  const RequestSpec& r3 = file.requests[2];
  REQUIRE(r3.prompt_token_ids.has_value());
  CHECK(*r3.prompt_token_ids == std::vector<int32_t>{5, 6, 7});
}

TEST_CASE("errors name the file, the line and the field") {
  const std::string good = R"({"prompt": "ok"})";
  struct Case {
    std::string line;
    std::string expected;  // the whole message
  };
  const Case cases[] = {
      {R"({"prompt": "x", "max_tokens": -3})",
       "p.jsonl:2: field 'max_tokens': expected a positive integer, got -3"},
      {R"({"prompt": "x", "max_tokens": 0})",
       "p.jsonl:2: field 'max_tokens': expected a positive integer, got 0"},
      {R"({"prompt": "x", "max_tokens": 2.5})",
       "p.jsonl:2: field 'max_tokens': expected a positive integer, got 2.5"},
      {R"({"prompt": "x", "max_tokens": "8"})",
       "p.jsonl:2: field 'max_tokens': expected a positive integer, got \"8\""},
      {R"({"prompt": "x", "max_tokens": 3000000000})",
       "p.jsonl:2: field 'max_tokens': expected a positive integer, got 3000000000"},
      {R"({"prompt": "x", "temperature": -0.1})",
       "p.jsonl:2: field 'temperature': expected a number >= 0, got -0.1"},
      {R"({"prompt": "x", "top_k": -1})",
       "p.jsonl:2: field 'top_k': expected an integer >= 0, got -1"},
      {R"({"prompt": "x", "top_p": 0})",
       "p.jsonl:2: field 'top_p': expected a number in (0, 1], got 0"},
      {R"({"prompt": "x", "top_p": 1.5})",
       "p.jsonl:2: field 'top_p': expected a number in (0, 1], got 1.5"},
      {R"({"prompt": "x", "seed": -1})",
       "p.jsonl:2: field 'seed': expected an unsigned integer, got -1"},
      {R"({"prompt": "x", "ignore_eos": 1})",
       "p.jsonl:2: field 'ignore_eos': expected true or false, got 1"},
      {R"({"prompt": "x", "arrival_time": -2})",
       "p.jsonl:2: field 'arrival_time': expected a number of seconds >= 0, got -2"},
      {R"({"prompt": "x", "id": [1]})",
       "p.jsonl:2: field 'id': expected a string or an integer, got [1]"},
      {R"({"prompt": "x", "id": ""})",
       "p.jsonl:2: field 'id': empty; an id names the request's output line"},
      {R"({"custom_id": "", "body": {"prompt": [5, 6], "seed": 2}})",
       "p.jsonl:2: field 'custom_id': empty; an id names the request's output line"},
      {R"({"prompt": 5})", "p.jsonl:2: field 'prompt': expected a string, got 5"},
      {R"({"prompt": ""})", "p.jsonl:2: field 'prompt': empty; a request needs a prompt"},
      {R"({"prompt_token_ids": []})",
       "p.jsonl:2: field 'prompt_token_ids': empty; a request needs a prompt"},
      {R"({"prompt_token_ids": [1, -4]})",
       "p.jsonl:2: field 'prompt_token_ids[1]': expected a token id (an integer >= 0), got -4"},
      {R"({"prompt_token_ids": "1 2"})",
       "p.jsonl:2: field 'prompt_token_ids': expected an array of token ids, got \"1 2\""},
      {R"({"prompt": "x", "prompt_token_ids": [1]})",
       "p.jsonl:2: fields 'prompt' and 'prompt_token_ids': give one, not both"},
      {R"({"max_tokens": 3})",
       "p.jsonl:2: field 'prompt': missing (give 'prompt', 'prompt_token_ids' or 'messages')"},
      {R"({"prompt": "ok", "id": "line-1"})",
       "p.jsonl:2: field 'id': duplicate id 'line-1' (first on line 1)"},
      {R"([1, 2])", "p.jsonl:2: expected a JSON object per line, got an array"},
      {R"("text")", "p.jsonl:2: expected a JSON object per line, got a scalar"},
      {R"({"prompt": "x"} {"prompt": "y"})",
       "p.jsonl:2: invalid JSON: unexpected text after the object at column 17"},
      {R"({"prompt": "x"}, )",
       "p.jsonl:2: invalid JSON: unexpected text after the object at column 16"},
      {R"({"custom_id": "c", "body": {"prompt": "x", "max_tokens": -1}})",
       "p.jsonl:2: field 'body.max_tokens': expected a positive integer, got -1"},
      {R"({"custom_id": "c", "body": {"messages": []}})",
       "p.jsonl:2: field 'body.messages': expected a nonempty array of messages, got []"},
      {R"({"custom_id": "c", "body": {"messages": [{"content": "x"}]}})",
       "p.jsonl:2: field 'body.messages[0].role': missing"},
      {R"({"custom_id": "c", "body": {}})",
       "p.jsonl:2: field 'body.prompt': missing (give 'body.prompt' or 'body.messages')"},
      {R"({"custom_id": "c"})",
       "p.jsonl:2: field 'body': missing (an OpenAI batch line needs one)"},
      {R"({"body": {"prompt": "x"}})",
       "p.jsonl:2: field 'custom_id': missing (an OpenAI batch line needs one)"},
      {R"({"custom_id": "c", "method": "GET", "body": {"prompt": "x"}})",
       "p.jsonl:2: field 'method': expected \"POST\", got \"GET\""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    CHECK(parse_error(good + "\n" + c.line + "\n") == c.expected);
  }
}

TEST_CASE("bad JSON and a truncated line are errors naming the line") {
  const std::string message = parse_error("{\"prompt\": \"a\"}\n\n{\"prompt\": \"b\"\n");
  CHECK(message.rfind("p.jsonl:3: invalid JSON: ", 0) == 0);
}

TEST_CASE("skip_invalid turns bad lines into reported skips") {
  const std::string content =
      "{\"prompt\": \"a\"}\n"
      "{\"prompt\": \"b\", \"max_tokens\": -3}\n"
      "not json\n"
      "{\"prompt\": \"c\"}\n";
  const PromptFile file = parse_prompt_jsonl(content, "p.jsonl", true);
  REQUIRE(file.requests.size() == 2);
  CHECK(file.requests[0].prompt == std::optional<std::string>("a"));
  CHECK(file.requests[1].prompt == std::optional<std::string>("c"));
  CHECK(file.requests[1].line == 4);
  REQUIRE(file.skipped.size() == 2);
  CHECK(file.skipped[0].line == 2);
  CHECK(file.skipped[0].message ==
        "p.jsonl:2: field 'max_tokens': expected a positive integer, got -3");
  CHECK(file.skipped[1].line == 3);
  CHECK(file.skipped[1].message.rfind("p.jsonl:3: invalid JSON", 0) == 0);

  // Without skip_invalid the first bad line stops the parse.
  CHECK(parse_error(content) ==
        "p.jsonl:2: field 'max_tokens': expected a positive integer, got -3");
}

TEST_CASE("an empty file, or one with only blank or only bad lines, has no requests") {
  CHECK(parse_error("") == "p.jsonl: no requests (the file has no non-blank lines)");
  CHECK(parse_error("\n  \n\r\n\t\n") == "p.jsonl: no requests (the file has no non-blank lines)");
  CHECK(parse_error("\xEF\xBB\xBF") == "p.jsonl: no requests (the file has no non-blank lines)");
  try {
    parse_prompt_jsonl("{\"max_tokens\": 1}\n", "p.jsonl", true);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).rfind("p.jsonl: no valid requests (1 lines skipped", 0) == 0);
  }
}

TEST_CASE("BOM, CRLF, blank lines, no final newline") {
  const std::string content =
      "\xEF\xBB\xBF{\"prompt\": \"a\"}\r\n"
      "\r\n"
      "   \n"
      "{\"prompt\": \"b\\r\"}\r\n"
      "{\"prompt\": \"c\"}";
  const PromptFile file = parse_prompt_jsonl(content, "p.jsonl", false);
  REQUIRE(file.requests.size() == 3);
  CHECK(file.requests[0].prompt == std::optional<std::string>("a"));
  CHECK(file.requests[0].line == 1);
  CHECK(file.requests[1].prompt == std::optional<std::string>("b\r"));  // escaped \r is content
  CHECK(file.requests[1].line == 4);
  CHECK(file.requests[2].line == 5);
}

TEST_CASE("invalid UTF-8 is an error naming the line and column") {
  CHECK(parse_error("{\"prompt\": \"a\"}\n{\"prompt\": \"\xC3\x28\"}\n") ==
        "p.jsonl:2: invalid UTF-8 at column 13");
  // An overlong encoding of '/' and a lone surrogate are invalid too.
  CHECK(parse_error("{\"prompt\": \"\xC0\xAF\"}") == "p.jsonl:1: invalid UTF-8 at column 13");
  CHECK(parse_error("{\"prompt\": \"\xED\xA0\x80\"}") == "p.jsonl:1: invalid UTF-8 at column 13");
  // Valid multibyte text passes through unchanged.
  const PromptFile file =
      parse_prompt_jsonl("{\"prompt\": \"h\xC3\xA9llo \xF0\x9F\x8C\xB9\"}", "p", false);
  CHECK(file.requests[0].prompt == std::optional<std::string>("h\xC3\xA9llo \xF0\x9F\x8C\xB9"));
}

TEST_CASE("very long lines parse (no fixed buffer)") {
  std::string text(3 << 20, 'x');  // a 3 MiB prompt
  std::string ids = "[";
  for (int i = 0; i < 200000; ++i) ids += std::to_string(i % 50000) + (i + 1 < 200000 ? "," : "]");
  const std::string content =
      "{\"prompt\": \"" + text + "\"}\n{\"prompt_token_ids\": " + ids + "}\n";
  const PromptFile file = parse_prompt_jsonl(content, "p.jsonl", false);
  REQUIRE(file.requests.size() == 2);
  CHECK(file.requests[0].prompt->size() == text.size());
  REQUIRE(file.requests[1].prompt_token_ids->size() == 200000);
  CHECK((*file.requests[1].prompt_token_ids)[123456] == 123456 % 50000);
}

TEST_CASE("read_prompt_file: missing file, a directory, a real file") {
  const auto dir = std::filesystem::temp_directory_path() / "roseinfer_test_prompts";
  std::filesystem::create_directories(dir);
  const auto missing = dir / "missing.jsonl";
  std::filesystem::remove(missing);
  try {
    read_prompt_file(missing, false);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == missing.string() + ": no such file");
  }
  try {
    read_prompt_file(dir, false);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == dir.string() + ": is a directory, expected a JSONL file");
  }
  const auto real = dir / "real.jsonl";
  {
    std::ofstream out(real, std::ios::binary);
    out << "{\"prompt\": \"x\", \"max_tokens\": 2}\n{\"prompt\": \"y\", \"top_k\": 1.5}\n";
  }
  try {
    read_prompt_file(real, false);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          real.string() + ":2: field 'top_k': expected an integer >= 0, got 1.5");
  }
  const PromptFile file = read_prompt_file(real, true);
  CHECK(file.requests.size() == 1);
  CHECK(file.skipped.size() == 1);
  std::filesystem::remove_all(dir);
}

// ---- completion output lines (engine/io/completions.h) ----

TEST_CASE("json_quote escapes quotes, backslashes and control characters") {
  CHECK(json_quote("a\"b\\c") == R"("a\"b\\c")");
  CHECK(json_quote("\n\r\t") == R"("\n\r\t")");
  CHECK(json_quote(std::string("\x01\x1f", 2)) == R"("\u0001\u001f")");
  CHECK(json_quote(std::string("nul\0x", 5)) == R"("nul\u0000x")");
  CHECK(json_quote("h\xC3\xA9") == "\"h\xC3\xA9\"");  // UTF-8 passes through
}

TEST_CASE("a roseinfer completion line has every field, parseable") {
  RequestSpec spec;
  spec.id = "q\"1";
  Completion c;
  c.prompt_tokens = 5;
  c.text = "hi\nthere";
  c.token_ids = {104, 105};
  c.finish_reason = "stop";
  c.cached_tokens = 3;
  c.ttft_ms = 1.5;
  c.e2el_ms = 2.25;
  const std::string line = completion_json_line(spec, c, "tiny", 0, 123);
  CHECK(line == R"({"id":"q\"1","prompt_tokens":5,"text":"hi\nthere","token_ids":[104,105],)"
                R"("finish_reason":"stop","cached_tokens":3,"ttft_ms":1.500,"e2el_ms":2.250})");
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  REQUIRE_FALSE(parser.parse(line).get(doc));
  CHECK(std::string_view(doc["text"].get_string().value()) == "hi\nthere");
  CHECK(doc["token_ids"].get_array().value().size() == 2);
}

TEST_CASE("OpenAI batch lines get the batch output shape") {
  const PromptFile file = parse_prompt_jsonl(
      R"({"custom_id": "c1", "body": {"prompt": "x"}})"
      "\n"
      R"({"custom_id": "c2", "body": {"messages": [{"role": "user", "content": "x"}]}})",
      "b.jsonl", false);
  Completion c;
  c.prompt_tokens = 4;
  c.text = "ok";
  c.token_ids = {1, 2, 3};
  c.finish_reason = "length";
  c.cached_tokens = 1;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;

  const std::string completion = completion_json_line(file.requests[0], c, "tiny", 0, 1700000000);
  REQUIRE_FALSE(parser.parse(completion).get(doc));
  CHECK(std::string_view(doc["id"].get_string().value()) == "batch_req_0");
  CHECK(std::string_view(doc["custom_id"].get_string().value()) == "c1");
  CHECK(doc["error"].is_null());
  CHECK(doc["response"]["status_code"].get_int64().value() == 200);
  simdjson::dom::element body = doc["response"]["body"].value();
  CHECK(std::string_view(body["object"].get_string().value()) == "text_completion");
  CHECK(std::string_view(body["model"].get_string().value()) == "tiny");
  CHECK(body["created"].get_int64().value() == 1700000000);
  CHECK(std::string_view(body["choices"].at(0)["text"].get_string().value()) == "ok");
  CHECK(std::string_view(body["choices"].at(0)["finish_reason"].get_string().value()) == "length");
  CHECK(body["usage"]["prompt_tokens"].get_int64().value() == 4);
  CHECK(body["usage"]["completion_tokens"].get_int64().value() == 3);
  CHECK(body["usage"]["total_tokens"].get_int64().value() == 7);
  CHECK(body["usage"]["prompt_tokens_details"]["cached_tokens"].get_int64().value() == 1);

  const std::string chat = completion_json_line(file.requests[1], c, "tiny", 1, 1700000000);
  REQUIRE_FALSE(parser.parse(chat).get(doc));
  CHECK(std::string_view(doc["id"].get_string().value()) == "batch_req_1");
  body = doc["response"]["body"].value();
  CHECK(std::string_view(body["object"].get_string().value()) == "chat.completion");
  CHECK(std::string_view(body["choices"].at(0)["message"]["role"].get_string().value()) ==
        "assistant");
  CHECK(std::string_view(body["choices"].at(0)["message"]["content"].get_string().value()) == "ok");
}
