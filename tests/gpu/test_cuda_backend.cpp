// The CUDA backend end to end against the CPU backend (the fp32 reference): the same step plans
// (prefill chunks over cached prefixes, mixed prefill + decode, pure decode replayed from CUDA
// graphs with padding rows) must give the same logits within bf16 tolerance, and greedy outputs
// must not depend on whether graphs are used.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/common/error.h"
#include "engine/model/gguf_model.h"
#include "engine/model/quantized_source.h"
#include "engine/model/weights.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/random_weights.h"

using namespace rose;

namespace {

// Random canonical tensors already rounded to bf16, so both backends compute with identical
// weights and only activation rounding separates them.
struct Bf16RandomWeights : test::RandomWeights {
  explicit Bf16RandomWeights(ModelConfig config)
      : RandomWeights(std::move(config), 0.15f, gputest::round_bf16) {}
};

ModelConfig gpt2_config() {
  ModelConfig c;
  c.arch = Arch::kGpt2;
  c.name = "test-gpt2";
  c.vocab_size = 211;
  c.hidden_size = 64;
  c.intermediate_size = 256;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.head_dim = 16;
  c.max_position_embeddings = 256;
  c.tie_word_embeddings = true;
  c.qkv_bias = true;
  return c;
}

ModelConfig qwen_like_config() {
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.name = "test-qwen";
  c.vocab_size = 300;
  c.hidden_size = 128;
  c.intermediate_size = 200;
  c.num_layers = 2;
  c.num_heads = 8;
  c.num_kv_heads = 1;
  c.head_dim = 16;
  c.max_position_embeddings = 512;
  c.rope_theta = 1000000.0f;
  c.rope_scaling = {"llama3", 8.0f, 1.0f, 4.0f, 64};
  c.tie_word_embeddings = false;
  c.qkv_bias = true;
  return c;
}

// A sequence as the scheduler would hold it: tokens so far, its blocks, tokens already cached.
struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
  int computed = 0;
  int generated = 0;
  SamplingParams sampling;
};

// One step: sequence i computes `counts[i]` new tokens (its next prompt chunk, or 1 to decode).
StepPlan make_plan(std::vector<Seq>& seqs, const std::vector<int>& counts, int block_size,
                   bool return_logits) {
  StepPlan plan;
  plan.clear();
  int stride = 1;
  for (size_t i = 0; i < seqs.size(); ++i) {
    stride = std::max(stride, (seqs[i].computed + counts[i] + block_size - 1) / block_size);
  }
  stride += 2;  // padded with -1 like the scheduler's tables
  plan.block_table_stride = stride;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq& s = seqs[i];
    for (int j = 0; j < counts[i]; ++j) {
      const int pos = s.computed + j;
      plan.token_ids.push_back(s.tokens[pos]);
      plan.positions.push_back(pos);
      plan.slot_mapping.push_back(s.blocks[pos / block_size] * block_size + pos % block_size);
    }
    plan.query_start.push_back(plan.query_start.back() + counts[i]);
    plan.context_lens.push_back(s.computed + counts[i]);
    for (int b = 0; b < stride; ++b) {
      plan.block_tables.push_back(b < int(s.blocks.size()) ? s.blocks[b] : -1);
    }
    plan.do_sample.push_back(s.computed + counts[i] == int(s.tokens.size()) ? 1 : 0);
    plan.sampling.push_back(s.sampling);
    plan.sample_index.push_back(uint64_t(s.generated));
  }
  plan.return_logits = return_logits;
  return plan;
}

std::vector<Seq> make_seqs(const std::vector<int>& prompt_lens, int vocab, int block_size,
                           int max_len, std::mt19937& rng) {
  std::vector<Seq> seqs;
  int next_block = 3;  // leave block 0 to padding reads; ids scattered by a stride
  for (int len : prompt_lens) {
    Seq s;
    for (int i = 0; i < len; ++i) s.tokens.push_back(int32_t(rng() % vocab));
    const int blocks = (max_len + block_size - 1) / block_size;
    for (int b = 0; b < blocks; ++b) s.blocks.push_back(next_block++);
    seqs.push_back(std::move(s));
  }
  return seqs;
}

// GPU logits vs CPU logits on the sampled rows, relative to the row's scale.
void check_logits(const StepOutput& gpu, const StepOutput& cpu, const StepPlan& plan, int vocab,
                  double tolerance) {
  REQUIRE(gpu.logits.size() == cpu.logits.size());
  for (int s = 0; s < plan.num_seqs(); ++s) {
    if (!plan.do_sample[s]) continue;
    double scale = 0.0, worst = 0.0;
    for (int v = 0; v < vocab; ++v)
      scale = std::max(scale, std::fabs(double(cpu.logits[size_t(s) * vocab + v])));
    for (int v = 0; v < vocab; ++v) {
      const size_t i = size_t(s) * vocab + v;
      worst = std::max(worst, std::fabs(double(gpu.logits[i]) - double(cpu.logits[i])));
    }
    CAPTURE(s);
    CAPTURE(scale);
    CHECK(worst <= tolerance * std::max(scale, 1.0));
  }
}

// Runs prefill (in chunks of at most `chunk` tokens) then `decode_steps` decode steps on both
// backends with the same plans (the CPU's greedy tokens are fed to both), comparing logits.
void compare_backends(const WeightSource& weights, const std::vector<int>& prompt_lens, int chunk,
                      int decode_steps, bool graphs, double tolerance, bool invariant = false,
                      int max_model_len = 1024) {
  const ModelConfig& config = weights.config();
  BackendOptions options;
  options.batch_invariant = invariant;
  options.max_model_len = std::min(config.max_position_embeddings, max_model_len);
  // make_seqs gives each sequence the blocks of max_model_len from block 3 on: at least 768.
  const int blocks_per_seq = (options.max_model_len + options.block_size - 1) / options.block_size;
  options.num_kv_blocks = std::max(768, 3 + int(prompt_lens.size()) * blocks_per_seq);
  options.max_num_seqs = 32;
  options.max_num_batched_tokens = 512;
  options.cuda_graphs = graphs;
  std::unique_ptr<Backend> cpu = make_cpu_backend(weights, options);
  std::unique_ptr<Backend> gpu = make_cuda_backend(weights, options);
  const int bs = options.block_size;
  std::mt19937 rng(42);
  std::vector<Seq> seqs = make_seqs(prompt_lens, config.vocab_size, bs, options.max_model_len, rng);
  // Prefill phase: sequences still in their prompt take a chunk, the others decode (mixed steps).
  for (int step = 0;; ++step) {
    std::vector<int> counts;
    bool prefill_left = false;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int left = int(seqs[i].tokens.size()) - seqs[i].computed;
      counts.push_back(std::min(left, chunk));
      prefill_left |= seqs[i].computed < prompt_lens[i];
    }
    if (!prefill_left) break;
    const StepPlan plan = make_plan(seqs, counts, bs, true);
    StepOutput out_cpu, out_gpu;
    cpu->execute(plan, out_cpu);
    gpu->execute(plan, out_gpu);
    CAPTURE(step);
    check_logits(out_gpu, out_cpu, plan, config.vocab_size, tolerance);
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].computed += counts[i];
      if (!plan.do_sample[i]) {
        CHECK(out_gpu.sampled[i] == -1);
      } else {
        const float* row = &out_gpu.logits[i * config.vocab_size];
        CHECK(out_gpu.sampled[i] == int(std::max_element(row, row + config.vocab_size) - row));
        seqs[i].tokens.push_back(out_cpu.sampled[i]);
        seqs[i].generated++;
      }
    }
  }
  for (int step = 0; step < decode_steps; ++step) {
    const StepPlan plan = make_plan(seqs, std::vector<int>(seqs.size(), 1), bs, true);
    REQUIRE(plan.is_pure_decode());
    StepOutput out_cpu, out_gpu;
    cpu->execute(plan, out_cpu);
    gpu->execute(plan, out_gpu);
    CAPTURE(step);
    check_logits(out_gpu, out_cpu, plan, config.vocab_size, tolerance);
    for (size_t i = 0; i < seqs.size(); ++i) {
      // The GPU's greedy pick is the argmax of the logits it returned.
      const float* row = &out_gpu.logits[i * config.vocab_size];
      CHECK(out_gpu.sampled[i] == int(std::max_element(row, row + config.vocab_size) - row));
      seqs[i].computed += 1;
      seqs[i].tokens.push_back(out_cpu.sampled[i]);
      seqs[i].generated++;
    }
  }
}

// What greedy_run records: each sequence's sampled ids, each step's logits (with `logits`), the
// backend's fused_norm_rows(), and with measure_copy its measured copy bandwidth.
struct GreedyRun {
  std::vector<std::vector<int32_t>> outputs;
  std::vector<std::vector<float>> logits;
  int fused_norm_rows = 0;
  std::optional<double> copy_gbps;
};

// `steps` greedy steps on a fresh CUDA backend: the prompts in one chunk, then one token a
// sequence per step. measure_copy: a KV pool sized from memory (a third of it), whose copy
// bandwidth is measured before the first step.
GreedyRun greedy_run(const WeightSource& weights, bool graphs, const std::vector<int>& prompt_lens,
                     int steps, bool logits = false, bool measure_copy = false) {
  BackendOptions options;
  options.num_kv_blocks = measure_copy ? 0 : 256;
  options.gpu_memory_utilization = 0.3;
  options.max_num_seqs = 16;
  options.max_num_batched_tokens = 256;
  options.max_model_len = std::min(512, weights.config().max_position_embeddings);  // GPT-2: 256
  options.cuda_graphs = graphs;
  std::unique_ptr<Backend> gpu = make_cuda_backend(weights, options);
  GreedyRun run;
  run.fused_norm_rows = dynamic_cast<CudaBackend&>(*gpu).fused_norm_rows();
  if (measure_copy) run.copy_gbps = gpu->measure_copy_bandwidth_gbps();
  std::mt19937 rng(7);
  std::vector<Seq> seqs =
      make_seqs(prompt_lens, weights.config().vocab_size, 16, options.max_model_len, rng);
  std::vector<int> counts;
  for (const Seq& s : seqs) counts.push_back(int(s.tokens.size()));
  run.outputs.resize(seqs.size());
  for (int step = 0; step < steps; ++step) {
    const StepPlan plan = make_plan(seqs, counts, 16, logits);
    StepOutput out;
    gpu->execute(plan, out);
    if (logits) run.logits.push_back(out.logits);
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].computed += counts[i];
      seqs[i].tokens.push_back(out.sampled[i]);
      seqs[i].generated++;
      run.outputs[i].push_back(out.sampled[i]);
    }
    counts.assign(seqs.size(), 1);
  }
  return run;
}

// greedy_run's steps with each one submitted before the last is collected (overlapped steps):
// its decode tokens are previous_step_token(row), read on the device from what the step before
// sampled, and two steps are in flight at once.
std::vector<std::vector<int32_t>> overlapped_run(const WeightSource& weights, bool graphs,
                                                 const std::vector<int>& prompt_lens, int steps) {
  BackendOptions options;
  options.num_kv_blocks = 256;
  options.max_num_seqs = 16;
  options.max_num_batched_tokens = 256;
  options.max_model_len = std::min(512, weights.config().max_position_embeddings);
  options.cuda_graphs = graphs;
  std::unique_ptr<Backend> gpu = make_cuda_backend(weights, options);
  REQUIRE(gpu->overlaps_steps());
  std::mt19937 rng(7);
  std::vector<Seq> seqs =
      make_seqs(prompt_lens, weights.config().vocab_size, 16, options.max_model_len, rng);
  std::vector<int> counts;
  for (const Seq& s : seqs) counts.push_back(int(s.tokens.size()));
  std::vector<std::vector<int32_t>> outputs(seqs.size());
  std::vector<size_t> pending(seqs.size());  // where each sequence's unknown token sits
  const auto collect = [&] {
    StepOutput out;
    gpu->collect(out);
    REQUIRE(out.sampled.size() == seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].tokens[pending[i]] = out.sampled[i];
      outputs[i].push_back(out.sampled[i]);
    }
  };
  for (int step = 0; step < steps; ++step) {
    gpu->submit(make_plan(seqs, counts, 16, false));
    if (step > 0) collect();  // the step before, while this one runs
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].computed += counts[i];
      pending[i] = seqs[i].tokens.size();
      seqs[i].tokens.push_back(previous_step_token(int(i)));
      seqs[i].generated++;
    }
    counts.assign(seqs.size(), 1);
  }
  collect();
  return outputs;
}

// A backend of 16 blocks, 4 sequences, 64 tokens a step and 128 positions (plans that are refused).
std::unique_ptr<Backend> small_backend(const WeightSource& weights) {
  BackendOptions options;
  options.num_kv_blocks = 16;
  options.max_num_seqs = 4;
  options.max_num_batched_tokens = 64;
  options.max_model_len = 128;
  return make_cuda_backend(weights, options);
}

}  // namespace

TEST_CASE("tiny preset: GPU logits match the CPU backend through prefill chunks and decode") {
  std::unique_ptr<WeightSource> weights = open_model("tiny");
  // bf16-rounded weights on the GPU vs fp32 on the CPU: a few percent of the logit scale.
  compare_backends(*weights, {5, 17, 33, 64, 1}, 24, 6, true, 0.06);
}

TEST_CASE("GPT-2 shape (LayerNorm, biases, learned positions): GPU matches CPU") {
  Bf16RandomWeights weights(gpt2_config());
  compare_backends(weights, {3, 16, 40}, 1000, 5, true, 0.05);
  compare_backends(weights, {31, 2}, 7, 3, false, 0.05);
}

TEST_CASE("Llama shape with qkv bias, GQA group 8, llama3 RoPE: GPU matches CPU") {
  Bf16RandomWeights weights(qwen_like_config());
  compare_backends(weights, {100, 9, 16, 47, 5, 1, 2}, 64, 5, true, 0.05);
}

TEST_CASE("decode rows past 1,024 keys (16-block attention clusters): GPU matches CPU") {
  // head_dim 64 and a GQA group of 2, so decode runs the cluster attention: 8 blocks a cluster up
  // to 1,024 keys, 16 past it (cluster_attention_splits), each in its own graph variant. The
  // decode steps cross from one to the other: 1,021-1,028 keys for one row, then for four.
  ModelConfig c = qwen_like_config();
  c.hidden_size = 256;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 2048;
  c.qkv_bias = false;
  Bf16RandomWeights weights(c);
  compare_backends(weights, {1020}, 512, 8, true, 0.05, false, 2048);
  compare_backends(weights, {1020, 1023, 700, 1022}, 128, 6, true, 0.05, false, 2048);
}

TEST_CASE("8 decode rows, one past 1,536 keys (the split-KV kernel in place of clusters)") {
  // 8 KV heads of 64 (512 wide, as llama-1b) with a GQA group of 2: a bucket of 8 decode rows
  // runs the cluster attention while its longest row is short, the split-KV kernel from
  // kWideClusterRowLimits[1].min_keys keys (cluster_attention_max_rows), in graph variant 3. The
  // decode steps cross it: the longest row goes from 1,533 to 1,540 keys, the others stay short.
  // Both kernels compute the same attention, so this holds each against the CPU across the
  // switch.
  static_assert(kWideClusterRowLimits[1].min_keys > 1533 &&
                kWideClusterRowLimits[1].min_keys <= 1540 && kWideClusterRowLimits[1].max_rows < 8);
  ModelConfig c = qwen_like_config();
  c.hidden_size = 256;
  c.num_heads = 16;
  c.num_kv_heads = 8;
  c.head_dim = 64;
  c.max_position_embeddings = 1600;
  c.qkv_bias = false;
  Bf16RandomWeights weights(c);
  compare_backends(weights, {1532, 30, 41, 52, 63, 74, 85, 96}, 64, 8, true, 0.05, false, 1600);
}

TEST_CASE("weights kept quantized (--quantize): GPU matches the CPU on the same blocks") {
  // The GPU reads the blocks (the quantized GEMV up to kGemvQuantMaxRows = 8 rows, on int8
  // activations; the tile-decoding GEMM above) where the CPU computes in fp32 on their
  // dequantized values: the tiny preset's tolerance. Ten sequences decode through the
  // tile-decoding GEMM on the blocks, five and two through the quantized GEMV (and the fused gated
  // one: tiny's gate | up is one Q range); tiny's down (in 688) stays dense. --batch-invariant
  // decodes the blocks for the pinned GEMM, or with ROSEINFER_CUDA_GEMM_QUANT_INVARIANT=1 runs
  // every product in the tile-decoding GEMM.
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    CAPTURE(int(type));
    const std::unique_ptr<WeightSource> weights = quantize_weights(open_model("tiny"), type);
    BackendOptions options;
    options.num_kv_blocks = 64;
    const std::string name = ggml_type_traits(type).name;
    CHECK(make_cuda_backend(*weights, options)->weight_types() == name + " x 13, bf16 x 4");
    compare_backends(*weights, {5, 17, 33, 64, 1, 12, 3, 20, 7, 40}, 24, 6, true, 0.06);
    compare_backends(*weights, {5, 17, 33, 64, 1}, 24, 6, true, 0.06);
    compare_backends(*weights, {9, 30}, 16, 8, true, 0.06);
    compare_backends(*weights, {9, 30}, 16, 4, false, 0.06, true);  // --batch-invariant
    setenv("ROSEINFER_CUDA_GEMM_QUANT_INVARIANT", "1", 1);          // read by the constructor
    compare_backends(*weights, {9, 30}, 16, 4, false, 0.06, true);
    unsetenv("ROSEINFER_CUDA_GEMM_QUANT_INVARIANT");
  }
  // --quantize q4_k_m: layers 2 and 3's qkv are two ranges (q and k in Q4_K, v in Q6_K), each read
  // by its own GEMV launch with the fused norm, and the tied lm_head is Q6_K.
  const std::unique_ptr<WeightSource> mixed =
      quantize_weights(open_model("tiny"), *QuantizeScheme::parse("q4_k_m"));
  BackendOptions options;
  options.num_kv_blocks = 64;
  CHECK(make_cuda_backend(*mixed, options)->weight_types() == "Q4_K x 12, Q6_K x 3, bf16 x 4");
  compare_backends(*mixed, {5, 17, 33, 64, 1, 12, 3, 20, 7, 40}, 24, 6, true, 0.06);
  compare_backends(*mixed, {5, 17, 33, 64, 1}, 24, 6, true, 0.06);
  compare_backends(*mixed, {9, 30}, 16, 8, true, 0.06);
}

TEST_CASE("GGUF blocks kept on the GPU: mixed types per matrix, dense fallbacks, same as decoded") {
  // tiny_llama_quant.gguf mixes 13 types: layer 0's o (Q8_0), gate | up (Q4_0 | Q4_1: two
  // ranges, so the unfused path) and the Q8_0 output stay in blocks; layer 1's down (Q6_K) too;
  // matrices with a part the GEMV cannot read (Q5_K, Q5_1, BF16, Q5_0...) are decoded to bf16.
  // Its random blocks give logits that bf16 activations move by ~10% of their scale, so instead
  // of the CPU (test_cuda_dequant bounds the decoded path against it) the kept path is checked
  // against the same file decoded at load. Products of 9 rows (past kGemvQuantMaxRows: the
  // prefill's lm_head over its 9 sequences, then a decode step of all 9) run the tile-decoding GEMM
  // on the blocks where quant_gemm_row_limit takes them (every matrix but the down projection): the
  // same bf16 weight values as the decoded copy, summed in another order, so within the bf16
  // tolerance; with that GEMM and the dense tensor-core GEMV off, and in the prefill's 170-row
  // products, they multiply the decoded values through the same cuBLAS calls: bit-identical
  // logits. Steps of 2 rows read the blocks in the GEMV (int8 activations against the exact
  // weights: within the bf16 tolerance of the decoded weights).
  const std::unique_ptr<WeightSource> weights =
      open_gguf_weights("tests/fixtures/gguf/tiny_llama_quant.gguf");
  const ModelConfig& config = weights->config();
  BackendOptions options;
  options.num_kv_blocks = 160;  // make_seqs gives each sequence 16 blocks from block 3 on
  options.max_num_seqs = 16;
  options.max_num_batched_tokens = 256;
  options.max_model_len = 256;
  const std::unique_ptr<Backend> kept = make_cuda_backend(*weights, options);
  // Read by the constructor: neither the tile GEMM nor the int8 tensor-core GEMV (which may
  // take the Q8_0, Q4_0 and Q4_1 matrices), so every product past 8 rows decodes and runs cuBLAS.
  // Nor, in it and in the decoded backend, the dense tensor-core GEMV: it takes this small
  // model's dense weights at 5-32 rows but never a decoded copy (which goes to library_gemm),
  // and here both must go through the same cuBLAS calls.
  setenv("ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS", "0", 1);
  setenv("ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS", "0", 1);
  setenv("ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS", "0", 1);
  const std::unique_ptr<Backend> kept_decoding = make_cuda_backend(*weights, options);
  unsetenv("ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS");
  unsetenv("ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS");
  options.dequantize_weights = true;
  const std::unique_ptr<Backend> decoded = make_cuda_backend(*weights, options);
  unsetenv("ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS");
  CHECK(kept->weight_types() == "Q4_0 x 1, Q4_1 x 1, Q6_K x 1, Q8_0 x 2, bf16 x 5");
  CHECK(decoded->weight_types() == "bf16");
  CHECK(kept->weight_bytes() < decoded->weight_bytes());
  std::mt19937 rng(11);
  std::vector<Seq> seqs =
      make_seqs({5, 17, 33, 64, 9, 3, 12, 7, 20}, config.vocab_size, 16, 256, rng);
  std::vector<int> counts;
  for (const Seq& seq : seqs) counts.push_back(int(seq.tokens.size()));
  StepPlan plan = make_plan(seqs, counts, 16, true);
  StepOutput out_kept, out_kept_decoding, out_decoded;
  kept->execute(plan, out_kept);
  kept_decoding->execute(plan, out_kept_decoding);
  decoded->execute(plan, out_decoded);
  REQUIRE(out_kept_decoding.logits.size() == out_decoded.logits.size());
  CHECK(std::memcmp(out_kept_decoding.logits.data(), out_decoded.logits.data(),
                    out_kept_decoding.logits.size() * 4) == 0);
  check_logits(out_kept, out_decoded, plan, config.vocab_size, 0.06);
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].computed += counts[i];
    seqs[i].tokens.push_back(out_decoded.sampled[i]);
    seqs[i].generated++;
  }
  plan = make_plan(seqs, std::vector<int>(seqs.size(), 1), 16, true);  // 9 rows: the GEMM
  kept->execute(plan, out_kept);
  decoded->execute(plan, out_decoded);
  check_logits(out_kept, out_decoded, plan, config.vocab_size, 0.06);
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i].computed += 1;
    seqs[i].tokens.push_back(out_decoded.sampled[i]);
    seqs[i].generated++;
  }
  seqs.resize(2);  // decode two of them: the quantized GEMV
  for (int step = 0; step < 6; ++step) {
    plan = make_plan(seqs, {1, 1}, 16, true);
    kept->execute(plan, out_kept);
    decoded->execute(plan, out_decoded);
    CAPTURE(step);
    check_logits(out_kept, out_decoded, plan, config.vocab_size, 0.06);
    for (size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].computed += 1;
      seqs[i].tokens.push_back(out_decoded.sampled[i]);
      seqs[i].generated++;
    }
  }
}

TEST_CASE("greedy outputs are identical with CUDA graphs on and off") {
  std::unique_ptr<WeightSource> weights = open_model("tiny");
  for (const std::vector<int>& lens : {std::vector<int>{7, 30, 16, 1}, std::vector<int>{12}}) {
    const auto eager = greedy_run(*weights, false, lens, 24).outputs;
    const auto graphed = greedy_run(*weights, true, lens, 24).outputs;
    CHECK(eager == graphed);
  }
}

TEST_CASE(
    "the copy bandwidth is measured through the KV pool, and the steps after it are the same") {
  std::unique_ptr<WeightSource> weights = open_model("tiny");
  const std::vector<int> lens = {7, 30, 16, 1};
  const GreedyRun measured = greedy_run(*weights, true, lens, 24, false, true);
  REQUIRE(measured.copy_gbps.has_value());
  // HBM GPUs copy at 1,000-5,000 GB/s (bytes read plus written; the H100 ~3,000); a figure far
  // outside means the timing or the byte count is wrong.
  CHECK(*measured.copy_gbps > 300.0);
  CHECK(*measured.copy_gbps < 20000.0);
  CHECK(measured.outputs == greedy_run(*weights, true, lens, 24).outputs);
}

TEST_CASE("overlapped steps: ids read on the device from the step before give the same outputs") {
  for (const std::string model : {"tiny", "tests/fixtures/models/tiny-llama"}) {
    CAPTURE(model);
    std::unique_ptr<WeightSource> weights = open_model(model);
    for (bool fused_embedding : {true, false}) {
      CAPTURE(fused_embedding);
      // Read by the constructor: the embedding in layer 0's norm, or launch_embedding.
      if (!fused_embedding) setenv("ROSEINFER_CUDA_FUSED_EMBEDDING", "0", 1);
      for (const std::vector<int>& lens : {std::vector<int>{7, 30, 16, 1}, std::vector<int>{12}}) {
        for (bool graphs : {true, false}) {
          CAPTURE(graphs);
          CHECK(overlapped_run(*weights, graphs, lens, 24) ==
                greedy_run(*weights, graphs, lens, 24).outputs);
        }
      }
      unsetenv("ROSEINFER_CUDA_FUSED_EMBEDDING");
    }
  }
}

TEST_CASE("submit and collect refuse what would lose a step's output") {
  std::unique_ptr<WeightSource> weights = open_model("tiny");
  std::unique_ptr<Backend> gpu = small_backend(*weights);
  std::mt19937 rng(1);
  std::vector<Seq> seqs = make_seqs({4}, weights->config().vocab_size, 16, 32, rng);
  StepOutput out;
  CHECK_THROWS_AS(gpu->collect(out), Error);                            // nothing submitted
  CHECK_THROWS_AS(gpu->submit(make_plan(seqs, {4}, 16, true)), Error);  // logits: execute()
  StepPlan plan = make_plan(seqs, {4}, 16, false);
  plan.token_ids[0] = previous_step_token(1);  // the step before had no row 1
  CHECK_THROWS_AS(gpu->submit(plan), Error);
  plan = make_plan(seqs, {4}, 16, false);
  gpu->submit(plan);
  gpu->submit(plan);
  CHECK_THROWS_AS(gpu->submit(plan), Error);  // two already in flight
  CHECK_THROWS_AS(gpu->execute(plan, out), Error);
  gpu->collect(out);
  const int32_t first = out.sampled.at(0);
  gpu->collect(out);
  CHECK(out.sampled.at(0) == first);  // the same plan twice: the same greedy id
  CHECK(first >= 0);
}

TEST_CASE("a step's graph replayed three times (ROSEINFER_CUDA_REPLAY=3) gives the same logits") {
  // The measurement switch times a step's GPU work alone by replaying each graph back to back
  // (results/2026-11-25-norm-after/host_gap_replay_h200): that is only sound if a replay of the
  // same inputs writes the same K/V and samples the same ids, so every step's logits must not
  // change. Eager steps (the prefill) run once either way.
  std::unique_ptr<WeightSource> weights = open_model("tiny");
  for (const std::vector<int>& lens : {std::vector<int>{7, 30, 16, 1}, std::vector<int>{12}}) {
    const GreedyRun once = greedy_run(*weights, true, lens, 12, true);
    setenv("ROSEINFER_CUDA_REPLAY", "3", 1);  // read by the constructor
    const GreedyRun thrice = greedy_run(*weights, true, lens, 12, true);
    unsetenv("ROSEINFER_CUDA_REPLAY");
    CHECK(once.outputs == thrice.outputs);
    CHECK(once.logits == thrice.logits);
  }
}

TEST_CASE("bad plans are rejected with rose::Error") {
  std::unique_ptr<WeightSource> weights = open_model("tiny");
  std::unique_ptr<Backend> gpu = small_backend(*weights);
  std::mt19937 rng(1);
  std::vector<Seq> seqs = make_seqs({4}, weights->config().vocab_size, 16, 32, rng);
  StepPlan plan = make_plan(seqs, {4}, 16, false);
  plan.token_ids[1] = weights->config().vocab_size;
  StepOutput out;
  CHECK_THROWS_AS(gpu->execute(plan, out), Error);
  plan = make_plan(seqs, {4}, 16, false);
  plan.block_tables[0] = 999;
  CHECK_THROWS_AS(gpu->execute(plan, out), Error);
  // A good plan still runs after the rejected ones.
  plan = make_plan(seqs, {4}, 16, false);
  gpu->execute(plan, out);
  CHECK(out.sampled.size() == 1);
  CHECK(out.sampled[0] >= 0);
}

TEST_CASE("norms fused into the decode GEMVs: the add-norm kernels' logits, bit for bit") {
  // Steps of up to fused_norm_rows() rows run qkv and gate|up on the residual stream,
  // each normalizing it itself, and o and down adding into it (gemv_fusion.cuh). Here every row
  // count the GEMVs take (ROSEINFER_CUDA_FUSED_NORM=8) against ROSEINFER_CUDA_FUSED_NORM=0, which
  // runs launch_add_norm between them: 1, 3 and 6 sequences, eager and graphed, and the logits of
  // every step must be identical. tiny's down (in 688) stays dense when tiny is quantized: its
  // steps add to the residual in the dense GEMV and fuse up to that GEMV's 4 rows. Dense qkv and
  // up fuse on the one-wave kernel (gemv_norm_input_supported: tiny, the qwen-like model, a
  // SmolLM2-135M-shaped one), up to its 4 rows; a llama-1b-shaped layer, whose gate|up is not on
  // that kernel, and GPT-2 (LayerNorm) never fuse. The comparison runs the dense GEMV to its 4
  // rows (ROSEINFER_CUDA_GEMV_MAX_ROWS=4); by default these small models stop it at 2
  // (gemv_rows_for), their 3-4 row products going to the tensor-core GEMV unfused.
  const std::unique_ptr<WeightSource> tiny = open_model("tiny");
  const std::unique_ptr<WeightSource> tiny_q4k =
      quantize_weights(open_model("tiny"), GgmlType::kQ4_K);
  // Every matrix quantizable (in a multiple of 256): the quantized GEMV's 8 rows throughout.
  ModelConfig all_quant = qwen_like_config();
  all_quant.name = "test-all-quantized";
  all_quant.hidden_size = 256;
  all_quant.intermediate_size = 512;
  all_quant.num_heads = 8;
  all_quant.num_kv_heads = 2;
  all_quant.head_dim = 32;
  all_quant.qkv_bias = false;
  const std::unique_ptr<WeightSource> q4k =
      quantize_weights(std::make_unique<Bf16RandomWeights>(all_quant), GgmlType::kQ4_K);
  const std::unique_ptr<WeightSource> q8 =
      quantize_weights(std::make_unique<Bf16RandomWeights>(all_quant), GgmlType::kQ8_0);
  const Bf16RandomWeights qwen(qwen_like_config());
  ModelConfig smollm2_shape = qwen_like_config();  // SmolLM2-135M's layer, two of them
  smollm2_shape.name = "test-smollm2-shape";
  smollm2_shape.hidden_size = 576;
  smollm2_shape.intermediate_size = 1536;
  smollm2_shape.num_heads = 9;
  smollm2_shape.num_kv_heads = 3;
  smollm2_shape.head_dim = 64;
  smollm2_shape.qkv_bias = false;
  const Bf16RandomWeights smollm2(smollm2_shape);
  struct Model {
    const WeightSource* weights;
    int fused_rows;
  };
  // What is compared is the norm inside one GEMV kernel against the add-norm kernel beside it:
  // the int8 tensor-core GEMV, which takes no fused norm, stays off (from 5 rows it would run the
  // unfused steps' Q4_K products and the dp4a GEMV the fused ones).
  setenv("ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS", "0", 1);
  setenv("ROSEINFER_CUDA_GEMV_MAX_ROWS", "4", 1);
  for (const Model& model : {Model{tiny_q4k.get(), 4}, Model{q4k.get(), 8}, Model{q8.get(), 8},
                             Model{tiny.get(), 4}, Model{&qwen, 4}, Model{&smollm2, 4}}) {
    CAPTURE(model.weights->config().name);
    for (const std::vector<int>& lens :
         {std::vector<int>{9}, std::vector<int>{4, 20, 7}, std::vector<int>{3, 5, 8, 13, 2, 6}}) {
      CAPTURE(lens.size());
      for (bool graphs : {false, true}) {
        setenv("ROSEINFER_CUDA_FUSED_NORM", "8", 1);  // read by the constructor: every row count
        const GreedyRun fused = greedy_run(*model.weights, graphs, lens, 7, true);
        setenv("ROSEINFER_CUDA_FUSED_NORM", "0", 1);
        const GreedyRun unfused = greedy_run(*model.weights, graphs, lens, 7, true);
        unsetenv("ROSEINFER_CUDA_FUSED_NORM");
        CHECK(fused.fused_norm_rows == model.fused_rows);
        CHECK(unfused.fused_norm_rows == 0);
        CHECK(fused.logits == unfused.logits);
      }
    }
  }
  unsetenv("ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS");
  unsetenv("ROSEINFER_CUDA_GEMV_MAX_ROWS");
  // By default: up to kFusedNormDefaultRows rows, and the dense GEMV's 2; never with a dense up
  // off the one-wave kernel or LayerNorm.
  CHECK(greedy_run(*q4k, false, {5}, 1).fused_norm_rows == kFusedNormDefaultRows);
  CHECK(greedy_run(*tiny_q4k, false, {5}, 1).fused_norm_rows == std::min(2, kFusedNormDefaultRows));
  CHECK(greedy_run(smollm2, false, {5}, 1).fused_norm_rows == std::min(2, kFusedNormDefaultRows));
  setenv("ROSEINFER_CUDA_FUSED_NORM", "8", 1);
  ModelConfig llama1b_layer = qwen_like_config();  // llama-1b's layer: gate|up of in 2048, out 8192
  llama1b_layer.name = "test-llama-1b-layer";
  llama1b_layer.num_layers = 1;
  llama1b_layer.hidden_size = 2048;
  llama1b_layer.intermediate_size = 8192;
  llama1b_layer.num_heads = 32;
  llama1b_layer.num_kv_heads = 8;
  llama1b_layer.head_dim = 64;
  llama1b_layer.qkv_bias = false;
  CHECK(greedy_run(Bf16RandomWeights(llama1b_layer), false, {5}, 1).fused_norm_rows == 0);
  Bf16RandomWeights gpt2(gpt2_config());
  CHECK(greedy_run(gpt2, false, {5}, 1).fused_norm_rows == 0);
  unsetenv("ROSEINFER_CUDA_FUSED_NORM");
}
