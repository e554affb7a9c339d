#include "engine/scheduler/request.h"

namespace rose {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

}  // namespace rose
