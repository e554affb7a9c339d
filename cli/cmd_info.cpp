// `roseinfer info`: what a model is and what it costs in memory, without building a backend.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/model/gguf_model.h"

namespace {

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} {}", bytes, units[u])
                : fmt::format("{:.2f} {}", bytes, units[u]);
}

std::string count_text(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(size_t(i), ",");
  return n < 0 ? "-" + digits : digits;
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

}  // namespace

void register_info_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<rose::cli::ModelFlags>();
  CLI::App* cmd = app.add_subcommand(
      "info", "Describe a model: shape, parameters, weight and KV-cache bytes, tokenizer");
  rose::cli::add_model_flags(cmd, *flags);
  cmd->callback([flags, &exit_code] {
    if (std::filesystem::path(flags->model).extension() == ".gguf") {
      KeyValues t;
      t.add_row({"model", flags->model});
      for (auto& [label, value] : rose::GgufModel::open(flags->model)->summary()) {
        t.add_row({label, value});
      }
      fmt::print("{}", t.render());
      exit_code = 0;
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
    if (c.arch == rose::Arch::kLlama) {
      std::string rope = fmt::format("theta {}", c.rope_theta);
      if (!c.rope_scaling.type.empty()) {
        rope += fmt::format(", {} scaling x{}", c.rope_scaling.type, c.rope_scaling.factor);
      }
      t.add_row({"rope", rope});
    } else {
      t.add_row({"positions", "learned"});
    }
    t.add_row({"tied embeddings", c.tie_word_embeddings ? "yes" : "no"});
    t.add_row({"parameters", fmt::format("{} ({})", count_text(params),
                                         params >= 1e9 ? fmt::format("{:.2f}B", params / 1e9)
                                                       : fmt::format("{:.1f}M", params / 1e6))});
    t.add_row({"weight bytes", both_dtypes(double(params))});
    t.add_row({"KV bytes per token", both_dtypes(double(c.kv_elements_per_token()))});
    t.add_row({"weights", c.synthetic_weights ? "synthetic (seeded random; text is meaningless)"
                                              : "checkpoint"});
    t.add_row({"tokenizer", model.tokenizer ? fmt::format("{} ({})", model.tokenizer->kind(),
                                                          model.tokenizer_source)
                                            : std::string("none (no tokenizer.json)")});
    fmt::print("{}", t.render());
    exit_code = 0;
  });
}
