#include "kernels/common/error.h"

#include <cstdio>
#include <cstdlib>

namespace rose {

void assertion_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "roseinfer: internal error: assertion `%s` failed at %s:%d\n", expr, file,
               line);
  std::abort();
}

}  // namespace rose
