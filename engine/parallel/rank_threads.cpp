// One thread per tensor-parallel rank (rank_threads.h).
#include "engine/parallel/rank_threads.h"

#include <utility>

namespace rose {

RankThreads::RankThreads(int size) {
  for (int r = 0; r < size; ++r) threads_.emplace_back([this, r] { loop(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RankThreads::run(const std::function<void(int)>& fn,
                      const std::function<void()>& on_first_failure) {
  {
    std::lock_guard lock(mutex_);
    task_ = &fn;
    on_first_failure_ = on_first_failure ? &on_first_failure : nullptr;
    pending_ = size();
    first_error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  task_ = nullptr;
  on_first_failure_ = nullptr;
  if (first_error_) std::rethrow_exception(std::exchange(first_error_, nullptr));
}

void RankThreads::loop(int rank) {
  unsigned long seen = 0;
  for (;;) {
    const std::function<void(int)>* task = nullptr;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      task = task_;
    }
    std::exception_ptr error;
    try {
      (*task)(rank);
    } catch (...) {
      error = std::current_exception();
    }
    bool first = false;
    const std::function<void()>* hook = nullptr;
    if (error) {
      std::lock_guard lock(mutex_);
      first = !first_error_;
      if (first) first_error_ = error;
      hook = on_first_failure_;
    }
    // Outside the lock: the hook wakes ranks that are still running, which report here after.
    if (first && hook) {
      try {
        (*hook)();
      } catch (...) {  // the rank's own error is the one to report
      }
    }
    std::lock_guard lock(mutex_);
    if (--pending_ == 0) done_.notify_all();
  }
}

}  // namespace rose
