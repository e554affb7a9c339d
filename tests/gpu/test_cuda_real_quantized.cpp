// The real SmolLM2-135M Q4_1 GGUF on the GPU with its blocks kept quantized (Q4_1 projections, a
// Q8_0 tied lm_head) against the CPU backend on the same file (fp32 on the dequantized blocks) and
// transformers' greedy continuations (tests/fixtures/real_model/smollm2-q4_1). Skipped when the
// model is not cached (`make run` fetches it) or no GPU is present.
//
// Tolerance: the GPU computes with exactly the CPU's weight values but bf16 activations, a bf16
// KV cache and, in the quantized GEMV (up to 8 rows, the prompts' lm_head included), activations
// quantized to int8 per 32 elements (each off by at most 1/254 of its block's largest), so
// last-position logits differ by that rounding carried through 30 layers: |gpu - cpu| <= 0.05
// max|cpu| per row (the measured worst is printed).
// Greedy paths are reported token by token: near-ties (transformers' smallest top-1/top-2 gap on
// these paths is 0.0035) may legitimately flip under bf16, so the test requires the first token of
// every prompt to agree and reports where later ones diverge.
#include <doctest/doctest.h>

#include <string>

#include "engine/model/gguf_model.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/real_model.h"

using namespace rose;
using namespace rose::test;

namespace {

constexpr int kGreedySteps = 64;

std::unique_ptr<Backend> make_gpu(const WeightSource& weights, bool dequantize) {
  BackendOptions options;
  options.num_kv_blocks = 160;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 512;
  options.dequantize_weights = dequantize;
  return make_cuda_backend(weights, options);
}

struct GreedyRun {
  std::vector<float> first_logits;           // (prompts, V) at the last prompt position
  std::vector<std::vector<int32_t>> tokens;  // (prompts, kGreedySteps)
};

// All prompts prefilled in one step, then kGreedySteps - 1 decode steps of every sequence (6 rows)
// or, with `one_at_a_time`, each sequence decoded alone (1 row): both within the quantized GEMV's 8
// rows, so the two differ only in the rows beside each sequence (and the attention kernel).
GreedyRun greedy(Backend& backend, const RealReference& ref, bool one_at_a_time) {
  const int num_prompts = int(ref.prompts.size());
  std::vector<Sequence> seqs(size_t(num_prompts), Sequence{});
  int next_block = 0;
  for (int i = 0; i < num_prompts; ++i) {
    seqs[i].tokens = ref.prompts[i];
    assign_blocks(seqs[i], int(ref.prompts[i].size()) + kGreedySteps, next_block);
  }
  GreedyRun run;
  run.tokens.resize(size_t(num_prompts));
  StepOutput out;
  StepPlan plan;
  plan.return_logits = true;
  for (Sequence& seq : seqs) add_to_plan(plan, seq, int(seq.tokens.size()));
  backend.execute(plan, out);
  run.first_logits = out.logits;
  for (int i = 0; i < num_prompts; ++i) {
    seqs[i].tokens.push_back(out.sampled[i]);
    run.tokens[i].push_back(out.sampled[i]);
    ++seqs[i].generated;
  }
  for (int step = 1; step < kGreedySteps; ++step) {
    for (int first = 0; first < num_prompts; first += one_at_a_time ? 1 : num_prompts) {
      const int last = one_at_a_time ? first + 1 : num_prompts;
      StepPlan decode;
      for (int i = first; i < last; ++i) add_to_plan(decode, seqs[i], 1);
      backend.execute(decode, out);
      for (int i = first; i < last; ++i) {
        const int32_t token = out.sampled[i - first];
        seqs[i].tokens.push_back(token);
        run.tokens[i].push_back(token);
        ++seqs[i].generated;
      }
    }
  }
  return run;
}

// Steps until `a` and `b` first differ (their length when they never do).
size_t agreeing_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

TEST_CASE("SmolLM2 Q4_1 GGUF kept quantized on the GPU: logits and greedy tokens vs the CPU") {
  const auto path = cached_or_skip(kModelFile);
  const auto weights = open_gguf_weights(path);
  const RealReference ref = load_real_reference();
  const int V = weights->config().vocab_size;
  const auto gpu = make_gpu(*weights, false);
  CHECK(gpu->weight_types() == "Q4_1 x 120, Q8_0 x 1");
  const auto gpu_dequantized = make_gpu(*weights, true);
  CHECK(gpu_dequantized->weight_types() == "bf16");
  // The quantized GPU reads fewer weight bytes than the dequantized one: Q4_1 is 5 bits a weight.
  CHECK(gpu->weight_bytes() * 2 < gpu_dequantized->weight_bytes());
  const auto cpu = make_backend(*weights);
  const GreedyRun cpu_run = greedy(*cpu, ref, false);

  for (bool one_at_a_time : {false, true}) {
    CAPTURE(one_at_a_time);
    const GreedyRun gpu_run = greedy(*gpu, ref, one_at_a_time);
    float worst = 0.0f;
    for (size_t i = 0; i < ref.prompts.size(); ++i) {
      CAPTURE(i);
      float max_ref = 0.0f, max_diff = 0.0f;
      for (int v = 0; v < V; ++v) {
        const size_t at = i * size_t(V) + size_t(v);
        max_ref = std::max(max_ref, std::abs(cpu_run.first_logits[at]));
        max_diff =
            std::max(max_diff, std::abs(gpu_run.first_logits[at] - cpu_run.first_logits[at]));
      }
      worst = std::max(worst, max_diff / max_ref);
      CHECK(max_diff <= 0.05f * max_ref);
      CHECK(gpu_run.tokens[i][0] == cpu_run.tokens[i][0]);
      const size_t same_cpu = agreeing_prefix(gpu_run.tokens[i], cpu_run.tokens[i]);
      const size_t same_hf = agreeing_prefix(gpu_run.tokens[i], ref.greedy[i]);
      // A std::string: doctest prints a bare const char* operand as a pointer.
      const std::string how = one_at_a_time ? " (decoded alone)" : " (decoded together)";
      MESSAGE("prompt " << i << how << ": greedy agrees with the CPU for " << same_cpu << " of "
                        << kGreedySteps << " tokens, with transformers for " << same_hf << " of "
                        << ref.greedy[i].size());
    }
    MESSAGE("worst |gpu - cpu| / max|cpu| over the last-position logits: " << worst);
  }
}
