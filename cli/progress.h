#pragma once
// A one-line progress display on stderr for long runs: done/total, rate and ETA, redrawn at most
// every 250 ms, and only when stderr is a terminal (a log file gets nothing).
#include <chrono>
#include <cstdint>
#include <string>

namespace rose::cli {

class ProgressLine {
 public:
  // `already_done` requests (resumed from a journal) count toward done but not toward the rate.
  ProgressLine(std::string label, int64_t total, int64_t already_done = 0);
  ~ProgressLine();  // clears the line
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void finish_one();
  void clear();
  // A streamed run learns its exact total late (lines skipped while reading).
  void set_total(int64_t total) { total_ = total; }
  int64_t total() const { return total_; }

 private:
  bool enabled_;
  std::string label_;
  int64_t total_;
  int64_t done_;
  int64_t done_this_run_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  bool drawn_ = false;
};

// "42s", "3m05s", "2h07m".
std::string duration_text(double seconds);

}  // namespace rose::cli
