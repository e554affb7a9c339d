#pragma once
// Per-request stop strings (OpenAI's `stop`): the generated text is decoded as tokens arrive, and
// the request finishes with finish_reason "stop" once any stop string appears in it.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace rose {

class StopStringMatcher {
 public:
  // `stops` must be nonempty strings; `tokenizer` must outlive the matcher.
  StopStringMatcher(const Tokenizer& tokenizer, std::vector<std::string> stops);
  // Appends one generated token's text; true when a stop string now appears in the text.
  bool push(int32_t token);

 private:
  IncrementalDetokenizer detokenizer_;
  std::vector<std::string> stops_;
  size_t longest_ = 0;  // bytes of the longest stop string
  std::string tail_;    // the last longest_-1 bytes of text seen (a match may straddle tokens)
};

// `text` up to the first occurrence of any stop string: OpenAI leaves the stop string out.
std::string_view cut_at_stop_string(std::string_view text, std::span<const std::string> stops);

}  // namespace rose
