// One thread per tensor-parallel rank (rank_threads.h).
#include "engine/parallel/rank_threads.h"

namespace rose {

RankThreads::RankThreads(int size) : errors_(size_t(size)) {
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

void RankThreads::run(const std::function<void(int)>& fn) {
  {
    std::lock_guard lock(mutex_);
    task_ = &fn;
    pending_ = size();
    for (std::exception_ptr& e : errors_) e = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  task_ = nullptr;
  for (const std::exception_ptr& e : errors_) {
    if (e) std::rethrow_exception(e);
  }
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
    std::lock_guard lock(mutex_);
    errors_[size_t(rank)] = error;
    if (--pending_ == 0) done_.notify_all();
  }
}

}  // namespace rose
