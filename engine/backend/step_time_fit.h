#pragma once
// Fits the sim backend's StepTimeModel to measured runs (`bench --json`, best with
// --save-detailed): each run gives one equation, its total execute() time =
// base x steps + per_prefill_token x prompt tokens computed + per_decode_seq x decode tokens
// + per_kv_token_read x KV tokens its decode steps attended over, solved by least squares on the
// relative error, coefficients kept >= 0.
#include <span>
#include <string>
#include <vector>

#include "engine/backend/sim_backend.h"
#include "engine/metrics/results_json.h"

namespace rose {

struct StepTimeSample {
  std::string name;  // "FILE: mode, cache on"
  double steps = 0, prefill_tokens = 0, decode_tokens = 0, kv_tokens_read = 0;
  double execute_s = 0;  // measured
};

// One sample per run. KV tokens read: from the per-request lengths when saved (request with I
// prompt and O output tokens decodes O - 1 times over I + 1 .. I + O - 1 tokens), else from the
// mean lengths.
std::vector<StepTimeSample> step_time_samples(const BenchResults& results,
                                              const std::string& source);

struct StepTimeFit {
  StepTimeModel model;
  std::vector<double> relative_errors;  // (samples,) (predicted - measured) / measured
};

// Throws rose::Error with fewer than 2 samples or a measured time <= 0.
StepTimeFit fit_step_time_model(std::span<const StepTimeSample> samples);

double predict_execute_s(const StepTimeModel& model, const StepTimeSample& sample);

}  // namespace rose
