// --batch-invariant on the CUDA backend (issue 10): a query row's bits must not depend on the
// batch.
// 1. The attention kernel alone, in its invariant mode (AttentionArgs::split_keys): one "needle"
//    query row, at a position at or across the 512-key split boundaries up to ~8k, computed as the
//    last or a middle row of a prefill chunk, as a decode row alone, among 1 or 255 others, or as
//    the tail after a cached prefix, with other grid sizes, launch sizes and the separate merge
//    kernel: identical output bits every time (and close to the CPU reference).
// 2. The engine end to end (llama-1b shapes, 4 layers, bf16 and fp16): a shared-prefix,
//    skewed-length (up to ~3k tokens) workload of greedy and seeded-sampling requests under a KV
//    pool that forces preemption, in every scheduler mode x prefix cache x CUDA graphs: zero
//    tokens may differ from the offline/cache-on/graphs-on run. This needs the batch-invariant
//    GEMMs as well; then the same with the weights kept in Q4_K blocks (bf16), through both of
//    the kept matrices' invariant paths.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/presets.h"
#include "engine/model/quantized_source.h"
#include "engine/model/weights.h"
#include "engine/scheduler/engine.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/attention.cuh"
#include "tests/gpu/gpu_test_util.h"
#include "tests/invariance_workload.h"

using namespace rose;
using namespace rose::gputest;
using namespace rose::testing;

namespace {

// ---- 1. The attention kernel ----

constexpr int kBlock = 16;
constexpr int kSplitKeys = 512;
constexpr int kMaxKeys = 8192 + 64;  // the needle's keys: positions up to 8191 + a chunk
constexpr int kNeedleBlocks = kMaxKeys / kBlock;
constexpr int kPoolBlocks = 128;  // random K/V blocks the other sequences share
constexpr int kMaxRows = 256;     // partial buffers: rows per launch at most
constexpr int kMaxSplits = 24;    // partial buffers: grid splits at most

uint16_t to_bits(float f, DType dtype) {
  if (dtype == DType::kBF16) return f32_to_bf16_bits(f);
  return static_cast<__half_raw>(__float2half_rn(f)).x;
}
float from_bits(uint16_t bits, DType dtype) {
  if (dtype == DType::kBF16) return bf16_bits_to_f32(bits);
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

// Values exactly representable in `dtype`, as bits (for the GPU) and fp32 (for the reference).
struct Data {
  std::vector<uint16_t> bits;
  std::vector<float> f32;
};
Data random_data(size_t count, DType dtype, std::mt19937& rng, float range) {
  std::uniform_real_distribution<float> dist(-range, range);
  Data d;
  for (size_t i = 0; i < count; ++i) {
    d.bits.push_back(to_bits(dist(rng), dtype));
    d.f32.push_back(from_bits(d.bits.back(), dtype));
  }
  return d;
}

struct Shape {
  int heads, kv_heads, head_dim;
};

// The KV cache of one shape: blocks [0, kPoolBlocks) random for the other sequences, then the
// needle's kNeedleBlocks blocks in shuffled physical order.
struct Cache {
  Shape sh;
  DType dtype;
  Data k, v;
  std::vector<int32_t> needle_table;  // (kNeedleBlocks,) logical block -> physical block
  std::unique_ptr<DeviceArray<uint16_t>> dk, dv;
};

std::unique_ptr<Cache> make_cache(const Shape& sh, DType dtype, std::mt19937& rng) {
  auto c = std::make_unique<Cache>();
  c->sh = sh;
  c->dtype = dtype;
  const size_t elems = size_t(kPoolBlocks + kNeedleBlocks) * kBlock * sh.kv_heads * sh.head_dim;
  c->k = random_data(elems, dtype, rng, 2.0f);
  c->v = random_data(elems, dtype, rng, 1.0f);
  c->needle_table.resize(kNeedleBlocks);
  std::iota(c->needle_table.begin(), c->needle_table.end(), kPoolBlocks);
  std::shuffle(c->needle_table.begin(), c->needle_table.end(), rng);
  c->dk = std::make_unique<DeviceArray<uint16_t>>(c->k.bits);
  c->dv = std::make_unique<DeviceArray<uint16_t>>(c->v.bits);
  return c;
}

// One sequence of a batch: its newest query_len tokens are queries over context_len keys. The
// needle sequence reads the needle's blocks; the others random pool blocks.
struct Seq {
  int query_len, context_len;
  bool needle = false;
};

// How the batch is launched: grid splits (max_model_len / 512 in the backend), query rows per
// launch, fused (merge_counters) or separate merge kernel. None may change the needle's bits.
struct LaunchVariant {
  int num_splits = (kMaxKeys + kSplitKeys - 1) / kSplitKeys;
  int rows_per_launch = kMaxRows;
  bool fused = true;
};

struct Buffers {
  DeviceArray<float> part{size_t(kMaxRows) * 64 * kMaxSplits * 128};
  DeviceArray<float> lse{size_t(kMaxRows) * 64 * kMaxSplits};
  DeviceArray<int32_t> counters{std::vector<int32_t>(size_t(kMaxRows) * 64, 0)};
};

// Runs the batch; returns the needle row's output bits (at position needle_pos of its sequence).
std::vector<uint16_t> run_batch(const Cache& c, const std::vector<Seq>& seqs, const Data& needle_q,
                                int needle_pos, const LaunchVariant& lv, Buffers& buf,
                                std::mt19937& rng) {
  const Shape& sh = c.sh;
  const int q_dim = sh.heads * sh.head_dim;
  int stride = 1, num_tokens = 0, needle_row = -1;
  for (const Seq& s : seqs) stride = std::max(stride, (s.context_len + kBlock - 1) / kBlock);
  std::vector<int32_t> query_start = {0}, context_lens, token_seq, tables;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Seq& s = seqs[i];
    if (s.needle) needle_row = num_tokens + needle_pos - (s.context_len - s.query_len);
    num_tokens += s.query_len;
    query_start.push_back(num_tokens);
    context_lens.push_back(s.context_len);
    token_seq.insert(token_seq.end(), size_t(s.query_len), int32_t(i));
    for (int b = 0; b < stride; ++b) {
      const bool used = b * kBlock < s.context_len;
      tables.push_back(!used ? -1 : s.needle ? c.needle_table[b] : int32_t(rng() % kPoolBlocks));
    }
  }
  REQUIRE(needle_row >= 0);
  Data q = random_data(size_t(num_tokens) * q_dim, c.dtype, rng, 2.0f);
  std::copy(needle_q.bits.begin(), needle_q.bits.end(),
            q.bits.begin() + size_t(needle_row) * q_dim);
  DeviceArray<uint16_t> d_q(q.bits), d_out(size_t(num_tokens) * q_dim);
  DeviceArray<int32_t> d_tables(tables), d_stride(std::vector<int32_t>{stride}), d_qs(query_start),
      d_ctx(context_lens), d_seq(token_seq);
  REQUIRE(lv.num_splits <= kMaxSplits);
  REQUIRE(lv.rows_per_launch <= kMaxRows);
  AttentionArgs args;
  args.q = d_q.get();
  args.q_stride = q_dim;
  args.k_cache = c.dk->get();
  args.v_cache = c.dv->get();
  args.block_tables = d_tables.get();
  args.block_table_stride = d_stride.get();
  args.query_start = d_qs.get();
  args.context_lens = d_ctx.get();
  args.token_seq = d_seq.get();
  args.out = d_out.get();
  args.partial_out = buf.part.get();
  args.partial_lse = buf.lse.get();
  args.merge_counters = lv.fused ? buf.counters.get() : nullptr;
  args.num_tokens = num_tokens;
  args.num_heads = sh.heads;
  args.num_kv_heads = sh.kv_heads;
  args.head_dim = sh.head_dim;
  args.block_size = kBlock;
  args.num_splits = lv.num_splits;
  args.split_keys = kSplitKeys;
  args.rows_per_launch = lv.rows_per_launch;
  args.scale = 1.0f / std::sqrt(float(sh.head_dim));
  args.dtype = c.dtype;
  launch_paged_attention(args, nullptr);
  const std::vector<uint16_t> out = d_out.download();
  return {out.begin() + size_t(needle_row) * q_dim, out.begin() + size_t(needle_row + 1) * q_dim};
}

// The CPU reference for the needle row alone.
std::vector<float> reference_row(const Cache& c, const Data& needle_q, int needle_pos) {
  const Shape& sh = c.sh;
  const int32_t query_start[2] = {0, 1}, context_len = needle_pos + 1;
  std::vector<float> out(size_t(sh.heads) * sh.head_dim);
  cpu::paged_attention(needle_q.f32.data(), sh.heads * sh.head_dim, c.k.f32.data(), c.v.f32.data(),
                       query_start, &context_len, c.needle_table.data(), kNeedleBlocks, 1, sh.heads,
                       sh.kv_heads, sh.head_dim, kBlock, 1.0f / std::sqrt(float(sh.head_dim)),
                       out.data());
  return out;
}

// Other sequences: decode rows with random contexts and, every 16th, a 9-row prefill chunk.
std::vector<Seq> others(int count, std::mt19937& rng) {
  std::vector<Seq> out;
  for (int i = 0; i < count; ++i) {
    const int ctx = 1 + int(rng() % 3000);
    out.push_back(i % 16 == 5 ? Seq{std::min(9, ctx), ctx} : Seq{1, ctx});
  }
  return out;
}

void check_needle(const Cache& c, int pos, Buffers& buf, std::mt19937& rng) {
  CAPTURE(pos);
  const Data needle_q = random_data(size_t(c.sh.heads) * c.sh.head_dim, c.dtype, rng, 2.0f);
  const int keys = pos + 1;
  const int after = std::min(20, kMaxKeys - keys);  // keys after the needle in a middle-row chunk
  std::vector<std::pair<std::string, std::vector<Seq>>> batches;
  batches.push_back({"decode alone", {{1, keys, true}}});
  batches.push_back({"last row of a prefill chunk", {{std::min(keys, 48), keys, true}, {1, 700}}});
  batches.push_back({"middle row of a prefill chunk",
                     {{1, 33}, {std::min(40, keys + after), keys + after, true}}});
  const int cached = pos / 3 / kBlock * kBlock;  // a prefix hit is whole blocks
  batches.push_back(
      {"tail after a cached prefix", {{std::min(keys - cached, 2000), keys, true}, {1, 90}}});
  std::vector<Seq> one_other = others(1, rng);
  one_other.push_back({1, keys, true});
  batches.push_back({"decode among 1 other", one_other});
  std::vector<Seq> many = others(255, rng);
  many.insert(many.begin() + 100, Seq{1, keys, true});
  batches.push_back({"decode among 255 others", many});

  const std::vector<LaunchVariant> variants = {{}, {kMaxSplits, 7, false}, {20, 64, true}};
  const std::vector<uint16_t> first = run_batch(c, batches[0].second, needle_q, pos, {}, buf, rng);
  std::vector<float> got(first.size());
  for (size_t i = 0; i < first.size(); ++i) got[i] = from_bits(first[i], c.dtype);
  check_close(got, reference_row(c, needle_q, pos), 1e-2f, 1e-2f, "needle vs cpu reference");
  for (size_t b = 0; b < batches.size(); ++b) {
    for (size_t v = 0; v < variants.size(); ++v) {
      if (b == 0 && v == 0) continue;
      CAPTURE(batches[b].first);
      CAPTURE(v);
      CHECK(run_batch(c, batches[b].second, needle_q, pos, variants[v], buf, rng) == first);
    }
  }
}

// ---- 2. The engine ----

// llama-1b's shapes with its first `layers` layers: the preset's own tensors, fewer of them.
class FewLayers : public WeightSource {
 public:
  FewLayers(std::unique_ptr<WeightSource> inner, int layers) : inner_(std::move(inner)) {
    config_ = inner_->config();
    config_.num_layers = layers;
  }
  const ModelConfig& config() const override { return config_; }
  void read_f32(const std::string& name, std::span<float> dst) const override {
    inner_->read_f32(name, dst);
  }
  std::optional<SyntheticInit> synthetic(const std::string& name) const override {
    return inner_->synthetic(name);
  }

 private:
  std::unique_ptr<WeightSource> inner_;
  ModelConfig config_;
};

struct EngineOutcome {
  std::vector<std::vector<int32_t>> tokens;
  int64_t preemptions = 0;
  int64_t hit_tokens = 0;
};

// A 240-block pool (3,840 tokens) against ~8,000 prompt tokens (the longest ~3,000): preemption;
// a 512-token budget chunks the long prompts.
EngineOutcome run_engine(const WeightSource& weights, const std::string& dtype,
                         const InvarianceSetting& s) {
  BackendOptions options;
  options.dtype = dtype;
  options.block_size = 16;
  options.num_kv_blocks = 240;
  options.max_num_seqs = 16;
  options.max_num_batched_tokens = 512;
  options.max_model_len = 4096;
  options.cuda_graphs = s.cuda_graphs;
  options.batch_invariant = true;
  std::unique_ptr<Backend> backend = make_cuda_backend(weights, options);
  EngineConfig config;
  config.mode = s.mode;
  config.prefix_cache = s.prefix_cache;
  config.max_num_seqs = 16;
  config.max_num_batched_tokens = 512;
  Engine engine(*backend, config, "llama-1b-4l");
  const RunResult result =
      engine.run(invariance_requests(weights.config().vocab_size, 300, 1500, 3000));
  EngineOutcome out;
  out.preemptions = result.kv.preemptions;
  out.hit_tokens = result.cache.hit_tokens;
  for (const RequestResult& r : result.requests) out.tokens.push_back(r.output_ids);
  return out;
}

}  // namespace

TEST_CASE("invariant attention: a row's bits do not depend on its batch, chunk or launch") {
  std::mt19937 rng(10);
  Buffers buf;
  const std::vector<Shape> shapes = {{8, 8, 64},  {8, 8, 128},  {32, 8, 64}, {16, 4, 128},
                                     {32, 4, 64}, {32, 4, 128}, {8, 2, 32}};
  const std::vector<int> positions = {0,    1,    31,   511,  512,  513,  1023,
                                      1024, 2047, 3000, 4095, 4096, 6000, 8191};
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    for (const Shape& sh : shapes) {
      CAPTURE(dtype == DType::kBF16 ? "bf16" : "fp16");
      CAPTURE(sh.heads);
      CAPTURE(sh.kv_heads);
      CAPTURE(sh.head_dim);
      const std::unique_ptr<Cache> cache = make_cache(sh, dtype, rng);
      for (int pos : positions) check_needle(*cache, pos, buf, rng);
    }
  }
  const std::vector<int32_t> counters = buf.counters.download();
  CHECK(std::count(counters.begin(), counters.end(), 0) == int64_t(counters.size()));
}

TEST_CASE("cuda engine, --batch-invariant: zero differing tokens in every mode x cache x graphs") {
  const FewLayers weights(open_preset("llama-1b"), 4);
  std::string table = diff_table_header();
  for (const std::string dtype : {"bf16", "fp16"}) {
    CAPTURE(dtype);
    const InvarianceSetting ref_setting{SchedulerMode::kOffline, true, true};
    const EngineOutcome reference = run_engine(weights, dtype, ref_setting);
    REQUIRE(reference.tokens.size() == 14);
    for (const auto& t : reference.tokens) REQUIRE(!t.empty());
    CHECK(reference.preemptions > 0);
    CHECK(reference.hit_tokens > 0);
    for (const InvarianceSetting& s : invariance_settings(true)) {
      if (s.name() == ref_setting.name()) continue;
      CAPTURE(s.name());
      const TokenDiff d = diff_tokens(run_engine(weights, dtype, s).tokens, reference.tokens);
      table += diff_table_row(dtype + " " + s.name() + " vs " + ref_setting.name(), d);
      CHECK(d.differing == 0);
    }
  }
  MESSAGE("llama-1b shapes, 4 layers, --batch-invariant\n" << table);
}

// Weights kept in Q4_K blocks, --batch-invariant: by default every product decodes its matrix and
// runs the pinned GEMM; with ROSEINFER_CUDA_GEMM_QUANT_INVARIANT=1 every product (decode rows
// included) runs the tile-decoding GEMM on the blocks (gemm_quant.cuh), whose sums follow the
// weight shape only. Both keep every request's tokens independent of the batch.
TEST_CASE("cuda engine, --batch-invariant, weights kept in Q4_K blocks: zero differing tokens") {
  const std::unique_ptr<WeightSource> weights =
      quantize_weights(std::make_unique<FewLayers>(open_preset("llama-1b"), 4), GgmlType::kQ4_K);
  std::string table = diff_table_header();
  const InvarianceSetting ref_setting{SchedulerMode::kOffline, true, true};
  for (const char* path : {"decoded", "quant_gemm"}) {
    CAPTURE(path);
    // Read by each backend's constructor (run_engine builds a fresh engine).
    setenv("ROSEINFER_CUDA_GEMM_QUANT_INVARIANT", std::string(path) == "decoded" ? "0" : "1", 1);
    const EngineOutcome reference = run_engine(*weights, "bf16", ref_setting);
    REQUIRE(reference.tokens.size() == 14);
    CHECK(reference.preemptions > 0);
    for (const InvarianceSetting& s : invariance_settings(true)) {
      if (s.name() == ref_setting.name()) continue;
      CAPTURE(s.name());
      const TokenDiff d = diff_tokens(run_engine(*weights, "bf16", s).tokens, reference.tokens);
      table += diff_table_row(std::string(path) + " " + s.name() + " vs " + ref_setting.name(), d);
      CHECK(d.differing == 0);
    }
  }
  unsetenv("ROSEINFER_CUDA_GEMM_QUANT_INVARIANT");
  MESSAGE("llama-1b shapes, 4 layers, Q4_K kept, --batch-invariant, bf16\n" << table);
}
