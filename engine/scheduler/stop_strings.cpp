#include "engine/scheduler/stop_strings.h"

#include <algorithm>

namespace rose {

StopStringMatcher::StopStringMatcher(const Tokenizer& tokenizer, std::vector<std::string> stops)
    : detokenizer_(tokenizer, /*skip_special_tokens=*/true), stops_(std::move(stops)) {
  for (const std::string& stop : stops_) longest_ = std::max(longest_, stop.size());
}

bool StopStringMatcher::push(int32_t token) {
  tail_ += detokenizer_.push(token);
  bool found = false;
  for (const std::string& stop : stops_) {
    if (tail_.find(stop) != std::string::npos) found = true;
  }
  // Only the last longest_-1 bytes can start a match that the next token completes.
  const size_t keep = longest_ > 0 ? longest_ - 1 : 0;
  if (tail_.size() > keep) tail_.erase(0, tail_.size() - keep);
  return found;
}

std::string_view cut_at_stop_string(std::string_view text, std::span<const std::string> stops) {
  size_t cut = text.size();
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    cut = std::min(cut, text.find(stop));
  }
  return text.substr(0, cut);
}

}  // namespace rose
