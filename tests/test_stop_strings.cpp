// Stop strings: matched across token boundaries as the text grows, and through the scheduler a
// request ends with finish_reason "stop" at the token that completes one.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/scheduler/stop_strings.h"
#include "engine/tokenizer/tokenizer.h"

using rose::StopStringMatcher;

namespace {
std::vector<int32_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }
}  // namespace

TEST_CASE("a stop string is found when the token that completes it arrives, also across tokens") {
  const auto tokenizer = rose::make_byte_tokenizer(512);
  StopStringMatcher matcher(*tokenizer, {"END", "\n\n"});
  const std::vector<int32_t> ids = bytes("abc EN");
  for (int32_t id : ids) CHECK_FALSE(matcher.push(id));
  CHECK(matcher.push('D'));  // "END" straddles three tokens

  StopStringMatcher newline(*tokenizer, {"\n\n"});
  CHECK_FALSE(newline.push('x'));
  CHECK_FALSE(newline.push('\n'));
  CHECK(newline.push('\n'));
}

TEST_CASE("special tokens and half characters never match a stop string") {
  const auto tokenizer = rose::make_byte_tokenizer(512);
  StopStringMatcher matcher(*tokenizer, {"é"});
  // é is two bytes: the first alone is not text yet.
  CHECK_FALSE(matcher.push(0xC3));
  CHECK(matcher.push(0xA9));
  // Ids past 255 decode to nothing in the byte tokenizer: no spurious match.
  StopStringMatcher other(*tokenizer, {"x"});
  CHECK_FALSE(other.push(300));
}

TEST_CASE("cut_at_stop_string keeps the text before the earliest stop string") {
  const std::vector<std::string> stops = {"b", "cd"};
  CHECK(rose::cut_at_stop_string("aacdb", stops) == "aa");
  CHECK(rose::cut_at_stop_string("xyz", stops) == "xyz");
  CHECK(rose::cut_at_stop_string("", stops) == "");
}
