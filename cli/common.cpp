#include "cli/common.h"

#include <cmath>

#include "engine/common/error.h"
#include "engine/common/shell_quote.h"
#include "engine/metrics/results_json.h"
#include "engine/model/presets.h"
#include "engine/model/quantized_source.h"
#include "engine/parallel/shard_plan.h"
#include "engine/parallel/tensor_parallel_backend.h"

namespace rose::cli {
namespace {

// (0, 1]: CLI11's Range includes 0, which means "no memory" here.
CLI::Validator fraction_in_open_unit() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          const double v = std::stod(value);
          if (v > 0 && v <= 1) return "";
        } catch (const std::exception&) {
        }
        return "must be a number in (0, 1], got " + value;
      },
      "(0,1]");
}

std::string g_command_line;

}  // namespace

void set_command_line(int argc, const char* const* argv) {
  g_command_line = join_command(argc, argv);
}
const std::string& command_line() { return g_command_line; }

void add_model_flags(CLI::App* cmd, ModelFlags& flags) {
  cmd->add_option("--model,-m", flags.model,
                  "preset (" + preset_names_text() +
                      "), a .gguf file, a Hugging Face model folder (config.json, *.safetensors, "
                      "tokenizer.json) or a repo id (org/name) in the local Hugging Face cache; "
                      "default: tiny on the CPU, gpt2 on CUDA");
  cmd->add_option("--chat-template", flags.chat_template,
                  "a Jinja chat template file used instead of the model's own for 'messages'")
      ->check(CLI::ExistingFile);
  cmd->add_option("--device", flags.device,
                  "auto (CUDA when a GPU can be used, else the CPU), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--dtype", flags.dtype,
                  "GPU activations, KV cache and dense weights (the CPU computes in fp32); given "
                  "for a GGUF, its quantized blocks are dequantized to it instead of kept")
      ->check(CLI::IsMember({"bf16", "fp16"}))
      ->each([&flags](const std::string&) { flags.dtype_given = true; })
      ->capture_default_str();
  cmd->add_option("--quantize", flags.quantize,
                  "quantize a preset's or safetensors model's linear layers at load (a GGUF keeps "
                  "its own types) to one type, or to q4_k_m, llama.cpp's mix of Q4_K and Q6_K; "
                  "the GPU keeps them in ggml blocks, the CPU dequantizes them")
      ->check(CLI::IsMember({"q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m"}));
}

void add_tensor_parallel_flag(CLI::App* cmd, ModelFlags& flags) {
  cmd->add_option("--tensor-parallel", flags.tensor_parallel,
                  "split the model over N GPUs (attention heads and MLP columns; an all-reduce "
                  "after the o and down projections, through NVLink peer memory up to 512 KiB, "
                  "else NCCL); on --device cpu, N threads (for tests); "
                  "`roseinfer info` lists the degrees a model allows")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

void add_engine_flags(CLI::App* cmd, EngineFlags& flags, const std::string& seed_help) {
  cmd->add_option("--gpu-memory-utilization", flags.gpu_memory_utilization,
                  "fraction of GPU memory for weights, workspaces and the KV pool")
      ->check(fraction_in_open_unit())
      ->capture_default_str();
  cmd->add_option("--num-kv-blocks", flags.num_kv_blocks,
                  "KV pool size in blocks (0: size it from memory)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--block-size", flags.block_size, "tokens per KV block")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", flags.max_num_seqs, "requests in one step at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", flags.max_num_batched_tokens,
                  "tokens in one step at most (long prompts are split into chunks)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-model-len", flags.max_model_len,
                  "context length limit (0: the model's max positions)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("--no-cuda-graph", flags.no_cuda_graph,
                "CUDA: launch decode steps directly instead of replaying captured graphs");
  cmd->add_flag("--no-overlap", flags.no_overlap,
                "CUDA: run one step at a time, instead of enqueuing each step before the ids of "
                "the one before it reach the host");
  cmd->add_flag("--batch-invariant", flags.batch_invariant,
                "CUDA: kernels whose result for a request does not depend on the rest of its batch "
                "(fixed reduction orders; costs speed, see the README)");
  cmd->add_option("--seed", flags.seed, seed_help)->capture_default_str();
}

void add_request_flags(CLI::App* cmd, RequestDefaults& d) {
  cmd->add_option("--max-tokens", d.max_tokens, "output tokens per request, unless a line says")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--temperature", d.temperature, "0 is greedy, unless a line says")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--top-k", d.top_k, "keep the k most likely tokens (0: off), unless a line says")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--top-p", d.top_p,
                  "nucleus sampling mass in (0, 1] (1: off), unless a line says")
      ->check(fraction_in_open_unit())
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", d.ignore_eos,
                "generate exactly max_tokens, past end-of-sequence tokens, unless a line says");
}

LoadedModel open_model(ModelFlags& flags) {
  LoadedModel m;
  std::string why_not;
  if (flags.device == "cuda") {
    // Fail before loading weights, which for a large preset takes a while.
    if (!cuda_available(&why_not)) fail("--device cuda: {}", why_not);
    m.cuda = true;
  } else if (flags.device == "auto") {
    m.cuda = cuda_available(&why_not);
    if (!m.cuda) notice("no usable GPU ({}); running on the CPU", why_not);
  }
  if (flags.model.empty()) {
    flags.model = m.cuda ? "gpt2" : "tiny";
    notice("no --model given; using the preset '{}'", flags.model);
  }
  static_cast<ModelBundle&>(m) = open_model_bundle(flags.model, {flags.chat_template});
  if (!flags.quantize.empty()) {
    m.weights = quantize_weights(std::move(m.weights), *QuantizeScheme::parse(flags.quantize));
  }
  if (m.config().synthetic_weights) {
    notice("'{}' has synthetic weights: output text is meaningless; speed is real", m.name);
  }
  return m;
}

BackendOptions backend_options(const ModelFlags& model, const EngineFlags& engine) {
  BackendOptions o;
  o.block_size = engine.block_size;
  o.num_kv_blocks = engine.num_kv_blocks;
  o.max_num_seqs = engine.max_num_seqs;
  o.max_num_batched_tokens = engine.max_num_batched_tokens;
  o.max_model_len = engine.max_model_len;
  o.gpu_memory_utilization = engine.gpu_memory_utilization;
  o.dtype = model.dtype;
  o.dequantize_weights = model.dtype_given;
  o.cuda_graphs = !engine.no_cuda_graph;
  o.batch_invariant = engine.batch_invariant;
  return o;
}

std::unique_ptr<Backend> make_backend(const LoadedModel& model, const ModelFlags& model_flags,
                                      const EngineFlags& engine_flags) {
  const int ranks = model_flags.tensor_parallel;
  std::vector<int> devices;
  for (int d = 0; d < ranks; ++d) devices.push_back(d);
  if (model.cuda && ranks > cuda_device_count()) {
    throw CLI::ValidationError(
        "--tensor-parallel", fmt::format("{} GPUs needed, {} present", ranks, cuda_device_count()));
  }
  return make_backend_on(model, model_flags, backend_options(model_flags, engine_flags), devices);
}

std::unique_ptr<Backend> make_backend_on(const LoadedModel& model, const ModelFlags& model_flags,
                                         const BackendOptions& options,
                                         const std::vector<int>& devices) {
  const int ranks = model_flags.tensor_parallel;
  if (ranks > 1) {
    check_tensor_parallel(model.config(), ranks);
    if (!model.cuda) return make_cpu_tensor_parallel_backend(*model.weights, options, ranks);
    auto backend = make_cuda_tensor_parallel_backend(*model.weights, options, devices);
    if (!options.dequantize_weights && has_quantized_linear(*model.weights)) {
      // A matrix cut inside a ggml block cannot stay in blocks (sharded_weights.h): say what the
      // first GPU keeps (every rank's cuts fall alike).
      notice(
          "--tensor-parallel {}: each GPU keeps {} (matrices cut inside a ggml block are "
          "decoded to {})",
          ranks, backend->weight_types(), options.dtype);
    }
    return backend;
  }
  BackendOptions one = options;
  one.device = devices.empty() ? options.device : devices.front();
  if (model.cuda) return make_cuda_backend(*model.weights, one);
  return make_cpu_backend(*model.weights, one);
}

EngineConfig engine_config(const EngineFlags& flags, SchedulerMode mode, bool prefix_cache) {
  EngineConfig config;
  config.mode = mode;
  config.max_num_seqs = flags.max_num_seqs;
  config.max_num_batched_tokens = flags.max_num_batched_tokens;
  config.prefix_cache = prefix_cache;
  if (flags.no_overlap) config.overlap = StepOverlap::kOff;
  return config;
}

std::vector<SchedulerMode> parse_modes(const std::string& mode) {
  if (mode == "all")
    return {SchedulerMode::kNaive, SchedulerMode::kOffline, SchedulerMode::kOnline};
  if (mode == "naive") return {SchedulerMode::kNaive};
  if (mode == "online") return {SchedulerMode::kOnline};
  return {SchedulerMode::kOffline};
}

std::optional<std::vector<double>> arrival_times(const std::vector<RequestSpec>& specs) {
  std::vector<double> times;
  times.reserve(specs.size());
  for (const RequestSpec& spec : specs) {
    if (!spec.arrival_time) return std::nullopt;
    times.push_back(*spec.arrival_time);
  }
  return times;
}

int max_model_len(const LoadedModel& model, const EngineFlags& engine) {
  const int positions = model.config().max_position_embeddings;
  if (engine.max_model_len > positions) {
    fail("--max-model-len {} is more than the model's {} positions", engine.max_model_len,
         positions);
  }
  return engine.max_model_len > 0 ? engine.max_model_len : positions;
}

}  // namespace rose::cli
