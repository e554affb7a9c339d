#pragma once
// One thread per tensor-parallel rank, alive as long as the backend: every rank's part of a step
// must run at the same time (their collectives wait for each other), and a thread per step would
// cost its start-up every step.
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rose {

class RankThreads {
 public:
  explicit RankThreads(int size);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int size() const { return int(threads_.size()); }
  // Calls fn(rank) on every rank's thread and returns when all have returned; then rethrows the
  // exception of the rank that failed first, if any. on_first_failure, if set, runs once, on that
  // rank's thread as soon as it fails: it can abort the collectives the other ranks wait in.
  // Not reentrant.
  void run(const std::function<void(int)>& fn,
           const std::function<void()>& on_first_failure = nullptr);

 private:
  void loop(int rank);

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* task_ = nullptr;
  const std::function<void()>* on_first_failure_ = nullptr;
  std::exception_ptr first_error_;  // of the current run
  unsigned long generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

}  // namespace rose
