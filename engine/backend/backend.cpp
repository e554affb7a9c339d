#include "engine/backend/backend.h"

namespace rose {

bool StepPlan::is_pure_decode() const {
  const int n = num_seqs();
  if (n == 0 || num_tokens() != n) return false;
  for (int s = 0; s < n; ++s) {
    if (!do_sample[s]) return false;
  }
  return true;
}

void StepPlan::clear() {
  token_ids.clear();
  positions.clear();
  slot_mapping.clear();
  query_start.assign(1, 0);
  context_lens.clear();
  block_tables.clear();
  do_sample.clear();
  sampling.clear();
  sample_index.clear();
  return_logits = false;
}

}  // namespace rose
