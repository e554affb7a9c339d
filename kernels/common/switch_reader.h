#pragma once
// Reading the ROSEINFER_* measurement switches strictly, for the kernels' (kernel_switches.h) and
// the CUDA backend's (engine/backend/cuda/backend_switches.h): an unset or empty variable is the
// default, anything but a value the switch takes stops the run with rose::Error "NAME=VALUE: want
// ...", since a switch silently left at its default would make a comparison measure the wrong
// thing. Plain C++17 (nvcc includes kernel_switches.h, which names SwitchLookup).
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace rose {

// The variable's value by name, null when unset: std::getenv, or a table in the tests.
using SwitchLookup = std::function<const char*(const char*)>;

[[noreturn]] void refuse_switch(const char* name, std::string_view value, const char* want);

// The value paired with the variable's text among `choices`, or `fallback` when unset or empty;
// anything else is refused with `want` as the message.
int switch_one_of(const SwitchLookup& lookup, const char* name,
                  std::initializer_list<std::pair<const char*, int>> choices, int fallback,
                  const char* want);

// 0 (off) or 1 (on), or `fallback`.
bool switch_on_off(const SwitchLookup& lookup, const char* name, bool fallback);

// A decimal whole number in [lo, hi], or `fallback`; `want` describes the range.
int64_t switch_number(const SwitchLookup& lookup, const char* name, int64_t fallback, int64_t lo,
                      int64_t hi, const char* want);

// A count in [0, hi] (an int), or `fallback`.
int switch_count(const SwitchLookup& lookup, const char* name, int fallback, int64_t hi,
                 const char* want);

// std::getenv as a SwitchLookup: the process's environment.
const char* switch_from_environment(const char* name);

}  // namespace rose
