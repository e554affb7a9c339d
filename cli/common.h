#pragma once
// What every subcommand shares: the model/device/engine flags, opening the model and its
// tokenizer, building the backend, and turning parsed request lines into engine requests.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/io/prompts.h"
#include "engine/model/weights.h"
#include "engine/scheduler/engine.h"
#include "engine/tokenizer/tokenizer.h"

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
};

struct EngineFlags {
  double gpu_memory_utilization = 0.9;
  int num_kv_blocks = 0;
  int block_size = 16;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int max_model_len = 0;
  bool no_cuda_graph = false;
  uint64_t seed = 0;
};

// Defaults for what a prompt line does not say itself.
struct RequestDefaults {
  int max_tokens = 16;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  bool ignore_eos = false;
};

void add_model_flags(CLI::App* cmd, ModelFlags& flags);
void add_engine_flags(CLI::App* cmd, EngineFlags& flags, const std::string& seed_help);
void add_request_flags(CLI::App* cmd, RequestDefaults& defaults);

struct LoadedModel {
  std::string name;  // what --model said, or the default preset
  bool cuda = false;
  std::unique_ptr<WeightSource> weights;
  std::unique_ptr<Tokenizer> tokenizer;  // null for a folder without tokenizer.json
  std::string tokenizer_source;          // "preset" or the tokenizer.json path
  const ModelConfig& config() const { return weights->config(); }
};

// Resolves --device (auto: CUDA when usable, else the CPU with a notice saying why) and the default
// --model, opens the weights and the tokenizer, and says on stderr when the weights are synthetic.
LoadedModel open_model(ModelFlags& flags);

BackendOptions backend_options(const ModelFlags& model, const EngineFlags& engine);
std::unique_ptr<Backend> make_backend(const LoadedModel& model, const ModelFlags& model_flags,
                                      const EngineFlags& engine_flags);

// The context length requests must fit in: --max-model-len, else the model's positions.
int max_model_len(const LoadedModel& model, const EngineFlags& engine);

// Tokenizes text prompts (before any clock starts) and fills what a line left out from `defaults`;
// a request without a seed gets --seed + its index, so equal prompts do not sample equally. Errors
// name `source`:line and the field (a text prompt with no tokenizer, ids outside the vocabulary, a
// prompt that does not fit the context).
std::vector<EngineRequest> to_engine_requests(const std::vector<RequestSpec>& specs,
                                              const std::string& source, const LoadedModel& model,
                                              const RequestDefaults& defaults, uint64_t seed,
                                              int context_limit);

}  // namespace rose::cli
