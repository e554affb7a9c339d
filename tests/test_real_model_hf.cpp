// The real SmolLM2-135M-Instruct as a Hugging Face folder (config.json, fp32 model.safetensors,
// tokenizer.json, chat_template.jinja) holding the same weights as the GGUF: written by
// transformers from the GGUF (scripts/gguf_to_hf_folder.py), so roseinfer's safetensors, config,
// tokenizer.json and template paths meet the same transformers reference as the GGUF path
// (tests/real_model.h). Exits 77 (skipped) unless SmolLM2-135M-Instruct-hf is in the model cache.
#include <doctest/doctest.h>

#include "engine/model/bundle.h"
#include "engine/model/weights.h"
#include "tests/real_model.h"

using namespace rose::test;

namespace {
const char* kFolder = "SmolLM2-135M-Instruct-hf";
}  // namespace

TEST_CASE("SmolLM2 folder: config.json gives the GGUF's shape") {
  const auto weights = rose::open_model(cached_or_skip(kFolder).string());
  const rose::ModelConfig& c = weights->config();
  CHECK(c.arch == rose::Arch::kLlama);
  CHECK(c.num_layers == 30);
  CHECK(c.hidden_size == 576);
  CHECK(c.num_heads == 9);
  CHECK(c.num_kv_heads == 3);
  CHECK(c.vocab_size == 49152);
  CHECK(c.rope_theta == 100000.0f);
  CHECK(c.tie_word_embeddings);
}

TEST_CASE("SmolLM2 folder bundle: its tokenizer.json and template give transformers' ids") {
  const rose::ModelBundle bundle = rose::open_model_bundle(cached_or_skip(kFolder).string());
  check_hello_chat(bundle);
}

TEST_CASE("SmolLM2 folder on the CPU: last-position logits and 40 greedy tokens match") {
  check_logits_and_greedy(*rose::open_model(cached_or_skip(kFolder).string()));
}

TEST_CASE("SmolLM2 folder on the CPU: perplexity of the Austen text within 0.5%") {
  check_perplexity(*rose::open_model(cached_or_skip(kFolder).string()));
}
