#include "kernels/common/switch_reader.h"

#include <charconv>
#include <cstdlib>
#include <string>

#include "kernels/common/error.h"

namespace rose {

void refuse_switch(const char* name, std::string_view value, const char* want) {
  throw Error(std::string(name) + "=" + std::string(value) + ": want " + want);
}

int switch_one_of(const SwitchLookup& lookup, const char* name,
                  std::initializer_list<std::pair<const char*, int>> choices, int fallback,
                  const char* want) {
  const char* value = lookup(name);
  if (value == nullptr || *value == '\0') return fallback;
  for (const auto& [text, result] : choices) {
    if (std::string_view(value) == text) return result;
  }
  refuse_switch(name, value, want);
}

bool switch_on_off(const SwitchLookup& lookup, const char* name, bool fallback) {
  return switch_one_of(lookup, name, {{"0", 0}, {"1", 1}}, fallback ? 1 : 0, "0 or 1") == 1;
}

int64_t switch_number(const SwitchLookup& lookup, const char* name, int64_t fallback, int64_t lo,
                      int64_t hi, const char* want) {
  const char* value = lookup(name);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string_view text(value);
  int64_t result = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), result);
  if (error != std::errc() || end != text.data() + text.size() || result < lo || result > hi) {
    refuse_switch(name, text, want);
  }
  return result;
}

int switch_count(const SwitchLookup& lookup, const char* name, int fallback, int64_t hi,
                 const char* want) {
  return int(switch_number(lookup, name, fallback, 0, hi, want));
}

const char* switch_from_environment(const char* name) { return std::getenv(name); }

}  // namespace rose
