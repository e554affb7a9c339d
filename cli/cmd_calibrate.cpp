// `roseinfer calibrate RESULTS.json... -o sim.json`: fits the sim backend's step-time model to
// measured bench runs and prints each run's error; the fit itself is
// engine/backend/step_time_fit.cpp.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/backend/step_time_fit.h"
#include "engine/common/error.h"

namespace {

struct CalibrateArgs {
  std::vector<std::string> inputs;
  std::vector<std::string> held_out;
  std::string output;
};

void print_errors(const rose::StepTimeModel& model,
                  const std::vector<rose::StepTimeSample>& samples, const char* heading) {
  fmt::print("{}\n", heading);
  for (const rose::StepTimeSample& s : samples) {
    const double predicted = rose::predict_execute_s(model, s);
    fmt::print("  {:<48} measured {:9.4f} s  model {:9.4f} s  error {:+6.1f}%\n", s.name,
               s.execute_s, predicted, 100.0 * (predicted - s.execute_s) / s.execute_s);
  }
}

std::vector<rose::StepTimeSample> samples_of(const std::vector<std::string>& paths) {
  std::vector<rose::StepTimeSample> samples;
  for (const std::string& path : paths) {
    const auto more = rose::step_time_samples(rose::read_results_json(path), path);
    samples.insert(samples.end(), more.begin(), more.end());
  }
  return samples;
}

}  // namespace

void register_calibrate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Fit the sim backend's step-time model (base + prefill tokens + decode sequences + KV tokens "
      "read) to `bench --json` results (best with --save-detailed)");
  cmd->add_option("RESULTS", args->inputs, "results JSON files to fit on")->required();
  cmd->add_option("-o,--output", args->output, "where to write the model (JSON)")->required();
  cmd->add_option("--held-out", args->held_out,
                  "results JSON files not fitted on, only checked (the model's error elsewhere)");
  cmd->callback([args, &exit_code]() {
    const std::vector<rose::StepTimeSample> fitted = samples_of(args->inputs);
    const rose::StepTimeFit fit = rose::fit_step_time_model(fitted);
    rose::StepTimeModel model = fit.model;
    std::string source = "fitted on";
    for (const std::string& path : args->inputs) source += " " + path;
    model.source = source;
    rose::write_step_time_model(args->output, model);
    fmt::print(
        "step time = {:.6g} s + {:.6g} s x prefill tokens + {:.6g} s x decode seqs + {:.6g} s x KV "
        "tokens read\n",
        model.base_s, model.per_prefill_token_s, model.per_decode_seq_s, model.per_kv_token_read_s);
    print_errors(model, fitted, "fitted runs (execute time):");
    if (!args->held_out.empty()) print_errors(model, samples_of(args->held_out), "held-out runs:");
    fmt::print("wrote {}\n", args->output);
    exit_code = 0;
  });
}
