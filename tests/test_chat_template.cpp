// The chat-template corpus: every template in ../shared/chat-templates rendered with several
// conversations must equal Python jinja2's output as transformers configures it (fixtures made by
// scripts/make_chat_template_fixtures.py), or fail as jinja2 does. Skipped (exit 77) when the
// shared folder is absent.
#include <doctest/doctest.h>
#include <simdjson.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/chat/chat_template.h"
#include "engine/common/error.h"

namespace {

const std::filesystem::path kTemplateDir = "../shared/chat-templates";
const char* const kFixture = "tests/fixtures/chat_templates/expected.json";

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<rose::ChatMessage> conversation(simdjson::dom::element messages) {
  std::vector<rose::ChatMessage> out;
  for (simdjson::dom::element m : messages.get_array())
    out.push_back({std::string(m["role"].get_string().value()),
                   std::string(m["content"].get_string().value())});
  return out;
}

// The fixture's moment (FIXED_NOW in the script): 2025-03-07 14:05:09.
std::tm fixed_now() {
  std::tm t{};
  t.tm_year = 2025 - 1900;
  t.tm_mon = 2;
  t.tm_mday = 7;
  t.tm_hour = 14;
  t.tm_min = 5;
  t.tm_sec = 9;
  t.tm_wday = 5;
  t.tm_yday = 65;
  return t;
}

}  // namespace

TEST_CASE("every shared chat template renders as Python jinja2 renders it") {
  if (!std::filesystem::exists(kTemplateDir)) {
    std::fprintf(stderr, "skipped: %s not found\n", kTemplateDir.c_str());
    std::exit(77);
  }
  simdjson::dom::parser parser;
  simdjson::dom::element fixture = parser.load(kFixture);
  std::map<std::string, std::vector<rose::ChatMessage>> conversations;
  for (auto [name, messages] : fixture["conversations"].get_object())
    conversations[std::string(name)] = conversation(messages);
  std::map<std::string, std::string> first_failure;  // per template
  std::map<std::string, bool> seen;
  int cases = 0;
  for (simdjson::dom::element c : fixture["cases"].get_array()) {
    std::string file(c["file"].get_string().value());
    seen[file] = true;
    rose::ChatTemplateOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].get_bool().value();
    options.bos_token = std::string(fixture["bos_token"].get_string().value());
    options.eos_token = std::string(fixture["eos_token"].get_string().value());
    options.now = fixed_now();
    std::string source = read_file(kTemplateDir / file);
    const auto& messages = conversations.at(std::string(c["conversation"].get_string().value()));
    std::string got, error;
    try {
      got = rose::render_chat_template(source, file, messages, options);
    } catch (const rose::Error& e) {
      error = e.what();
    }
    std::string_view text, raises, jinja_error;
    bool expects_text = c["text"].get(text) == simdjson::SUCCESS;
    bool expects_raise = c["raises"].get(raises) == simdjson::SUCCESS;
    bool has_error_text = c["error"].get(jinja_error) == simdjson::SUCCESS;
    std::string label = file + " [" + std::string(c["conversation"].get_string().value()) +
                        (options.add_generation_prompt ? ", generation prompt]" : "]");
    std::string problem;
    if (expects_text && !error.empty())
      problem = "error: " + error;
    else if (expects_text && got != text)
      problem = "output differs:\n--- jinja2\n" + std::string(text) + "\n--- ours\n" + got;
    else if (expects_raise && error.find(std::string(raises)) == std::string::npos)
      problem = "expected raise_exception '" + std::string(raises) + "', got " +
                (error.empty() ? "output" : error);
    else if (!expects_text && !expects_raise && error.empty())
      problem = "expected an error like jinja2's '" +
                (has_error_text ? std::string(jinja_error) : "?") + "', got output";
    ++cases;
    if (!problem.empty() && !first_failure.count(file))
      first_failure[file] = label + ": " + problem;
  }
  for (const auto& [file, problem] : first_failure) MESSAGE(problem);
  size_t identical = seen.size() - first_failure.size();
  MESSAGE(identical << " of " << seen.size() << " templates identical to jinja2 on all " << cases
                    << " cases");
  CHECK(first_failure.empty());
  CHECK(seen.size() == 54);
}
