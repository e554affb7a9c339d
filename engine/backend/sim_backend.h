#pragma once
// A backend that computes nothing: it returns deterministic token ids and advances a virtual clock
// by a fitted step-time model, so routing can be studied at 64+ replicas on a CPU (DESIGN.md
// "Scale-out", simulation). Run the Engine with the SimClock the backend advances.
#include <memory>
#include <string>

#include "engine/backend/backend.h"
#include "engine/scheduler/engine.h"

namespace rose {

// time(step) = base + per_prefill_token * prefill tokens + per_decode_seq * decode sequences
//            + per_kv_token_read * cached tokens the decode sequences attend over.
// A sequence with one query token is a decode; longer ones are prefill chunks.
struct StepTimeModel {
  double base_s = 0.0;
  double per_prefill_token_s = 0.0;
  double per_decode_seq_s = 0.0;
  double per_kv_token_read_s = 0.0;
  std::string source;  // what it was fitted on (for reports)

  double step_time(const StepPlan& plan) const;
};

// Virtual time: now() is what the simulated steps have added up to; sleep_until jumps forward.
class SimClock : public Clock {
 public:
  double now() override { return now_; }
  void sleep_until(double t) override {
    if (t > now_) now_ = t;
  }
  void advance(double seconds) { now_ += seconds; }

 private:
  double now_ = 0.0;
};

// Reads {"base_s", "per_prefill_token_s", "per_decode_seq_s", "per_kv_token_read_s"} (as written by
// `roseinfer calibrate`); throws rose::Error naming the file and field.
StepTimeModel read_step_time_model(const std::string& path);
// Writes it atomically, with the fit's inputs and errors in "source".
void write_step_time_model(const std::string& path, const StepTimeModel& model);

// `config` gives the vocabulary and KV geometry; options.num_kv_blocks must be > 0 (nothing is
// allocated, so there is no memory to size the pool from). `clock` must outlive the backend.
std::unique_ptr<Backend> make_sim_backend(const ModelConfig& config, const BackendOptions& options,
                                          const StepTimeModel& model, SimClock& clock);

}  // namespace rose
