#pragma once
// The scheduler (reference/scheduling.md), vLLM v1 style: every request has num_computed tokens
// and each step schedules tokens so that it catches up with its num_tokens (prompt plus generated
// tokens). Chunked prefill, prefix hits, decode and recompute after preemption are all that rule.
// The three modes differ only in arrival and in the order they hand out the step's budgets.
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/prefix_index.h"
#include "engine/scheduler/engine_config.h"
#include "engine/scheduler/request.h"
#include "engine/scheduler/stop_strings.h"

namespace rose {

enum class SeqStatus { kPending, kWaiting, kRunning, kFinished };

struct Sequence {
  int index = 0;  // the caller's request index (reported to the callbacks)
  int slot = 0;   // position in the scheduler's sequence list (add() order)
  int max_tokens = 0;
  SamplingParams sampling;
  bool ignore_eos = false;
  double arrival = 0.0;  // seconds since the run's start
  int prompt_len = 0;
  std::vector<int32_t> tokens;       // (prompt_len + generated,) reserved for prompt + max_tokens
  int num_computed = 0;              // tokens whose KV is in the cache (or written this step)
  std::vector<int32_t> blocks;       // block table, append-only while running
  std::vector<BlockKey> block_keys;  // keys of the first full blocks, computed once each
  int num_registered = 0;            // leading blocks already offered to the prefix index
  SeqStatus status = SeqStatus::kPending;
  bool admitted_once = false;   // counts toward max_concurrency until it finishes
  int64_t scheduled_step = -1;  // last step that scheduled it (guards same-step preemption)
  RequestResult result;
  std::shared_ptr<StopStringMatcher> stop_matcher;  // set when the request has stop strings

  int num_tokens() const { return int(tokens.size()); }
  // Whether the last token is a previous-step token (sampling_rule.h) that continue_ahead()
  // appended and update() has not yet replaced by the sampled id (prompt ids are never negative).
  // Blocks holding it are neither hashed nor offered to the prefix index until then.
  bool has_pending_token() const {
    return !tokens.empty() && is_previous_step_token(tokens.back());
  }
  int num_generated() const { return num_tokens() - prompt_len; }
};

class Scheduler {
 public:
  struct Scheduled {
    Sequence* seq;  // null once the request finished while this step was running (overlap)
    int num_new;    // tokens this step computes for it
    bool samples;   // this step samples its next token (its chunk reaches the end)
  };
  // `index` may be null (prefix caching off). `eos_token_ids`: ids that finish a request unless
  // it sets ignore_eos.
  Scheduler(const EngineConfig& config, BlockPool& pool, PrefixIndex* index,
            std::vector<int32_t> eos_token_ids);

  // The tokenizer that stop strings are matched with (null: requests with stop strings are
  // refused). Must outlive the scheduler.
  void set_stop_tokenizer(const Tokenizer* tokenizer) { stop_tokenizer_ = tokenizer; }

  // Begins a run with no requests; `max_model_len` (0: no limit) bounds prompt + max_tokens.
  void start(int max_model_len);
  // Validates and queues one request, also after the run has started (between update() and the
  // next schedule(), or while a step scheduled ahead (continue_ahead) waits for its update()).
  // rose::Error for one that can never run: empty prompt, max_tokens < 1, bad arrival, longer than
  // max_model_len or than the whole pool. `index` is what callbacks report.
  void add(const EngineRequest& request, int index);
  // start(max_model_len), then every request validated before any is added (index = position).
  void start(const std::vector<EngineRequest>& requests, int max_model_len);

  // Builds the next step into `plan` (reusing its storage). `now`: seconds since the run's start;
  // in online mode only requests with arrival <= now are visible. An empty plan means nothing can
  // run before the next arrival.
  void schedule(double now, StepPlan& plan);
  // Applies the step's sampled ids (`now`: when they reached the host): appends tokens, stamps
  // times, finishes requests on EOS or max_tokens and frees their blocks tail first. After
  // continue_ahead(), the step it applies is the one scheduled before the last.
  void update(const StepOutput& out, double now, const RunCallbacks& callbacks);
  // Overlapped steps (engine.h), between schedule() and update() of a step: appends to each row
  // that samples and may go on (not at max_tokens) a previous_step_token naming its row, so that
  // the next schedule() plans its decode before the id is known; update() then applies this
  // step and replaces those tokens. A request that finishes at this step (EOS, a stop string)
  // still runs in the next one: its row there is dropped. False, changing nothing, when no row
  // goes on or a step is already ahead.
  bool continue_ahead();

  // Gives back every running sequence's blocks (after a failed step; the run is abandoned).
  void release_all();

  bool done() const { return num_finished_ == num_added_; }
  // Arrival of the first request not yet visible, +inf when all are.
  double next_arrival() const;

  // With config.keep_results off, finished slots are reused: seq() is only meaningful with it on.
  const Sequence& seq(int slot) const { return seqs_[size_t(slot)]; }
  int num_requests() const { return int(seqs_.size()); }
  int num_running() const { return int(running_.size()); }
  int num_waiting() const { return int(waiting_.size()); }
  int64_t num_preemptions() const { return preemptions_; }
  int64_t num_steps() const { return step_; }
  // Of the last scheduled step: prompt (and recomputed) tokens, and decode tokens.
  int last_prefill_tokens() const { return last_prefill_tokens_; }
  int last_decode_tokens() const { return last_decode_tokens_; }
  // The last step's sequences in plan order (row s of the plan is scheduled()[s]).
  const std::vector<Scheduled>& scheduled() const { return scheduled_; }

 private:
  void validate(const EngineRequest& request, int index) const;
  Sequence& new_sequence();  // a reused finished slot (keep_results off) or a new one
  Sequence& at(int slot) { return seqs_[size_t(slot)]; }
  const Sequence& at(int slot) const { return seqs_[size_t(slot)]; }
  void forget_finished();  // keep_results off: frees finished sequences' storage, reuses slots
  void admit_arrivals(double now);
  // Schedules up to `max_new` tokens of a running sequence, preempting later-admitted unscheduled
  // sequences if blocks run out. Returns false when `seq` itself had to be preempted.
  bool schedule_running(Sequence& seq, int max_new);
  // Admits waiting sequences (front first) while seats, budget and blocks allow,
  // keeping `reserve_blocks` free for running sequences' decodes; at most `seat_limit` running.
  void admit_waiting(int reserve_blocks, int seat_limit);
  bool try_admit(Sequence& seq, int reserve_blocks);
  // Offers every running sequence that `filter` accepts and this step has not scheduled yet.
  template <typename Filter>
  void schedule_running_pass(Filter filter);
  bool grow_blocks(Sequence& seq, int num_tokens_after);  // all or nothing
  void commit(Sequence& seq, int num_new);
  void register_full_blocks(Sequence& seq);
  void preempt(Sequence& seq);
  // Ends `seq` (status kFinished, blocks freed, callbacks told) with its result as set.
  void finish(Sequence& seq, double now, const RunCallbacks& callbacks);
  Sequence* pick_victim(const Sequence& except);
  void build_plan(StepPlan& plan);
  int blocks_for(int num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  EngineConfig config_;
  BlockPool& pool_;
  PrefixIndex* index_;
  std::vector<int32_t> eos_token_ids_;
  const Tokenizer* stop_tokenizer_ = nullptr;
  int block_size_;
  int max_model_len_ = 0;

  // A deque: add() during a run must not move the sequences that a step scheduled ahead (and not
  // yet updated) points at.
  std::deque<Sequence> seqs_;
  std::vector<int> free_slots_;     // finished slots to reuse (keep_results off)
  std::vector<int> just_finished_;  // slots finished by the last update()
  std::vector<int> arrival_order_;  // slots by (arrival, add order)
  size_t next_arrival_pos_ = 0;     // first of arrival_order_ not yet visible
  std::deque<int> waiting_;         // slots: visible, not running; preempted ones at the front
  std::vector<int> running_;        // slots, in admission order
  int in_flight_ = 0;               // admitted at least once and not finished
  int num_finished_ = 0;
  int num_added_ = 0;
  int64_t step_ = 0;
  int64_t preemptions_ = 0;

  // Per-step scratch, reused.
  std::vector<Scheduled> scheduled_;
  // After continue_ahead(): the step scheduled before the last, which update() applies first.
  std::vector<Scheduled> ahead_of_;
  bool has_ahead_of_ = false;
  int64_t ahead_of_step_ = 0;
  std::vector<int32_t> hits_;
  std::vector<int> running_snapshot_;
  int token_budget_ = 0;
  double now_ = 0.0;
  bool preempted_this_step_ = false;
  int last_prefill_tokens_ = 0;
  int last_decode_tokens_ = 0;
};

}  // namespace rose
