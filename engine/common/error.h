#pragma once
// Raising user errors: fail() throws rose::Error (kernels/common/error.h) with a formatted message
// that names the file, line and field; usage_fail() a UsageError, which the CLI exits 2 for.
#include <fmt/format.h>

#include <string>

#include "kernels/common/error.h"

namespace rose {

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

}  // namespace rose
