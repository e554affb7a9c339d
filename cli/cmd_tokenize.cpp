// roseinfer tokenize PROMPTS.jsonl --model X: what the model really sees, one JSON line per
// request: its id, the prompt text after the chat template, and the token ids.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/common/json_string.h"
#include "engine/io/prompts.h"
#include "engine/io/requests.h"

namespace {

struct TokenizeArgs {
  std::string prompts_path;
  rose::cli::ModelFlags model;
};

std::string ids_json(const std::vector<int32_t>& ids) {
  return fmt::format("[{}]", fmt::join(ids, ","));
}

void tokenize_command(TokenizeArgs& args) {
  using namespace rose;
  const PromptFile file = read_prompt_file(args.prompts_path, /*skip_invalid=*/false);
  // Tokenizing needs no backend: the CPU is enough whatever --device says.
  args.model.device = "cpu";
  const cli::LoadedModel model = cli::open_model(args.model);
  const std::vector<EngineRequest> requests =
      prepare_requests(file.requests, args.prompts_path, model, {}, 0, 1 << 30);
  std::string out;
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestSpec& spec = file.requests[i];
    const std::string where = fmt::format("{}:{}", args.prompts_path, spec.line);
    // Ids given as ids show as the text they stand for, special tokens included.
    const std::string text =
        spec.prompt_token_ids
            ? (model.tokenizer ? model.tokenizer->decode(requests[i].prompt, false) : "")
            : render_prompt_text(spec, model, where);
    out += fmt::format(R"({{"id":{},"prompt":{},"token_ids":{},"num_tokens":{}}})",
                       json_quote(spec.id), json_quote(text), ids_json(requests[i].prompt),
                       requests[i].prompt.size());
    out += '\n';
  }
  fmt::print("{}", out);
}

}  // namespace

void register_tokenize_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize",
      "Print each request's prompt as the model sees it: chat template applied, token ids");
  cmd->add_option("prompts", args->prompts_path, "JSONL prompt file")->required();
  rose::cli::add_model_flags(cmd, args->model);
  cmd->callback([args, &exit_code] {
    tokenize_command(*args);
    exit_code = 0;
  });
}
