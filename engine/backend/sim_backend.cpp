#include "engine/backend/sim_backend.h"

#include <fmt/format.h>
#include <simdjson.h>

#include "engine/common/error.h"
#include "engine/io/atomic_file.h"

namespace rose {

double StepTimeModel::step_time(const StepPlan& plan) const {
  int64_t prefill_tokens = 0, decode_seqs = 0, kv_tokens_read = 0;
  for (int s = 0; s < plan.num_seqs(); ++s) {
    const int query = plan.query_start[size_t(s) + 1] - plan.query_start[size_t(s)];
    if (query == 1) {
      ++decode_seqs;
      kv_tokens_read += plan.context_lens[size_t(s)];
    } else {
      prefill_tokens += query;
    }
  }
  return base_s + per_prefill_token_s * double(prefill_tokens) +
         per_decode_seq_s * double(decode_seqs) + per_kv_token_read_s * double(kv_tokens_read);
}

StepTimeModel read_step_time_model(const std::string& path) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto error = parser.load(path).get(root))
    fail("{}: cannot read a step-time model: {}", path, simdjson::error_message(error));
  StepTimeModel model;
  const std::pair<const char*, double*> fields[] = {
      {"base_s", &model.base_s},
      {"per_prefill_token_s", &model.per_prefill_token_s},
      {"per_decode_seq_s", &model.per_decode_seq_s},
      {"per_kv_token_read_s", &model.per_kv_token_read_s}};
  for (const auto& [key, value] : fields) {
    double number = 0;
    if (root[key].get_double().get(number))
      fail("{}: field '{}': expected a number (a `roseinfer calibrate` output)", path, key);
    if (!(number >= 0)) fail("{}: field '{}': must be >= 0, got {}", path, key, number);
    *value = number;
  }
  std::string_view source;
  if (!root["source"].get_string().get(source)) model.source = std::string(source);
  return model;
}

void write_step_time_model(const std::string& path, const StepTimeModel& model) {
  std::string escaped;
  for (char c : model.source) {
    if (c == '"' || c == '\\') escaped += '\\';
    if (c == '\n') {
      escaped += "\\n";
      continue;
    }
    escaped += c;
  }
  write_file_atomically(
      path, fmt::format("{{\n  \"base_s\": {:.9g},\n  \"per_prefill_token_s\": {:.9g},\n"
                        "  \"per_decode_seq_s\": {:.9g},\n  \"per_kv_token_read_s\": {:.9g},\n"
                        "  \"source\": \"{}\"\n}}\n",
                        model.base_s, model.per_prefill_token_s, model.per_decode_seq_s,
                        model.per_kv_token_read_s, escaped));
}

namespace {

class SimBackend final : public Backend {
 public:
  SimBackend(const ModelConfig& config, const BackendOptions& options, const StepTimeModel& model,
             SimClock& clock)
      : config_(config), options_(options), model_(model), clock_(clock) {
    if (options.num_kv_blocks < 1)
      fail("--backend sim needs --num-kv-blocks (it has no memory to size a KV pool from)");
    limits_ = {options.max_num_batched_tokens,
               options.max_num_seqs,
               options.max_model_len > 0 ? options.max_model_len : config.max_position_embeddings,
               options.num_kv_blocks,
               options.block_size,
               config.vocab_size};
  }

  void execute(const StepPlan& plan, StepOutput& out) override {
    validate_step_plan(plan, limits_);
    out.sampled.assign(size_t(plan.num_seqs()), -1);
    for (int s = 0; s < plan.num_seqs(); ++s) {
      if (!plan.do_sample[size_t(s)]) continue;
      // A fixed function of the last token and how many the request has made: reproducible, and
      // it varies so no output is one repeated id.
      const uint64_t last = uint64_t(plan.token_ids[size_t(plan.query_start[size_t(s) + 1] - 1)]);
      const uint64_t mixed = (last * 0x9E3779B97F4A7C15ull) ^ (plan.sample_index[size_t(s)] + 1);
      out.sampled[size_t(s)] = int32_t(mixed % uint64_t(config_.vocab_size));
    }
    out.logits.clear();
    clock_.advance(model_.step_time(plan));
  }
  const PlanLimits& limits() const override { return limits_; }
  std::string device_name() const override { return "sim (step-time model, virtual clock)"; }
  const ModelConfig& config() const override { return config_; }
  int64_t weight_bytes() const override { return 0; }
  std::string weight_types() const override { return "none (step-time model)"; }
  int64_t kv_bytes_per_token() const override {
    return 2 * int64_t(config_.num_layers) * config_.kv_dim() * 2;  // K and V, bf16
  }

 private:
  ModelConfig config_;
  BackendOptions options_;
  StepTimeModel model_;
  SimClock& clock_;
  PlanLimits limits_;
};

}  // namespace

std::unique_ptr<Backend> make_sim_backend(const ModelConfig& config, const BackendOptions& options,
                                          const StepTimeModel& model, SimClock& clock) {
  return std::make_unique<SimBackend>(config, options, model, clock);
}

}  // namespace rose
