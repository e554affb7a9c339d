#include "engine/backend/backend.h"

#include <algorithm>

#include "engine/common/error.h"

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

void validate_step_plan(const StepPlan& plan, const PlanLimits& limits, int previous_rows) {
  const int num_tokens = plan.num_tokens();
  const int num_seqs = plan.num_seqs();
  if (num_tokens > limits.max_num_tokens) {
    fail("step plan: {} tokens exceed max_num_batched_tokens {}", num_tokens,
         limits.max_num_tokens);
  }
  if (num_seqs > limits.max_num_seqs) {
    fail("step plan: {} sequences exceed max_num_seqs {}", num_seqs, limits.max_num_seqs);
  }
  if (plan.positions.size() != size_t(num_tokens) ||
      plan.slot_mapping.size() != size_t(num_tokens)) {
    fail("step plan: positions ({}) and slot_mapping ({}) must have one entry per token ({})",
         plan.positions.size(), plan.slot_mapping.size(), num_tokens);
  }
  if (plan.query_start.size() != size_t(num_seqs) + 1 ||
      plan.do_sample.size() != size_t(num_seqs) || plan.sampling.size() != size_t(num_seqs) ||
      plan.sample_index.size() != size_t(num_seqs)) {
    fail(
        "step plan: query_start ({}), do_sample ({}), sampling ({}) and sample_index ({}) do not "
        "match {} sequences",
        plan.query_start.size(), plan.do_sample.size(), plan.sampling.size(),
        plan.sample_index.size(), num_seqs);
  }
  if (plan.block_table_stride < 0 ||
      plan.block_tables.size() != size_t(num_seqs) * size_t(plan.block_table_stride)) {
    fail("step plan: block_tables has {} entries, expected {} sequences x stride {}",
         plan.block_tables.size(), num_seqs, plan.block_table_stride);
  }
  if (plan.query_start[0] != 0 || plan.query_start[num_seqs] != num_tokens) {
    fail("step plan: query_start must run from 0 to num_tokens {}", num_tokens);
  }
  const int64_t num_slots = int64_t(limits.num_kv_blocks) * limits.block_size;
  for (int s = 0; s < num_seqs; ++s) {
    const int begin = plan.query_start[s], end = plan.query_start[s + 1];
    const int n = end - begin;
    const int context = plan.context_lens[s];
    if (n < 1 || end > num_tokens) {
      fail("step plan: sequence {} has query range [{}, {})", s, begin, end);
    }
    if (context < n || context > limits.max_model_len) {
      fail("step plan: sequence {} has context_len {} for {} query tokens (max_model_len {})", s,
           context, n, limits.max_model_len);
    }
    const int blocks_needed = (context + limits.block_size - 1) / limits.block_size;
    if (blocks_needed > plan.block_table_stride) {
      fail("step plan: sequence {} needs {} blocks, block_table_stride is {}", s, blocks_needed,
           plan.block_table_stride);
    }
    const int32_t* table = plan.block_tables.data() + size_t(s) * plan.block_table_stride;
    for (int b = 0; b < blocks_needed; ++b) {
      if (table[b] < 0 || table[b] >= limits.num_kv_blocks) {
        fail("step plan: sequence {} block table entry {} is {} (pool has {} blocks)", s, b,
             table[b], limits.num_kv_blocks);
      }
    }
    for (int i = begin; i < end; ++i) {
      if (plan.positions[i] != context - n + (i - begin)) {
        fail("step plan: token {} of sequence {} has position {}, expected {}", i, s,
             plan.positions[i], context - n + (i - begin));
      }
    }
    const SamplingParams& sp = plan.sampling[s];
    if (!(sp.temperature >= 0.0f) || sp.top_k < 0 || !(sp.top_p > 0.0f && sp.top_p <= 1.0f)) {
      fail("step plan: sequence {} has invalid sampling (temperature {}, top_k {}, top_p {})", s,
           sp.temperature, sp.top_k, sp.top_p);
    }
  }
  for (int i = 0; i < num_tokens; ++i) {
    const int32_t id = plan.token_ids[i];
    if (is_previous_step_token(id) && previous_step_row(id) < previous_rows) {
      // resolved by the backend to what row previous_step_row(id) of the step before sampled
    } else if (id < 0 || id >= limits.vocab_size) {
      fail("step plan: token {} has id {} outside the vocabulary of {}{}", i, id, limits.vocab_size,
           is_previous_step_token(id)
               ? fmt::format(" (it names row {} of a previous step of {} rows)",
                             previous_step_row(id), previous_rows)
               : "");
    }
    if (plan.slot_mapping[i] < -1 || plan.slot_mapping[i] >= num_slots) {
      fail("step plan: token {} has slot {} outside the pool of {} slots", i, plan.slot_mapping[i],
           num_slots);
    }
  }
}

void Backend::submit(const StepPlan& plan) {
  if (queued_count_ == 2) fail("step plan: two submitted steps are still to be collected");
  const StepPlan* run = &plan;
  if (std::any_of(plan.token_ids.begin(), plan.token_ids.end(), is_previous_step_token)) {
    resolved_ = plan;
    for (int32_t& id : resolved_.token_ids) {
      if (!is_previous_step_token(id)) continue;
      const int row = previous_step_row(id);
      if (row >= int(last_sampled_.size()) || last_sampled_[size_t(row)] == -1) {
        fail("step plan: a token names row {} of the previous step, which sampled {} rows", row,
             last_sampled_.size());
      }
      id = std::max(0, last_sampled_[size_t(row)]);  // kSampledNonFinite: 0 (sampling_rule.h)
    }
    run = &resolved_;
  }
  StepOutput& out = queued_[(queued_head_ + queued_count_) % 2];
  execute(*run, out);
  ++queued_count_;
  last_sampled_.assign(out.sampled.begin(), out.sampled.end());
}

void Backend::collect(StepOutput& out) {
  if (queued_count_ == 0) fail("collect: no step was submitted");
  std::swap(out, queued_[queued_head_]);
  queued_head_ = (queued_head_ + 1) % 2;
  --queued_count_;
}

}  // namespace rose
