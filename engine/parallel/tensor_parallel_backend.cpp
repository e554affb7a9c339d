// A tensor-parallel Backend over shard backends (tensor_parallel_backend.h).
#include "engine/parallel/tensor_parallel_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <optional>

#include "engine/common/error.h"
#include "engine/parallel/rank_threads.h"
#include "engine/parallel/shard_plan.h"
#include "engine/parallel/sharded_weights.h"
#include "engine/parallel/thread_collective.h"

namespace rose {
namespace {

class TensorParallelBackend final : public Backend {
 public:
  TensorParallelBackend(const WeightSource& weights, const BackendOptions& options,
                        const std::vector<int>& devices,
                        std::vector<std::unique_ptr<Collective>> collectives,
                        const ShardBackendFactory& make_shard);
  ~TensorParallelBackend() override;

  void execute(const StepPlan& plan, StepOutput& out) override;
  // Overlapped steps where every shard overlaps (GPUs): each rank enqueues the step and returns,
  // so the GPUs run step N+1 while the host applies step N's ids. Shards that do not (the CPU)
  // keep Backend's default, which runs the step in submit().
  void submit(const StepPlan& plan) override;
  void collect(StepOutput& out) override;
  bool overlaps_steps() const override { return overlaps_; }
  void warm_up() override;
  std::optional<CollectiveTiming> time_collectives(int rows, int iterations) override;
  std::optional<double> measure_copy_bandwidth_gbps() override;
  const PlanLimits& limits() const override { return limits_; }
  std::string device_name() const override {
    return fmt::format("{} x {} (tensor parallel)", degree(), shards_[0]->device_name());
  }
  const ModelConfig& config() const override { return config_; }
  int64_t weight_bytes() const override {
    return sum([](const Backend& b) { return b.weight_bytes(); });
  }
  std::string weight_types() const override { return shards_[0]->weight_types(); }
  int64_t kv_bytes_per_token() const override {
    return sum([](const Backend& b) { return b.kv_bytes_per_token(); });
  }

 private:
  int degree() const { return int(shards_.size()); }
  // threads_.run(fn) with a first-failure hook that aborts every collective, so that the ranks
  // waiting in a collective for the rank that threw end too instead of hanging; the first error
  // is the one rethrown (not a woken rank's "another rank failed").
  void run_ranks(const std::function<void(int)>& fn);
  template <typename F>
  int64_t sum(F value) const {
    int64_t total = 0;
    for (const auto& shard : shards_) total += value(*shard);
    return total;
  }

  ModelConfig config_;  // the whole model's
  PlanLimits limits_;
  std::vector<std::unique_ptr<Collective>> collectives_;  // (degree,)
  std::vector<std::unique_ptr<WeightSource>> sources_;    // (degree,) each rank's shard
  std::vector<std::unique_ptr<Backend>> shards_;          // (degree,)
  std::vector<StepOutput> rank_outputs_;                  // (degree,) ranks 1.. (discarded)
  RankThreads threads_;
  bool overlaps_ = false;  // every shard's submit() returns before its step has run
  int previous_rows_ = 0;  // the rows of the last submitted step (its ids may be read by the next)
};

TensorParallelBackend::TensorParallelBackend(const WeightSource& weights,
                                             const BackendOptions& options,
                                             const std::vector<int>& devices,
                                             std::vector<std::unique_ptr<Collective>> collectives,
                                             const ShardBackendFactory& make_shard)
    : config_(weights.config()),
      collectives_(std::move(collectives)),
      rank_outputs_(collectives_.size()),
      threads_(int(collectives_.size())) {
  const int n = int(collectives_.size());
  ROSE_ASSERT(n >= 1 && int(devices.size()) == n);
  check_tensor_parallel(config_, n);
  // NCCL's ring sums more than two ranks' partials in an order that follows the message size,
  // so a row's bits would depend on the step's rows; two ranks add once (a + b = b + a).
  if (options.batch_invariant && n > 2) {
    fail(
        "--batch-invariant with --tensor-parallel {}: only up to 2 ranks keep a row's sums "
        "independent of the batch",
        n);
  }
  shards_.resize(size_t(n));
  for (int r = 0; r < n; ++r) sources_.push_back(shard_weights(weights, n, r));
  // Two phases: every rank loads its shard and sizes its KV pool (no collectives; an error on one
  // rank, such as GPU memory, ends here for all of them), then all warm up together (collectives).
  threads_.run([&](int rank) {
    BackendOptions rank_options = options;
    rank_options.device = devices[size_t(rank)];
    rank_options.collective = collectives_[size_t(rank)].get();
    rank_options.defer_warm_up = true;
    shards_[size_t(rank)] = make_shard(*sources_[size_t(rank)], rank_options);
  });
  if (!options.defer_warm_up) warm_up();
  overlaps_ = std::all_of(shards_.begin(), shards_.end(),
                          [](const auto& shard) { return shard->overlaps_steps(); });
  // The engine sees one pool: the blocks every rank has.
  limits_ = shards_[0]->limits();
  limits_.vocab_size = config_.vocab_size;
  for (const auto& shard : shards_) {
    limits_.num_kv_blocks = std::min(limits_.num_kv_blocks, shard->limits().num_kv_blocks);
  }
}

// Each rank's backend is destroyed on its own thread (a GPU backend selects its device there).
TensorParallelBackend::~TensorParallelBackend() {
  try {
    threads_.run([&](int rank) { shards_[size_t(rank)].reset(); });
  } catch (...) {  // a destructor never throws; the shards' own destructors do not either
  }
}

void TensorParallelBackend::run_ranks(const std::function<void(int)>& fn) {
  // The first rank to fail aborts every collective, so the others end with an error instead of
  // waiting for it forever; its own error is the one rethrown.
  threads_.run(fn, [&] {
    for (const auto& collective : collectives_) collective->abort();
  });
}

void TensorParallelBackend::warm_up() {
  run_ranks([&](int rank) { shards_[size_t(rank)]->warm_up(); });
}

void TensorParallelBackend::execute(const StepPlan& plan, StepOutput& out) {
  // Checked here once, so no rank fails alone and leaves the others waiting in a collective.
  validate_step_plan(plan, limits_);
  run_ranks([&](int rank) {
    shards_[size_t(rank)]->execute(plan, rank == 0 ? out : rank_outputs_[size_t(rank)]);
  });
  previous_rows_ = plan.num_seqs();
}

void TensorParallelBackend::submit(const StepPlan& plan) {
  if (!overlaps_) return Backend::submit(plan);
  validate_step_plan(plan, limits_, previous_rows_);  // once, as in execute()
  run_ranks([&](int rank) { shards_[size_t(rank)]->submit(plan); });
  previous_rows_ = plan.num_seqs();
}

void TensorParallelBackend::collect(StepOutput& out) {
  if (!overlaps_) return Backend::collect(out);
  run_ranks([&](int rank) {
    shards_[size_t(rank)]->collect(rank == 0 ? out : rank_outputs_[size_t(rank)]);
  });
}

// Every rank times the same collectives at once (they wait for each other, as in a step); a
// call's time is the slowest rank's, which is what a step waits for.
std::optional<CollectiveTiming> TensorParallelBackend::time_collectives(int rows, int iterations) {
  std::vector<std::optional<CollectiveTiming>> timings(shards_.size());
  run_ranks([&](int rank) {
    timings[size_t(rank)] = shards_[size_t(rank)]->time_collectives(rows, iterations);
  });
  std::optional<CollectiveTiming> slowest = timings[0];
  for (const std::optional<CollectiveTiming>& t : timings) {
    if (!t || !slowest) return std::nullopt;  // one rank (--tensor-parallel 1): no collectives
    slowest->all_reduce_s = std::max(slowest->all_reduce_s, t->all_reduce_s);
    slowest->all_gather_s = std::max(slowest->all_gather_s, t->all_gather_s);
    slowest->fused_add_norm = slowest->fused_add_norm && t->fused_add_norm;
  }
  return slowest;
}

// Every GPU copies at once, as every rank reads its shard at once in a step; the floor is their
// sum (weight_bytes() is the sum of the shards').
std::optional<double> TensorParallelBackend::measure_copy_bandwidth_gbps() {
  std::vector<std::optional<double>> measured(shards_.size());
  run_ranks([&](int rank) {
    measured[size_t(rank)] = shards_[size_t(rank)]->measure_copy_bandwidth_gbps();
  });
  double sum = 0.0;
  for (const std::optional<double>& gbps : measured) {
    if (!gbps) return std::nullopt;
    sum += *gbps;
  }
  return sum;
}

}  // namespace

std::unique_ptr<Backend> make_tensor_parallel_backend(
    const WeightSource& weights, const BackendOptions& options, const std::vector<int>& devices,
    std::vector<std::unique_ptr<Collective>> collectives, const ShardBackendFactory& make_shard) {
  return std::make_unique<TensorParallelBackend>(weights, options, devices, std::move(collectives),
                                                 make_shard);
}

std::unique_ptr<Backend> make_cpu_tensor_parallel_backend(const WeightSource& weights,
                                                          const BackendOptions& options,
                                                          int degree) {
  check_tensor_parallel(weights.config(), degree);
  return make_tensor_parallel_backend(weights, options, std::vector<int>(size_t(degree), 0),
                                      make_thread_collectives(degree), make_cpu_backend);
}

}  // namespace rose
