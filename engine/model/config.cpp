#include "engine/model/config.h"

#include <simdjson.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>

#include "engine/common/error.h"
#include "engine/common/json_parse.h"
#include "engine/model/weights.h"

namespace rose {

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::kGpt2:
      return "gpt2";
    case Arch::kLlama:
      return "llama";
  }
  return "unknown";
}

int64_t ModelConfig::num_parameters() const {
  int64_t total = 0;
  for (const TensorSpec& spec : canonical_tensors(*this)) total += spec.numel();
  return total;
}

void ModelConfig::validate(const std::string& source) const {
  auto require_positive = [&](int value, const char* field) {
    if (value <= 0) fail("{}: {} must be positive, got {}", source, field, value);
  };
  require_positive(vocab_size, "vocab_size");
  require_positive(hidden_size, "hidden_size");
  require_positive(intermediate_size, "intermediate_size");
  require_positive(num_layers, "num_hidden_layers");
  require_positive(num_heads, "num_attention_heads");
  require_positive(num_kv_heads, "num_key_value_heads");
  require_positive(head_dim, "head_dim");
  require_positive(max_position_embeddings, "max_position_embeddings");
  if (num_heads % num_kv_heads != 0) {
    fail("{}: num_attention_heads ({}) must be a multiple of num_key_value_heads ({})", source,
         num_heads, num_kv_heads);
  }
  // GPT-2's config has no head_dim or kv-head count of its own; these are its format's rules.
  if (arch == Arch::kGpt2) {
    if (num_heads * head_dim != hidden_size) {
      fail("{}: n_head ({}) must divide n_embd ({})", source, num_heads, hidden_size);
    }
    if (num_kv_heads != num_heads) {
      fail("{}: GPT-2 has one key/value head per query head", source);
    }
  }
  if (uses_rope() && head_dim % 2 != 0) {
    fail("{}: head_dim ({}) must be even for rotary embeddings", source, head_dim);
  }
  // The backends size rows with int (qkv_dim, 2 * intermediate); keep those from overflowing.
  const int64_t widest = std::max<int64_t>(
      {int64_t(num_heads + 2 * int64_t(num_kv_heads)) * head_dim, 2 * int64_t(intermediate_size),
       int64_t(hidden_size), int64_t(vocab_size)});
  if (widest > (int64_t(1) << 30)) fail("{}: model dimensions are implausibly large", source);
  if (!(norm_eps > 0.0f) || !std::isfinite(norm_eps)) {
    fail("{}: the norm epsilon must be a positive number, got {}", source, norm_eps);
  }
  if (uses_rope() && (!(rope_theta > 0.0f) || !std::isfinite(rope_theta))) {
    fail("{}: rope_theta must be a positive number, got {}", source, rope_theta);
  }
  if (!rope_scaling.type.empty()) {
    if (rope_scaling.type != "llama3") {
      fail("{}: rope_scaling type '{}' is not supported (only llama3 or default)", source,
           rope_scaling.type);
    }
    if (!(rope_scaling.factor > 0.0f) || !(rope_scaling.low_freq_factor > 0.0f) ||
        !(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor) ||
        rope_scaling.original_max_position_embeddings <= 0) {
      fail(
          "{}: rope_scaling llama3 needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
          "original_max_position_embeddings > 0",
          source);
    }
  }
  if (bos_token_id < -1 || bos_token_id >= vocab_size) {
    fail("{}: bos_token_id {} is outside the vocabulary (size {})", source, bos_token_id,
         vocab_size);
  }
  for (int id : eos_token_ids) {
    if (id < 0 || id >= vocab_size) {
      fail("{}: eos_token_id {} is outside the vocabulary (size {})", source, id, vocab_size);
    }
  }
}

namespace {

const char* json_type_name(simdjson::dom::element_type type) {
  using T = simdjson::dom::element_type;
  switch (type) {
    case T::ARRAY:
      return "an array";
    case T::OBJECT:
      return "an object";
    case T::INT64:
    case T::UINT64:
      return "an integer";
    case T::DOUBLE:
      return "a number";
    case T::STRING:
      return "a string";
    case T::BOOL:
      return "a boolean";
    case T::NULL_VALUE:
      return "null";
  }
  return "unknown";
}

// Typed access to one JSON object's fields; errors name the file and the (dotted) field.
class Fields {
 public:
  Fields(simdjson::dom::object object, std::string file, std::string prefix = "")
      : object_(object), file_(std::move(file)), prefix_(std::move(prefix)) {}

  // Present and not null.
  bool has(const char* key) const {
    simdjson::dom::element value;
    return !object_[key].get(value) && !value.is_null();
  }

  int get_int(const char* key) const {
    std::optional<int> value = opt_int(key);
    if (!value) missing(key);
    return *value;
  }
  std::optional<int> opt_int(const char* key) const {
    simdjson::dom::element value;
    if (!lookup(key, &value)) return std::nullopt;
    return as_int(key, value);
  }
  int int_or(const char* key, int fallback) const { return opt_int(key).value_or(fallback); }

  float get_float(const char* key) const {
    std::optional<float> value = opt_float(key);
    if (!value) missing(key);
    return *value;
  }
  std::optional<float> opt_float(const char* key) const {
    simdjson::dom::element value;
    if (!lookup(key, &value)) return std::nullopt;
    double number;
    if (value.get_double().get(number)) wrong_type(key, value, "a number");
    return float(number);
  }
  float float_or(const char* key, float fallback) const {
    return opt_float(key).value_or(fallback);
  }

  bool bool_or(const char* key, bool fallback) const {
    simdjson::dom::element value;
    if (!lookup(key, &value)) return fallback;
    bool flag;
    if (value.get_bool().get(flag)) wrong_type(key, value, "true or false");
    return flag;
  }

  std::optional<std::string> opt_string(const char* key) const {
    simdjson::dom::element value;
    if (!lookup(key, &value)) return std::nullopt;
    std::string_view text;
    if (value.get_string().get(text)) wrong_type(key, value, "a string");
    return std::string(text);
  }
  std::string get_string(const char* key) const {
    std::optional<std::string> value = opt_string(key);
    if (!value) missing(key);
    return *value;
  }

  std::optional<simdjson::dom::object> opt_object(const char* key) const {
    simdjson::dom::element value;
    if (!lookup(key, &value)) return std::nullopt;
    simdjson::dom::object object;
    if (value.get_object().get(object)) wrong_type(key, value, "an object");
    return object;
  }

  // An int, a list of ints, or null/absent (empty).
  std::vector<int> int_list(const char* key) const {
    simdjson::dom::element value;
    if (!lookup(key, &value)) return {};
    if (!value.is_array()) return {as_int(key, value)};
    std::vector<int> ids;
    simdjson::dom::array items;
    if (value.get_array().get(items)) wrong_type(key, value, "an integer or a list");
    for (simdjson::dom::element item : items) ids.push_back(as_int(key, item));
    return ids;
  }

  std::string name(const char* key) const { return prefix_ + key; }
  const std::string& file() const { return file_; }

 private:
  bool lookup(const char* key, simdjson::dom::element* value) const {
    return !object_[key].get(*value) && !value->is_null();
  }
  // Integers may be written as 8192 or 8192.0; anything fractional or out of range is rejected.
  int as_int(const char* key, simdjson::dom::element value) const {
    int64_t integer;
    if (!value.get_int64().get(integer)) {
      if (integer < std::numeric_limits<int>::min() || integer > std::numeric_limits<int>::max()) {
        fail("{}: field '{}' = {} is out of range", file_, name(key), integer);
      }
      return int(integer);
    }
    double number;
    if (!value.get_double().get(number) && number == std::floor(number) &&
        std::fabs(number) <= double(std::numeric_limits<int>::max())) {
      return int(number);
    }
    wrong_type(key, value, "an integer");
  }
  [[noreturn]] void missing(const char* key) const {
    fail("{}: missing field '{}'", file_, name(key));
  }
  [[noreturn]] void wrong_type(const char* key, simdjson::dom::element value,
                               const char* expected) const {
    fail("{}: field '{}' must be {}, got {}", file_, name(key), expected,
         json_type_name(value.type()));
  }

  simdjson::dom::object object_;
  std::string file_;
  std::string prefix_;
};

// rope_scaling (older files) or rope_parameters (newer): {"rope_type" | "type", "factor", ...}.
void parse_rope(const Fields& root, ModelConfig* config) {
  config->rope_theta = root.float_or("rope_theta", 10000.0f);
  std::optional<simdjson::dom::object> scaling;
  std::string prefix;
  if ((scaling = root.opt_object("rope_parameters"))) {
    prefix = "rope_parameters.";
  } else if ((scaling = root.opt_object("rope_scaling"))) {
    prefix = "rope_scaling.";
  }
  if (!scaling) return;
  const Fields fields(*scaling, root.file(), prefix);
  if (prefix == "rope_parameters.")
    config->rope_theta = fields.float_or("rope_theta", config->rope_theta);
  std::optional<std::string> type = fields.opt_string("rope_type");
  if (!type) type = fields.opt_string("type");
  if (!type || *type == "default") return;
  if (*type != "llama3") {
    fail("{}: field '{}' = '{}' is not supported (only llama3 or default)", root.file(),
         fields.name(fields.has("rope_type") ? "rope_type" : "type"), *type);
  }
  config->rope_scaling.type = "llama3";
  config->rope_scaling.factor = fields.get_float("factor");
  config->rope_scaling.low_freq_factor = fields.get_float("low_freq_factor");
  config->rope_scaling.high_freq_factor = fields.get_float("high_freq_factor");
  config->rope_scaling.original_max_position_embeddings =
      fields.get_int("original_max_position_embeddings");
}

void parse_gpt2(const Fields& f, ModelConfig* config) {
  config->arch = Arch::kGpt2;
  config->vocab_size = f.get_int("vocab_size");
  config->max_position_embeddings =
      f.has("n_positions") ? f.get_int("n_positions") : f.get_int("n_ctx");
  config->hidden_size = f.get_int("n_embd");
  config->num_layers = f.get_int("n_layer");
  config->num_heads = f.get_int("n_head");
  config->num_kv_heads = config->num_heads;
  if (config->num_heads > 0 && config->hidden_size % config->num_heads != 0) {
    fail("{}: n_head ({}) must divide n_embd ({})", f.file(), config->num_heads,
         config->hidden_size);
  }
  config->head_dim = config->num_heads > 0 ? config->hidden_size / config->num_heads : 0;
  config->intermediate_size = f.int_or("n_inner", 4 * config->hidden_size);
  config->norm_eps = f.float_or("layer_norm_epsilon", 1e-5f);
  const std::string activation = f.opt_string("activation_function").value_or("gelu_new");
  // All three are the tanh approximation the engine implements.
  if (activation != "gelu_new" && activation != "gelu_pytorch_tanh" && activation != "gelu_fast") {
    fail("{}: field 'activation_function' = '{}' is not supported (gelu_new)", f.file(),
         activation);
  }
  if (f.bool_or("scale_attn_by_inverse_layer_idx", false)) {
    fail("{}: field 'scale_attn_by_inverse_layer_idx' = true is not supported", f.file());
  }
  if (!f.bool_or("scale_attn_weights", true)) {
    fail("{}: field 'scale_attn_weights' = false is not supported", f.file());
  }
  config->tie_word_embeddings = f.bool_or("tie_word_embeddings", true);
  config->qkv_bias = true;
}

void parse_llama(const Fields& f, const std::string& model_type, ModelConfig* config) {
  config->arch = Arch::kLlama;
  config->vocab_size = f.get_int("vocab_size");
  config->hidden_size = f.get_int("hidden_size");
  config->intermediate_size = f.get_int("intermediate_size");
  config->num_layers = f.get_int("num_hidden_layers");
  config->num_heads = f.get_int("num_attention_heads");
  config->num_kv_heads = f.int_or("num_key_value_heads", config->num_heads);
  config->max_position_embeddings = f.get_int("max_position_embeddings");
  if (f.has("head_dim")) {
    config->head_dim = f.get_int("head_dim");
  } else {
    if (config->num_heads > 0 && config->hidden_size % config->num_heads != 0) {
      fail("{}: num_attention_heads ({}) must divide hidden_size ({}) when head_dim is absent",
           f.file(), config->num_heads, config->hidden_size);
    }
    config->head_dim = config->num_heads > 0 ? config->hidden_size / config->num_heads : 0;
  }
  config->norm_eps = f.float_or("rms_norm_eps", 1e-6f);
  const std::string activation = f.opt_string("hidden_act").value_or("silu");
  if (activation != "silu") {
    fail("{}: field 'hidden_act' = '{}' is not supported (silu)", f.file(), activation);
  }
  parse_rope(f, config);
  config->tie_word_embeddings = f.bool_or("tie_word_embeddings", false);
  if (model_type == "qwen2") {
    config->qkv_bias = true;
  } else if (f.bool_or("attention_bias", false)) {
    // Llama's attention_bias also puts a bias on o_proj, which the canonical layout has no slot
    // for.
    fail("{}: field 'attention_bias' = true is not supported for {} (o_proj bias)", f.file(),
         model_type);
  }
  if (f.bool_or("mlp_bias", false)) fail("{}: field 'mlp_bias' = true is not supported", f.file());
}

std::string folder_name(const std::filesystem::path& config_path) {
  std::filesystem::path folder = std::filesystem::absolute(config_path).lexically_normal();
  folder = folder.parent_path();
  if (folder.filename().empty()) folder = folder.parent_path();
  return folder.filename().string();
}

}  // namespace

ModelConfig load_config_json(const std::filesystem::path& path) {
  const std::string file = path.string();
  simdjson::padded_string text;
  if (auto err = simdjson::padded_string::load(file).get(text)) {
    fail("cannot read {}: {}", file, simdjson::error_message(err));
  }
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parse_json_widening(parser, text, root)) {
    fail("{}: not valid JSON: {}", file, simdjson::error_message(err));
  }
  simdjson::dom::object object;
  if (root.get_object().get(object)) fail("{}: expected a JSON object", file);
  const Fields fields(object, file);

  ModelConfig config;
  const std::string model_type = fields.get_string("model_type");
  if (model_type == "gpt2") {
    parse_gpt2(fields, &config);
  } else if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2") {
    parse_llama(fields, model_type, &config);
  } else {
    fail("{}: field 'model_type' = '{}' is not supported (gpt2, llama, mistral, qwen2)", file,
         model_type);
  }
  config.name = folder_name(path);

  // Ids outside the vocabulary can be neither produced nor embedded (transformers' own GPT-2
  // defaults put them at 50256 even for a tiny vocabulary), so they are dropped, not fatal.
  const std::optional<int> bos = fields.opt_int("bos_token_id");
  config.bos_token_id = bos && *bos >= 0 && *bos < config.vocab_size ? *bos : -1;
  for (int id : fields.int_list("eos_token_id")) {
    if (id >= 0 && id < config.vocab_size) config.eos_token_ids.push_back(id);
  }
  config.validate(file);
  return config;
}

}  // namespace rose
