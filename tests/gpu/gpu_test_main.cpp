// GPU tests run only where a CUDA device can be used; elsewhere they report themselves skipped
// (exit 77, which ctest shows as "Skipped").
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "engine/backend/backend.h"

int main(int argc, char** argv) {
  std::string why;
  if (!rose::cuda_available(&why)) {
    std::printf("SKIPPED: no usable GPU (%s)\n", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
