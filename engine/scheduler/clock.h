#pragma once
// Time source for runs; tests use a fake one so arrival waits are instant and deterministic.
#include <memory>

namespace rose {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now() = 0;  // seconds
  virtual void sleep_until(double t) = 0;
};
std::unique_ptr<Clock> make_steady_clock();

}  // namespace rose
