#include "cli/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace rose::cli {

std::string duration_text(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

ProgressLine::ProgressLine(std::string label, int64_t total, int64_t already_done)
    : enabled_(isatty(STDERR_FILENO) != 0),
      label_(std::move(label)),
      total_(total),
      done_(already_done),
      start_(std::chrono::steady_clock::now()) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::finish_one() {
  ++done_;
  ++done_this_run_;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done_ < total_ && drawn_ && now - last_draw_ < std::chrono::milliseconds(250)) return;
  last_draw_ = now;
  drawn_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? double(done_this_run_) / elapsed : 0.0;
  const double eta = rate > 0 ? double(total_ - done_) / rate : NAN;
  fmt::print(stderr, "\r\033[K  {}: {}/{} requests, {:.1f} req/s, ETA {}", label_, done_, total_,
             rate, duration_text(eta));
  std::fflush(stderr);
}

void ProgressLine::clear() {
  if (!drawn_) return;
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace rose::cli
