#include "engine/model/bundle.h"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/common/error.h"
#include "engine/common/json_parse.h"
#include "engine/model/gguf_model.h"
#include "engine/model/model_source.h"
#include "engine/model/presets.h"

namespace rose {
namespace fs = std::filesystem;

namespace {

// The presets' built-in template: what render_plain_chat writes, through the same interpreter as
// real templates. Presets have synthetic weights, so any plain shape serves.
constexpr const char* kPresetChatTemplate =
    "{% for message in messages %}{{ message.role }}: {{ message.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot be read", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void add_end_id(ModelBundle& bundle, int64_t id) {
  if (id < 0 || id >= bundle.config().vocab_size) return;
  if (std::find(bundle.eos_ids.begin(), bundle.eos_ids.end(), int32_t(id)) ==
      bundle.eos_ids.end()) {
    bundle.eos_ids.push_back(int32_t(id));
  }
}

// A JSON file that must hold an object; errors name the file and say what is wrong.
simdjson::dom::element load_json_object(simdjson::dom::parser& parser, const fs::path& path) {
  simdjson::padded_string text;
  if (auto error = simdjson::padded_string::load(path.string()).get(text)) {
    fail("cannot read {}: {}", path.string(), simdjson::error_message(error));
  }
  simdjson::dom::element root;
  if (auto error = parse_json_widening(parser, text, root)) {
    fail("{}: not valid JSON: {}", path.string(), simdjson::error_message(error));
  }
  if (!root.is_object()) fail("{}: not a JSON object", path.string());
  return root;
}

// tokenizer_config.json writes special tokens as a string or as {"content": "..."}.
std::string token_text(simdjson::dom::element value) {
  std::string_view text;
  if (!value.get_string().get(text)) return std::string(text);
  if (!value["content"].get_string().get(text)) return std::string(text);
  return "";
}

// chat_template: a string, or a list of {"name", "template"} of which "default" is the one.
void read_tokenizer_config(const fs::path& folder, ModelBundle& bundle) {
  const fs::path path = folder / "tokenizer_config.json";
  if (!fs::exists(path)) return;
  simdjson::dom::parser parser;
  const simdjson::dom::element root = load_json_object(parser, path);
  if (auto bos = root["bos_token"]; !bos.error()) bundle.bos_token = token_text(bos.value());
  if (auto eos = root["eos_token"]; !eos.error()) bundle.eos_token = token_text(eos.value());
  auto chat = root["chat_template"];
  if (chat.error()) return;
  std::string_view text;
  if (!chat.get_string().get(text)) {
    bundle.chat_template = std::string(text);
  } else if (simdjson::dom::array list; !chat.get_array().get(list)) {
    for (simdjson::dom::element entry : list) {
      std::string_view name, body;
      if (!entry["name"].get_string().get(name) && name == "default" &&
          !entry["template"].get_string().get(body)) {
        bundle.chat_template = std::string(body);
      }
    }
    if (bundle.chat_template.empty()) {
      fail("{}: field 'chat_template': a list without a 'default' template", path.string());
    }
  } else {
    fail("{}: field 'chat_template': expected a string or a list of templates", path.string());
  }
  bundle.chat_template_source = path.string() + " (chat_template)";
}

// generation_config.json's eos_token_id (an id or a list) joins config.json's end set.
void read_generation_config(const fs::path& folder, ModelBundle& bundle) {
  const fs::path path = folder / "generation_config.json";
  if (!fs::exists(path)) return;
  simdjson::dom::parser parser;
  const simdjson::dom::element root = load_json_object(parser, path);
  auto eos = root["eos_token_id"];
  if (eos.error()) return;
  int64_t id = 0;
  if (!eos.get_int64().get(id)) {
    add_end_id(bundle, id);
  } else if (simdjson::dom::array list; !eos.get_array().get(list)) {
    for (simdjson::dom::element item : list) {
      if (item.get_int64().get(id)) {
        fail("{}: field 'eos_token_id': expected integers", path.string());
      }
      add_end_id(bundle, id);
    }
  } else if (!eos.is_null()) {
    fail("{}: field 'eos_token_id': expected an integer or a list of them", path.string());
  }
}

void open_hf_folder(const fs::path& folder, ModelBundle& bundle) {
  bundle.format = "safetensors";
  bundle.weights = open_model(folder.string());
  const fs::path tokenizer = folder / "tokenizer.json";
  if (fs::exists(tokenizer)) {
    bundle.tokenizer = load_tokenizer_json(tokenizer);
    bundle.tokenizer_source = tokenizer.string();
  }
  read_tokenizer_config(folder, bundle);
  const fs::path jinja = folder / "chat_template.jinja";
  if (bundle.chat_template.empty() && fs::exists(jinja)) {
    bundle.chat_template = read_text_file(jinja);
    bundle.chat_template_source = jinja.string();
  }
  for (int id : bundle.config().eos_token_ids) add_end_id(bundle, id);
  read_generation_config(folder, bundle);
}

void open_gguf(const fs::path& path, ModelBundle& bundle) {
  bundle.format = "gguf";
  const auto model = GgufModel::open(path);
  bundle.weights = GgufModel::weights(model);
  TokenizerVocab vocab = model->vocab();
  vocab.source = path.string();
  bundle.tokenizer = make_tokenizer(vocab);
  bundle.tokenizer_source = path.string() + " (tokenizer.ggml.*)";
  if (auto chat = model->chat_template()) {
    bundle.chat_template = *chat;
    bundle.chat_template_source = path.string() + " (tokenizer.chat_template)";
  }
  for (int id : bundle.config().eos_token_ids) add_end_id(bundle, id);
  for (int id : model->end_ids()) add_end_id(bundle, id);
}

// Templates see BOS and EOS by their text; a GGUF or a folder without tokenizer_config.json
// names them only by id.
void fill_special_token_texts(ModelBundle& bundle) {
  if (!bundle.tokenizer) return;
  if (bundle.bos_token.empty() && bundle.tokenizer->bos_id()) {
    bundle.bos_token = bundle.tokenizer->token_bytes(*bundle.tokenizer->bos_id());
  }
  if (bundle.eos_token.empty() && bundle.tokenizer->eos_id()) {
    bundle.eos_token = bundle.tokenizer->token_bytes(*bundle.tokenizer->eos_id());
  }
}

}  // namespace

ModelBundle open_model_bundle(const std::string& model, const BundleOptions& options) {
  ModelBundle bundle;
  bundle.name = model;
  const ModelSource source = resolve_model_source(model, process_environment());
  switch (source.kind) {
    case ModelSourceKind::kPreset:
      bundle.format = "preset";
      bundle.weights = open_model(model);
      bundle.tokenizer = make_byte_tokenizer(bundle.config().vocab_size);
      bundle.tokenizer_source = "preset";
      bundle.chat_template = kPresetChatTemplate;
      bundle.chat_template_source = "built-in plain template (presets)";
      for (int id : bundle.config().eos_token_ids) add_end_id(bundle, id);
      break;
    case ModelSourceKind::kGguf:
      open_gguf(source.path, bundle);
      break;
    case ModelSourceKind::kHfFolder:
      open_hf_folder(source.path, bundle);
      break;
  }
  if (!options.chat_template_path.empty()) {
    bundle.chat_template = read_text_file(options.chat_template_path);
    bundle.chat_template_source = options.chat_template_path + " (--chat-template)";
  }
  fill_special_token_texts(bundle);
  return bundle;
}

}  // namespace rose
