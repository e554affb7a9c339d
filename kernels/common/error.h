#pragma once
// The error type and the assertion shared by every layer (kernels, engine, cli). rose::Error is for
// what a user can cause (a bad file, line, field, flag or model, or a CUDA failure such as running
// out of memory): the CLI catches it, prints its message and exits nonzero. Broken internal
// invariants are ROSE_ASSERT failures instead: they are bugs, not user errors.
#include <stdexcept>

namespace rose {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void assertion_failed(const char* expr, const char* file, int line);

}  // namespace rose

#define ROSE_ASSERT(cond) \
  ((cond) ? static_cast<void>(0) : ::rose::assertion_failed(#cond, __FILE__, __LINE__))
