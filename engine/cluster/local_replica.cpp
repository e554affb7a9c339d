// A replica whose engine runs in this process (replica_handle.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

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
               int num_replicas, bool threaded)
      : backend_(backend),
        clock_(sim_clock),
        engine_(backend, config, model_id),
        replica_(replica),
        num_replicas_(num_replicas),
        threaded_(threaded) {
    engine_.set_stop_tokenizer(stop_tokenizer);
  }
  ~LocalReplica() override {
    if (!worker_.joinable()) return;
    {
      const std::lock_guard lock(mutex_);
      quit_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  ReplicaShape shape() const override { return {backend_.block_size(), backend_.num_kv_blocks()}; }
  const ReplicaState& state() const override { return state_; }

  void start(bool record_tokens) override {
    clock_.reset();
    busy_s_ = 0;
    events_.clear();
    RunCallbacks record;
    if (record_tokens) {
      record.on_token = [this](int index, int32_t token) {
        events_.events.push_back({step_start_, index, token, -1});
      };
    }
    record.on_finish = [this](int index, const RequestResult& result) {
      events_.events.push_back({step_start_, index, 0, int(events_.results.size())});
      events_.results.push_back(result);
    };
    engine_.start(record, &clock_);
    refresh();
  }

  void add(const EngineRequest& request, int index, double now) override {
    clock_.sleep_until(now);  // an idle replica waits for the request
    engine_.add(request, index);
    refresh();
  }

  void begin_advance(double until) override {
    if (!threaded_) {
      until_ = until;
      return;
    }
    if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
    {
      const std::lock_guard lock(mutex_);
      until_ = until;
      busy_ = true;
    }
    wake_.notify_all();
  }

  bool advance_ready() override {
    if (!threaded_) return true;
    const std::lock_guard lock(mutex_);
    return !busy_;
  }

  void end_advance(ReplicaEvents& events) override {
    if (threaded_) {
      std::unique_lock lock(mutex_);
      done_.wait(lock, [this] { return !busy_; });
    } else {
      advance(until_);
    }
    // The worker is idle: what it wrote is ours until the next begin_advance().
    for (ReplicaEvent& e : events_.events) {
      if (e.result >= 0) e.result += int(events.results.size());
      events.events.push_back(e);
    }
    for (RequestResult& r : events_.results) events.results.push_back(std::move(r));
    events_.clear();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
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
  // The replica's thread: one advance per begin_advance(), until the handle goes.
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return busy_ || quit_; });
      if (quit_) return;
      const double until = until_;
      lock.unlock();
      advance(until);
      lock.lock();
      busy_ = false;
      done_.notify_all();
    }
  }

  // Steps to `until` (ReplicaHandle::begin_advance); a failure is kept for end_advance().
  void advance(double until) {
    try {
      while (!engine_.done() && engine_.now() < until) step();
    } catch (...) {
      error_ = std::current_exception();
    }
    refresh();
  }

  void step() {
    const double before = engine_.now();
    step_start_ = before;
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
  }

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
  // The advance under way, written by whoever steps (this replica's thread, or the caller's in
  // end_advance() without one) and read by the caller once it is over.
  double step_start_ = 0;  // the clock at the start of the step in progress
  ReplicaEvents events_;
  std::exception_ptr error_;
  // The replica's own thread (threaded_): begin_advance() sets until_ and busy_; work() clears it.
  const bool threaded_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  double until_ = 0;
  bool busy_ = false, quit_ = false;
};

}  // namespace

std::unique_ptr<ReplicaHandle> make_local_replica(Backend& backend, SimClock* sim_clock,
                                                  const EngineConfig& config,
                                                  const std::string& model_id,
                                                  const Tokenizer* stop_tokenizer, int replica,
                                                  int num_replicas, bool threaded) {
  return std::make_unique<LocalReplica>(backend, sim_clock, config, model_id, stop_tokenizer,
                                        replica, num_replicas, threaded);
}

}  // namespace rose
