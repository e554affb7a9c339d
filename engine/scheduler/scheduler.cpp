#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/common/error.h"

namespace rose {

Scheduler::Scheduler(const EngineConfig& config, BlockPool& pool, PrefixIndex* index,
                     std::vector<int32_t> eos_token_ids)
    : config_(config),
      pool_(pool),
      index_(index),
      eos_token_ids_(std::move(eos_token_ids)),
      block_size_(pool.block_size()) {
  if (config_.max_num_seqs < 1)
    fail("max_num_seqs must be at least 1, got {}", config_.max_num_seqs);
  if (config_.max_num_batched_tokens < 1) {
    fail("max_num_batched_tokens must be at least 1, got {}", config_.max_num_batched_tokens);
  }
  if (config_.max_concurrency < 0) {
    fail("max_concurrency must be 0 (no cap) or positive, got {}", config_.max_concurrency);
  }
  scheduled_.reserve(size_t(config_.max_num_seqs));
  ahead_of_.reserve(size_t(config_.max_num_seqs));
}

void Scheduler::start(int max_model_len) {
  max_model_len_ = max_model_len;
  seqs_.clear();
  free_slots_.clear();
  arrival_order_.clear();
  next_arrival_pos_ = 0;
  waiting_.clear();
  running_.clear();
  running_.reserve(size_t(config_.max_num_seqs));
  running_snapshot_.reserve(size_t(config_.max_num_seqs));
  in_flight_ = 0;
  num_finished_ = 0;
  num_added_ = 0;
  step_ = 0;
  preemptions_ = 0;
  scheduled_.clear();
  ahead_of_.clear();
  has_ahead_of_ = false;
}

void Scheduler::start(const std::vector<EngineRequest>& requests, int max_model_len) {
  start(max_model_len);
  for (size_t i = 0; i < requests.size(); ++i) validate(requests[i], int(i));
  arrival_order_.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) add(requests[i], int(i));
}

void Scheduler::validate(const EngineRequest& r, int i) const {
  if (r.prompt.empty()) fail("request {}: the prompt has no tokens", i);
  if (r.max_tokens < 1) fail("request {}: max_tokens must be at least 1, got {}", i, r.max_tokens);
  if (!std::isfinite(r.arrival_s) || r.arrival_s < 0) {
    fail("request {}: arrival time {} must be a finite number of seconds >= 0", i, r.arrival_s);
  }
  if (!r.stop.empty() && !stop_tokenizer_) {
    fail("request {}: stop strings need the model's tokenizer, and this engine has none", i);
  }
  for (const std::string& stop : r.stop) {
    if (stop.empty()) fail("request {}: a stop string is empty", i);
  }
  const int64_t total = int64_t(r.prompt.size()) + r.max_tokens;
  if (max_model_len_ > 0 && total > max_model_len_) {
    fail("request {}: prompt ({} tokens) + max_tokens ({}) exceeds the model's length limit {}", i,
         r.prompt.size(), r.max_tokens, max_model_len_);
  }
  // The last generated token never enters the cache.
  const int64_t blocks_needed = (total - 1 + block_size_ - 1) / block_size_;
  if (blocks_needed > pool_.num_blocks()) {
    fail(
        "request {}: prompt ({} tokens) + max_tokens ({}) needs {} KV blocks of {} tokens but "
        "the whole pool has {}; give the KV cache more memory or shorten the request",
        i, r.prompt.size(), r.max_tokens, blocks_needed, block_size_, pool_.num_blocks());
  }
}

void Scheduler::add(const EngineRequest& r, int index) {
  validate(r, index);
  const bool online = config_.mode == SchedulerMode::kOnline;
  Sequence& s = new_sequence();
  s.index = index;
  ++num_added_;
  s.max_tokens = r.max_tokens;
  s.sampling = r.sampling;
  s.ignore_eos = r.ignore_eos;
  if (!r.stop.empty())
    s.stop_matcher = std::make_shared<StopStringMatcher>(*stop_tokenizer_, r.stop);
  s.arrival = online ? r.arrival_s : 0.0;
  s.prompt_len = int(r.prompt.size());
  const size_t capacity = r.prompt.size() + size_t(r.max_tokens);
  s.tokens.reserve(capacity);
  s.tokens.assign(r.prompt.begin(), r.prompt.end());
  s.blocks.reserve(capacity / size_t(block_size_) + 1);
  if (index_) s.block_keys.reserve(capacity / size_t(block_size_));
  s.result.timeline.arrival = s.arrival;
  s.result.timeline.token_times.reserve(size_t(r.max_tokens));
  // Not yet visible ones stay sorted by arrival; equal arrivals keep add order.
  const auto later = std::upper_bound(
      arrival_order_.begin() + std::ptrdiff_t(next_arrival_pos_), arrival_order_.end(), s.arrival,
      [&](double arrival, int slot) { return arrival < at(slot).arrival; });
  arrival_order_.insert(later, s.slot);
}

Sequence& Scheduler::new_sequence() {
  if (free_slots_.empty()) {
    Sequence& s = seqs_.emplace_back();
    s.slot = int(seqs_.size()) - 1;
    return s;
  }
  const int slot = free_slots_.back();
  free_slots_.pop_back();
  Sequence& s = at(slot);
  s = Sequence{};
  s.slot = slot;
  return s;
}

void Scheduler::forget_finished() {
  for (int slot : just_finished_) {
    Sequence& s = at(slot);
    s = Sequence{};  // gives the token, block and timeline storage back
    s.slot = slot;
    s.status = SeqStatus::kFinished;
    free_slots_.push_back(slot);
  }
  // The visible prefix of arrival_order_ is never read again; drop it once it dominates.
  if (next_arrival_pos_ >= 1024 && next_arrival_pos_ * 2 >= arrival_order_.size()) {
    arrival_order_.erase(arrival_order_.begin(),
                         arrival_order_.begin() + std::ptrdiff_t(next_arrival_pos_));
    next_arrival_pos_ = 0;
  }
}

void Scheduler::release_all() {
  for (int index : running_) {
    Sequence& seq = at(index);
    pool_.release_all(seq.blocks);
    seq.blocks.clear();
    seq.num_computed = 0;
    seq.num_registered = 0;
    seq.status = SeqStatus::kWaiting;
  }
  running_.clear();
  has_ahead_of_ = false;
}

double Scheduler::next_arrival() const {
  if (next_arrival_pos_ >= arrival_order_.size()) return std::numeric_limits<double>::infinity();
  return at(arrival_order_[next_arrival_pos_]).arrival;
}

void Scheduler::admit_arrivals(double now) {
  while (next_arrival_pos_ < arrival_order_.size() &&
         at(arrival_order_[next_arrival_pos_]).arrival <= now) {
    Sequence& s = at(arrival_order_[next_arrival_pos_++]);
    s.status = SeqStatus::kWaiting;
    waiting_.push_back(s.slot);
  }
}

bool Scheduler::grow_blocks(Sequence& seq, int num_tokens_after) {
  const int need = blocks_for(num_tokens_after) - int(seq.blocks.size());
  if (need <= 0) return true;
  if (need > pool_.num_free()) return false;
  for (int i = 0; i < need; ++i) seq.blocks.push_back(pool_.allocate());
  return true;
}

void Scheduler::register_full_blocks(Sequence& seq) {
  if (!index_) return;
  int full = seq.num_computed / block_size_;
  // A block holding a previous-step token is keyed once update() knows its id.
  if (seq.has_pending_token()) full = std::min(full, (seq.num_tokens() - 1) / block_size_);
  if (full <= seq.num_registered) return;
  const std::span<const int32_t> tokens(seq.tokens);
  index_->extend_keys(tokens, full, seq.block_keys);
  for (int b = seq.num_registered; b < full; ++b) {
    index_->insert(seq.block_keys[size_t(b)], seq.blocks[size_t(b)],
                   tokens.subspan(size_t(b) * block_size_, size_t(block_size_)));
  }
  seq.num_registered = full;
}

void Scheduler::commit(Sequence& seq, int num_new) {
  ROSE_ASSERT(num_new > 0 && num_new <= token_budget_);
  seq.num_computed += num_new;
  ROSE_ASSERT(seq.num_computed <= seq.num_tokens());
  ROSE_ASSERT(int64_t(seq.blocks.size()) * block_size_ >= seq.num_computed);
  seq.scheduled_step = step_;
  if (seq.result.timeline.first_scheduled < 0) seq.result.timeline.first_scheduled = now_;
  token_budget_ -= num_new;
  scheduled_.push_back({&seq, num_new, seq.num_computed == seq.num_tokens()});
  // Registered now, not after the step: a later sequence of this same step that hits these blocks
  // reads KV that this step's forward writes before it runs attention (backend.h).
  register_full_blocks(seq);
}

void Scheduler::preempt(Sequence& seq) {
  ROSE_ASSERT(seq.status == SeqStatus::kRunning && seq.scheduled_step != step_);
  pool_.release_all(seq.blocks);
  seq.blocks.clear();
  seq.num_computed = 0;  // generated tokens stay in `tokens` and are recomputed with the prompt
  seq.num_registered = 0;
  seq.status = SeqStatus::kWaiting;
  ++seq.result.preemptions;
  ++preemptions_;
  preempted_this_step_ = true;
  running_.erase(std::find(running_.begin(), running_.end(), seq.slot));
  waiting_.push_front(seq.slot);
}

Sequence* Scheduler::pick_victim(const Sequence& seq) {
  // The most recently admitted running sequence that this step has not scheduled; `seq` itself
  // counts, and if it is the one, the caller decides what to do.
  for (size_t i = running_.size(); i-- > 0;) {
    Sequence& candidate = at(running_[i]);
    if (&candidate == &seq || candidate.scheduled_step != step_) return &candidate;
  }
  return nullptr;
}

bool Scheduler::schedule_running(Sequence& seq, int max_new) {
  int num_new = std::min({seq.num_tokens() - seq.num_computed, token_budget_, max_new});
  if (num_new <= 0) return true;
  while (!grow_blocks(seq, seq.num_computed + num_new)) {
    Sequence* victim = pick_victim(seq);
    ROSE_ASSERT(victim != nullptr);
    if (victim != &seq) {
      preempt(*victim);
      continue;
    }
    // Nobody later to take blocks from: a prefill chunk shrinks to the blocks that are left.
    const int fits = (int(seq.blocks.size()) + pool_.num_free()) * block_size_ - seq.num_computed;
    if (fits > 0 && fits < num_new) {
      num_new = fits;
      continue;
    }
    preempt(seq);
    return false;
  }
  commit(seq, num_new);
  return true;
}

bool Scheduler::try_admit(Sequence& seq, int reserve_blocks) {
  hits_.clear();
  const std::span<const int32_t> tokens(seq.tokens);
  const int hit_blocks = index_ ? index_->match_prefix(tokens, seq.block_keys, hits_) : 0;
  const int num_hit = hit_blocks * block_size_;
  const int num_new = std::min(seq.num_tokens() - num_hit, token_budget_);
  ROSE_ASSERT(num_new > 0);
  int hits_on_free = 0;
  for (int32_t b : hits_) hits_on_free += pool_.is_free(b) ? 1 : 0;
  const int need = blocks_for(num_hit + num_new) - hit_blocks;
  if (pool_.num_free() - hits_on_free - need < reserve_blocks) return false;

  ROSE_ASSERT(seq.blocks.empty());
  for (int32_t b : hits_) {
    pool_.acquire(b);
    seq.blocks.push_back(b);
  }
  const bool grown = grow_blocks(seq, num_hit + num_new);
  ROSE_ASSERT(grown);
  seq.num_computed = num_hit;
  seq.num_registered = hit_blocks;
  if (index_) index_->record_lookup(seq.num_tokens(), num_hit);
  seq.result.cached_prompt_tokens = std::min(num_hit, seq.prompt_len);
  seq.status = SeqStatus::kRunning;
  if (!seq.admitted_once) {
    seq.result.first_cached_prompt_tokens = seq.result.cached_prompt_tokens;
    seq.admitted_once = true;
    ++in_flight_;
  }
  running_.push_back(seq.slot);
  commit(seq, num_new);
  return true;
}

void Scheduler::admit_waiting(int reserve_blocks, int seat_limit) {
  const bool capped = config_.mode == SchedulerMode::kOnline && config_.max_concurrency > 0;
  while (!waiting_.empty() && token_budget_ > 0 && int(running_.size()) < seat_limit) {
    Sequence& seq = at(waiting_.front());
    if (capped && !seq.admitted_once && in_flight_ >= config_.max_concurrency) break;
    // Preempted while its last token was a previous-step token: its prefix is hashed (and it is
    // recomputed) once update() has the id.
    if (seq.has_pending_token()) break;
    // First come, first served: when the front does not fit, nothing behind it jumps the queue.
    if (!try_admit(seq, reserve_blocks)) break;
    waiting_.pop_front();
  }
}

template <typename Filter>
void Scheduler::schedule_running_pass(Filter filter) {
  // A snapshot, because preemption removes sequences from running_ while we walk it.
  running_snapshot_.assign(running_.begin(), running_.end());
  for (int index : running_snapshot_) {
    if (token_budget_ <= 0) break;
    Sequence& seq = at(index);
    if (seq.status != SeqStatus::kRunning || seq.scheduled_step == step_ || !filter(seq)) continue;
    schedule_running(seq, token_budget_);
  }
}

void Scheduler::schedule(double now, StepPlan& plan) {
  ++step_;
  now_ = now;
  if (config_.mode == SchedulerMode::kOnline) {
    admit_arrivals(now);
  } else {
    admit_arrivals(std::numeric_limits<double>::infinity());
  }
  scheduled_.clear();
  token_budget_ = config_.max_num_batched_tokens;
  preempted_this_step_ = false;
  const auto is_decode = [](const Sequence& s) { return s.num_tokens() - s.num_computed == 1; };
  const auto is_prefill = [](const Sequence& s) { return s.num_tokens() - s.num_computed > 1; };
  const auto any = [](const Sequence&) { return true; };

  switch (config_.mode) {
    case SchedulerMode::kNaive:
      // One request in flight, file order: its whole prompt (chunked only by the token budget),
      // then one token per step.
      schedule_running_pass(any);
      admit_waiting(0, 1);
      break;
    case SchedulerMode::kOffline: {
      // Prefill first: unfinished prompt chunks, then new prompts fill the budget, then the running
      // set decodes with what is left. Admission keeps back the blocks those decodes need, so new
      // prompts do not push running requests out.
      schedule_running_pass(is_prefill);
      int decode_blocks = 0;
      for (int index : running_) {
        const Sequence& s = at(index);
        if (is_decode(s) && blocks_for(s.num_computed + 1) > int(s.blocks.size())) ++decode_blocks;
      }
      if (!preempted_this_step_) admit_waiting(decode_blocks, config_.max_num_seqs);
      schedule_running_pass(is_decode);
      break;
    }
    case SchedulerMode::kOnline:
      // Decode first (protects inter-token latency), then running prompt chunks, then new arrivals
      // fill the rest of the token budget.
      schedule_running_pass(is_decode);
      schedule_running_pass(is_prefill);
      if (!preempted_this_step_) admit_waiting(0, config_.max_num_seqs);
      break;
  }
  build_plan(plan);
}

void Scheduler::build_plan(StepPlan& plan) {
  plan.clear();
  last_prefill_tokens_ = 0;
  last_decode_tokens_ = 0;
  size_t stride = 0;
  for (const Scheduled& s : scheduled_) stride = std::max(stride, s.seq->blocks.size());
  plan.block_table_stride = int(stride);
  plan.block_tables.assign(scheduled_.size() * stride, -1);
  for (size_t k = 0; k < scheduled_.size(); ++k) {
    const Sequence& seq = *scheduled_[k].seq;
    const int first = seq.num_computed - scheduled_[k].num_new;
    for (int pos = first; pos < seq.num_computed; ++pos) {
      plan.token_ids.push_back(seq.tokens[size_t(pos)]);
      plan.positions.push_back(pos);
      plan.slot_mapping.push_back(seq.blocks[size_t(pos / block_size_)] * block_size_ +
                                  pos % block_size_);
    }
    plan.query_start.push_back(int32_t(plan.token_ids.size()));
    plan.context_lens.push_back(seq.num_computed);
    std::copy(seq.blocks.begin(), seq.blocks.end(), plan.block_tables.begin() + k * stride);
    plan.do_sample.push_back(seq.num_computed == seq.num_tokens() ? 1 : 0);
    plan.sampling.push_back(seq.sampling);
    plan.sample_index.push_back(uint64_t(seq.num_generated()));
    if (scheduled_[k].num_new == 1 && first >= seq.prompt_len) {
      ++last_decode_tokens_;
    } else {
      last_prefill_tokens_ += scheduled_[k].num_new;
    }
  }
}

bool Scheduler::continue_ahead() {
  if (has_ahead_of_) return false;
  bool any = false;
  for (size_t k = 0; k < scheduled_.size(); ++k) {
    const Scheduled& row = scheduled_[k];
    if (!row.seq || !row.samples) continue;
    Sequence& seq = *row.seq;
    // One that reaches max_tokens with this token ends here for certain: nothing to plan.
    if (seq.num_generated() + 1 >= seq.max_tokens) continue;
    seq.tokens.push_back(previous_step_token(int(k)));
    any = true;
  }
  if (!any) return false;
  ahead_of_.swap(scheduled_);
  scheduled_.clear();
  has_ahead_of_ = true;
  ahead_of_step_ = step_;
  return true;
}

void Scheduler::finish(Sequence& seq, double now, const RunCallbacks& callbacks) {
  seq.result.timeline.finish = now;
  seq.result.output_ids.assign(seq.tokens.begin() + seq.prompt_len, seq.tokens.end());
  pool_.release_all(seq.blocks);
  seq.blocks.clear();
  // Preempted by the step planned ahead of this update: it waits for readmission no more.
  if (seq.status == SeqStatus::kWaiting) std::erase(waiting_, seq.slot);
  seq.status = SeqStatus::kFinished;
  ++num_finished_;
  --in_flight_;
  just_finished_.push_back(seq.slot);
  if (callbacks.on_finish) callbacks.on_finish(seq.index, seq.result);
}

void Scheduler::update(const StepOutput& out, double now, const RunCallbacks& callbacks) {
  just_finished_.clear();
  const bool ahead = has_ahead_of_;
  std::vector<Scheduled>& rows = ahead ? ahead_of_ : scheduled_;
  const int64_t step = ahead ? ahead_of_step_ : step_;
  has_ahead_of_ = false;
  for (size_t k = 0; k < rows.size(); ++k) {
    if (!rows[k].seq || !rows[k].samples) continue;  // dropped, or a prompt chunk short of the end
    Sequence& seq = *rows[k].seq;
    ROSE_ASSERT(k < out.sampled.size() &&
                (out.sampled[k] >= 0 || out.sampled[k] == kSampledNonFinite));
    const int32_t token = out.sampled[k];
    const bool pending = seq.has_pending_token();
    Timeline& timeline = seq.result.timeline;
    if (token == kSampledNonFinite) {
      // The other requests of the step are not affected: only this one ends.
      if (pending) seq.tokens.pop_back();
      seq.result.finish_reason = FinishReason::kError;
      seq.result.error = fmt::format(
          "non-finite logits (NaN or infinity) at engine step {}, sampling output token {}", step,
          seq.num_generated());
    } else {
      if (pending) {
        seq.tokens.back() = token;
      } else {
        seq.tokens.push_back(token);
      }
      timeline.token_times.push_back(now);
      if (callbacks.on_token) callbacks.on_token(seq.index, token);
      const bool eos = !seq.ignore_eos && std::find(eos_token_ids_.begin(), eos_token_ids_.end(),
                                                    token) != eos_token_ids_.end();
      // A stop string is matched even with ignore_eos: the caller asked for it by name.
      const bool stop = eos || (seq.stop_matcher && seq.stop_matcher->push(token));
      if (!stop && seq.num_generated() < seq.max_tokens) {
        // Its blocks up to the token just known can now be keyed (register_full_blocks).
        if (pending && seq.status == SeqStatus::kRunning) register_full_blocks(seq);
        continue;
      }
      seq.result.finish_reason = stop ? FinishReason::kStop : FinishReason::kLength;
    }
    finish(seq, now, callbacks);
  }
  if (just_finished_.empty()) return;
  if (ahead) {
    // The step planned ahead still runs these requests' rows: it must not apply them.
    for (Scheduled& row : scheduled_) {
      if (row.seq && row.seq->status == SeqStatus::kFinished) row.seq = nullptr;
    }
  }
  std::erase_if(running_, [&](int index) { return at(index).status == SeqStatus::kFinished; });
  if (!config_.keep_results) forget_finished();
}

}  // namespace rose
