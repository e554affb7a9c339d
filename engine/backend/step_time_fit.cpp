#include "engine/backend/step_time_fit.h"

#include <array>
#include <cmath>

#include "engine/common/error.h"

namespace rose {
namespace {

constexpr int kTerms = 4;  // base, prefill token, decode sequence, KV token read

std::array<double, kTerms> features(const StepTimeSample& s) {
  return {s.steps, s.prefill_tokens, s.decode_tokens, s.kv_tokens_read};
}

double value_of(const BenchResults& results, size_t run, const char* key) {
  const auto& values = results.run_values[run];
  const auto it = values.find(key);
  return it == values.end() ? 0.0 : it->second;
}

// Solves the normal equations over the `active` terms (Gaussian elimination with partial
// pivoting); inactive terms stay 0. Rows weighted by 1 / measured, so the error minimised is
// relative. Returns false when the active columns are linearly dependent.
bool solve_active(std::span<const StepTimeSample> samples, const std::array<bool, kTerms>& active,
                  std::array<double, kTerms>& coef) {
  std::array<std::array<double, kTerms + 1>, kTerms> m{};  // (terms, terms + 1) augmented
  for (const StepTimeSample& s : samples) {
    const auto x = features(s);
    const double w = 1.0 / (s.execute_s * s.execute_s);
    for (int i = 0; i < kTerms; ++i) {
      for (int j = 0; j < kTerms; ++j) m[i][j] += w * x[i] * x[j];
      m[i][kTerms] += w * x[i] * s.execute_s;
    }
  }
  for (int i = 0; i < kTerms; ++i) {
    if (active[i]) continue;
    m[i].fill(0.0);
    m[i][i] = 1.0;
    for (int j = 0; j < kTerms; ++j) {
      if (j != i) m[j][i] = 0.0;
    }
  }
  for (int col = 0; col < kTerms; ++col) {
    int pivot = col;
    for (int r = col + 1; r < kTerms; ++r) {
      if (std::abs(m[r][col]) > std::abs(m[pivot][col])) pivot = r;
    }
    if (std::abs(m[pivot][col]) < 1e-300) return false;
    std::swap(m[col], m[pivot]);
    for (int r = 0; r < kTerms; ++r) {
      if (r == col) continue;
      const double f = m[r][col] / m[col][col];
      for (int c = col; c <= kTerms; ++c) m[r][c] -= f * m[col][c];
    }
  }
  for (int i = 0; i < kTerms; ++i) coef[i] = m[i][kTerms] / m[i][i];
  return true;
}

}  // namespace

std::vector<StepTimeSample> step_time_samples(const BenchResults& results,
                                              const std::string& source) {
  std::vector<StepTimeSample> samples;
  for (size_t r = 0; r < results.runs.size(); ++r) {
    const BenchReport& run = results.runs[r];
    StepTimeSample s;
    s.name = fmt::format("{}: {}, cache {}", source, run.mode, run.prefix_cache ? "on" : "off");
    s.steps = value_of(results, r, "steps");
    s.prefill_tokens = value_of(results, r, "prefill_tokens_computed");
    s.decode_tokens = value_of(results, r, "decode_tokens");
    s.execute_s = value_of(results, r, "execute_time_s");
    const RequestDetail& d = run.detail;
    if (!d.input_lens.empty() && d.input_lens.size() == d.output_lens.size()) {
      for (size_t i = 0; i < d.input_lens.size(); ++i) {
        const double in = double(d.input_lens[i]), decodes = double(d.output_lens[i]) - 1;
        if (decodes > 0) s.kv_tokens_read += decodes * in + decodes * (decodes + 1) / 2;
      }
    } else if (run.completed > 0) {
      const double in = double(run.total_input_tokens) / run.completed;
      const double decodes = double(run.total_output_tokens) / run.completed - 1;
      if (decodes > 0)
        s.kv_tokens_read = run.completed * (decodes * in + decodes * (decodes + 1) / 2);
    }
    samples.push_back(std::move(s));
  }
  return samples;
}

double predict_execute_s(const StepTimeModel& m, const StepTimeSample& s) {
  return m.base_s * s.steps + m.per_prefill_token_s * s.prefill_tokens +
         m.per_decode_seq_s * s.decode_tokens + m.per_kv_token_read_s * s.kv_tokens_read;
}

StepTimeFit fit_step_time_model(std::span<const StepTimeSample> samples) {
  if (samples.size() < 2)
    fail("calibrate: need at least 2 measured runs to fit a step-time model, got {}",
         samples.size());
  for (const StepTimeSample& s : samples) {
    if (!(s.execute_s > 0))
      fail("calibrate: {}: no measured execute time (execute_time_s)", s.name);
  }
  // Active set: a term whose least-squares coefficient comes out negative is dropped (set to 0)
  // and the rest refitted; a term the runs cannot tell apart from the others is dropped too.
  std::array<bool, kTerms> active{true, true, true, true};
  std::array<double, kTerms> coef{};
  bool solved = false;
  while (!solved) {
    int drop = -1;
    if (!solve_active(samples, active, coef)) {
      for (int i = kTerms - 1; i >= 0 && drop < 0; --i) {
        if (active[i]) drop = i;
      }
    } else {
      for (int i = 0; i < kTerms; ++i) {
        if (active[i] && coef[i] < 0 && (drop < 0 || coef[i] < coef[drop])) drop = i;
      }
      solved = drop < 0;
    }
    if (solved) break;
    if (drop < 0) fail("calibrate: the runs do not determine any step-time coefficient");
    active[drop] = false;
  }
  StepTimeFit fit;
  for (int i = 0; i < kTerms; ++i) coef[i] = active[i] ? coef[i] : 0.0;
  fit.model = {coef[0], coef[1], coef[2], coef[3], ""};
  for (const StepTimeSample& s : samples)
    fit.relative_errors.push_back((predict_execute_s(fit.model, s) - s.execute_s) / s.execute_s);
  return fit;
}

}  // namespace rose
