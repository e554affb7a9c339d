// The tensor-core prefill attention (kernels/cuda/attention_prefill.cuh) against the CPU reference
// attention on random inputs: head_dim 64 and 128, GQA groups 1, 3, 4, 8, bf16 and fp16, chunks of
// 1..200 tokens over cached prefixes of 0..1000 tokens (and one 8k context), several sequences per
// step with decode rows mixed in, shuffled block tables and block sizes that do not divide the key
// tile. Inputs are rounded to the storage type on the host so the reference sees the same values;
// tolerance as the other attention tests (atol 1e-2 + rtol 1e-2); the output is poisoned (NaN)
// before each launch so a row the kernel misses fails.
#include <cuda_fp16.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/attention_prefill.cuh"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;
using namespace rose::gputest;

namespace {

constexpr float kAtol = 1e-2f, kRtol = 1e-2f;

struct PrefillCase {
  int heads, kv_heads, head_dim;
  std::vector<int> query_lens;    // per sequence
  std::vector<int> context_lens;  // per sequence, >= query_lens (the rest is the cached prefix)
  DType dtype = DType::kBF16;
  int block_size = 16;
};

// Values rounded to the storage type: as fp32 for the reference, as bits for the GPU.
struct Stored {
  std::vector<float> f32;
  std::vector<uint16_t> bits;
};

uint16_t half_bits(float f) {
  const __half h = __float2half_rn(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
float half_value(uint16_t bits) {
  __half h;
  std::memcpy(&h, &bits, 2);
  return __half2float(h);
}

Stored random_stored(size_t count, DType dtype, std::mt19937& rng, float lo, float hi) {
  Bf16Data d = random_bf16(count, rng, lo, hi);
  if (dtype == DType::kBF16) return {std::move(d.f32), std::move(d.bits)};
  Stored s;
  s.f32.resize(count);
  s.bits.resize(count);
  for (size_t i = 0; i < count; ++i) {
    s.bits[i] = half_bits(d.f32[i]);
    s.f32[i] = half_value(s.bits[i]);
  }
  return s;
}

std::vector<float> stored_to_f32(const std::vector<uint16_t>& bits, DType dtype) {
  if (dtype == DType::kBF16) return to_f32(bits);
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = half_value(bits[i]);
  return out;
}

cpu::ThreadPool& pool() {
  static cpu::ThreadPool p(0);
  return p;
}

void run_prefill_case(const PrefillCase& tc, std::mt19937& rng) {
  const int num_seqs = int(tc.query_lens.size());
  const int bs = tc.block_size;
  const int D = tc.head_dim, q_dim = tc.heads * D, kv_dim = tc.kv_heads * D;
  // The q rows are strided like the backend's qkv rows: q | k | v.
  const int q_stride = q_dim + 2 * kv_dim;
  int num_tokens = 0, max_blocks = 0, total_blocks = 0, max_query_len = 0;
  std::vector<int32_t> query_start = {0};
  for (int s = 0; s < num_seqs; ++s) {
    REQUIRE(tc.query_lens[s] <= tc.context_lens[s]);
    num_tokens += tc.query_lens[s];
    max_query_len = std::max(max_query_len, tc.query_lens[s]);
    query_start.push_back(num_tokens);
    const int blocks = (tc.context_lens[s] + bs - 1) / bs;
    max_blocks = std::max(max_blocks, blocks);
    total_blocks += blocks;
  }
  // Scattered physical blocks, rows padded with -1 like the scheduler's.
  std::vector<int32_t> ids(total_blocks + 3);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> tables(size_t(num_seqs) * max_blocks, -1), token_seq;
  int next = 0;
  for (int s = 0; s < num_seqs; ++s) {
    const int blocks = (tc.context_lens[s] + bs - 1) / bs;
    for (int b = 0; b < blocks; ++b) tables[size_t(s) * max_blocks + b] = ids[next++];
    for (int i = 0; i < tc.query_lens[s]; ++i) token_seq.push_back(s);
  }
  const size_t cache_elems = size_t(ids.size()) * bs * kv_dim;
  const Stored q = random_stored(size_t(num_tokens) * q_stride, tc.dtype, rng, -2.0f, 2.0f);
  const Stored k = random_stored(cache_elems, tc.dtype, rng, -2.0f, 2.0f);
  const Stored v = random_stored(cache_elems, tc.dtype, rng, -1.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(float(D));

  std::vector<float> expected(size_t(num_tokens) * q_dim);
  cpu::paged_attention(q.f32.data(), q_stride, k.f32.data(), v.f32.data(), query_start.data(),
                       tc.context_lens.data(), tables.data(), max_blocks, num_seqs, tc.heads,
                       tc.kv_heads, D, bs, scale, expected.data(), &pool());

  DeviceArray<uint16_t> d_q(q.bits), d_k(k.bits), d_v(v.bits), d_out(expected.size());
  DeviceArray<int32_t> d_tables(tables), d_stride(std::vector<int32_t>{max_blocks}),
      d_qs(query_start), d_ctx(tc.context_lens), d_seq(token_seq);
  AttentionArgs args;
  args.q = d_q.get();
  args.q_stride = q_stride;
  args.k_cache = d_k.get();
  args.v_cache = d_v.get();
  args.block_tables = d_tables.get();
  args.block_table_stride = d_stride.get();
  args.query_start = d_qs.get();
  args.context_lens = d_ctx.get();
  args.token_seq = d_seq.get();
  args.out = d_out.get();
  args.num_tokens = num_tokens;
  args.num_heads = tc.heads;
  args.num_kv_heads = tc.kv_heads;
  args.head_dim = D;
  args.block_size = bs;
  args.scale = scale;
  args.dtype = tc.dtype;
  REQUIRE(prefill_attention_supported(args));
  launch_prefill_attention(args, num_seqs, max_query_len, nullptr);
  ROSE_CUDA_CHECK(cudaGetLastError());
  check_close(stored_to_f32(d_out.download(), tc.dtype), expected, kAtol, kRtol,
              "prefill attention");
}

const char* dtype_name(DType d) { return d == DType::kBF16 ? "bf16" : "fp16"; }

struct HeadShape {
  int heads, kv_heads, head_dim;
};
// llama-1b (group 4, 64), gpt2 (group 1), SmolLM2 (group 3), group 8 and head_dim 128.
const HeadShape kShapes[] = {{32, 8, 64}, {12, 12, 64}, {9, 3, 64}, {16, 2, 128}, {8, 2, 128}};

}  // namespace

TEST_CASE("prefill attention: every chunk length after every cached prefix, one per step") {
  std::mt19937 rng(101);
  const int chunks[] = {1, 15, 16, 17, 63, 64, 65, 200};
  const int prefixes[] = {0, 1, 16, 100, 1000};
  for (const DType dtype : {DType::kBF16, DType::kFP16}) {
    for (const HeadShape& sh : kShapes) {
      // All chunk lengths in one step per prefix: several sequences with tiles of different
      // counts, query_start offsets that are not multiples of the tile.
      for (const int prefix : prefixes) {
        PrefillCase tc{sh.heads, sh.kv_heads, sh.head_dim, {}, {}, dtype};
        for (const int chunk : chunks) {
          tc.query_lens.push_back(chunk);
          tc.context_lens.push_back(prefix + chunk);
        }
        CAPTURE(dtype_name(dtype));
        CAPTURE(sh.heads);
        CAPTURE(sh.kv_heads);
        CAPTURE(sh.head_dim);
        CAPTURE(prefix);
        run_prefill_case(tc, rng);
      }
    }
  }
}

TEST_CASE("prefill attention: single sequences, each chunk and prefix alone") {
  std::mt19937 rng(202);
  for (const DType dtype : {DType::kBF16, DType::kFP16}) {
    for (const int chunk : {1, 15, 16, 17, 63, 64, 65, 200}) {
      for (const int prefix : {0, 1, 16, 100, 1000}) {
        CAPTURE(dtype_name(dtype));
        CAPTURE(chunk);
        CAPTURE(prefix);
        run_prefill_case({32, 8, 64, {chunk}, {prefix + chunk}, dtype}, rng);
        run_prefill_case({8, 1, 128, {chunk}, {prefix + chunk}, dtype}, rng);
      }
    }
  }
}

TEST_CASE("prefill attention: mixed steps, prefill chunks with decode rows") {
  std::mt19937 rng(303);
  for (const DType dtype : {DType::kBF16, DType::kFP16}) {
    for (const HeadShape& sh : kShapes) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(sh.heads);
      CAPTURE(sh.head_dim);
      run_prefill_case({sh.heads,
                        sh.kv_heads,
                        sh.head_dim,
                        {1, 130, 1, 1, 64, 1, 17},
                        {50, 1130, 1, 777, 64, 2, 117},
                        dtype},
                       rng);
      // Decode rows only (the kernel serves any step, though forward() keeps split-KV there).
      run_prefill_case({sh.heads, sh.kv_heads, sh.head_dim, {1, 1, 1, 1}, {1, 63, 64, 1500}, dtype},
                       rng);
    }
  }
}

namespace {

// The kernel's output bits for one step over a given cache (block_size 16, tables row-major).
std::vector<uint16_t> attention_bits(const HeadShape& sh, const std::vector<uint16_t>& q,
                                     int q_stride, const DeviceArray<uint16_t>& k,
                                     const DeviceArray<uint16_t>& v,
                                     const std::vector<int32_t>& tables, int stride,
                                     const std::vector<int32_t>& query_start,
                                     const std::vector<int32_t>& context_lens) {
  const int num_seqs = int(context_lens.size());
  int max_query_len = 0;
  for (int s = 0; s < num_seqs; ++s) {
    max_query_len = std::max(max_query_len, query_start[s + 1] - query_start[s]);
  }
  const int num_tokens = query_start.back();
  DeviceArray<uint16_t> d_q(q), d_out(size_t(num_tokens) * sh.heads * sh.head_dim);
  DeviceArray<int32_t> d_tables(tables), d_stride(std::vector<int32_t>{stride}), d_qs(query_start),
      d_ctx(context_lens);
  AttentionArgs args;
  args.q = d_q.get();
  args.q_stride = q_stride;
  args.k_cache = k.get();
  args.v_cache = v.get();
  args.block_tables = d_tables.get();
  args.block_table_stride = d_stride.get();
  args.query_start = d_qs.get();
  args.context_lens = d_ctx.get();
  args.out = d_out.get();
  args.num_tokens = num_tokens;
  args.num_heads = sh.heads;
  args.num_kv_heads = sh.kv_heads;
  args.head_dim = sh.head_dim;
  args.block_size = 16;
  args.scale = 1.0f / std::sqrt(float(sh.head_dim));
  args.dtype = DType::kBF16;
  launch_prefill_attention(args, num_seqs, max_query_len, nullptr);
  ROSE_CUDA_CHECK(cudaGetLastError());
  return d_out.download();
}

}  // namespace

// What --batch-invariant relies on: a position's output is the same whether its query row is one
// of a prefill chunk's (a tile of one head's rows) or a decode row (a tile of a KV head's query
// heads, beside other sequences).
TEST_CASE(
    "prefill attention: a position's bits are the same in a prefill chunk and a decode step") {
  std::mt19937 rng(505);
  for (const HeadShape& sh : kShapes) {
    CAPTURE(sh.heads);
    CAPTURE(sh.head_dim);
    const int D = sh.head_dim, q_dim = sh.heads * D, q_stride = q_dim + 2 * sh.kv_heads * D;
    const int ctx = 300, chunk = 77, stride = (ctx + 15) / 16;
    // Sequence 0 owns blocks 0..stride-1; two other decode sequences own the next ones.
    std::vector<int32_t> tables(3 * size_t(stride));
    std::iota(tables.begin(), tables.end(), 0);
    const size_t cache = tables.size() * 16 * sh.kv_heads * D;
    const Bf16Data k = random_bf16(cache, rng, -2.0f, 2.0f), v = random_bf16(cache, rng);
    DeviceArray<uint16_t> d_k(k.bits), d_v(v.bits);
    const Bf16Data q = random_bf16(size_t(chunk) * q_stride, rng, -2.0f, 2.0f);
    const std::vector<uint16_t> prefill = attention_bits(
        sh, q.bits, q_stride, d_k, d_v,
        std::vector<int32_t>(tables.begin(), tables.begin() + stride), stride, {0, chunk}, {ctx});
    // The chunk's last row (position 299) as the middle of three decode rows.
    std::vector<uint16_t> decode_q = random_bf16(3 * size_t(q_stride), rng, -2.0f, 2.0f).bits;
    std::copy_n(q.bits.begin() + int64_t(chunk - 1) * q_stride, q_stride,
                decode_q.begin() + q_stride);
    std::vector<int32_t> decode_tables(3 * size_t(stride));
    for (int s = 0; s < 3; ++s) {
      const int owner = s == 1 ? 0 : s;  // row 1 reads sequence 0's blocks
      std::copy_n(tables.begin() + owner * stride, stride, decode_tables.begin() + s * stride);
    }
    const std::vector<uint16_t> decode = attention_bits(
        sh, decode_q, q_stride, d_k, d_v, decode_tables, stride, {0, 1, 2, 3}, {ctx, ctx, 40});
    const auto last_row = prefill.begin() + int64_t(chunk - 1) * q_dim;
    CHECK(std::equal(last_row, last_row + q_dim, decode.begin() + q_dim));
  }
}

TEST_CASE("prefill attention: block sizes 1, 7, 16, 32, 64") {
  std::mt19937 rng(404);
  for (const int bs : {1, 7, 16, 32, 64}) {
    CAPTURE(bs);
    PrefillCase tc{32, 8, 64, {65, 1, 200}, {165, 300, 1200}, DType::kBF16, bs};
    run_prefill_case(tc, rng);
    tc.head_dim = 128;
    tc.dtype = DType::kFP16;
    run_prefill_case(tc, rng);
  }
}

TEST_CASE("prefill attention: long prompts up to 8k context") {
  std::mt19937 rng(505);
  for (const DType dtype : {DType::kBF16, DType::kFP16}) {
    CAPTURE(dtype_name(dtype));
    // A whole 2k prompt, the last 300-token chunk of an 8k context, and a decode row at 8k.
    run_prefill_case({8, 2, 64, {2048, 300, 1}, {2048, 8192, 8000}, dtype}, rng);
    run_prefill_case({4, 1, 128, {1000, 1}, {8192, 8191}, dtype}, rng);
  }
}
