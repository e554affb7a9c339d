// A replica whose engine runs in this process (replica_handle.h).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/cluster/replica_handle.h"
#include "engine/common/error.h"
#include "engine/kv/prefix_index.h"
#include "engine/scheduler/engine.h"

namespace rose {
namespace {

// A replica's own time (cluster.h): the sim backend's virtual clock, or a stopwatch that runs only
// between resume() and pause() and jumps forward when the replica idles until an arrival.
class ReplicaClock final : public Clock {
 public:
  explicit ReplicaClock(SimClock* sim) : sim_(sim) {}
  double now() override {
    if (sim_) return sim_->now();
    if (!running_) return elapsed_;
    return elapsed_ +
           std::chrono::duration<double>(std::chrono::steady_clock::now() - resumed_).count();
  }
  void sleep_until(double t) override {
    if (sim_) {
      sim_->sleep_until(t);
    } else if (!running_) {
      elapsed_ = std::max(elapsed_, t);
    }
  }
  void resume() {
    running_ = true;
    resumed_ = std::chrono::steady_clock::now();
  }
  void pause() {
    elapsed_ = now();
    running_ = false;
  }
  void reset() {
    elapsed_ = 0;
    running_ = false;
    if (sim_) *sim_ = SimClock{};
  }

 private:
  SimClock* sim_;
  double elapsed_ = 0.0;
  bool running_ = false;
  std::chrono::steady_clock::time_point resumed_;
};

class LocalReplica final : public ReplicaHandle {
 public:
  LocalReplica(Backend& backend, SimClock* sim_clock, const EngineConfig& config,
               const std::string& model_id, const Tokenizer* stop_tokenizer, int replica,
               int num_replicas)
      : backend_(backend),
        clock_(sim_clock),
        engine_(backend, config, model_id),
        replica_(replica),
        num_replicas_(num_replicas) {
    engine_.set_stop_tokenizer(stop_tokenizer);
  }

  ReplicaShape shape() const override { return {backend_.block_size(), backend_.num_kv_blocks()}; }
  const ReplicaState& state() const override { return state_; }

  void start(const RunCallbacks& callbacks) override {
    clock_.reset();
    busy_s_ = 0;
    engine_.start(callbacks, &clock_);
    refresh();
  }

  void add(const EngineRequest& request, int index, double now) override {
    clock_.sleep_until(now);  // an idle replica waits for the request
    engine_.add(request, index);
    refresh();
  }

  void step() override {
    const double before = engine_.now();
    bool ran = false;
    clock_.resume();
    try {
      ran = engine_.step(before);
    } catch (const std::exception& e) {
      clock_.pause();
      fail("replica {} of {} failed: {}", replica_, num_replicas_, e.what());
    }
    clock_.pause();
    if (ran) {
      busy_s_ += engine_.now() - before;
    } else {
      // Every request it holds arrived before it was added, so it can always run one.
      const double next = engine_.next_arrival();
      if (!std::isfinite(next))
        fail("replica {}: has unfinished requests but cannot step", replica_);
      clock_.sleep_until(next);
    }
    refresh();
  }

  int cached_prefix_blocks(std::span<const int32_t> prompt) override {
    const PrefixIndex* index = engine_.prefix_index();
    return index ? index->cached_prefix_blocks(prompt) : 0;
  }

  RunResult finish(double* busy_s) override {
    RunResult result = engine_.finish();
    if (busy_s) *busy_s = busy_s_;
    state_.kv_used_blocks = engine_.kv_used_blocks();
    state_.done = true;
    return result;
  }

  void reset_prefix_cache() override {
    engine_.reset_prefix_cache();
    state_.kv_used_blocks = engine_.kv_used_blocks();
  }

 private:
  void refresh() {
    state_ = {engine_.num_waiting(), engine_.num_running(), engine_.kv_used_blocks(),
              engine_.done(), engine_.now()};
  }

  Backend& backend_;
  ReplicaClock clock_;
  Engine engine_;
  int replica_, num_replicas_;
  double busy_s_ = 0;
  ReplicaState state_;
};

}  // namespace

std::unique_ptr<ReplicaHandle> make_local_replica(Backend& backend, SimClock* sim_clock,
                                                  const EngineConfig& config,
                                                  const std::string& model_id,
                                                  const Tokenizer* stop_tokenizer, int replica,
                                                  int num_replicas) {
  return std::make_unique<LocalReplica>(backend, sim_clock, config, model_id, stop_tokenizer,
                                        replica, num_replicas);
}

}  // namespace rose
