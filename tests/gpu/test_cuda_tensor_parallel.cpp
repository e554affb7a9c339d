// Tensor parallel on GPUs over NCCL (engine/parallel, engine/backend/cuda/nccl_collective): a
// shard's synthetic slice generated on the device equals the CPU's slice of the whole tensor; and
// with 2 GPUs, the model split over both gives the one-GPU backend's logits (bf16 tolerance: the
// partial sums round differently) and its greedy ids wherever the top two logits are not a near
// tie, with CUDA graphs (collectives captured) and without. Cases needing 2 GPUs say skipped.
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/error.h"
#include "engine/model/gguf_model.h"
#include "engine/model/presets.h"
#include "engine/parallel/shard_plan.h"
#include "engine/parallel/sharded_weights.h"
#include "engine/parallel/tensor_parallel_backend.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/fill.cuh"
#include "tests/gpu/gpu_test_util.h"
#include "tests/random_weights.h"
#include "tests/tensor_parallel_plans.h"

using namespace rose;

namespace {

#ifdef ROSEINFER_HAVE_NCCL
constexpr bool kHaveNccl = true;
#else
constexpr bool kHaveNccl = false;
#endif
// The cases over NCCL need 2 GPUs and a build with NCCL; elsewhere doctest reports them skipped.
bool two_gpus() { return kHaveNccl && cuda_device_count() >= 2; }

// A test-only Collective for ranks that share one GPU (NCCL refuses two ranks on one device):
// each operation copies the rank's buffer to the host, waits for its stream, sums (bf16 rounded
// once, after an fp32 sum in rank order) or gathers there between barriers, and copies back. It
// synchronises, so it runs eager steps only (no graph capture); it checks the shards' arithmetic
// on a machine with one GPU.
class StagedCollective final : public Collective {
 public:
  struct Shared {
    explicit Shared(int size) : size(size), published(size_t(size)), barrier(size) {}
    int size;
    std::vector<const float*> published;
    std::barrier<> barrier;
  };
  StagedCollective(std::shared_ptr<Shared> shared, int rank)
      : shared_(std::move(shared)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return shared_->size; }

  void all_reduce_sum(void* buffer, int64_t count, CollectiveType type, void* stream) override {
    REQUIRE(type == CollectiveType::kBF16);
    auto s = static_cast<cudaStream_t>(stream);
    std::vector<uint16_t> bits(static_cast<size_t>(count));
    ROSE_CUDA_CHECK(
        cudaMemcpyAsync(bits.data(), buffer, bits.size() * 2, cudaMemcpyDeviceToHost, s));
    ROSE_CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<float> mine(bits.size()), sum(bits.size(), 0.0f);
    for (size_t i = 0; i < bits.size(); ++i) mine[i] = gputest::bf16_bits_to_f32(bits[i]);
    publish(mine.data());
    for (const float* rank_data : shared_->published) {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += rank_data[i];
    }
    shared_->barrier.arrive_and_wait();
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = gputest::f32_to_bf16_bits(sum[i]);
    ROSE_CUDA_CHECK(
        cudaMemcpyAsync(buffer, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice, s));
    ROSE_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  void all_gather(const void* send, void* recv, int64_t count, CollectiveType type,
                  void* stream) override {
    REQUIRE(type == CollectiveType::kF32);
    auto s = static_cast<cudaStream_t>(stream);
    std::vector<float> mine(static_cast<size_t>(count));
    ROSE_CUDA_CHECK(cudaMemcpyAsync(mine.data(), send, mine.size() * 4, cudaMemcpyDeviceToHost, s));
    ROSE_CUDA_CHECK(cudaStreamSynchronize(s));
    publish(mine.data());
    std::vector<float> all;
    for (const float* rank_data : shared_->published)
      all.insert(all.end(), rank_data, rank_data + count);
    shared_->barrier.arrive_and_wait();
    ROSE_CUDA_CHECK(cudaMemcpyAsync(recv, all.data(), all.size() * 4, cudaMemcpyHostToDevice, s));
    ROSE_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  void publish(const float* data) {
    shared_->published[size_t(rank_)] = data;
    shared_->barrier.arrive_and_wait();
  }
  std::shared_ptr<Shared> shared_;
  int rank_;
};

std::vector<std::unique_ptr<Collective>> staged_collectives(int n) {
  auto shared = std::make_shared<StagedCollective::Shared>(n);
  std::vector<std::unique_ptr<Collective>> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(std::make_unique<StagedCollective>(shared, r));
  return ranks;
}

// Steps where `reference`'s best logit leads the second by more than `margin`: there the split
// backend must pick the same id. Returns how many (step, sequence) pairs were compared.
int check_ids_away_from_ties(const tptest::Run& split, const tptest::Run& reference, int vocab,
                             float margin) {
  int compared = 0;
  for (size_t step = 0; step < reference.ids.size(); ++step) {
    const std::vector<float>& logits = reference.logits[step];
    for (size_t s = 0; s < reference.ids[step].size(); ++s) {
      std::vector<float> row(logits.begin() + s * vocab, logits.begin() + (s + 1) * vocab);
      std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
      if (row[0] - row[1] <= margin) continue;
      CHECK(split.ids[step][s] == reference.ids[step][s]);
      ++compared;
    }
  }
  return compared;
}

double worst_logit_error(const tptest::Run& a, const tptest::Run& b) {
  double worst = 0;
  for (size_t step = 0; step < a.logits.size(); ++step) {
    for (size_t i = 0; i < a.logits[step].size(); ++i) {
      worst = std::max(worst, double(std::fabs(a.logits[step][i] - b.logits[step][i])));
    }
  }
  return worst;
}

// bf16 activations: the split sums its partials in another order and rounds them once more, so
// allow 3% of the largest logit (at least 0.1); the one-GPU backend itself is that far from fp32.
double logit_tolerance(const tptest::Run& reference) {
  double largest = 0;
  for (const std::vector<float>& step : reference.logits) {
    for (float v : step) largest = std::max(largest, double(std::fabs(v)));
  }
  return std::max(0.1, 0.03 * largest);
}

// `margin` 0 compares ids where the reference's top two logits are further apart than twice the
// worst logit difference (the widest gap the difference can close).
void check_split_matches_one_gpu(const char* preset, bool graphs, float margin = 0.2f) {
  const auto weights = open_preset(preset);
  const int vocab = weights->config().vocab_size;
  BackendOptions options = tptest::small_options();
  options.cuda_graphs = graphs;
  const auto one = make_cuda_backend(*weights, options);
  const tptest::Run reference = tptest::greedy_run(*one, vocab, 8);
  const auto split = make_cuda_tensor_parallel_backend(*weights, options, {0, 1});
  CHECK(split->num_kv_blocks() == options.num_kv_blocks);
  const tptest::Run got = tptest::greedy_run(*split, vocab, 8, &reference);
  const double error = worst_logit_error(got, reference);
  MESSAGE((std::string(preset) + (graphs ? " graphs" : " eager")), ": worst logit difference ",
          error);
  CHECK(error < logit_tolerance(reference));
  const float id_margin = margin > 0 ? margin : float(2 * error);
  const int compared = check_ids_away_from_ties(got, reference, vocab, id_margin);
  MESSAGE(std::string(preset), ": ", compared, " of ", 3 * reference.ids.size(),
          " greedy ids compared (top-two gap > ", id_margin, ")");
  CHECK(compared > 0);
}

}  // namespace

TEST_CASE("a shard's synthetic slice is generated on the device as the CPU slices it") {
  const auto tiny = open_preset("tiny");
  for (const char* name : {"layers.1.qkv.weight", "layers.0.o.weight", "layers.2.up.weight",
                           "layers.3.down.weight", "lm_head.weight"}) {
    CAPTURE(name);
    const auto shard = shard_weights(*tiny, 2, 1);
    const std::optional<SyntheticInit> init = shard->synthetic(name);
    REQUIRE(init);
    REQUIRE(!init->rows.empty());
    int64_t numel = 0;
    for (const RowRun& run : init->rows) numel += run.count * init->cols;
    std::vector<float> want(static_cast<size_t>(numel));
    shard->read_f32(name, want);
    void* device = nullptr;
    ROSE_CUDA_CHECK(cudaMalloc(&device, size_t(numel) * 2));
    char* out = static_cast<char*>(device);
    for (const RowRun& run : init->rows) {
      launch_fill_uniform_slice(out, DType::kBF16, run.count, init->cols, run.begin,
                                init->source_cols, init->col_begin, init->seed, init->scale,
                                nullptr);
      out += run.count * init->cols * 2;
    }
    std::vector<uint16_t> got(static_cast<size_t>(numel));
    ROSE_CUDA_CHECK(cudaMemcpy(got.data(), device, got.size() * 2, cudaMemcpyDeviceToHost));
    ROSE_CUDA_CHECK(cudaFree(device));
    int mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      mismatches += gputest::bf16_bits_to_f32(got[i]) != gputest::round_bf16(want[i]);
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("split in 2 and 4 on one GPU (host-staged collectives, eager) matches the whole model") {
  for (const char* preset : {"tiny", "gpt2"}) {
    const auto weights = open_preset(preset);
    const int vocab = weights->config().vocab_size;
    BackendOptions options = tptest::small_options();
    options.cuda_graphs = false;
    const auto one = make_cuda_backend(*weights, options);
    const tptest::Run reference = tptest::greedy_run(*one, vocab, 6);
    for (int degree : {2, 4}) {
      if (!tensor_parallel_refusal(weights->config(), degree).empty()) continue;
      const std::string name = preset;
      CAPTURE(name);
      CAPTURE(degree);
      const auto split =
          make_tensor_parallel_backend(*weights, options, std::vector<int>(size_t(degree), 0),
                                       staged_collectives(degree), make_cuda_backend);
      const tptest::Run got = tptest::greedy_run(*split, vocab, 6, &reference);
      const double error = worst_logit_error(got, reference);
      MESSAGE(name, " split in ", degree, " on one GPU: worst logit difference ", error);
      CHECK(error < logit_tolerance(reference));
      CHECK(check_ids_away_from_ties(got, reference, vocab, 0.2f) > 0);
    }
  }
}

namespace {

// Random bf16-exact weights with nonzero biases (a preset's are 0, which would hide a bias sliced
// wrongly or added once per rank), read through the checkpoint path (read_f32, then sliced).
struct RandomWeights : test::RandomWeights {
  explicit RandomWeights(ModelConfig config)
      : test::RandomWeights(std::move(config), 0.15f, gputest::round_bf16) {}
};

ModelConfig random_llama() {  // GQA 2, qkv bias, untied lm_head, odd vocab
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.name = "tp-random-llama";
  c.vocab_size = 301;
  c.hidden_size = 128;
  c.intermediate_size = 256;
  c.num_layers = 2;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 16;
  c.max_position_embeddings = 512;
  c.tie_word_embeddings = false;
  c.qkv_bias = true;
  return c;
}

ModelConfig random_gpt2() {  // every linear layer with a bias, tied lm_head
  ModelConfig c = random_llama();
  c.arch = Arch::kGpt2;
  c.name = "tp-random-gpt2";
  c.num_kv_heads = 8;
  c.tie_word_embeddings = true;
  return c;
}

}  // namespace

TEST_CASE(
    "random weights with biases, split in 2 and 4 on one GPU (staged, eager), match one GPU") {
  for (const ModelConfig& config : {random_llama(), random_gpt2()}) {
    CAPTURE(config.name);
    const RandomWeights weights(config);
    BackendOptions options = tptest::small_options();
    options.cuda_graphs = false;
    const auto one = make_cuda_backend(weights, options);
    const tptest::Run reference = tptest::greedy_run(*one, config.vocab_size, 6);
    for (int degree : {2, 4}) {
      CAPTURE(degree);
      const auto split =
          make_tensor_parallel_backend(weights, options, std::vector<int>(size_t(degree), 0),
                                       staged_collectives(degree), make_cuda_backend);
      const tptest::Run got = tptest::greedy_run(*split, config.vocab_size, 6, &reference);
      const double error = worst_logit_error(got, reference);
      MESSAGE(config.name, " split in ", degree, ": worst logit difference ", error, " (tolerance ",
              logit_tolerance(reference), ")");
      CHECK(error < logit_tolerance(reference));
      CHECK(check_ids_away_from_ties(got, reference, config.vocab_size, 0.2f) > 0);
    }
  }
}

TEST_CASE("a quantized GGUF split in 2 on one GPU keeps ggml blocks and matches the whole model") {
  // 2 layers, hidden 256, 4 heads, 2 KV heads, vocab 32, every matrix its own ggml type: o and
  // down are cut at column 128, between blocks for the 32-element types (kept), inside the one
  // block of a row for the 256-element K types (decoded to bf16).
  const auto model = GgufModel::open("tests/fixtures/gguf/tiny_llama_quant.gguf");
  const auto weights = GgufModel::weights(model);
  BackendOptions options = tptest::small_options();
  options.cuda_graphs = false;
  const auto one = make_cuda_backend(*weights, options);
  const tptest::Run reference = tptest::greedy_run(*one, 32, 6);
  const auto split = make_tensor_parallel_backend(*weights, options, {0, 0}, staged_collectives(2),
                                                  make_cuda_backend);
  MESSAGE("whole: ", one->weight_types(), "; rank 0: ", split->weight_types());
  // The same matrices stay in blocks as in the whole model (layer 0's o among them, Q8_0, cut
  // at column 128) but layer 1's down, Q6_K, cut inside its block: decoded (one more bf16).
  CHECK(one->weight_types().find("Q6_K x 1") != std::string::npos);
  CHECK(split->weight_types().find("Q6_K") == std::string::npos);
  CHECK(split->weight_types().find("Q8_0 x 2") != std::string::npos);
  const tptest::Run got = tptest::greedy_run(*split, 32, 6, &reference);
  const double error = worst_logit_error(got, reference);
  MESSAGE("quantized GGUF split in 2: worst logit difference ", error, " (tolerance ",
          logit_tolerance(reference), ")");
  CHECK(error < logit_tolerance(reference));
  CHECK(check_ids_away_from_ties(got, reference, 32, float(2 * error)) > 0);
}

TEST_CASE("tiny split over 2 GPUs matches one GPU, eager" * doctest::skip(!two_gpus())) {
  check_split_matches_one_gpu("tiny", false);
}

TEST_CASE("tiny split over 2 GPUs matches one GPU, CUDA graphs" * doctest::skip(!two_gpus())) {
  check_split_matches_one_gpu("tiny", true);
}

TEST_CASE("gpt2 (biases, tied, odd vocab) split over 2 GPUs matches one GPU" *
          doctest::skip(!two_gpus())) {
  check_split_matches_one_gpu("gpt2", true);
}

// The shapes: llama-1b (32 query / 8 KV heads, vocab 128,256) and llama-8b (4,096 wide,
// 14,336 MLP) with their synthetic weights; one GPU holds the whole model as the reference.
TEST_CASE("llama-1b split over 2 GPUs matches one GPU, CUDA graphs" * doctest::skip(!two_gpus())) {
  check_split_matches_one_gpu("llama-1b", true, 0.0f);
}

TEST_CASE("llama-8b split over 2 GPUs matches one GPU, CUDA graphs" * doctest::skip(!two_gpus())) {
  check_split_matches_one_gpu("llama-8b", true, 0.0f);
}

// Over 2 GPUs each o and down all-reduce of a small step runs fused with the add-norm after it
// (AddNormReducer); ROSEINFER_CUDA_FUSED_ALL_REDUCE=0 keeps the two kernels. The same logits bit
// for bit. The fused run raises the row cap to 64 so the prefill step (62 rows: blocks of two
// rows) fuses too; graphed decode, and the final norm (its gathered rows fused at any step),
// included. Both runs gather the logits through the same path.
TEST_CASE("over 2 GPUs the fused all-reduce add-norm gives the two kernels' logits bit for bit" *
          doctest::skip(!two_gpus())) {
  for (const char* preset : {"tiny", "gpt2", "llama-1b"}) {
    CAPTURE(preset);
    const auto weights = open_preset(preset);
    const int vocab = weights->config().vocab_size;
    const BackendOptions options = tptest::small_options();
    setenv("ROSEINFER_CUDA_FUSED_ALL_REDUCE", "0", 1);
    auto two_kernels = make_cuda_tensor_parallel_backend(*weights, options, {0, 1});
    unsetenv("ROSEINFER_CUDA_FUSED_ALL_REDUCE");
    const tptest::Run want = tptest::greedy_run(*two_kernels, vocab, 8);
    two_kernels.reset();
    setenv("ROSEINFER_CUDA_FUSED_ALL_REDUCE", "64", 1);
    const auto fused = make_cuda_tensor_parallel_backend(*weights, options, {0, 1});
    unsetenv("ROSEINFER_CUDA_FUSED_ALL_REDUCE");
    const tptest::Run got = tptest::greedy_run(*fused, vocab, 8, &want);
    REQUIRE(got.logits.size() == want.logits.size());
    for (size_t step = 0; step < want.logits.size(); ++step) {
      CAPTURE(step);
      CHECK(got.logits[step] == want.logits[step]);
      CHECK(got.ids[step] == want.ids[step]);
    }
  }
}

TEST_CASE("greedy ids over 2 GPUs do not depend on CUDA graphs" * doctest::skip(!two_gpus())) {
  const auto weights = open_preset("tiny");
  BackendOptions eager = tptest::small_options();
  eager.cuda_graphs = false;
  BackendOptions graphs = tptest::small_options();
  const auto a = make_cuda_tensor_parallel_backend(*weights, eager, {0, 1});
  const tptest::Run want = tptest::greedy_run(*a, 512, 8);
  const auto b = make_cuda_tensor_parallel_backend(*weights, graphs, {0, 1});
  const tptest::Run got = tptest::greedy_run(*b, 512, 8);
  for (size_t step = 0; step < want.ids.size(); ++step) CHECK(got.ids[step] == want.ids[step]);
}

// The engine overlaps steps over GPUs too: each rank enqueues step k + 1 before step k's ids reach
// the host, and reads its decode tokens from what its own step k sampled (every rank samples the
// same gathered logits).
TEST_CASE("over 2 GPUs steps submitted ahead give execute()'s ids" * doctest::skip(!two_gpus())) {
  for (const char* preset : {"tiny", "llama-1b"}) {
    CAPTURE(preset);
    const auto weights = open_preset(preset);
    const int vocab = weights->config().vocab_size;
    for (bool graphs : {true, false}) {
      CAPTURE(graphs);
      BackendOptions options = tptest::small_options();
      options.cuda_graphs = graphs;
      const auto split = make_cuda_tensor_parallel_backend(*weights, options, {0, 1});
      REQUIRE(split->overlaps_steps());
      const tptest::Run want = tptest::greedy_run(*split, vocab, 8);
      CHECK(tptest::overlapped_ids(*split, vocab, 8) == want.ids);
    }
  }
}

TEST_CASE("a degree the model does not allow is refused before any GPU work") {
  const auto weights = open_preset("tiny");  // 2 KV heads
  CHECK_THROWS_WITH_AS(
      make_cuda_tensor_parallel_backend(*weights, tptest::small_options(), {0, 0, 0, 0}),
      doctest::Contains("num_key_value_heads (2)"), Error);
}

// Backend::time_collectives on the CUDA shards: a pure-decode step's calls, bf16 all-reduces of
// (rows, hidden) and one fp32 gather of (rows, vocab stride), at its graph bucket; bench prints it.
TEST_CASE("time_collectives: the decode step's calls and sizes (staged, eager)") {
  const auto weights = open_preset("tiny");
  const ModelConfig& c = weights->config();
  BackendOptions options = tptest::small_options();
  options.cuda_graphs = false;  // the staged collective cannot be captured
  CHECK_FALSE(make_cuda_backend(*weights, options)->time_collectives(3, 5).has_value());
  const auto split = make_tensor_parallel_backend(*weights, options, {0, 0}, staged_collectives(2),
                                                  make_cuda_backend);
  const std::optional<CollectiveTiming> t = split->time_collectives(3, 5);
  REQUIRE(t.has_value());
  CHECK(t->ranks == 2);
  CHECK(t->rows == 3);
  CHECK(t->all_reduces_per_step == 2 * c.num_layers);
  CHECK(t->all_reduce_bytes == int64_t(3) * c.hidden_size * 2);
  CHECK(t->all_gathers_per_step == 1);
  CHECK(t->all_gather_bytes == int64_t(3) * vocab_shard_stride(c.vocab_size, 2) * 4);
  CHECK(t->all_reduce_s > 0);
  CHECK(t->all_gather_s > 0);
  CHECK_FALSE(t->fused_add_norm);  // the staged collective sums apart from the add-norm
  CHECK(split->time_collectives(100000, 1)->rows == options.max_num_seqs);
}

TEST_CASE("time_collectives over 2 GPUs (NCCL, graphs): at the bucket, then steps as before" *
          doctest::skip(!two_gpus())) {
  const auto weights = open_preset("tiny");
  const BackendOptions options = tptest::small_options();
  const auto split = make_cuda_tensor_parallel_backend(*weights, options, {0, 1});
  const tptest::Run before = tptest::greedy_run(*split, 512, 4);
  const std::optional<CollectiveTiming> t = split->time_collectives(3, 50);
  REQUIRE(t.has_value());
  MESSAGE("tiny over 2 GPUs, 3 rows: all-reduce of ", t->all_reduce_bytes, " B ",
          t->all_reduce_s * 1e6, " us (", t->all_reduce_bus_gbps(), " GB/s bus), gather of ",
          t->all_gather_bytes, " B ", t->all_gather_s * 1e6, " us");
  // The step fuses each all-reduce with its add-norm (the peer kernel over NVLink): the figure
  // is that kernel's time over the plain add-norm's, which the exchange keeps above 0.
  CHECK(t->fused_add_norm);
  CHECK(t->rows == 4);  // a graph replays 3 sequences padded to its bucket of 4
  CHECK(t->all_reduce_bytes == int64_t(4) * weights->config().hidden_size * 2);
  CHECK(t->all_reduce_s > 0);
  CHECK(t->all_reduce_s < 0.01);
  CHECK(t->all_gather_s > 0);
  // The timing used the step's buffers between steps: the same prompts decode the same ids.
  const tptest::Run after = tptest::greedy_run(*split, 512, 4);
  for (size_t step = 0; step < before.ids.size(); ++step)
    CHECK(after.ids[step] == before.ids[step]);
}
