// `roseinfer info`: what a model is and what it costs in memory, without building a backend.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/model/gguf_model.h"
#include "engine/model/quantized_source.h"
#include "engine/model/weight_check.h"
#include "engine/parallel/shard_plan.h"

namespace {

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} {}", bytes, units[u])
                : fmt::format("{:.2f} {}", bytes, units[u]);
}

std::string count_text(int64_t n) {
  // Built forwards rather than with string::insert, which trips GCC 12's -Wrestrict when inlined.
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// "key   value" lines with the values aligned.
class KeyValues {
 public:
  void add_row(std::vector<std::string> row) {
    rows_.emplace_back(std::move(row[0]), std::move(row[1]));
  }
  std::string render() const {
    size_t width = 0;
    for (const auto& [key, value] : rows_) width = std::max(width, key.size());
    std::string out;
    for (const auto& [key, value] : rows_) out += fmt::format("{:<{}}  {}\n", key, width, value);
    return out;
  }

 private:
  std::vector<std::pair<std::string, std::string>> rows_;
};

// Prints what check_weights found; the exit status: 1 when a value is not finite.
int print_weight_check(const rose::WeightSource& weights) {
  constexpr int kReported = 10;
  const rose::WeightCheck check = rose::check_weights(weights, kReported);
  if (check.non_finite == 0) {
    fmt::print("weight check: {} values in {} tensors, all finite\n", count_text(check.values),
               count_text(check.tensors));
    return 0;
  }
  fmt::print("weight check: {} of {} values are NaN or infinite; the first:\n",
             count_text(check.non_finite), count_text(check.values));
  for (const rose::NonFiniteWeight& w : check.first) {
    fmt::print("  {}[{}] = {}\n", w.tensor, fmt::join(w.position, ", "), w.value);
  }
  return 1;
}

}  // namespace

void register_info_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<rose::cli::ModelFlags>();
  auto check = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "info", "Describe a model: shape, parameters, weight and KV-cache bytes, tokenizer");
  rose::cli::add_model_flags(cmd, *flags);
  cmd->add_flag("--check-weights", *check,
                "read every tensor and report NaN or infinite values (exit 1 when there are any)");
  cmd->callback([flags, check, &exit_code] {
    if (std::filesystem::path(flags->model).extension() == ".gguf") {
      KeyValues t;
      t.add_row({"model", flags->model});
      const auto gguf = rose::GgufModel::open(flags->model);
      for (auto& [label, value] : gguf->summary()) t.add_row({label, value});
      fmt::print("{}", t.render());
      exit_code = *check ? print_weight_check(*rose::GgufModel::weights(gguf)) : 0;
      return;
    }
    rose::cli::LoadedModel model = rose::cli::open_model(*flags);
    const rose::ModelConfig& c = model.config();
    // The GPU stores weights and KV in --dtype (2 bytes each); the CPU backend computes in fp32.
    auto both_dtypes = [&](double elements) {
      return fmt::format("{} at {}, {} at fp32 (cpu)", bytes_text(elements * 2), flags->dtype,
                         bytes_text(elements * 4));
    };
    const int64_t params = c.num_parameters();
    KeyValues t;
    t.add_row({"model", model.name});
    t.add_row({"architecture", rose::arch_name(c.arch)});
    t.add_row({"layers", count_text(c.num_layers)});
    t.add_row({"hidden", count_text(c.hidden_size)});
    t.add_row({"heads / kv heads", fmt::format("{} / {} (GQA {}:1)", c.num_heads, c.num_kv_heads,
                                               c.num_kv_heads ? c.num_heads / c.num_kv_heads : 0)});
    t.add_row({"head_dim", count_text(c.head_dim)});
    t.add_row({"intermediate", count_text(c.intermediate_size)});
    t.add_row({"vocab", count_text(c.vocab_size)});
    t.add_row({"max positions", count_text(c.max_position_embeddings)});
    if (c.uses_rope()) {
      std::string rope = fmt::format("theta {}", c.rope_theta);
      if (!c.rope_scaling.type.empty()) {
        rope += fmt::format(", {} scaling x{}", c.rope_scaling.type, c.rope_scaling.factor);
      }
      t.add_row({"rope", rope});
    } else {
      t.add_row({"positions", "learned"});
    }
    t.add_row({"tied embeddings", c.tie_word_embeddings ? "yes" : "no"});
    t.add_row({"tensor parallel", tensor_parallel_degrees_text(c)});
    t.add_row({"parameters", fmt::format("{} ({})", count_text(params),
                                         params >= 1e9 ? fmt::format("{:.2f}B", params / 1e9)
                                                       : fmt::format("{:.1f}M", params / 1e6))});
    t.add_row({"weight bytes", both_dtypes(double(params))});
    t.add_row({"KV bytes per token", both_dtypes(double(c.kv_elements_per_token()))});
    t.add_row({"weights", c.synthetic_weights ? "synthetic (seeded random; text is meaningless)"
                                              : "checkpoint"});
    // What the linear layers are stored as: "dense x 65", or "Q4_K x 65" under --quantize.
    t.add_row({"linear layers", rose::linear_weight_types(*model.weights)});
    t.add_row({"tokenizer", model.tokenizer ? fmt::format("{} ({})", model.tokenizer->kind(),
                                                          model.tokenizer_source)
                                            : std::string("none (no tokenizer.json)")});
    fmt::print("{}", t.render());
    exit_code = *check ? print_weight_check(*model.weights) : 0;
  });
}
