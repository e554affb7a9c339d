// The sim backend and its calibration: the step-time formula on a hand-built plan, the engine on
// virtual time (durations are sums of modelled steps, outputs deterministic), the least-squares fit
// recovering known coefficients and keeping them >= 0, and the model file's round trip and errors.
#include <doctest/doctest.h>

#include <fstream>

#include "engine/backend/sim_backend.h"
#include "engine/backend/step_time_fit.h"
#include "engine/common/error.h"
#include "engine/model/presets.h"
#include "tests/test_util.h"

using namespace rose;

namespace {

StepTimeModel model_of(double base, double prefill, double decode, double kv) {
  return {base, prefill, decode, kv, "test"};
}

BackendOptions sim_options(int blocks) {
  BackendOptions o;
  o.num_kv_blocks = blocks;
  o.block_size = 4;
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 64;
  return o;
}

}  // namespace

TEST_CASE("step time = base + prefill tokens + decode sequences + KV tokens the decodes read") {
  StepPlan plan;
  plan.query_start = {0, 5, 6};  // a 5-token prefill chunk, then one decode
  plan.context_lens = {5, 10};
  const StepTimeModel m = model_of(1.0, 0.1, 0.01, 0.001);
  CHECK(m.step_time(plan) == doctest::Approx(1.0 + 5 * 0.1 + 1 * 0.01 + 10 * 0.001));
}

TEST_CASE("the engine on a sim backend runs on virtual time, with deterministic outputs") {
  const ModelConfig config = *preset_config("tiny");
  SimClock clock;
  auto backend = make_sim_backend(config, sim_options(32), model_of(0.001, 0, 0, 0), clock);
  EngineConfig engine_config;
  engine_config.max_num_batched_tokens = 64;
  engine_config.max_num_seqs = 8;
  Engine engine(*backend, engine_config, "tiny");
  EngineRequest request;
  request.prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  request.max_tokens = 3;
  request.ignore_eos = true;
  const RunResult first = engine.run({request}, {}, &clock);
  // One prefill step (samples the first token), then two decodes: 3 steps of 1 ms.
  CHECK(first.duration_s == doctest::Approx(0.003));
  REQUIRE(first.requests[0].output_ids.size() == 3);
  CHECK(first.requests[0].timeline.token_times[0] == doctest::Approx(0.001));
  engine.reset_prefix_cache();
  const RunResult second = engine.run({request}, {}, &clock);
  CHECK(second.requests[0].output_ids == first.requests[0].output_ids);
  CHECK_THROWS_WITH_AS(make_sim_backend(config, sim_options(0), StepTimeModel{}, clock),
                       doctest::Contains("needs --num-kv-blocks"), Error);
}

TEST_CASE("the fit recovers the coefficients that generated the runs") {
  const StepTimeModel truth = model_of(0.002, 1e-5, 3e-4, 2e-8);
  std::vector<StepTimeSample> samples;
  const double shapes[][4] = {{128, 512, 127, 40000},      {128, 8192, 2032, 700000},
                              {135, 131072, 32512, 9e6},   {129, 32768, 8128, 2.6e6},
                              {1029, 141608, 135888, 8e7}, {300, 1000, 5000, 1e5}};
  for (const auto& s : shapes) {
    StepTimeSample sample{"run", s[0], s[1], s[2], s[3], 0};
    sample.execute_s = predict_execute_s(truth, sample);
    samples.push_back(sample);
  }
  const StepTimeFit fit = fit_step_time_model(samples);
  CHECK(fit.model.base_s == doctest::Approx(truth.base_s).epsilon(1e-6));
  CHECK(fit.model.per_prefill_token_s == doctest::Approx(truth.per_prefill_token_s).epsilon(1e-6));
  CHECK(fit.model.per_decode_seq_s == doctest::Approx(truth.per_decode_seq_s).epsilon(1e-6));
  CHECK(fit.model.per_kv_token_read_s == doctest::Approx(truth.per_kv_token_read_s).epsilon(1e-6));
  for (double e : fit.relative_errors) CHECK(std::abs(e) < 1e-9);
}

TEST_CASE("the fit keeps every coefficient >= 0 and needs two runs") {
  // Time falls with KV tokens read: a free fit would give that term a negative price.
  std::vector<StepTimeSample> samples{{"a", 10, 100, 10, 5000, 0.020},
                                      {"b", 10, 200, 10, 1000, 0.030},
                                      {"c", 20, 100, 20, 9000, 0.030},
                                      {"d", 20, 300, 40, 100, 0.060}};
  const StepTimeFit fit = fit_step_time_model(samples);
  CHECK(fit.model.base_s >= 0);
  CHECK(fit.model.per_prefill_token_s >= 0);
  CHECK(fit.model.per_decode_seq_s >= 0);
  CHECK(fit.model.per_kv_token_read_s == 0);
  CHECK_THROWS_AS(fit_step_time_model(std::span(samples).first(1)), Error);
}

TEST_CASE("step-time model files round-trip; a bad one names the file and field") {
  rose::test::TempDir dir("sim");
  const std::string path = (dir.path / "sim.json").string();
  write_step_time_model(path, model_of(0.001, 2e-6, 3e-5, 4e-9));
  const StepTimeModel back = read_step_time_model(path);
  CHECK(back.base_s == doctest::Approx(0.001));
  CHECK(back.per_kv_token_read_s == doctest::Approx(4e-9));
  CHECK(back.source == "test");
  std::ofstream(path) << R"({"base_s": 1, "per_prefill_token_s": "x"})";
  CHECK_THROWS_WITH_AS(read_step_time_model(path),
                       doctest::Contains("field 'per_prefill_token_s': expected a number"), Error);
}
