// config.json parsing on real-shaped files (GPT-2 124M, Llama-3.2-1B, transformers 5's
// rope_parameters layout, Qwen2-0.5B, Llama-3.1 eos lists) and the errors for bad ones. Expected
// parameter counts are the published sizes of those models.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include "engine/common/error.h"
#include "engine/common/json_parse.h"
#include "engine/model/config.h"
#include "engine/model/presets.h"
#include "engine/model/safetensors.h"
#include "tests/test_util.h"

using namespace rose;
using rose::test::contains;
using rose::test::error_of;
using rose::test::TempDir;
namespace fs = std::filesystem;

namespace {

// Writes `text` as <tmp>/<folder>/config.json and parses it.
ModelConfig load(const std::string& text, const std::string& folder = "my-model") {
  TempDir dir("config");
  fs::create_directories(dir.path / folder);
  write_file(dir.path / folder / "config.json", text);
  return load_config_json(dir.path / folder / "config.json");
}

std::string load_error(const std::string& text) {
  try {
    load(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

const char* kGpt2 = R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
  "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
  "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": null,
  "summary_first_dropout": 0.1, "summary_proj_to_labels": true, "summary_type": "cls_index",
  "summary_use_proj": true, "task_specific_params": {"text-generation": {"do_sample": true,
  "max_length": 50}}, "vocab_size": 50257})";

const char* kLlama32 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 32.0,
  "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
  "rope_type": "llama3"}, "rope_theta": 500000.0, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.45.0.dev0", "use_cache": true,
  "vocab_size": 128256})";

// The same model as transformers 5 writes it.
const char* kLlama32RopeParameters = R"({
  "attention_bias": false, "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64,
  "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_parameters": {"factor": 32.0, "high_freq_factor": 4.0,
  "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_theta": 500000.0,
  "rope_type": "llama3"}, "tie_word_embeddings": true, "dtype": "bfloat16",
  "vocab_size": 128256})";

const char* kQwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 131072, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 131072, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// A minimal Llama whose fields the error cases replace one at a time.
std::string small_llama(const std::string& extra = "") {
  return R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
    "max_position_embeddings": 256)" +
         extra + "}";
}

}  // namespace

TEST_CASE("GPT-2 124M config.json") {
  const ModelConfig c = load(kGpt2, "gpt2");
  CHECK(c.arch == Arch::kGpt2);
  CHECK(std::string(arch_name(c.arch)) == "gpt2");
  CHECK(c.name == "gpt2");
  CHECK(c.vocab_size == 50257);
  CHECK(c.hidden_size == 768);
  CHECK(c.intermediate_size == 3072);  // n_inner absent: 4 * n_embd
  CHECK(c.num_layers == 12);
  CHECK(c.num_heads == 12);
  CHECK(c.num_kv_heads == 12);
  CHECK(c.head_dim == 64);
  CHECK(c.max_position_embeddings == 1024);
  CHECK(c.norm_eps == doctest::Approx(1e-5f));
  CHECK(c.tie_word_embeddings);
  CHECK(c.qkv_bias);
  CHECK(c.bos_token_id == 50256);
  CHECK(c.eos_token_ids == std::vector<int>{50256});
  CHECK(c.rope_scaling.type.empty());
  CHECK_FALSE(c.synthetic_weights);
  CHECK(c.num_parameters() == 124439808);  // GPT2LMHeadModel's published count
  CHECK(c.qkv_dim() == 3 * 768);
}

TEST_CASE("GPT-2 n_inner set explicitly, and ids outside a small vocabulary dropped") {
  const ModelConfig c = load(R"({"model_type": "gpt2", "vocab_size": 300, "n_positions": 64,
    "n_embd": 32, "n_layer": 2, "n_head": 4, "n_inner": 40, "bos_token_id": 50256,
    "eos_token_id": 50256})");
  CHECK(c.intermediate_size == 40);
  CHECK(c.head_dim == 8);
  CHECK(c.bos_token_id == -1);
  CHECK(c.eos_token_ids.empty());
}

TEST_CASE("Llama-3.2-1B config.json with llama3 rope_scaling") {
  const ModelConfig c = load(kLlama32, "Llama-3.2-1B");
  CHECK(c.arch == Arch::kLlama);
  CHECK(c.name == "Llama-3.2-1B");
  CHECK(c.vocab_size == 128256);
  CHECK(c.hidden_size == 2048);
  CHECK(c.intermediate_size == 8192);
  CHECK(c.num_layers == 16);
  CHECK(c.num_heads == 32);
  CHECK(c.num_kv_heads == 8);
  CHECK(c.head_dim == 64);
  CHECK(c.max_position_embeddings == 131072);
  CHECK(c.norm_eps == doctest::Approx(1e-5f));
  CHECK(c.rope_theta == 500000.0f);
  CHECK(c.rope_scaling.type == "llama3");
  CHECK(c.rope_scaling.factor == 32.0f);
  CHECK(c.rope_scaling.low_freq_factor == 1.0f);
  CHECK(c.rope_scaling.high_freq_factor == 4.0f);
  CHECK(c.rope_scaling.original_max_position_embeddings == 8192);
  CHECK(c.tie_word_embeddings);
  CHECK_FALSE(c.qkv_bias);
  CHECK(c.bos_token_id == 128000);
  CHECK(c.eos_token_ids == std::vector<int>{128001});
  CHECK(c.num_parameters() == 1235814400);  // published size of Llama-3.2-1B
  CHECK(c.kv_elements_per_token() == 2 * 16 * 512);
}

TEST_CASE("the rope_parameters layout reads the same as rope_theta + rope_scaling") {
  ModelConfig old_layout = load(kLlama32, "m");
  ModelConfig new_layout = load(kLlama32RopeParameters, "m");
  CHECK(new_layout.rope_theta == 500000.0f);
  CHECK(new_layout.rope_scaling.type == "llama3");
  CHECK(new_layout.rope_scaling.factor == old_layout.rope_scaling.factor);
  CHECK(new_layout.rope_scaling.low_freq_factor == old_layout.rope_scaling.low_freq_factor);
  CHECK(new_layout.rope_scaling.high_freq_factor == old_layout.rope_scaling.high_freq_factor);
  CHECK(new_layout.rope_scaling.original_max_position_embeddings ==
        old_layout.rope_scaling.original_max_position_embeddings);
  CHECK(new_layout.num_parameters() == old_layout.num_parameters());

  const ModelConfig plain = load(small_llama(R"(, "rope_parameters": {"rope_theta": 123.0,
    "rope_type": "default"})"));
  CHECK(plain.rope_theta == 123.0f);
  CHECK(plain.rope_scaling.type.empty());
}

TEST_CASE("Qwen2 config.json: qkv bias, GQA, no head_dim field") {
  const ModelConfig c = load(kQwen2);
  CHECK(c.arch == Arch::kLlama);
  CHECK(c.qkv_bias);
  CHECK(c.head_dim == 64);  // 896 / 14
  CHECK(c.num_kv_heads == 2);
  CHECK(c.rope_theta == 1000000.0f);
  CHECK(c.norm_eps == doctest::Approx(1e-6f));
  CHECK(c.tie_word_embeddings);
  CHECK(c.eos_token_ids == std::vector<int>{151643});
  CHECK(c.num_parameters() == 494032768);  // Qwen2-0.5B's published count
}

TEST_CASE("architecture properties: GPT-2 learned positions, LayerNorm, biases, gelu MLP") {
  const ModelConfig c = load(kGpt2, "gpt2");
  CHECK(c.uses_learned_positions());
  CHECK_FALSE(c.uses_rope());
  CHECK(c.norm_kind() == NormKind::kLayerNorm);
  CHECK(c.mlp_kind() == MlpKind::kGeluTanh);
  CHECK(c.has_linear_biases());
  CHECK(c.has_qkv_bias());
  CHECK(c.mlp_up_rows() == 3072);  // up only, no gate
}

TEST_CASE("architecture properties: Llama RoPE, RMSNorm, no biases, silu-gated MLP") {
  const ModelConfig llama = load(kLlama32, "Llama-3.2-1B");
  CHECK(llama.uses_rope());
  CHECK_FALSE(llama.uses_learned_positions());
  CHECK(llama.norm_kind() == NormKind::kRmsNorm);
  CHECK(llama.mlp_kind() == MlpKind::kSiluGated);
  CHECK_FALSE(llama.has_linear_biases());
  CHECK_FALSE(llama.has_qkv_bias());
  CHECK(llama.mlp_up_rows() == 2 * 8192);  // fused gate | up

  // Qwen2 is the Llama family with a qkv bias alone.
  const ModelConfig qwen = load(kQwen2);
  CHECK(qwen.uses_rope());
  CHECK(qwen.norm_kind() == NormKind::kRmsNorm);
  CHECK_FALSE(qwen.has_linear_biases());
  CHECK(qwen.has_qkv_bias());

  // Wide enough that 2 * intermediate would overflow int: the row count is 64-bit.
  ModelConfig wide = llama;
  wide.intermediate_size = 1 << 30;
  CHECK(wide.mlp_up_rows() == (int64_t(1) << 31));
}

TEST_CASE("defaults and eos lists") {
  const ModelConfig c = load(small_llama(R"(, "eos_token_id": [1, 8, 9], "bos_token_id": null)"));
  CHECK(c.eos_token_ids == std::vector<int>{1, 8, 9});
  CHECK(c.bos_token_id == -1);
  CHECK(c.num_kv_heads == 4);       // default: one kv head per query head
  CHECK(c.head_dim == 16);          // default: hidden / heads
  CHECK(c.rope_theta == 10000.0f);  // default theta
  CHECK(c.rope_scaling.type.empty());
  CHECK_FALSE(c.tie_word_embeddings);  // LlamaConfig's default
  CHECK(c.norm_eps == doctest::Approx(1e-6f));

  const ModelConfig null_scaling =
      load(small_llama(R"(, "rope_scaling": null, "head_dim": null, "num_key_value_heads": 2)"));
  CHECK(null_scaling.rope_scaling.type.empty());
  CHECK(null_scaling.head_dim == 16);
  CHECK(null_scaling.num_kv_heads == 2);

  const ModelConfig mistral = load(R"({"model_type": "mistral", "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 32, "vocab_size": 50, "max_position_embeddings": 128,
    "sliding_window": 4096, "rope_scaling": {"type": "default"}})");
  CHECK(mistral.head_dim == 32);  // explicit head_dim need not be hidden / heads
  CHECK(mistral.q_dim() == 128);
  CHECK_FALSE(mistral.qkv_bias);
}

TEST_CASE("config errors name the file and the field") {
  SUBCASE("missing field") {
    const std::string e = load_error(R"({"model_type": "llama", "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
      "max_position_embeddings": 256})");
    CHECK(contains(e, "config.json"));
    CHECK(contains(e, "missing field 'hidden_size'"));
  }
  SUBCASE("wrong type") {
    const std::string e = load_error(R"({"model_type": "llama", "hidden_size": "64",
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "vocab_size": 100, "max_position_embeddings": 256})");
    CHECK(contains(e, "config.json"));
    CHECK(contains(e, "'hidden_size'"));
    CHECK(contains(e, "integer"));
    CHECK(contains(load_error(small_llama(R"(, "tie_word_embeddings": "yes")")),
                   "'tie_word_embeddings'"));
    CHECK(contains(load_error(small_llama(R"(, "num_key_value_heads": 2.5)")),
                   "'num_key_value_heads'"));
    CHECK(contains(load_error(small_llama(R"(, "eos_token_id": ["a"])")), "'eos_token_id'"));
  }
  SUBCASE("bad JSON") {
    const std::string e = load_error(R"({"model_type": "llama", "hidden_size": )");
    CHECK(contains(e, "config.json"));
    CHECK(contains(e, "not valid JSON"));
    CHECK(contains(load_error("[1, 2]"), "JSON object"));
  }
  SUBCASE("heads not dividing hidden") {
    const std::string e = load_error(R"({"model_type": "llama", "hidden_size": 66,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "vocab_size": 100, "max_position_embeddings": 256})");
    CHECK(contains(e, "config.json"));
    CHECK(contains(e, "num_attention_heads (4) must divide hidden_size (66)"));
    CHECK(contains(load_error(R"({"model_type": "gpt2", "vocab_size": 10, "n_positions": 8,
      "n_embd": 30, "n_layer": 1, "n_head": 4})"),
                   "n_head (4) must divide n_embd (30)"));
  }
  SUBCASE("kv heads not dividing heads") {
    CHECK(contains(load_error(small_llama(R"(, "num_key_value_heads": 3)")),
                   "must be a multiple of num_key_value_heads (3)"));
  }
  SUBCASE("unknown rope type") {
    const std::string e =
        load_error(small_llama(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})"));
    CHECK(contains(e, "config.json"));
    CHECK(contains(e, "rope_scaling.rope_type"));
    CHECK(contains(e, "'yarn'"));
    CHECK(contains(load_error(small_llama(R"(, "rope_parameters": {"rope_type": "dynamic"})")),
                   "rope_parameters.rope_type"));
  }
  SUBCASE("llama3 scaling without its fields") {
    CHECK(contains(load_error(small_llama(R"(, "rope_scaling": {"rope_type": "llama3"})")),
                   "missing field 'rope_scaling.factor'"));
  }
  SUBCASE("unsupported model_type and activation") {
    CHECK(contains(load_error(R"({"model_type": "bert"})"), "'model_type' = 'bert'"));
    CHECK(contains(load_error(R"({"hidden_size": 4})"), "missing field 'model_type'"));
    CHECK(contains(load_error(small_llama(R"(, "hidden_act": "gelu")")), "'hidden_act'"));
    CHECK(contains(load_error(small_llama(R"(, "attention_bias": true)")), "'attention_bias'"));
  }
  SUBCASE("non-positive sizes") {
    CHECK(contains(load_error(small_llama(R"(, "num_key_value_heads": 0)")),
                   "num_key_value_heads must be positive"));
  }
  SUBCASE("a missing file") {
    const std::string e = [] {
      try {
        load_config_json("/nonexistent/dir/config.json");
      } catch (const Error& error) {
        return std::string(error.what());
      }
      return std::string("<no error>");
    }();
    CHECK(contains(e, "/nonexistent/dir/config.json"));
  }
}

TEST_CASE("preset configs have the shapes of the models they stand for") {
  const ModelConfig tiny = *preset_config("tiny");
  CHECK(tiny.synthetic_weights);
  CHECK(tiny.name == "tiny");
  CHECK(tiny.arch == Arch::kLlama);
  CHECK(tiny.vocab_size == 512);
  CHECK(tiny.qkv_dim() == 8 * 32 + 2 * 2 * 32);
  CHECK(tiny.eos_token_ids == std::vector<int>{256});
  CHECK(tiny.bos_token_id == -1);
  // embedding 512*256 + 4 layers of (2 norms + qkv 384x256 + o 256x256 + gate|up 1376x256 +
  // down 256x688) + final norm, tied head.
  CHECK(tiny.num_parameters() ==
        512 * 256 + 4 * (2 * 256 + 384 * 256 + 256 * 256 + 1376 * 256 + 256 * 688) + 256);

  CHECK(preset_config("gpt2")->num_parameters() == 124439808);
  CHECK(preset_config("llama-1b")->num_parameters() == 1235814400);
  CHECK(preset_config("llama-8b")->num_parameters() == 8030261248);  // Llama-3-8B
  CHECK(preset_config("llama-1b")->rope_scaling.type == "llama3");
  CHECK_FALSE(preset_config("llama-8b")->tie_word_embeddings);
  CHECK_FALSE(preset_config("llama-3b").has_value());
  CHECK(preset_config("llama-70b")->num_parameters() == 70553706496);  // Llama-3-70B
  CHECK(preset_names() ==
        std::vector<std::string>{"tiny", "gpt2", "llama-1b", "llama-8b", "llama-70b"});
  CHECK(preset_names_text() == "tiny, gpt2, llama-1b, llama-8b, llama-70b");
}

TEST_CASE("JSON: integers beyond 64 bits read as doubles, as Python's json reads them") {
  using rose::widen_big_json_integers;
  // transformers writes model_max_length = int(1e30).
  CHECK(widen_big_json_integers(R"({"model_max_length": 1000000000000000019884624838656})") ==
        R"({"model_max_length": 1000000000000000019884624838656.0})");
  // 64-bit limits stay integers; one past them becomes a double.
  CHECK(widen_big_json_integers("[18446744073709551615,-9223372036854775808]") ==
        "[18446744073709551615,-9223372036854775808]");
  CHECK(widen_big_json_integers("[18446744073709551616,-9223372036854775809]") ==
        "[18446744073709551616.0,-9223372036854775809.0]");
  // Floats, exponents and digits inside strings (escaped quotes too) are left alone.
  CHECK(widen_big_json_integers(
            R"(["x\"123456789012345678901234", 1.5e300, 123456789012345678901234e1])") ==
        R"(["x\"123456789012345678901234", 1.5e300, 123456789012345678901234e1])");

  simdjson::dom::parser parser;
  simdjson::dom::element root;
  REQUIRE(!rose::parse_json_widening(parser, R"({"n": 1000000000000000019884624838656, "k": 7})",
                                     root));
  double n = 0;
  int64_t k = 0;
  CHECK(!root["n"].get_double().get(n));
  CHECK(n == doctest::Approx(1e30));
  CHECK(!root["k"].get_int64().get(k));
  CHECK(k == 7);
  // Malformed numbers still fail.
  CHECK(rose::parse_json_widening(parser, R"({"n": 12.})", root) != simdjson::SUCCESS);
}
