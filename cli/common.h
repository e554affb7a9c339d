#pragma once
// What every subcommand shares: the model/device/engine flags, resolving the device and opening
// the model (engine/model/bundle.h), building the backend.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/io/prompts.h"
#include "engine/io/requests.h"
#include "engine/model/bundle.h"
#include "engine/scheduler/engine.h"

namespace rose::cli {

// A one-line notice on stderr ("roseinfer: ..."); stdout is kept for results.
template <typename... Args>
void notice(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "roseinfer: {}\n", fmt::format(format, std::forward<Args>(args)...));
}

// The command line as typed (shell-quoted), recorded in results files; set once by main.
void set_command_line(int argc, const char* const* argv);
const std::string& command_line();

struct ModelFlags {
  std::string model;  // "" until resolved: tiny on the CPU, gpt2 on CUDA
  std::string device = "auto";
  std::string dtype = "bf16";
  bool dtype_given = false;   // --dtype on the command line: a GGUF's blocks are then dequantized
  std::string quantize;       // --quantize q8_0|q4_0|q4_k|q6_k ("": the checkpoint's own types)
  std::string chat_template;  // --chat-template FILE: overrides the model's own template
  int tensor_parallel = 1;    // --tensor-parallel N: the model split over N GPUs (or CPU threads)
};

struct EngineFlags {
  double gpu_memory_utilization = 0.9;
  int num_kv_blocks = 0;
  int block_size = 16;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int max_model_len = 0;
  bool no_cuda_graph = false;
  bool no_overlap = false;  // EngineConfig::overlap off
  bool batch_invariant = false;
  uint64_t seed = 0;
};

using RequestDefaults = rose::RequestDefaults;

void add_model_flags(CLI::App* cmd, ModelFlags& flags);
// --tensor-parallel, for the commands that build backends (run, bench).
void add_tensor_parallel_flag(CLI::App* cmd, ModelFlags& flags);
void add_engine_flags(CLI::App* cmd, EngineFlags& flags, const std::string& seed_help);
void add_request_flags(CLI::App* cmd, RequestDefaults& defaults);

// The opened model (name: what --model said, or the default preset) and the device chosen for it.
struct LoadedModel : ModelBundle {
  bool cuda = false;
};

// Resolves --device (auto: CUDA when usable, else the CPU with a notice saying why) and the default
// --model, opens the weights and the tokenizer, and says on stderr when the weights are synthetic.
LoadedModel open_model(ModelFlags& flags);

BackendOptions backend_options(const ModelFlags& model, const EngineFlags& engine);
// One replica's backend: the model on one device, or split over --tensor-parallel devices
// (`devices`, rank r on devices[r]; ignored on the CPU, whose ranks are threads).
std::unique_ptr<Backend> make_backend(const LoadedModel& model, const ModelFlags& model_flags,
                                      const EngineFlags& engine_flags);
std::unique_ptr<Backend> make_backend_on(const LoadedModel& model, const ModelFlags& model_flags,
                                         const BackendOptions& options,
                                         const std::vector<int>& devices);

// The engine's budgets from the flags for one scheduler mode and prefix-cache setting.
EngineConfig engine_config(const EngineFlags& flags, SchedulerMode mode, bool prefix_cache);
// --mode: naive, offline, online, or all (the three in that order).
std::vector<SchedulerMode> parse_modes(const std::string& mode);
// Every line's arrival_time, or nullopt when some line has none (then all arrive at once).
std::optional<std::vector<double>> arrival_times(const std::vector<RequestSpec>& specs);

// The context length requests must fit in: --max-model-len, else the model's positions.
int max_model_len(const LoadedModel& model, const EngineFlags& engine);

}  // namespace rose::cli
