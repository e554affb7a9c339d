// Canonical weights: the GPT-2 Conv1D transpose and the Llama q|k|v and gate|up fusions, checked
// element by element against small checkpoints written here with known values; shape and presence
// checks against config.json; sharded loading; and the presets' synthetic weights.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/model/presets.h"
#include "engine/model/safetensors.h"
#include "engine/model/weights.h"
#include "kernels/common/counter_rng.h"
#include "tests/test_util.h"

using namespace rose;
using rose::test::contains;
using rose::test::error_of;
using rose::test::TempDir;
namespace fs = std::filesystem;

namespace {

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A checkpoint being built: every tensor gets distinct values (tensor number * 1000 + element), so
// a value identifies where it came from.
struct Checkpoint {
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> tensors;
  int next = 1;

  const std::vector<float>& add(const std::string& name, std::vector<int64_t> shape) {
    std::vector<float> values(size_t(numel(shape)));
    for (size_t k = 0; k < values.size(); ++k) values[k] = float(next * 1000 + int(k));
    ++next;
    tensors[name] = {std::move(shape), std::move(values)};
    return tensors[name].second;
  }
  const std::vector<float>& operator[](const std::string& name) const {
    return tensors.at(name).second;
  }
  SafetensorsWriter writer(const std::function<bool(const std::string&)>& keep =
                               [](const std::string&) { return true; }) const {
    SafetensorsWriter writer;
    for (const auto& [name, tensor] : tensors) {
      if (keep(name)) writer.add_f32(name, tensor.first, tensor.second);
    }
    return writer;
  }
};

std::vector<float> read(const WeightSource& source, const std::string& name) {
  for (const TensorSpec& spec : canonical_tensors(source.config())) {
    if (spec.name == name) {
      std::vector<float> values(size_t(spec.numel()));
      source.read_f32(name, values);
      return values;
    }
  }
  FAIL("no canonical tensor " << name);
  return {};
}

// GPT-2: E=4, 2 heads, I = 4E = 16, V=10, P=8, one layer.
constexpr int64_t kE = 4, kI = 16, kV = 10, kP = 8;

const char* kGpt2Config = R"({"model_type": "gpt2", "vocab_size": 10, "n_positions": 8,
  "n_embd": 4, "n_layer": 1, "n_head": 2, "n_inner": null, "activation_function": "gelu_new",
  "layer_norm_epsilon": 1e-05, "eos_token_id": 3})";

Checkpoint gpt2_checkpoint(const std::string& p) {
  Checkpoint c;
  c.add(p + "wte.weight", {kV, kE});
  c.add(p + "wpe.weight", {kP, kE});
  c.add(p + "h.0.ln_1.weight", {kE});
  c.add(p + "h.0.ln_1.bias", {kE});
  c.add(p + "h.0.attn.c_attn.weight", {kE, 3 * kE});
  c.add(p + "h.0.attn.c_attn.bias", {3 * kE});
  c.add(p + "h.0.attn.c_proj.weight", {kE, kE});
  c.add(p + "h.0.attn.c_proj.bias", {kE});
  c.add(p + "h.0.ln_2.weight", {kE});
  c.add(p + "h.0.ln_2.bias", {kE});
  c.add(p + "h.0.mlp.c_fc.weight", {kE, kI});
  c.add(p + "h.0.mlp.c_fc.bias", {kI});
  c.add(p + "h.0.mlp.c_proj.weight", {kI, kE});
  c.add(p + "h.0.mlp.c_proj.bias", {kE});
  c.add(p + "ln_f.weight", {kE});
  c.add(p + "ln_f.bias", {kE});
  // Buffers and extras that must be ignored.
  c.add(p + "h.0.attn.bias", {1, 1, kP, kP});
  c.add(p + "h.0.attn.masked_bias", {});
  c.add("lm_head.weight", {kV, kE});
  return c;
}

// Canonical (out, in) element [o, i] must be the Conv1D element [i, o].
void check_transposed(const std::vector<float>& canonical, const std::vector<float>& conv1d,
                      int64_t out, int64_t in) {
  REQUIRE(int64_t(canonical.size()) == out * in);
  int mismatches = 0;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) mismatches += canonical[o * in + i] != conv1d[i * out + o];
  }
  CHECK(mismatches == 0);
}

void check_gpt2(const WeightSource& source, const Checkpoint& c, const std::string& p) {
  const ModelConfig& config = source.config();
  CHECK(config.arch == Arch::kGpt2);
  CHECK(config.name == "model");
  CHECK_FALSE(config.synthetic_weights);
  CHECK(config.intermediate_size == kI);
  CHECK(read(source, "tok_emb") == c[p + "wte.weight"]);
  CHECK(read(source, "pos_emb") == c[p + "wpe.weight"]);
  CHECK(read(source, "layers.0.attn_norm.weight") == c[p + "h.0.ln_1.weight"]);
  CHECK(read(source, "layers.0.attn_norm.bias") == c[p + "h.0.ln_1.bias"]);
  // c_attn (E, 3E) columns q|k|v -> qkv (3E, E) rows q|k|v.
  check_transposed(read(source, "layers.0.qkv.weight"), c[p + "h.0.attn.c_attn.weight"], 3 * kE,
                   kE);
  CHECK(read(source, "layers.0.qkv.bias") == c[p + "h.0.attn.c_attn.bias"]);
  check_transposed(read(source, "layers.0.o.weight"), c[p + "h.0.attn.c_proj.weight"], kE, kE);
  CHECK(read(source, "layers.0.o.bias") == c[p + "h.0.attn.c_proj.bias"]);
  CHECK(read(source, "layers.0.mlp_norm.weight") == c[p + "h.0.ln_2.weight"]);
  CHECK(read(source, "layers.0.mlp_norm.bias") == c[p + "h.0.ln_2.bias"]);
  check_transposed(read(source, "layers.0.up.weight"), c[p + "h.0.mlp.c_fc.weight"], kI, kE);
  CHECK(read(source, "layers.0.up.bias") == c[p + "h.0.mlp.c_fc.bias"]);
  check_transposed(read(source, "layers.0.down.weight"), c[p + "h.0.mlp.c_proj.weight"], kE, kI);
  CHECK(read(source, "layers.0.down.bias") == c[p + "h.0.mlp.c_proj.bias"]);
  CHECK(read(source, "final_norm.weight") == c[p + "ln_f.weight"]);
  CHECK(read(source, "final_norm.bias") == c[p + "ln_f.bias"]);
  // Tied: no lm_head in the canonical set even though the checkpoint has one.
  CHECK(contains(error_of([&] {
                   std::vector<float> dst(kV * kE);
                   source.read_f32("lm_head.weight", dst);
                 }),
                 "lm_head.weight"));
}

// Llama: H=8, 2 heads of 4, 1 kv head, I=6, V=11, two layers.
constexpr int64_t kH = 8, kQ = 8, kKV = 4, kLI = 6, kLV = 11;

std::string llama_config(const std::string& model_type, bool tied) {
  return R"({"model_type": ")" + model_type +
         R"(", "hidden_size": 8, "intermediate_size": 6, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 11,
    "max_position_embeddings": 32, "rms_norm_eps": 1e-06, "tie_word_embeddings": )" +
         (tied ? "true" : "false") + "}";
}

Checkpoint llama_checkpoint(bool biases, bool lm_head) {
  Checkpoint c;
  c.add("model.embed_tokens.weight", {kLV, kH});
  for (int layer = 0; layer < 2; ++layer) {
    const std::string h = "model.layers." + std::to_string(layer) + ".";
    c.add(h + "input_layernorm.weight", {kH});
    c.add(h + "self_attn.q_proj.weight", {kQ, kH});
    c.add(h + "self_attn.k_proj.weight", {kKV, kH});
    c.add(h + "self_attn.v_proj.weight", {kKV, kH});
    if (biases) {
      c.add(h + "self_attn.q_proj.bias", {kQ});
      c.add(h + "self_attn.k_proj.bias", {kKV});
      c.add(h + "self_attn.v_proj.bias", {kKV});
    }
    c.add(h + "self_attn.o_proj.weight", {kH, kQ});
    c.add(h + "post_attention_layernorm.weight", {kH});
    c.add(h + "mlp.gate_proj.weight", {kLI, kH});
    c.add(h + "mlp.up_proj.weight", {kLI, kH});
    c.add(h + "mlp.down_proj.weight", {kH, kLI});
    c.add(h + "self_attn.rotary_emb.inv_freq", {2});  // an old buffer: ignored
  }
  c.add("model.norm.weight", {kH});
  if (lm_head) c.add("lm_head.weight", {kLV, kH});
  return c;
}

std::vector<float> concat(std::initializer_list<std::vector<float>> parts) {
  std::vector<float> all;
  for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

void check_llama(const WeightSource& source, const Checkpoint& c, bool biases) {
  CHECK(read(source, "tok_emb") == c["model.embed_tokens.weight"]);
  for (int layer = 0; layer < 2; ++layer) {
    const std::string n = "layers." + std::to_string(layer) + ".";
    const std::string h = "model.layers." + std::to_string(layer) + ".";
    CHECK(read(source, n + "attn_norm.weight") == c[h + "input_layernorm.weight"]);
    // Rows q (8 x 8) | k (4 x 8) | v (4 x 8).
    const std::vector<float> qkv = read(source, n + "qkv.weight");
    REQUIRE(qkv.size() == size_t((kQ + 2 * kKV) * kH));
    CHECK(std::vector<float>(qkv.begin(), qkv.begin() + kQ * kH) ==
          c[h + "self_attn.q_proj.weight"]);
    CHECK(std::vector<float>(qkv.begin() + kQ * kH, qkv.begin() + (kQ + kKV) * kH) ==
          c[h + "self_attn.k_proj.weight"]);
    CHECK(std::vector<float>(qkv.begin() + (kQ + kKV) * kH, qkv.end()) ==
          c[h + "self_attn.v_proj.weight"]);
    if (biases) {
      CHECK(read(source, n + "qkv.bias") ==
            concat({c[h + "self_attn.q_proj.bias"], c[h + "self_attn.k_proj.bias"],
                    c[h + "self_attn.v_proj.bias"]}));
    }
    CHECK(read(source, n + "o.weight") == c[h + "self_attn.o_proj.weight"]);
    CHECK(read(source, n + "mlp_norm.weight") == c[h + "post_attention_layernorm.weight"]);
    // Rows gate (6 x 8) | up (6 x 8).
    const std::vector<float> up = read(source, n + "up.weight");
    REQUIRE(up.size() == size_t(2 * kLI * kH));
    CHECK(std::vector<float>(up.begin(), up.begin() + kLI * kH) == c[h + "mlp.gate_proj.weight"]);
    CHECK(std::vector<float>(up.begin() + kLI * kH, up.end()) == c[h + "mlp.up_proj.weight"]);
    CHECK(read(source, n + "down.weight") == c[h + "mlp.down_proj.weight"]);
  }
  CHECK(read(source, "final_norm.weight") == c["model.norm.weight"]);
}

}  // namespace

TEST_CASE("canonical tensor order and shapes") {
  ModelConfig config = *preset_config("gpt2");
  config.num_layers = 1;
  std::vector<std::string> names;
  for (const TensorSpec& spec : canonical_tensors(config)) names.push_back(spec.name);
  CHECK(names == std::vector<std::string>{
                     "tok_emb", "pos_emb", "layers.0.attn_norm.weight", "layers.0.attn_norm.bias",
                     "layers.0.qkv.weight", "layers.0.qkv.bias", "layers.0.o.weight",
                     "layers.0.o.bias", "layers.0.mlp_norm.weight", "layers.0.mlp_norm.bias",
                     "layers.0.up.weight", "layers.0.up.bias", "layers.0.down.weight",
                     "layers.0.down.bias", "final_norm.weight", "final_norm.bias"});

  const std::vector<TensorSpec> llama = canonical_tensors(*preset_config("llama-8b"));
  CHECK(llama.size() == 1 + 32 * 6 + 1 + 1);  // per layer: 2 norms, qkv, o, up, down
  CHECK(llama[2].name == "layers.0.qkv.weight");
  CHECK(llama[2].shape == std::vector<int64_t>{4096 + 2 * 1024, 4096});
  CHECK(llama[5].name == "layers.0.up.weight");
  CHECK(llama[5].shape == std::vector<int64_t>{2 * 14336, 4096});
  CHECK(llama.back().name == "lm_head.weight");
  CHECK(llama.back().shape == std::vector<int64_t>{128256, 4096});
}

TEST_CASE("GPT-2 checkpoints, with and without the transformer. prefix") {
  for (const std::string prefix : {"transformer.", ""}) {
    CAPTURE(prefix);
    TempDir dir("weights", "model");
    write_file(dir.path / "config.json", kGpt2Config);
    const Checkpoint c = gpt2_checkpoint(prefix);
    c.writer().write(dir.path / "model.safetensors");
    const std::unique_ptr<WeightSource> source = open_model(dir.path.string());
    check_gpt2(*source, c, prefix);
    CHECK_FALSE(source->synthetic("tok_emb").has_value());
  }
}

TEST_CASE("Llama checkpoints: q|k|v and gate|up fused, untied head") {
  TempDir dir("weights", "model");
  write_file(dir.path / "config.json", llama_config("llama", false));
  const Checkpoint c = llama_checkpoint(false, true);
  c.writer().write(dir.path / "model.safetensors");
  const std::unique_ptr<WeightSource> source = open_model(dir.path.string());
  CHECK(source->config().arch == Arch::kLlama);
  check_llama(*source, c, false);
  CHECK(read(*source, "lm_head.weight") == c["lm_head.weight"]);
}

TEST_CASE("Qwen2 checkpoints fuse the q, k, v biases") {
  TempDir dir("weights", "model");
  write_file(dir.path / "config.json", llama_config("qwen2", true));
  const Checkpoint c = llama_checkpoint(true, false);
  c.writer().write(dir.path / "model.safetensors");
  const std::unique_ptr<WeightSource> source = open_model(dir.path.string());
  CHECK(source->config().qkv_bias);
  check_llama(*source, c, true);
}

TEST_CASE("BF16 and F16 checkpoints convert to fp32") {
  TempDir dir("weights", "model");
  write_file(dir.path / "config.json", llama_config("llama", true));
  const Checkpoint c = llama_checkpoint(false, false);
  SafetensorsWriter writer = c.writer([](const std::string& name) {
    return name != "model.embed_tokens.weight" && name != "model.layers.0.mlp.up_proj.weight";
  });
  // Small integers and halves are exact in both formats.
  std::vector<float> embed(kLV * kH), up(kLI * kH);
  std::vector<uint16_t> embed_bf16(embed.size()), up_f16(up.size());
  for (size_t k = 0; k < embed.size(); ++k) {
    embed[k] = float(int(k) - 40) * 0.5f;
    embed_bf16[k] = f32_to_bf16(embed[k]);
  }
  for (size_t k = 0; k < up.size(); ++k) {
    up[k] = float(k) * 0.25f - 3.0f;
    up_f16[k] = f32_to_f16(up[k]);
  }
  writer.add("model.embed_tokens.weight", Dtype::kBF16, {kLV, kH},
             {reinterpret_cast<const uint8_t*>(embed_bf16.data()), embed_bf16.size() * 2});
  writer.add("model.layers.0.mlp.up_proj.weight", Dtype::kF16, {kLI, kH},
             {reinterpret_cast<const uint8_t*>(up_f16.data()), up_f16.size() * 2});
  writer.write(dir.path / "model.safetensors");
  const std::unique_ptr<WeightSource> source = open_model(dir.path.string());
  CHECK(read(*source, "tok_emb") == embed);
  const std::vector<float> fused = read(*source, "layers.0.up.weight");
  CHECK(std::vector<float>(fused.begin() + kLI * kH, fused.end()) == up);
}

TEST_CASE("sharded Llama checkpoint through model.safetensors.index.json") {
  TempDir dir("weights", "model");
  write_file(dir.path / "config.json", llama_config("mistral", false));
  const Checkpoint c = llama_checkpoint(false, true);
  // Layer 0's q and k in shard 1, its v in shard 2: one fused tensor spans both files.
  auto in_first = [](const std::string& name) {
    return name.starts_with("model.embed") ||
           (name.starts_with("model.layers.0.") && name.find("v_proj") == std::string::npos);
  };
  c.writer(in_first).write(dir.path / "model-00001-of-00002.safetensors");
  c.writer([&](const std::string& name) {
     return !in_first(name);
   }).write(dir.path / "model-00002-of-00002.safetensors");
  std::string index = R"({"metadata": {"total_size": 0}, "weight_map": {)";
  bool first = true;
  for (const auto& [name, tensor] : c.tensors) {
    index += (first ? "" : ", ") + SafetensorsWriter::quote(name) + ": " +
             SafetensorsWriter::quote(in_first(name) ? "model-00001-of-00002.safetensors"
                                                     : "model-00002-of-00002.safetensors");
    first = false;
  }
  write_file(dir.path / "model.safetensors.index.json", index + "}}");
  const std::unique_ptr<WeightSource> source = open_model(dir.path.string());
  check_llama(*source, c, false);
  CHECK(read(*source, "lm_head.weight") == c["lm_head.weight"]);
}

TEST_CASE("checkpoint errors name the tensor") {
  TempDir dir("weights", "model");
  SUBCASE("missing lm_head when untied") {
    write_file(dir.path / "config.json", llama_config("llama", false));
    llama_checkpoint(false, false).writer().write(dir.path / "model.safetensors");
    const std::string e = error_of([&] { open_model(dir.path.string()); });
    CHECK(contains(e, "model.safetensors"));
    CHECK(contains(e, "missing tensor 'lm_head.weight'"));
  }
  SUBCASE("a missing layer tensor") {
    write_file(dir.path / "config.json", llama_config("llama", true));
    llama_checkpoint(false, false)
        .writer([](const std::string& n) { return n != "model.layers.1.mlp.down_proj.weight"; })
        .write(dir.path / "model.safetensors");
    CHECK(contains(error_of([&] { open_model(dir.path.string()); }),
                   "'model.layers.1.mlp.down_proj.weight'"));
  }
  SUBCASE("Qwen2 without its biases") {
    write_file(dir.path / "config.json", llama_config("qwen2", true));
    llama_checkpoint(false, false).writer().write(dir.path / "model.safetensors");
    CHECK(contains(error_of([&] { open_model(dir.path.string()); }),
                   "'model.layers.0.self_attn.q_proj.bias'"));
  }
  SUBCASE("a shape that disagrees with config.json") {
    write_file(dir.path / "config.json", llama_config("llama", true));
    Checkpoint c = llama_checkpoint(false, false);
    c.add("model.layers.1.self_attn.k_proj.weight", {kH, kH});
    c.writer().write(dir.path / "model.safetensors");
    const std::string e = error_of([&] { open_model(dir.path.string()); });
    CHECK(contains(e, "'model.layers.1.self_attn.k_proj.weight'"));
    CHECK(contains(e, "[8, 8]"));
    CHECK(contains(e, "[4, 8]"));
  }
  SUBCASE("a GPT-2 Conv1D stored in nn.Linear layout") {
    write_file(dir.path / "config.json", kGpt2Config);
    Checkpoint c = gpt2_checkpoint("");
    c.add("h.0.mlp.c_fc.weight", {kI, kE});
    c.writer().write(dir.path / "model.safetensors");
    const std::string e = error_of([&] { open_model(dir.path.string()); });
    CHECK(contains(e, "'h.0.mlp.c_fc.weight'"));
    CHECK(contains(e, "[16, 4]"));
    CHECK(contains(e, "[4, 16]"));
  }
  SUBCASE("integer weights") {
    write_file(dir.path / "config.json", llama_config("llama", true));
    SafetensorsWriter writer = llama_checkpoint(false, false).writer([](const std::string& n) {
      return n != "model.norm.weight";
    });
    const std::vector<int32_t> ints(kH, 1);
    writer.add("model.norm.weight", Dtype::kI32, {kH},
               {reinterpret_cast<const uint8_t*>(ints.data()), ints.size() * 4});
    writer.write(dir.path / "model.safetensors");
    const std::string e = error_of([&] { open_model(dir.path.string()); });
    CHECK(contains(e, "'model.norm.weight'"));
    CHECK(contains(e, "I32"));
  }
  SUBCASE("config.json but no weights") {
    write_file(dir.path / "config.json", llama_config("llama", true));
    CHECK(contains(error_of([&] { open_model(dir.path.string()); }), "model.safetensors"));
  }
  SUBCASE("a bad config.json is named") {
    write_file(dir.path / "config.json", R"({"model_type": "llama"})");
    const std::string e = error_of([&] { open_model(dir.path.string()); });
    CHECK(contains(e, "config.json"));
    CHECK(contains(e, "missing field"));
  }
}

TEST_CASE("unknown models") {
  CHECK(error_of([] { open_model("nope"); }) ==
        "unknown model 'nope': not a preset (tiny, gpt2, llama-1b, llama-8b, llama-70b) nor a "
        "folder with "
        "config.json");
  TempDir dir("weights", "model");  // a folder, but without config.json
  CHECK(contains(error_of([&] { open_model(dir.path.string()); }), "not a preset"));
  CHECK(contains(error_of([] { open_model(""); }), "unknown model ''"));
}

TEST_CASE("preset weights are synthetic_uniform of per-tensor seeds, constant norms and biases") {
  const std::unique_ptr<WeightSource> tiny = open_model("tiny");
  const ModelConfig& config = tiny->config();
  CHECK(config.synthetic_weights);
  CHECK(config.name == "tiny");
  const std::vector<TensorSpec> specs = canonical_tensors(config);
  const uint64_t seed = preset_seed("tiny");
  std::map<std::string, float> expected_scale = {
      {"tok_emb", 1.0f / 16.0f},                           // 1/sqrt(hidden 256)
      {"layers.0.qkv.weight", 1.0f / 16.0f},               // fan-in 256
      {"layers.0.o.weight", 1.0f / 16.0f},                 // fan-in q_dim 256
      {"layers.0.up.weight", 1.0f / 16.0f},                // fan-in 256
      {"layers.3.down.weight", 1.0f / std::sqrt(688.0f)},  // fan-in intermediate
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    CAPTURE(spec.name);
    std::vector<float> values(size_t(spec.numel()));
    tiny->read_f32(spec.name, values);
    const std::optional<SyntheticInit> init = tiny->synthetic(spec.name);
    REQUIRE(init.has_value());
    if (spec.name.ends_with("norm.weight")) {
      CHECK(init->kind == SyntheticInit::Kind::kConstant);
      CHECK(init->value == 1.0f);
      CHECK(std::count(values.begin(), values.end(), 1.0f) == int64_t(values.size()));
      continue;
    }
    CHECK(init->kind == SyntheticInit::Kind::kUniform);
    CHECK(init->seed == synthetic_tensor_seed(seed, i));
    if (expected_scale.count(spec.name)) CHECK(init->scale == expected_scale[spec.name]);
    int mismatches = 0;
    float largest = 0.0f;
    double sum = 0.0;
    for (size_t k = 0; k < values.size(); ++k) {
      mismatches += values[k] != synthetic_uniform(synthetic_tensor_seed(seed, i), k, init->scale);
      largest = std::max(largest, std::fabs(values[k]));
      sum += values[k];
    }
    CHECK(mismatches == 0);
    CHECK(largest <= init->scale);
    CHECK(largest > 0.99f * init->scale);  // spread over the whole range, not degenerate
    CHECK(std::fabs(sum / double(values.size())) < 0.05 * init->scale);
  }
  // Deterministic across opens; distinct across tensors and presets.
  const std::unique_ptr<WeightSource> again = open_model("tiny");
  CHECK(read(*again, "layers.2.qkv.weight") == read(*tiny, "layers.2.qkv.weight"));
  const std::vector<float> q0 = read(*tiny, "layers.0.qkv.weight");
  const std::vector<float> q1 = read(*tiny, "layers.1.qkv.weight");
  CHECK(q0 != q1);
  CHECK(preset_seed("tiny") != preset_seed("llama-1b"));
  CHECK(synthetic_tensor_seed(1, 0) != synthetic_tensor_seed(1, 1));
  CHECK(synthetic_tensor_seed(1, 0) != synthetic_tensor_seed(2, 0));
  CHECK(contains(error_of([&] {
                   std::vector<float> dst(1);
                   tiny->read_f32("layers.9.qkv.weight", dst);
                 }),
                 "layers.9.qkv.weight"));
}

TEST_CASE("GPT-2 preset biases are zero; llama-8b has its own head") {
  const std::unique_ptr<WeightSource> gpt2 = open_model("gpt2");
  CHECK(gpt2->config().arch == Arch::kGpt2);
  const std::vector<float> bias = read(*gpt2, "layers.5.qkv.bias");
  CHECK(bias.size() == 3 * 768);
  CHECK(std::count(bias.begin(), bias.end(), 0.0f) == int64_t(bias.size()));
  CHECK(gpt2->synthetic("layers.5.qkv.bias")->kind == SyntheticInit::Kind::kConstant);
  CHECK(gpt2->synthetic("pos_emb")->scale == doctest::Approx(1.0 / std::sqrt(768.0)));

  const std::unique_ptr<WeightSource> llama8b = open_model("llama-8b");
  const std::optional<SyntheticInit> head = llama8b->synthetic("lm_head.weight");
  REQUIRE(head.has_value());
  CHECK(head->kind == SyntheticInit::Kind::kUniform);
  CHECK(head->scale == 1.0f / 64.0f);  // fan-in 4096
  CHECK(head->seed != llama8b->synthetic("tok_emb")->seed);
}

TEST_CASE("checkpoints written by transformers open (tests/fixtures/models)") {
  struct Expected {
    const char* folder;
    Arch arch;
    int64_t parameters;  // counted by hand from each config.json
    bool qkv_bias;
    bool tied;
  };
  const Expected models[] = {
      // wte 1024*64 + wpe 256*64 + 2 * (2 LN + c_attn + c_proj + c_fc + mlp c_proj) + ln_f
      {"tiny-gpt2", Arch::kGpt2, 182016, true, true},
      // embed 1024*64 + 2 * (q 64x64, k, v 32x64, o, gate/up/down 128x64, 2 norms) + norm
      {"tiny-llama", Arch::kLlama, 139584, false, true},
      // as tiny-llama with vocab 512, q/k/v biases and an untied head
      {"tiny-qwen2", Arch::kLlama, 139840, true, false},
  };
  for (const Expected& expected : models) {
    CAPTURE(expected.folder);
    const fs::path folder = fs::path("tests/fixtures/models") / expected.folder;
    REQUIRE(fs::exists(folder / "model.safetensors"));
    const std::unique_ptr<WeightSource> source = open_model(folder.string());
    const ModelConfig& config = source->config();
    CHECK(config.name == expected.folder);
    CHECK(config.arch == expected.arch);
    CHECK(config.num_parameters() == expected.parameters);
    CHECK(config.qkv_bias == expected.qkv_bias);
    CHECK(config.tie_word_embeddings == expected.tied);
    CHECK(config.eos_token_ids == std::vector<int>{2});
    for (const TensorSpec& spec : canonical_tensors(config)) {
      std::vector<float> values(size_t(spec.numel()));
      source->read_f32(spec.name, values);
    }
  }
  // Spot-check the layouts against the raw file.
  const fs::path gpt2 = "tests/fixtures/models/tiny-gpt2";
  {
    const SafetensorsFile raw = SafetensorsFile::open(gpt2 / "model.safetensors");
    const TensorInfo& c_fc = raw.get("transformer.h.1.mlp.c_fc.weight");
    std::vector<float> stored(size_t(c_fc.numel()));
    raw.read_f32(c_fc, stored);
    check_transposed(read(*open_model(gpt2.string()), "layers.1.up.weight"), stored, 256, 64);
  }
  const fs::path llama = "tests/fixtures/models/tiny-llama";
  {
    const SafetensorsFile raw = SafetensorsFile::open(llama / "model.safetensors");
    const TensorInfo& v = raw.get("model.layers.1.self_attn.v_proj.weight");
    std::vector<float> stored(size_t(v.numel()));
    raw.read_f32(v, stored);
    const std::vector<float> qkv = read(*open_model(llama.string()), "layers.1.qkv.weight");
    CHECK(std::vector<float>(qkv.end() - 32 * 64, qkv.end()) == stored);
    CHECK(open_model(llama.string())->config().rope_scaling.type == "llama3");
  }
}
