#pragma once
// One error type for everything a user can cause (a bad file, line, field, flag or model): the CLI
// catches rose::Error, prints its message (which names the file, line and field) and exits nonzero.
// Broken internal invariants are ROSE_ASSERT failures instead: they are bugs, not user errors.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace rose {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A request the command cannot take as given (e.g. --resume with a journal of another run): the CLI
// exits 2, as for a bad flag, instead of 1.
class UsageError : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void usage_fail(fmt::format_string<Args...> format, Args&&... args) {
  throw UsageError(fmt::format(format, std::forward<Args>(args)...));
}

[[noreturn]] void assertion_failed(const char* expr, const char* file, int line);

}  // namespace rose

#define ROSE_ASSERT(cond) \
  ((cond) ? static_cast<void>(0) : ::rose::assertion_failed(#cond, __FILE__, __LINE__))
