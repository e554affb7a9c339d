#pragma once
// Device code only (.cu files): a step's token ids as the embedding reads them.
#include <cstdint>

#include "kernels/common/sampling_rule.h"

namespace rose {

// Token i's id: token_ids[i], or for a previous-step token (sampling_rule.h) the id the step
// before sampled for the row it names, from previous_ids (0 where that row sampled no id: the
// engine drops what its row computes).
__device__ __forceinline__ int32_t step_token_id(const int32_t* token_ids,
                                                 const int32_t* previous_ids, int i) {
  const int32_t id = token_ids[i];
  if (!is_previous_step_token(id)) return id;
  const int32_t sampled = previous_ids[previous_step_row(id)];
  return sampled >= 0 ? sampled : 0;
}

}  // namespace rose
