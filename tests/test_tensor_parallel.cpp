// Tensor parallel on the CPU (engine/parallel): the shard plan on hand-computed cases, the
// sharded weights against slices of the whole tensors, the thread collective, and the whole
// forward pass split over 2 and 4 ranks against the unsplit CPU backend on the same weights
// (logits within fp32 rounding, greedy tokens identical).
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/error.h"
#include "engine/model/gguf_model.h"
#include "engine/model/presets.h"
#include "engine/model/quant.h"
#include "engine/model/weights.h"
#include "engine/parallel/rank_threads.h"
#include "engine/parallel/shard_plan.h"
#include "engine/parallel/sharded_weights.h"
#include "engine/parallel/tensor_parallel_backend.h"
#include "engine/parallel/thread_collective.h"
#include "tests/random_weights.h"
#include "tests/stored_parts.h"
#include "tests/tensor_parallel_plans.h"

namespace {

// Random tensors, biases included, so a bias added once per rank instead of once after the
// all-reduce shows.
using rose::test::RandomWeights;

rose::ModelConfig llama_config() {
  rose::ModelConfig c;
  c.arch = rose::Arch::kLlama;
  c.name = "tp-llama";
  c.vocab_size = 97;  // odd: the vocab shards differ in size
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 8;
  c.max_position_embeddings = 256;
  c.tie_word_embeddings = false;
  c.qkv_bias = true;
  return c;
}

rose::ModelConfig gpt2_config() {
  rose::ModelConfig c;
  c.arch = rose::Arch::kGpt2;
  c.name = "tp-gpt2";
  c.vocab_size = 101;
  c.hidden_size = 32;
  c.intermediate_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.head_dim = 8;
  c.max_position_embeddings = 256;
  c.tie_word_embeddings = true;  // the lm_head shards are rows of tok_emb
  return c;
}

rose::ModelConfig smollm2_shape() {  // SmolLM2-135M: 9 query heads, 3 KV heads
  rose::ModelConfig c = llama_config();
  c.name = "smollm2-shape";
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  return c;
}

}  // namespace

TEST_CASE("the degrees a model allows, and a clear refusal of the others") {
  CHECK(rose::tensor_parallel_degrees(llama_config()) == std::vector<int>{1, 2, 4});
  CHECK(rose::tensor_parallel_degrees(smollm2_shape()) == std::vector<int>{1, 3});
  CHECK(rose::tensor_parallel_refusal(smollm2_shape(), 3).empty());
  const std::string why = rose::tensor_parallel_refusal(smollm2_shape(), 2);
  CHECK(why.find("num_key_value_heads (3)") != std::string::npos);
  CHECK(why.find("allows --tensor-parallel 1, 3") != std::string::npos);
  // The heads split evenly but the intermediate size does not.
  rose::ModelConfig odd_mlp = llama_config();
  odd_mlp.intermediate_size = 50;
  CHECK(rose::tensor_parallel_refusal(odd_mlp, 4).find("intermediate_size (50)") !=
        std::string::npos);
  CHECK_THROWS_AS(rose::check_tensor_parallel(smollm2_shape(), 2), rose::Error);
  CHECK(!rose::tensor_parallel_refusal(llama_config(), 0).empty());
  rose::ModelConfig tiny_vocab = llama_config();  // every rank needs lm_head rows
  tiny_vocab.vocab_size = 3;
  CHECK(rose::tensor_parallel_refusal(tiny_vocab, 4).find("vocab_size is 3") != std::string::npos);
  CHECK(rose::tensor_parallel_degrees(tiny_vocab) == std::vector<int>{1, 2});
}

TEST_CASE("--batch-invariant is refused past 2 ranks (the sum order would follow the batch)") {
  const RandomWeights weights(smollm2_shape());
  rose::BackendOptions options = tptest::small_options();
  options.batch_invariant = true;
  CHECK_THROWS_WITH_AS(rose::make_cpu_tensor_parallel_backend(weights, options, 3),
                       doctest::Contains("only up to 2 ranks"), rose::Error);
}

TEST_CASE("shard configs and slices, computed by hand") {
  const rose::ModelConfig m = llama_config();  // q_dim 64, kv_dim 32, qkv rows 128, I 48
  const rose::ModelConfig s1 = rose::shard_config(m, 2, 1);
  CHECK(s1.num_heads == 4);
  CHECK(s1.num_kv_heads == 2);
  CHECK(s1.intermediate_size == 24);
  CHECK(s1.hidden_size == 32);
  CHECK(s1.vocab_size == 97);
  CHECK(s1.is_shard());
  CHECK(s1.lm_head_begin == 49);  // ceil(97 / 2) rows per rank
  CHECK(s1.lm_head_rows == 48);
  CHECK(s1.lm_head_vocab_rows() == 48);

  const rose::TensorSlice qkv = rose::shard_slice(m, 2, 1, "layers.0.qkv.weight");
  REQUIRE(qkv.rows.size() == 3);
  CHECK(qkv.rows[0].begin == 32);  // q heads 4..7
  CHECK(qkv.rows[0].count == 32);
  CHECK(qkv.rows[1].begin == 64 + 16);  // k heads 2..3
  CHECK(qkv.rows[1].count == 16);
  CHECK(qkv.rows[2].begin == 96 + 16);  // v heads 2..3
  CHECK(qkv.cols == 32);
  CHECK(qkv.numel() == 64 * 32);
  const rose::TensorSlice o = rose::shard_slice(m, 2, 1, "layers.1.o.weight");
  CHECK(o.col_begin == 32);
  CHECK(o.cols == 32);
  CHECK(o.source_cols == 64);
  CHECK(o.rows[0].count == 32);
  const rose::TensorSlice up = rose::shard_slice(m, 2, 0, "layers.0.up.weight");
  REQUIRE(up.rows.size() == 2);  // gate rows 0..23, up rows 48..71
  CHECK(up.rows[0].begin == 0);
  CHECK(up.rows[1].begin == 48);
  CHECK(up.rows[1].count == 24);
  const rose::TensorSlice down = rose::shard_slice(m, 2, 1, "layers.0.down.weight");
  CHECK(down.col_begin == 24);
  CHECK(down.cols == 24);
  const rose::TensorSlice head = rose::shard_slice(m, 2, 1, "lm_head.weight");
  CHECK(head.source == "lm_head.weight");
  CHECK(head.rows[0].begin == 49);
  CHECK(head.rows[0].count == 48);
  CHECK(rose::shard_slice(m, 2, 1, "layers.0.attn_norm.weight").whole());
  // A tied model's lm_head shard comes from tok_emb.
  CHECK(rose::shard_slice(gpt2_config(), 4, 3, "lm_head.weight").source == "tok_emb");
  CHECK(rose::vocab_shard(101, 4, 3).begin == 78);
  CHECK(rose::vocab_shard(101, 4, 3).count == 23);
  // GPT-2's biases: up's split with its rows, o's and down's whole (added after the all-reduce).
  CHECK(rose::shard_slice(gpt2_config(), 2, 1, "layers.0.up.bias").rows[0].begin == 64);
  CHECK(rose::shard_slice(gpt2_config(), 2, 1, "layers.0.o.bias").whole());
  CHECK(rose::shard_slice(gpt2_config(), 2, 1, "layers.0.down.bias").whole());
}

TEST_CASE("a shard's tensors are the slices of the whole model's") {
  const RandomWeights whole(llama_config());
  const auto shard = rose::shard_weights(whole, 2, 1);
  std::vector<float> o_whole(32 * 64), o_shard(32 * 32);
  whole.read_f32("layers.0.o.weight", o_whole);
  shard->read_f32("layers.0.o.weight", o_shard);
  for (int r = 0; r < 32; ++r) {
    for (int c = 0; c < 32; ++c)
      CHECK(o_shard[size_t(r * 32 + c)] == o_whole[size_t(r * 64 + 32 + c)]);
  }
  std::vector<float> qkv_whole(128 * 32), qkv_shard(64 * 32);
  whole.read_f32("layers.1.qkv.weight", qkv_whole);
  shard->read_f32("layers.1.qkv.weight", qkv_shard);
  CHECK(qkv_shard[0] == qkv_whole[32 * 32]);                // row 0: whole row 32 (q head 4)
  CHECK(qkv_shard[32 * 32] == qkv_whole[size_t(80 * 32)]);  // row 32: whole row 80 (k head 2)
  CHECK(qkv_shard[48 * 32 + 5] == qkv_whole[size_t(112 * 32 + 5)]);  // v head 2
  // A preset's synthetic slice keeps the whole tensor's seed and scale, with the slice's place.
  const auto tiny = rose::open_preset("tiny");
  const auto tiny_shard = rose::shard_weights(*tiny, 2, 1);
  const auto init = tiny_shard->synthetic("layers.0.down.weight");
  REQUIRE(init);
  CHECK(init->seed == tiny->synthetic("layers.0.down.weight")->seed);
  CHECK(init->scale == tiny->synthetic("layers.0.down.weight")->scale);
  CHECK(init->col_begin == 344);
  CHECK(init->cols == 344);
  CHECK(init->source_cols == 688);
  CHECK(!tiny_shard->synthetic("layers.0.attn_norm.weight")->rows.size());
}

TEST_CASE("the thread collective sums in rank order and gathers in rank order") {
  const int n = 3;
  auto ranks = rose::make_thread_collectives(n);
  rose::RankThreads threads(n);
  std::vector<std::vector<float>> sums(n), gathered(n);
  threads.run([&](int r) {
    sums[size_t(r)] = {float(r), 10.0f * float(r + 1), -1.0f};
    ranks[size_t(r)]->all_reduce_sum(sums[size_t(r)].data(), 3, rose::CollectiveType::kF32,
                                     nullptr);
    const float mine[2] = {float(r), float(r) + 0.5f};
    gathered[size_t(r)].resize(6);
    ranks[size_t(r)]->all_gather(mine, gathered[size_t(r)].data(), 2, rose::CollectiveType::kF32,
                                 nullptr);
  });
  for (int r = 0; r < n; ++r) {
    CHECK(sums[size_t(r)] == std::vector<float>{3.0f, 60.0f, -3.0f});
    CHECK(gathered[size_t(r)] == std::vector<float>{0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f});
  }
}

TEST_CASE("abort() wakes a rank waiting in the thread collective with an error") {
  auto ranks = rose::make_thread_collectives(2);
  std::string error;
  std::thread waiter([&] {  // rank 0 alone: without abort() it would wait for rank 1 forever
    float x = 1.0f;
    try {
      ranks[0]->all_reduce_sum(&x, 1, rose::CollectiveType::kF32, nullptr);
    } catch (const rose::Error& e) {
      error = e.what();
    }
  });
  ranks[1]->abort();
  waiter.join();
  CHECK(error.find("another rank failed") != std::string::npos);
  float y = 2.0f;  // and stays aborted
  CHECK_THROWS_AS(ranks[1]->all_reduce_sum(&y, 1, rose::CollectiveType::kF32, nullptr),
                  rose::Error);
}

TEST_CASE("rank threads rethrow a rank's exception and keep working") {
  rose::RankThreads threads(2);
  CHECK_THROWS_AS(threads.run([](int r) {
    if (r == 1) throw std::runtime_error("rank 1 failed");
  }),
                  std::runtime_error);
  std::atomic<int> ran{0};
  threads.run([&](int) { ++ran; });
  CHECK(ran == 2);
}

TEST_CASE("rank threads report the first rank to fail and run its hook once, on its thread") {
  // Rank 2 fails first; rank 0 fails only after the hook has run, and rank 1 succeeds. The lowest
  // failing rank (0) is not the one to report.
  rose::RankThreads threads(3);
  std::mutex mutex;
  std::condition_variable hooked;
  int hooks = 0;
  std::thread::id hook_thread, failed_thread;
  std::string reported;
  try {
    threads.run(
        [&](int r) {
          if (r == 2) {
            failed_thread = std::this_thread::get_id();
            throw std::runtime_error("rank 2 failed first");
          }
          if (r == 0) {
            std::unique_lock lock(mutex);
            hooked.wait(lock, [&] { return hooks > 0; });
            throw std::runtime_error("rank 0 failed later");
          }
        },
        [&] {
          {
            const std::lock_guard lock(mutex);
            ++hooks;
            hook_thread = std::this_thread::get_id();
          }
          hooked.notify_all();
        });
  } catch (const std::runtime_error& e) {
    reported = e.what();
  }
  CHECK(reported == "rank 2 failed first");
  CHECK(hooks == 1);
  CHECK(hook_thread == failed_thread);
  // A run without failures afterwards neither throws nor calls a hook.
  threads.run([](int) {}, [&] { ++hooks; });
  CHECK(hooks == 1);
}

using tptest::check_same_run;
using tptest::greedy_run;
using tptest::Run;
using tptest::small_options;

TEST_CASE("the forward pass split over ranks equals the whole model's (CPU)") {
  for (const rose::ModelConfig& config : {llama_config(), gpt2_config()}) {
    CAPTURE(config.name);
    const RandomWeights weights(config);
    const auto whole = rose::make_cpu_backend(weights, small_options());
    const Run expected = greedy_run(*whole, config.vocab_size, 6);
    for (int degree : {1, 2, 4}) {
      CAPTURE(degree);
      const auto split = rose::make_cpu_tensor_parallel_backend(weights, small_options(), degree);
      CHECK(split->config().num_heads == config.num_heads);  // the engine sees the whole model
      CHECK(split->limits().vocab_size == config.vocab_size);
      CHECK(split->num_kv_blocks() == 64);
      check_same_run(greedy_run(*split, config.vocab_size, 6), expected);
    }
  }
}

TEST_CASE("a preset split over 2 ranks (synthetic weights read as slices)") {
  const auto tiny = rose::open_preset("tiny");
  const auto whole = rose::make_cpu_backend(*tiny, small_options());
  const auto split = rose::make_cpu_tensor_parallel_backend(*tiny, small_options(), 2);
  check_same_run(greedy_run(*split, 512, 3), greedy_run(*whole, 512, 3));
  CHECK_THROWS_AS(rose::make_cpu_tensor_parallel_backend(*tiny, small_options(), 4), rose::Error);
}

// The CPU shards do not overlap: submit() runs the step (Backend's default), with the previous
// step's ids filled in on the host.
TEST_CASE("steps submitted ahead over CPU ranks give execute()'s ids") {
  const RandomWeights weights(llama_config());
  const auto split = rose::make_cpu_tensor_parallel_backend(weights, small_options(), 2);
  CHECK_FALSE(split->overlaps_steps());
  const Run want = greedy_run(*split, llama_config().vocab_size, 5);
  CHECK(tptest::overlapped_ids(*split, llama_config().vocab_size, 5) == want.ids);
}

TEST_CASE("time_collectives: a decode step's collectives on the CPU ranks, counted and timed") {
  const auto tiny = rose::open_preset("tiny");
  const rose::ModelConfig& c = tiny->config();
  rose::BackendOptions options = small_options();
  options.max_num_seqs = 40;  // past one 16-row logits chunk
  const auto whole = rose::make_cpu_backend(*tiny, options);
  CHECK_FALSE(whole->time_collectives(4, 10).has_value());  // no collectives in its steps
  const auto one = rose::make_cpu_tensor_parallel_backend(*tiny, options, 1);
  CHECK_FALSE(one->time_collectives(4, 10).has_value());

  const auto split = rose::make_cpu_tensor_parallel_backend(*tiny, options, 2);
  const std::optional<rose::CollectiveTiming> t = split->time_collectives(4, 10);
  REQUIRE(t.has_value());
  CHECK(t->ranks == 2);
  CHECK(t->rows == 4);
  CHECK(t->iterations == 10);
  // After the o and the down projections of every layer, (rows, hidden) in fp32 on the CPU.
  CHECK(t->all_reduces_per_step == 2 * c.num_layers);
  CHECK(t->all_reduce_bytes == int64_t(4) * c.hidden_size * 4);
  // One gather of the whole 16-row logits chunk (each rank's vocab rows, padded to the stride).
  CHECK(t->all_gathers_per_step == 1);
  CHECK(t->all_gather_bytes == int64_t(16) * rose::vocab_shard_stride(c.vocab_size, 2) * 4);
  CHECK(t->all_reduce_s > 0);
  CHECK(t->all_gather_s > 0);
  CHECK(t->step_s() ==
        doctest::Approx(t->all_reduces_per_step * t->all_reduce_s + t->all_gather_s));
  CHECK(t->all_reduce_bus_gbps() > 0);

  // 20 sampled rows take two chunks; rows past the budgets are clamped to what the workspaces
  // hold (a decode step of max_num_seqs sequences).
  CHECK(split->time_collectives(20, 2)->all_gathers_per_step == 2);
  const std::optional<rose::CollectiveTiming> clamped = split->time_collectives(1000, 2);
  REQUIRE(clamped.has_value());
  CHECK(clamped->rows == 40);
  CHECK(clamped->all_reduce_bytes == int64_t(40) * c.hidden_size * 4);
  CHECK(split->time_collectives(0, 0)->rows == 1);

  // Between steps it leaves nothing behind: the split model still decodes the whole model's
  // tokens.
  check_same_run(greedy_run(*split, c.vocab_size, 3), greedy_run(*whole, c.vocab_size, 3));
}

TEST_CASE(
    "slice_stored_parts: rows keep their spans, columns keep whole blocks, other cuts refused") {
  // A Q8_0 part (blocks of 32 elements in 34 bytes) of 4 rows x 64 columns: 2 blocks a row.
  std::vector<uint8_t> bytes(4 * 2 * 34);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 7 + 1);
  rose::StoredPart part;
  part.type = rose::GgmlType::kQ8_0;
  part.bytes = bytes;
  part.rows = 4;
  part.cols = 64;
  rose::TensorSlice slice;
  slice.source = "t";
  slice.source_rows = 4;
  slice.source_cols = 64;
  slice.rows = {{1, 2}};
  slice.cols = 64;
  std::deque<std::vector<uint8_t>> storage;
  auto rows = rose::slice_stored_parts({part}, slice, storage);
  REQUIRE(rows);
  REQUIRE(rows->size() == 1);
  CHECK((*rows)[0].bytes.data() == bytes.data() + 68);  // a span into the same bytes
  CHECK((*rows)[0].bytes.size() == 2 * 68);
  CHECK(storage.empty());

  slice.col_begin = 32;  // the second block of rows 1 and 2, copied
  slice.cols = 32;
  auto cols = rose::slice_stored_parts({part}, slice, storage);
  REQUIRE(cols);
  REQUIRE((*cols)[0].bytes.size() == 2 * 34);
  CHECK((*cols)[0].cols == 32);
  CHECK(std::equal(bytes.begin() + 68 + 34, bytes.begin() + 136, (*cols)[0].bytes.begin()));
  CHECK(std::equal(bytes.begin() + 136 + 34, bytes.begin() + 204, (*cols)[0].bytes.begin() + 34));

  slice.col_begin = 16;  // inside a block
  CHECK_FALSE(rose::slice_stored_parts({part}, slice, storage));

  // Rows un-permuted per head (2 heads of 2 rows): whole heads only.
  part.unpermute_heads = 2;
  slice.col_begin = 0;
  slice.cols = 64;
  slice.rows = {{2, 2}};
  auto head = rose::slice_stored_parts({part}, slice, storage);
  REQUIRE(head);
  CHECK((*head)[0].unpermute_heads == 1);
  slice.rows = {{1, 2}};
  CHECK_FALSE(rose::slice_stored_parts({part}, slice, storage));
}

TEST_CASE("a GGUF's shards keep ggml blocks where every cut falls between blocks") {
  const auto model = rose::GgufModel::open("tests/fixtures/gguf/tiny_llama_quant.gguf");
  const auto whole = rose::GgufModel::weights(model);
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    const auto shard = rose::shard_weights(*whole, 2, rank);
    int kept = 0;
    const auto specs = rose::canonical_tensors(shard->config());
    for (const rose::TensorSpec& spec : specs) {
      CAPTURE(spec.name);
      const auto parts = shard->stored_parts(spec.name);
      if (!parts) continue;
      ++kept;
      std::vector<float> want(size_t(spec.numel()));
      shard->read_f32(spec.name, want);
      CHECK(rose::test::from_stored_parts(*parts) == want);  // the same values, exactly
    }
    CHECK(kept == int(specs.size()) - 1);  // all but layer 1's down (below)
    // Layer 0's o (Q8_0, 32-element blocks) is cut at column 128 between blocks; layer 1's down
    // (Q6_K, 256-element blocks) would be cut inside its one block a row, so it is read as fp32.
    CHECK(shard->stored_parts("layers.0.o.weight"));
    CHECK_FALSE(shard->stored_parts("layers.1.down.weight"));
    const auto qkv = shard->stored_parts("layers.0.qkv.weight");
    REQUIRE(qkv);
    REQUIRE(qkv->size() == 3);
    CHECK((*qkv)[0].unpermute_heads == 2);  // q: 2 of the 4 heads
    CHECK((*qkv)[1].unpermute_heads == 1);  // k: 1 of the 2 KV heads
  }
}

namespace {

// A shard whose execute() throws on its `fail_at`-th step before any collective: a rank failing
// in the middle of a step, while the other ranks wait for it in their first all-reduce.
class FailingShard final : public rose::Backend {
 public:
  FailingShard(std::unique_ptr<rose::Backend> inner, int fail_at)
      : inner_(std::move(inner)), fail_at_(fail_at) {}
  void execute(const rose::StepPlan& plan, rose::StepOutput& out) override {
    if (++steps_ == fail_at_) throw std::runtime_error("injected shard failure");
    inner_->execute(plan, out);
  }
  const rose::PlanLimits& limits() const override { return inner_->limits(); }
  std::string device_name() const override { return inner_->device_name(); }
  const rose::ModelConfig& config() const override { return inner_->config(); }
  int64_t weight_bytes() const override { return inner_->weight_bytes(); }
  std::string weight_types() const override { return inner_->weight_types(); }
  int64_t kv_bytes_per_token() const override { return inner_->kv_bytes_per_token(); }

 private:
  std::unique_ptr<rose::Backend> inner_;
  int fail_at_;
  int steps_ = 0;
};

}  // namespace

TEST_CASE("a rank failing inside a step ends the step with its error on every rank, no hang") {
  const auto tiny = rose::open_preset("tiny");
  const rose::ShardBackendFactory make_shard = [](const rose::WeightSource& shard,
                                                  const rose::BackendOptions& options) {
    auto backend = rose::make_cpu_backend(shard, options);
    const bool last_rank = shard.config().tp_rank == shard.config().tp_size - 1;
    return last_rank ? std::make_unique<FailingShard>(std::move(backend), 2) : std::move(backend);
  };
  const int degree = 2;
  auto split = rose::make_tensor_parallel_backend(
      *tiny, small_options(), {0, 0}, rose::make_thread_collectives(degree), make_shard);
  rose::StepPlan plan;
  rose::StepOutput out;
  tptest::add_tokens(plan, 0, {1, 2, 3}, 0);
  split->execute(plan, out);  // step 1: every rank runs
  plan.clear();
  tptest::add_tokens(plan, 0, {4}, 3);
  // Step 2: the last rank throws before its collectives; rank 0 waits in its first all-reduce
  // until the abort wakes it. The error rethrown is the failing rank's own.
  CHECK_THROWS_WITH(split->execute(plan, out), "injected shard failure");
}
