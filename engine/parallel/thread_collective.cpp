// Tensor-parallel ranks as CPU threads (thread_collective.h).
#include "engine/parallel/thread_collective.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "engine/common/error.h"

namespace rose {
namespace {

// A barrier that abort() breaks: std::barrier has no way to wake its waiters with an error.
class AbortableBarrier {
 public:
  explicit AbortableBarrier(int size) : size_(size) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (aborted_) fail("tensor parallel: another rank failed");
    const unsigned long generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      all_arrived_.notify_all();
      return;
    }
    all_arrived_.wait(lock, [&] { return generation_ != generation || aborted_; });
    if (generation_ == generation) fail("tensor parallel: another rank failed");
  }
  void abort() {
    const std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    all_arrived_.notify_all();
  }

 private:
  const int size_;
  std::mutex mutex_;
  std::condition_variable all_arrived_;
  int arrived_ = 0;
  unsigned long generation_ = 0;
  bool aborted_ = false;
};

// What the ranks share: each publishes its buffer, then every rank reads all of them between two
// barriers (the second keeps a rank from changing its buffer while another still reads it).
struct Shared {
  explicit Shared(int size) : size(size), published(size_t(size)), barrier(size) {}
  int size;
  std::vector<const float*> published;  // (size,) each rank's buffer of the current operation
  AbortableBarrier barrier;
};

class ThreadCollective final : public Collective {
 public:
  ThreadCollective(std::shared_ptr<Shared> shared, int rank)
      : shared_(std::move(shared)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return shared_->size; }

  void all_reduce_sum(void* buffer, int64_t count, CollectiveType type, void*) override {
    ROSE_ASSERT(type == CollectiveType::kF32);
    float* data = static_cast<float*>(buffer);
    publish(data);
    // Each rank sums every rank's values in rank order into its scratch, then all copy back.
    scratch_.resize(size_t(count));  // grows to the largest count once, outside the hot path
    std::fill(scratch_.begin(), scratch_.end(), 0.0f);
    for (const float* rank_data : shared_->published) {
      for (int64_t i = 0; i < count; ++i) scratch_[size_t(i)] += rank_data[i];
    }
    shared_->barrier.arrive_and_wait();  // everyone has read every buffer
    std::copy(scratch_.begin(), scratch_.end(), data);
  }

  void all_gather(const void* send, void* recv, int64_t count, CollectiveType type,
                  void*) override {
    ROSE_ASSERT(type == CollectiveType::kF32);
    publish(static_cast<const float*>(send));
    float* out = static_cast<float*>(recv);
    for (const float* rank_data : shared_->published) out = std::copy_n(rank_data, count, out);
    shared_->barrier.arrive_and_wait();
  }

  void abort() override { shared_->barrier.abort(); }

 private:
  void publish(const float* data) {
    shared_->published[size_t(rank_)] = data;
    shared_->barrier.arrive_and_wait();
  }

  std::shared_ptr<Shared> shared_;
  int rank_;
  std::vector<float> scratch_;
};

}  // namespace

std::vector<std::unique_ptr<Collective>> make_thread_collectives(int size) {
  ROSE_ASSERT(size >= 1);
  auto shared = std::make_shared<Shared>(size);
  std::vector<std::unique_ptr<Collective>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<ThreadCollective>(shared, r));
  return ranks;
}

}  // namespace rose
