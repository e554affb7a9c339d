// The streamed reading of prompt files (prompts.h PromptLineReader, prompt_scan.h): on files with
// BOM, CRLF, blank lines, bad lines and repeated ids, the first pass and the line reader give the
// same requests, skips and errors, in the same words, as reading the whole file.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <fstream>
#include <string>
#include <vector>

#include "engine/io/prompt_scan.h"
#include "engine/io/prompts.h"
#include "tests/test_util.h"

using namespace rose;
using rose::test::error_of;
using rose::test::TempDir;

namespace {

const std::vector<std::string> kFiles = {
    "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}",
    "\xEF\xBB\xBF{\"id\": \"x\", \"prompt\": \"a\"}\r\n\r\n  \n{\"id\": \"y\", \"prompt\": "
    "\"b\"}\r\n",
    "{\"id\": \"x\", \"prompt\": \"a\"}\n{\"prompt\": 3}\n{\"id\": \"x\", \"prompt\": \"b\"}\n",
    "{\"id\": \"x\", \"prompt\": \"a\"}\n{\"id\": \"x\", \"prompt\": \"b\"}\n{\"prompt\": 3}\n",
    "{\"custom_id\": \"c1\", \"body\": {\"prompt\": \"a\"}}\n{\"custom_id\": \"c1\", \"body\": "
    "{\"prompt\": \"b\"}}\n{\"id\": \"z\", \"prompt\": \"c\", \"arrival_time\": 1}\n",
    "{\"prompt\": \"a\", \"arrival_time\": 0.5}\nnot json\n{\"prompt\": \"b\", \"arrival_time\": "
    "2}\n",
    "\n\n",
    "{\"prompt\": 1}\n",
};

std::filesystem::path write(const TempDir& dir, const std::string& content, int n) {
  // fmt, not "p" + std::to_string(n): GCC 12 warns (-Wrestrict) on that concatenation.
  const auto path = dir.path / fmt::format("p{}.jsonl", n);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

}  // namespace

TEST_CASE("the first pass gives read_prompt_file's errors, skips and count") {
  TempDir dir("prompt_scan");
  int n = 0;
  for (const std::string& content : kFiles) {
    const auto path = write(dir, content, n++);
    CAPTURE(content);
    CHECK(error_of([&] { scan_prompt_file(path, false); }) ==
          error_of([&] { read_prompt_file(path, false); }));
    CHECK(error_of([&] { scan_prompt_file(path, true); }) ==
          error_of([&] { read_prompt_file(path, true); }));
    if (error_of([&] { read_prompt_file(path, true); }) != "<no error>") continue;
    const PromptFile whole = read_prompt_file(path, true);
    const PromptFileScan scan = scan_prompt_file(path, true);
    CHECK(scan.num_requests == int64_t(whole.requests.size()));
    REQUIRE(scan.skipped.size() == whole.skipped.size());
    for (size_t i = 0; i < whole.skipped.size(); ++i) {
      CHECK(scan.skipped[i].line == whole.skipped[i].line);
      CHECK(scan.skipped[i].message == whole.skipped[i].message);
    }
    bool all_arrivals = true, any_custom = false;
    for (const RequestSpec& spec : whole.requests) {
      all_arrivals &= spec.arrival_time.has_value();
      any_custom |= spec.custom_id.has_value();
    }
    CHECK(scan.all_have_arrival_time == all_arrivals);
    CHECK(scan.any_custom_id == any_custom);
  }
}

TEST_CASE("the line reader yields every non-blank line: the requests, in order, and the bad ones") {
  TempDir dir("prompt_lines");
  int n = 0;
  for (const std::string& content : kFiles) {
    const auto path = write(dir, content, n++);
    CAPTURE(content);
    if (error_of([&] { read_prompt_file(path, true); }) != "<no error>") continue;
    const PromptFile whole = read_prompt_file(path, true);
    const PromptFileScan scan = scan_prompt_file(path, true);
    PromptLineReader reader(path);
    PromptLine line;
    size_t request = 0, skip = 0;
    while (reader.next(line)) {
      if (skip < scan.skipped.size() && scan.skipped[skip].line == line.line) {
        ++skip;
        continue;
      }
      REQUIRE(line.spec.has_value());
      REQUIRE(request < whole.requests.size());
      CHECK(line.spec->id == whole.requests[request].id);
      CHECK(line.spec->line == whole.requests[request].line);
      CHECK(line.spec->prompt == whole.requests[request].prompt);
      ++request;
    }
    CHECK(request == whole.requests.size());
    CHECK(skip == scan.skipped.size());
  }
}

TEST_CASE("the line reader names a missing file and a directory like read_prompt_file") {
  TempDir dir("prompt_lines_missing");
  CHECK(error_of([&] { PromptLineReader reader(dir.path / "no.jsonl"); }) ==
        error_of([&] { read_prompt_file(dir.path / "no.jsonl", false); }));
  CHECK(error_of([&] { PromptLineReader reader(dir.path); }) ==
        error_of([&] { read_prompt_file(dir.path, false); }));
}
