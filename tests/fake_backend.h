#pragma once
// A fake Backend for scheduler and engine tests. It keeps a "KV cache" per slot, written through
// slot_mapping, and emulates two layers the way a real model depends on its context: layer 1 stores
// f(token, position); layer 2 stores a running hash of layer-1 values over positions 0..p read
// through the block table; the sampled token is a hash of the layer-2 values over 0..p. So a wrong
// block table, slot, shared block or a block reused while still referenced changes the output,
// and reference_generate() computes the right output without any paging.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/scheduler/engine.h"

namespace rose::testing {

inline uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}
constexpr uint64_t kLayer2Seed = 0x1234;
constexpr uint64_t kOutputSeed = 0x5678;

inline uint64_t layer1_value(int32_t token, int32_t position) {
  return mix(uint64_t(uint32_t(token)), uint64_t(position) + 17);
}

// The token the fake model produces after `seq` (prompt plus tokens generated so far).
inline int32_t reference_next(const std::vector<int32_t>& seq, int vocab) {
  uint64_t h1 = kLayer2Seed, h2 = kOutputSeed;
  for (size_t p = 0; p < seq.size(); ++p) {
    h1 = mix(h1, layer1_value(seq[p], int32_t(p)));
    h2 = mix(h2, h1);
  }
  return int32_t(h2 % uint64_t(vocab));
}

inline std::vector<int32_t> reference_generate(const EngineRequest& request, int vocab,
                                               const std::vector<int>& eos) {
  std::vector<int32_t> seq = request.prompt;
  std::vector<int32_t> out;
  while (int(out.size()) < request.max_tokens) {
    const int32_t token = reference_next(seq, vocab);
    out.push_back(token);
    seq.push_back(token);
    bool stop = false;
    for (int e : eos) stop |= (e == token);
    if (stop && !request.ignore_eos) break;
  }
  return out;
}

// Test clock: time moves only when the fake backend executes a step or the engine sleeps.
class FakeClock : public Clock {
 public:
  double now() override { return t; }
  void sleep_until(double until) override {
    ++sleeps;
    if (until > t) t = until;
  }
  double t = 100.0;  // not zero, so code that forgets to subtract the start shows
  int sleeps = 0;
};

struct StepLog {
  int num_seqs = 0;
  int num_tokens = 0;
  bool pure_decode = false;
  std::vector<int> query_lens;    // (num_seqs,)
  std::vector<int> context_lens;  // (num_seqs,)
};

class FakeBackend : public Backend {
 public:
  FakeBackend(int num_blocks, int block_size, int vocab, std::vector<int> eos = {},
              FakeClock* clock = nullptr, double step_seconds = 0.01)
      : num_blocks_(num_blocks),
        block_size_(block_size),
        clock_(clock),
        step_seconds_(step_seconds),
        kv1_(size_t(num_blocks) * size_t(block_size)),
        kv2_(size_t(num_blocks) * size_t(block_size)),
        written1_(kv1_.size(), 0),
        written2_(kv2_.size(), 0) {
    config_.name = "fake";
    config_.vocab_size = vocab;
    config_.max_position_embeddings = 1 << 20;
    config_.eos_token_ids = std::move(eos);
    plan_limits = PlanLimits{1 << 30,    1 << 30,    config_.max_position_embeddings,
                             num_blocks, block_size, vocab};
  }

  PlanLimits plan_limits;  // tests may shrink the budgets to see the engine refuse a config

  void execute(const StepPlan& plan, StepOutput& out) override {
    const int n = plan.num_seqs();
    check(n > 0 && plan.num_tokens() > 0, "empty plan");
    check(int(plan.query_start.size()) == n + 1 && plan.query_start[0] == 0 &&
              plan.query_start[size_t(n)] == plan.num_tokens(),
          "query_start");
    check(int(plan.block_tables.size()) == n * plan.block_table_stride, "block table size");
    check(plan.positions.size() == plan.token_ids.size() &&
              plan.slot_mapping.size() == plan.token_ids.size(),
          "flat array sizes");
    StepLog log;
    log.num_seqs = n;
    log.num_tokens = plan.num_tokens();
    log.pure_decode = plan.is_pure_decode();
    // Layer 1: every token's value goes to its slot, checked against the block table.
    for (int s = 0; s < n; ++s) {
      const int q0 = plan.query_start[size_t(s)], q1 = plan.query_start[size_t(s) + 1];
      const int ctx = plan.context_lens[size_t(s)];
      check(q1 > q0 && ctx >= q1 - q0, "query length");
      log.query_lens.push_back(q1 - q0);
      log.context_lens.push_back(ctx);
      for (int t = q0; t < q1; ++t) {
        const int pos = ctx - (q1 - t);
        check(plan.positions[size_t(t)] == pos, "position");
        const int64_t slot = slot_of(plan, s, pos);
        check(plan.slot_mapping[size_t(t)] == slot, "slot mapping");
        kv1_[size_t(slot)] = layer1_value(plan.token_ids[size_t(t)], pos);
        written1_[size_t(slot)] = 1;
      }
    }
    // Layer 2: the running hash of layer-1 values over the context, read through the pages.
    for (int s = 0; s < n; ++s) {
      const int q0 = plan.query_start[size_t(s)], q1 = plan.query_start[size_t(s) + 1];
      const int ctx = plan.context_lens[size_t(s)];
      const int first = ctx - (q1 - q0);
      uint64_t h1 = kLayer2Seed;
      for (int pos = 0; pos < ctx; ++pos) {
        const int64_t slot = slot_of(plan, s, pos);
        check(written1_[size_t(slot)] != 0, "layer 1 reads a slot never written");
        h1 = mix(h1, kv1_[size_t(slot)]);
        if (pos >= first) {
          kv2_[size_t(slot)] = h1;
          written2_[size_t(slot)] = 1;
        }
      }
    }
    out.sampled.assign(size_t(n), -1);
    for (int s = 0; s < n; ++s) {
      if (!plan.do_sample[size_t(s)]) continue;
      const int ctx = plan.context_lens[size_t(s)];
      uint64_t h2 = kOutputSeed;
      for (int pos = 0; pos < ctx; ++pos) {
        const int64_t slot = slot_of(plan, s, pos);
        check(written2_[size_t(slot)] != 0, "layer 2 reads a slot never written");
        h2 = mix(h2, kv2_[size_t(slot)]);
      }
      out.sampled[size_t(s)] = int32_t(h2 % uint64_t(config_.vocab_size));
    }
    steps.push_back(std::move(log));
    if (clock_) clock_->t += step_seconds_;
  }

  const PlanLimits& limits() const override { return plan_limits; }
  std::string device_name() const override { return "fake"; }
  const ModelConfig& config() const override { return config_; }
  int64_t weight_bytes() const override { return 1000; }
  std::string weight_types() const override { return "fake"; }
  int64_t kv_bytes_per_token() const override { return 10; }

  std::vector<StepLog> steps;

 private:
  static void check(bool ok, const char* what) {
    if (!ok) throw std::logic_error(std::string("fake backend: bad plan: ") + what);
  }
  int64_t slot_of(const StepPlan& plan, int s, int pos) const {
    check(pos / block_size_ < plan.block_table_stride, "position beyond the block table");
    const int32_t block =
        plan.block_tables[size_t(s) * size_t(plan.block_table_stride) + size_t(pos / block_size_)];
    check(block >= 0 && block < num_blocks_, "block id");
    return int64_t(block) * block_size_ + pos % block_size_;
  }

  int num_blocks_;
  int block_size_;
  FakeClock* clock_;
  double step_seconds_;
  ModelConfig config_;
  std::vector<uint64_t> kv1_, kv2_;           // (num_blocks * block_size,) one value per slot
  std::vector<uint8_t> written1_, written2_;  // (num_blocks * block_size,)
};

}  // namespace rose::testing
