// Every CUDA kernel against the CPU reference ops (kernels/cpu/ops.h) on fresh random inputs of
// several shapes. Inputs are rounded to bf16 on the host first, so the reference computes in fp32
// on exactly the values the GPU reads; the remaining differences are the GPU's bf16 outputs and
// its summation order: tolerance atol 1e-2 + rtol 1e-2 (bf16 has 8 bits of mantissa, ~4e-3).
// Outputs are poisoned (NaN) before each launch so unwritten elements fail.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/model/rope.h"
#include "kernels/common/counter_rng.h"
#include "kernels/common/kernel_switches.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/fill.cuh"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/gemv_mma.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/rope_kv.cuh"
#include "kernels/cuda/sampling.cuh"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;
using namespace rose::gputest;

namespace {

constexpr float kAtol = 1e-2f, kRtol = 1e-2f;

}  // namespace

TEST_CASE("fill_uniform reproduces the host's synthetic weights bit for bit before rounding") {
  const int64_t n = 100003;
  const uint64_t seed = 0x1234'5678'9abcull;
  const float scale = 0.037f;
  DeviceArray<uint16_t> dev(n);
  launch_fill_uniform(dev.get(), DType::kBF16, n, seed, scale, nullptr);
  const std::vector<uint16_t> got = dev.download();
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    mismatches += got[i] != f32_to_bf16_bits(synthetic_uniform(seed, uint64_t(i), scale));
  }
  CHECK(mismatches == 0);
  launch_fill_constant(dev.get(), DType::kBF16, n, 1.0f, nullptr);
  const std::vector<uint16_t> ones = dev.download();
  CHECK(std::count(ones.begin(), ones.end(), f32_to_bf16_bits(1.0f)) == n);
}

namespace {

// Every third id of `ids` recoded as a previous-step token naming a row of `previous` (ids the
// step before sampled, one of them kSampledNonFinite); `ids` then holds what each should resolve
// to (sampling_rule.h: the sampled id, 0 for a non-finite row).
std::vector<int32_t> code_previous_step_tokens(std::vector<int32_t>& ids,
                                               const std::vector<int32_t>& previous) {
  std::vector<int32_t> coded = ids;
  for (size_t i = 1; i < ids.size(); i += 3) {
    const int row = int(i * 5 % previous.size());
    coded[i] = previous_step_token(row);
    ids[i] = std::max(0, previous[size_t(row)]);
  }
  return coded;
}

}  // namespace

TEST_CASE("embedding with and without learned positions, and previous-step tokens") {
  std::mt19937 rng(1);
  const int vocab = 300, hidden = 96, max_pos = 64, n = 37;
  const Bf16Data tok = random_bf16(size_t(vocab) * hidden, rng);
  const Bf16Data pos = random_bf16(size_t(max_pos) * hidden, rng);
  std::vector<int32_t> ids(n), positions(n);
  for (int i = 0; i < n; ++i) {
    ids[i] = int32_t(rng() % vocab);
    positions[i] = int32_t(rng() % max_pos);
  }
  const std::vector<int32_t> previous = {17, 299, kSampledNonFinite, 0, 123, 5, 250};
  const std::vector<int32_t> coded = code_previous_step_tokens(ids, previous);
  REQUIRE(std::count_if(coded.begin(), coded.end(), is_previous_step_token) == 12);
  DeviceArray<uint16_t> d_tok(tok.bits), d_pos(pos.bits);
  DeviceArray<int32_t> d_ids(coded), d_previous(previous), d_positions(positions);
  for (bool with_pos : {false, true}) {
    DeviceArray<float> out(size_t(n) * hidden);
    launch_embedding(out.get(), d_tok.get(), with_pos ? d_pos.get() : nullptr, d_ids.get(),
                     d_previous.get(), d_positions.get(), n, hidden, DType::kBF16, nullptr);
    std::vector<float> expected(size_t(n) * hidden);
    cpu::embedding(ids.data(), positions.data(), tok.f32.data(),
                   with_pos ? pos.f32.data() : nullptr, n, hidden, expected.data());
    check_close(out.download(), expected, 1e-6f, 1e-6f, "embedding");
  }
}

TEST_CASE("add_norm: LayerNorm and RMSNorm fused with the residual add, bias and row gather") {
  std::mt19937 rng(2);
  for (int hidden : {64, 768, 2048, 4096}) {
    for (NormKind kind : {NormKind::kLayerNorm, NormKind::kRmsNorm}) {
      const int rows = 19;
      CAPTURE(hidden);
      std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
      std::vector<float> residual(size_t(rows) * hidden);
      for (float& x : residual) x = dist(rng) + 2.0f;  // an offset mean tests the centring
      const Bf16Data delta = random_bf16(residual.size(), rng);
      const Bf16Data delta_bias = random_bf16(hidden, rng);
      const Bf16Data weight = random_bf16(hidden, rng, 0.5f, 1.5f);
      const Bf16Data bias = random_bf16(hidden, rng);

      // Reference: the CPU adds x = delta + delta_bias into the residual.
      std::vector<float> x(residual.size());
      for (int r = 0; r < rows; ++r) {
        for (int i = 0; i < hidden; ++i) {
          x[size_t(r) * hidden + i] = delta.f32[size_t(r) * hidden + i] + delta_bias.f32[i];
        }
      }
      std::vector<float> ref_residual = residual, ref_out(residual.size());
      if (kind == NormKind::kLayerNorm) {
        cpu::add_layernorm(ref_residual.data(), x.data(), weight.f32.data(), bias.f32.data(), 1e-5f,
                           rows, hidden, ref_out.data());
      } else {
        cpu::add_rmsnorm(ref_residual.data(), x.data(), weight.f32.data(), 1e-6f, rows, hidden,
                         ref_out.data());
      }

      DeviceArray<float> d_residual(residual);
      DeviceArray<uint16_t> d_delta(delta.bits), d_delta_bias(delta_bias.bits), d_w(weight.bits),
          d_b(bias.bits), d_out(residual.size());
      AddNormArgs args;
      args.residual = d_residual.get();
      args.delta = d_delta.get();
      args.delta_bias = d_delta_bias.get();
      args.weight = d_w.get();
      args.bias = kind == NormKind::kLayerNorm ? d_b.get() : nullptr;
      args.out = d_out.get();
      args.num_rows = rows;
      args.hidden = hidden;
      args.eps = kind == NormKind::kLayerNorm ? 1e-5f : 1e-6f;
      args.kind = kind;
      launch_add_norm(args, nullptr);
      check_close(d_residual.download(), ref_residual, 1e-5f, 1e-5f, "residual");
      check_close(to_f32(d_out.download()), ref_out, kAtol, kRtol, "normed");

      // The final-norm form: gathered rows, residual left alone.
      const std::vector<int32_t> index = {7, 0, 18, 3};
      DeviceArray<int32_t> d_index(index);
      DeviceArray<uint16_t> d_gathered(index.size() * hidden);
      d_residual.upload(residual);
      args.row_index = d_index.get();
      args.write_residual = false;
      args.num_rows = int(index.size());
      args.out = d_gathered.get();
      launch_add_norm(args, nullptr);
      std::vector<float> expected;
      for (int32_t r : index) {
        expected.insert(expected.end(), ref_out.begin() + int64_t(r) * hidden,
                        ref_out.begin() + int64_t(r + 1) * hidden);
      }
      check_close(to_f32(d_gathered.download()), expected, kAtol, kRtol, "gathered");
      check_close(d_residual.download(), residual, 0.0f, 0.0f, "untouched residual");
    }
  }
}

TEST_CASE("add_norm with the embedding: the bits of launch_embedding followed by the norm") {
  // Layer 0's attention norm looks the embedding up itself (forward.cpp): its residual and normed
  // rows must be exactly those of the two launches it replaces, with and without positions.
  std::mt19937 rng(3);
  const int vocab = 500, max_pos = 80, n = 23;
  for (int hidden : {576, 768, 2048}) {
    for (bool with_pos : {false, true}) {
      CAPTURE(hidden);
      CAPTURE(with_pos);
      const Bf16Data tok = random_bf16(size_t(vocab) * hidden, rng);
      const Bf16Data pos = random_bf16(size_t(max_pos) * hidden, rng);
      const Bf16Data weight = random_bf16(hidden, rng, 0.5f, 1.5f);
      const Bf16Data bias = random_bf16(hidden, rng);
      std::vector<int32_t> ids(n), positions(n);
      for (int i = 0; i < n; ++i) {
        ids[i] = int32_t(rng() % vocab);
        positions[i] = int32_t(rng() % max_pos);
      }
      // The fused norm reads previous-step tokens, the separate embedding their resolved ids.
      const std::vector<int32_t> previous = {3, kSampledNonFinite, 499, 42};
      const std::vector<int32_t> coded = code_previous_step_tokens(ids, previous);
      DeviceArray<uint16_t> d_tok(tok.bits), d_pos(pos.bits), d_w(weight.bits), d_b(bias.bits);
      DeviceArray<int32_t> d_ids(ids), d_coded(coded), d_previous(previous), d_positions(positions);
      DeviceArray<float> res_two(size_t(n) * hidden), res_one(size_t(n) * hidden);
      DeviceArray<uint16_t> out_two(size_t(n) * hidden), out_one(size_t(n) * hidden);
      AddNormArgs args;
      args.weight = d_w.get();
      args.bias = with_pos ? d_b.get() : nullptr;  // gpt2-like LayerNorm, else llama's RMSNorm
      args.kind = with_pos ? NormKind::kLayerNorm : NormKind::kRmsNorm;
      args.num_rows = n;
      args.hidden = hidden;
      args.residual = res_two.get();
      args.out = out_two.get();
      launch_embedding(res_two.get(), d_tok.get(), with_pos ? d_pos.get() : nullptr, d_ids.get(),
                       nullptr, d_positions.get(), n, hidden, DType::kBF16, nullptr);
      launch_add_norm(args, nullptr);
      args.residual = res_one.get();  // poisoned: the fused norm must not read it
      args.out = out_one.get();
      args.tok_emb = d_tok.get();
      args.pos_emb = with_pos ? d_pos.get() : nullptr;
      args.token_ids = d_coded.get();
      args.previous_ids = d_previous.get();
      args.positions = d_positions.get();
      launch_add_norm(args, nullptr);
      CHECK(res_one.download() == res_two.download());
      CHECK(out_one.download() == out_two.download());
    }
  }
}

TEST_CASE("RoPE (plain and llama3-scaled) and qkv bias fused with the paged KV write") {
  std::mt19937 rng(3);
  struct Shape {
    int heads, kv_heads, head_dim;
    bool rope, bias;
  };
  for (Shape sh : {Shape{8, 2, 64, true, false}, Shape{4, 4, 64, false, true},
                   Shape{32, 8, 128, true, true}, Shape{8, 1, 32, true, false}}) {
    CAPTURE(sh.head_dim);
    CAPTURE(sh.heads);
    const int n = 45, block_size = 16, num_blocks = 8;
    const int q_dim = sh.heads * sh.head_dim, kv_dim = sh.kv_heads * sh.head_dim;
    const int qkv_dim = q_dim + 2 * kv_dim;
    const Bf16Data qkv = random_bf16(size_t(n) * qkv_dim, rng);
    const Bf16Data bias = random_bf16(qkv_dim, rng);
    std::vector<int32_t> positions(n), slots(n);
    std::vector<int32_t> perm(num_blocks * block_size);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int i = 0; i < n; ++i) {
      positions[i] = int32_t(rng() % 5000);  // long positions test the angle precision
      slots[i] = i % 9 == 4 ? -1 : perm[i];
    }
    RopeScaling scaling;
    if (sh.head_dim == 128) scaling = RopeScaling{"llama3", 32.0f, 1.0f, 4.0f, 8192};
    std::vector<float> inv_freq(sh.head_dim / 2);
    rope_inv_freq(sh.head_dim, 500000.0f, scaling, inv_freq.data());

    std::vector<float> ref_qkv = qkv.f32;
    if (sh.bias) {
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < qkv_dim; ++j) ref_qkv[size_t(i) * qkv_dim + j] += bias.f32[j];
      }
    }
    const size_t cache_elems = size_t(num_blocks) * block_size * kv_dim;
    std::vector<float> ref_k(cache_elems, 0.0f), ref_v(cache_elems, 0.0f);
    cpu::rope_and_write_kv(ref_qkv.data(), positions.data(), slots.data(),
                           sh.rope ? inv_freq.data() : nullptr, n, sh.heads, sh.kv_heads,
                           sh.head_dim, block_size, ref_k.data(), ref_v.data());

    DeviceArray<uint16_t> d_qkv(qkv.bits), d_bias(bias.bits), d_k(cache_elems), d_v(cache_elems);
    DeviceArray<int32_t> d_pos(positions), d_slots(slots);
    DeviceArray<float> d_freq(inv_freq);
    ROSE_CUDA_CHECK(cudaMemset(d_k.get(), 0, cache_elems * 2));
    ROSE_CUDA_CHECK(cudaMemset(d_v.get(), 0, cache_elems * 2));
    RopeKvArgs args;
    args.qkv = d_qkv.get();
    args.qkv_bias = sh.bias ? d_bias.get() : nullptr;
    args.k_cache = d_k.get();
    args.v_cache = d_v.get();
    args.positions = d_pos.get();
    args.slot_mapping = d_slots.get();
    args.inv_freq = sh.rope ? d_freq.get() : nullptr;
    args.num_tokens = n;
    args.num_heads = sh.heads;
    args.num_kv_heads = sh.kv_heads;
    args.head_dim = sh.head_dim;
    launch_rope_kv_write(args, nullptr);
    // Only the q columns are defined after the kernel (k and v rows stay as they were).
    std::vector<float> got_q = to_f32(d_qkv.download()), want_q = ref_qkv;
    for (int i = 0; i < n; ++i) {
      for (int j = q_dim; j < qkv_dim; ++j)
        got_q[size_t(i) * qkv_dim + j] = want_q[size_t(i) * qkv_dim + j] = 0;
    }
    check_close(got_q, want_q, kAtol, kRtol, "rotated q");
    check_close(to_f32(d_k.download()), ref_k, kAtol, kRtol, "k cache");
    check_close(to_f32(d_v.download()), ref_v, kAtol, kRtol, "v cache");
  }
}

namespace {

// The cluster decode attention's kernels: the tensor-core one with the rule's blocks a cluster
// (splits 0) and with 4 and 16 (shapes whose merge does not fit those keep 8), and the scalar one.
struct ClusterVariant {
  bool scalar;
  int splits;
  void apply(KernelSwitches& s) const {
    s.cluster_attention_mma = !scalar;
    s.cluster_attention_splits = splits;
  }
};
constexpr ClusterVariant kClusterVariants[] = {{false, 0}, {false, 4}, {false, 16}, {true, 0}};

struct AttentionCase {
  int heads, kv_heads, head_dim;
  std::vector<int> query_lens;    // per sequence
  std::vector<int> context_lens;  // per sequence, >= query_lens
  int forced_splits = 0;          // 0: the backend's choice
  // Decode rows whose first shared_blocks table entries are sequence 0's (a cached prefix): run
  // once more through the shared-prefix launch, every row sharing but the last.
  int shared_blocks = 0;
};

// The case's decode rows again with the shared-prefix launch: keys below shared_blocks * 16 read
// once per 8 query vectors, the last row left out of the sharing (its own path, same result).
void run_shared_prefix(const AttentionCase& tc, AttentionArgs args, int splits,
                       const std::vector<float>& expected) {
  const int num_seqs = int(tc.query_lens.size()), D = tc.head_dim;
  const int prefix_splits =
      attention_prefix_splits(args.num_tokens, tc.kv_heads, tc.heads, 4 * 132, 32);
  REQUIRE(prefix_splits >= 1);
  const size_t slots = size_t(args.num_tokens) * tc.heads * (splits + prefix_splits);
  DeviceArray<float> d_part(slots * D), d_lse(slots);
  std::vector<int32_t> shares(num_seqs, 1);
  shares.back() = 0;
  DeviceArray<int32_t> d_shared(std::vector<int32_t>{tc.shared_blocks * 16}), d_shares(shares);
  args.partial_out = d_part.get();
  args.partial_lse = d_lse.get();
  args.shared_keys = d_shared.get();
  args.shares_prefix = d_shares.get();
  args.prefix_splits = prefix_splits;
  DeviceArray<uint16_t> d_out(expected.size());
  args.out = d_out.get();
  CAPTURE(prefix_splits);
  for (int run = 0; run < 2; ++run) {
    CAPTURE(run);
    ROSE_CUDA_CHECK(cudaMemset(d_out.get(), 0xff, expected.size() * 2));  // poison: NaN bf16
    launch_paged_attention(args, nullptr);
    ROSE_CUDA_CHECK(cudaDeviceSynchronize());
    check_close(to_f32(d_out.download()), expected, kAtol, kRtol, "attention, shared prefix");
  }
}

void run_attention_case(const AttentionCase& tc, std::mt19937& rng) {
  const int num_seqs = int(tc.query_lens.size());
  const int block_size = 16;
  const int D = tc.head_dim, q_dim = tc.heads * D, kv_dim = tc.kv_heads * D;
  int num_tokens = 0, max_blocks = 0, total_blocks = 0;
  std::vector<int32_t> query_start = {0};
  for (int s = 0; s < num_seqs; ++s) {
    num_tokens += tc.query_lens[s];
    query_start.push_back(num_tokens);
    const int blocks = (tc.context_lens[s] + block_size - 1) / block_size;
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
    const int blocks = (tc.context_lens[s] + block_size - 1) / block_size;
    for (int b = 0; b < blocks; ++b) {
      tables[size_t(s) * max_blocks + b] = s > 0 && b < tc.shared_blocks ? tables[b] : ids[next++];
    }
    for (int i = 0; i < tc.query_lens[s]; ++i) token_seq.push_back(s);
  }
  const int num_blocks = int(ids.size());
  const size_t cache_elems = size_t(num_blocks) * block_size * kv_dim;
  const Bf16Data q = random_bf16(size_t(num_tokens) * q_dim, rng, -2.0f, 2.0f);
  const Bf16Data k = random_bf16(cache_elems, rng, -2.0f, 2.0f);
  const Bf16Data v = random_bf16(cache_elems, rng);
  const float scale = 1.0f / std::sqrt(float(D));

  std::vector<float> expected(size_t(num_tokens) * q_dim);
  cpu::paged_attention(q.f32.data(), q_dim, k.f32.data(), v.f32.data(), query_start.data(),
                       tc.context_lens.data(), tables.data(), max_blocks, num_seqs, tc.heads,
                       tc.kv_heads, D, block_size, scale, expected.data());

  // The slots past each row's keys in its last block hold NaN, as a real cache's unwritten slots
  // may: no kernel may let them reach the output (the CPU reference never reads them).
  std::vector<uint16_t> k_bits = k.bits, v_bits = v.bits;
  for (int s = 0; s < num_seqs; ++s) {
    const int last = (tc.context_lens[s] - 1) / block_size;
    if (last < tc.shared_blocks) continue;  // other rows' keys
    const size_t block = size_t(tables[size_t(s) * max_blocks + last]);
    for (int slot = tc.context_lens[s] - last * block_size; slot < block_size; ++slot) {
      const size_t first = (block * block_size + slot) * kv_dim;
      std::fill_n(k_bits.begin() + first, kv_dim, uint16_t(0x7fc0));  // bf16 NaN
      std::fill_n(v_bits.begin() + first, kv_dim, uint16_t(0x7fc0));
    }
  }
  DeviceArray<uint16_t> d_q(q.bits), d_k(k_bits), d_v(v_bits), d_out(expected.size());
  DeviceArray<int32_t> d_tables(tables), d_stride(std::vector<int32_t>{max_blocks}),
      d_qs(query_start), d_ctx(tc.context_lens), d_seq(token_seq);
  const int splits = tc.forced_splits > 0
                         ? tc.forced_splits
                         : attention_num_splits(num_tokens, tc.kv_heads, tc.heads, 4 * 132, 32);
  DeviceArray<float> d_part(size_t(num_tokens) * tc.heads * splits * D),
      d_lse(size_t(num_tokens) * tc.heads * splits);
  AttentionArgs args;
  args.q = d_q.get();
  args.q_stride = q_dim;
  args.k_cache = d_k.get();
  args.v_cache = d_v.get();
  args.block_tables = d_tables.get();
  args.block_table_stride = d_stride.get();
  args.query_start = d_qs.get();
  args.context_lens = d_ctx.get();
  args.token_seq = d_seq.get();
  args.out = d_out.get();
  args.partial_out = d_part.get();
  args.partial_lse = d_lse.get();
  args.num_tokens = num_tokens;
  args.num_heads = tc.heads;
  args.num_kv_heads = tc.kv_heads;
  args.head_dim = D;
  args.block_size = block_size;
  args.num_splits = splits;
  args.scale = scale;
  CAPTURE(splits);
  launch_paged_attention(args, nullptr);
  check_close(to_f32(d_out.download()), expected, kAtol, kRtol, "attention");
  // The fused merge (last split block merges), twice: the counters must be back at zero.
  DeviceArray<int32_t> d_counters(
      std::vector<int32_t>(size_t(attention_merge_counters(num_tokens, tc.kv_heads, tc.heads)), 0));
  args.merge_counters = d_counters.get();
  for (int run = 0; run < 2; ++run) {
    CAPTURE(run);
    ROSE_CUDA_CHECK(cudaMemset(d_out.get(), 0xff, expected.size() * 2));  // poison: NaN bf16
    launch_paged_attention(args, nullptr);
    check_close(to_f32(d_out.download()), expected, kAtol, kRtol, "attention, fused merge");
  }
  const std::vector<int32_t> counters = d_counters.download();
  CHECK(std::count(counters.begin(), counters.end(), 0) == int64_t(counters.size()));
  // Launches of up to 1,024 rows at head_dim 64 and 128 run the rows kernel: above in its
  // tensor-core form where the GQA group has two or more query heads (the default), here in its
  // scalar form, direct and with the fused merge.
  if ((D == 64 || D == 128) && num_tokens <= 1024) {
    const ScopedKernelSwitches scalar([](KernelSwitches& s) { s.attention_rows_mma = false; });
    for (int32_t* merge : {static_cast<int32_t*>(nullptr), d_counters.get()}) {
      CAPTURE(merge != nullptr);
      AttentionArgs scalar_args = args;
      scalar_args.merge_counters = merge;
      ROSE_CUDA_CHECK(cudaMemset(d_out.get(), 0xff, expected.size() * 2));
      launch_paged_attention(scalar_args, nullptr);
      check_close(to_f32(d_out.download()), expected, kAtol, kRtol, "attention, scalar rows");
    }
    const std::vector<int32_t> after = d_counters.download();
    CHECK(std::count(after.begin(), after.end(), 0) == int64_t(after.size()));
  }
  if (D == 64 ||
      D == 128) {  // the cluster decode kernels (tensor-core, scalar), rows of every kind
    AttentionArgs cluster = args;
    cluster.cluster_decode = true;
    cluster.partial_out = nullptr;  // it needs no partials, counters or splits
    cluster.partial_lse = nullptr;
    cluster.merge_counters = nullptr;
    cluster.num_splits = 1;
    std::vector<uint16_t> tensor_core_bits;
    for (const ClusterVariant variant : kClusterVariants) {
      CAPTURE(variant.scalar);
      CAPTURE(variant.splits);
      const ScopedKernelSwitches kernel([&](KernelSwitches& s) { variant.apply(s); });
      ROSE_CUDA_CHECK(cudaMemset(d_out.get(), 0xff, expected.size() * 2));
      launch_paged_attention(cluster, nullptr);
      if (!variant.scalar && variant.splits == 0) tensor_core_bits = d_out.download();
      check_close(to_f32(d_out.download()), expected, kAtol, kRtol, "attention, cluster decode");
    }
    // The tensor-core kernel's K/V loads with the L2 evict_first policy (every row past one key
    // here): a cache hint only, so the same bits.
    AttentionArgs evict_first = cluster;
    evict_first.kv_evict_first_keys = 1;
    ROSE_CUDA_CHECK(cudaMemset(d_out.get(), 0xff, expected.size() * 2));
    launch_paged_attention(evict_first, nullptr);
    CHECK(d_out.download() == tensor_core_bits);
  }
  if (tc.shared_blocks > 0) run_shared_prefix(tc, args, splits, expected);
}

}  // namespace

TEST_CASE("paged attention: decode, GQA groups 1/4/8, head_dim 64 and 128, block boundaries") {
  std::mt19937 rng(4);
  for (int head_dim : {64, 128}) {
    for (int group : {1, 4, 8}) {
      CAPTURE(head_dim);
      CAPTURE(group);
      const int kv_heads = group == 1 ? 4 : 2;
      // Decode rows: one query token each, contexts at and across 16-token block boundaries.
      run_attention_case(
          {kv_heads * group, kv_heads, head_dim, {1, 1, 1, 1, 1, 1}, {1, 15, 16, 17, 32, 33}}, rng);
    }
  }
}

TEST_CASE("paged attention: prefill chunks over a cached prefix mixed with decode rows") {
  std::mt19937 rng(5);
  // Sequence 0: a fresh prompt; 1: a 20-token chunk over a 44-token cached prefix; 2, 3: decode.
  run_attention_case({8, 2, 64, {37, 20, 1, 1}, {37, 64, 100, 16}}, rng);
  run_attention_case({32, 8, 64, {16, 17, 1}, {16, 50, 300}}, rng);
  run_attention_case({4, 4, 128, {33, 1}, {33, 1}}, rng);
  run_attention_case({12, 1, 64, {5, 1}, {21, 9}}, rng);  // group 12 spans two thread blocks
  run_attention_case({4, 2, 8, {9, 1}, {9, 40}}, rng);    // the tiny head_dim of test models
  run_attention_case({8, 2, 32, {1, 3}, {70, 3}}, rng);
}

TEST_CASE("paged attention: long contexts and split-KV merging") {
  std::mt19937 rng(6);
  run_attention_case({32, 8, 64, {1}, {4100}}, rng);  // batch 1: many splits
  run_attention_case({32, 8, 128, {1, 1}, {5000, 4096}}, rng);
  run_attention_case({16, 2, 64, {1, 1, 1}, {700, 33, 2}, 7}, rng);  // splits longer than keys
  run_attention_case({8, 8, 64, {1}, {3000}, 32}, rng);
  // One split: a warp of the tensor-core rows kernel takes 30-47 chunks, past the 32 block-table
  // entries it reads at once (RowChunks).
  run_attention_case({32, 8, 64, {1, 1, 1}, {3000, 2100, 1919}, 1}, rng);
  run_attention_case({16, 4, 128, {1, 1}, {4500, 2049}, 1}, rng);
}

TEST_CASE("paged attention: decode rows sharing a cached prefix, read once per 8 query vectors") {
  std::mt19937 rng(31);
  // gpt2's shape, seed000's prefix (53 blocks) and 9 rows: two prefix blocks of 8 rows and 1.
  run_attention_case(
      {12, 12, 64, std::vector<int>(9, 1), {860, 861, 870, 849, 900, 865, 1000, 851, 880}, 0, 53},
      rng);
  run_attention_case({32, 8, 64, {1, 1, 1, 1, 1}, {300, 517, 200, 129, 1000}, 0, 8}, rng);
  run_attention_case({8, 4, 128, {1, 1, 1}, {170, 161, 4000}, 0, 10}, rng);          // group 2
  run_attention_case({12, 4, 64, {1, 1, 1, 1}, {700, 300, 257, 2000}, 0, 16}, rng);  // group 3
  run_attention_case({32, 8, 64, std::vector<int>(64, 1), std::vector<int>(64, 600), 0, 37}, rng);
}

TEST_CASE("paged attention: batch 256 decode") {
  std::mt19937 rng(7);
  AttentionCase tc{32, 8, 64, {}, {}};
  for (int s = 0; s < 256; ++s) {
    tc.query_lens.push_back(1);
    tc.context_lens.push_back(1 + int(rng() % 700));
  }
  run_attention_case(tc, rng);
}

TEST_CASE("paged attention: batch decode for every heads-per-block width (1, 2, 4, 8, 12)") {
  // Decode launches of head_dim 64/128 run the row-shared-lanes kernel, instantiated per number of
  // query heads per block; contexts cover partial tiles, block edges and several tiles per warp.
  std::mt19937 rng(11);
  for (int head_dim : {64, 128}) {
    for (int group : {1, 2, 4, 8, 12}) {
      CAPTURE(head_dim);
      CAPTURE(group);
      const int kv_heads = group >= 8 ? 1 : 2;
      AttentionCase tc{kv_heads * group, kv_heads, head_dim, {}, {}};
      for (int s = 0; s < 48; ++s) {
        tc.query_lens.push_back(1);
        tc.context_lens.push_back(1 + int(rng() % 600));
      }
      run_attention_case(tc, rng);
    }
  }
}

TEST_CASE("cluster decode attention with the qkv bias, RoPE and KV write fused") {
  // The fused launch against the two it replaces (launch_rope_kv_write, then the cluster kernel
  // reading the rotated q and the written cache), on decode rows whose contexts cover an empty
  // cache (the new key alone), partial tiles and more tiles than the cluster's 32 warps; for each
  // of kClusterVariants.
  std::mt19937 rng(21);
  struct Shape {
    int heads, kv_heads, head_dim;
    bool rope, bias;
  };
  for (const ClusterVariant variant : kClusterVariants) {
    CAPTURE(variant.scalar);
    CAPTURE(variant.splits);
    const ScopedKernelSwitches kernel([&](KernelSwitches& s) { variant.apply(s); });
    for (Shape sh : {Shape{32, 8, 64, true, false}, Shape{12, 12, 64, false, true},
                     Shape{32, 8, 128, true, true}, Shape{9, 3, 64, true, false},
                     Shape{16, 1, 128, true, false}}) {
      CAPTURE(sh.heads);
      CAPTURE(sh.kv_heads);
      CAPTURE(sh.head_dim);
      const std::vector<int> contexts = {1, 517, 33, 1300};
      const int num_seqs = int(contexts.size()), block_size = 16, D = sh.head_dim;
      const int q_dim = sh.heads * D, kv_dim = sh.kv_heads * D, qkv_dim = q_dim + 2 * kv_dim;
      int max_blocks = 0, total_blocks = 0;
      for (int c : contexts) {
        max_blocks = std::max(max_blocks, (c + block_size - 1) / block_size);
        total_blocks += (c + block_size - 1) / block_size;
      }
      std::vector<int32_t> ids(total_blocks + 2);
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      std::vector<int32_t> tables(size_t(num_seqs) * max_blocks, -1), query_start = {0}, token_seq,
                                                                      positions, slots;
      int next = 0;
      for (int s = 0; s < num_seqs; ++s) {
        for (int b = 0; b < (contexts[s] + block_size - 1) / block_size; ++b)
          tables[size_t(s) * max_blocks + b] = ids[next++];
        query_start.push_back(s + 1);
        token_seq.push_back(s);
        const int pos = contexts[s] - 1;  // the new key's position
        positions.push_back(pos);
        slots.push_back(tables[size_t(s) * max_blocks + pos / block_size] * block_size +
                        pos % block_size);
      }
      const size_t cache_elems = size_t(ids.size()) * block_size * kv_dim;
      const Bf16Data qkv = random_bf16(size_t(num_seqs) * qkv_dim, rng, -2.0f, 2.0f);
      const Bf16Data bias = random_bf16(qkv_dim, rng);
      const Bf16Data k = random_bf16(cache_elems, rng, -2.0f, 2.0f);
      const Bf16Data v = random_bf16(cache_elems, rng);
      std::vector<float> inv_freq(D / 2);
      rope_inv_freq(D, 500000.0f, RopeScaling{}, inv_freq.data());

      DeviceArray<uint16_t> d_qkv_ref(qkv.bits), d_qkv(qkv.bits), d_bias(bias.bits);
      DeviceArray<uint16_t> d_k_ref(k.bits), d_v_ref(v.bits), d_k(k.bits), d_v(v.bits);
      DeviceArray<uint16_t> d_out_ref(size_t(num_seqs) * q_dim), d_out(size_t(num_seqs) * q_dim);
      DeviceArray<int32_t> d_tables(tables), d_stride(std::vector<int32_t>{max_blocks}),
          d_qs(query_start), d_ctx(contexts), d_seq(token_seq), d_pos(positions), d_slots(slots);
      DeviceArray<float> d_freq(inv_freq);
      RopeKvArgs rope;
      rope.qkv_bias = sh.bias ? d_bias.get() : nullptr;
      rope.positions = d_pos.get();
      rope.slot_mapping = d_slots.get();
      rope.inv_freq = sh.rope ? d_freq.get() : nullptr;
      rope.num_tokens = num_seqs;
      rope.num_heads = sh.heads;
      rope.num_kv_heads = sh.kv_heads;
      rope.head_dim = D;
      AttentionArgs args;
      args.q_stride = qkv_dim;
      args.block_tables = d_tables.get();
      args.block_table_stride = d_stride.get();
      args.query_start = d_qs.get();
      args.context_lens = d_ctx.get();
      args.token_seq = d_seq.get();
      args.num_tokens = num_seqs;
      args.num_heads = sh.heads;
      args.num_kv_heads = sh.kv_heads;
      args.head_dim = D;
      args.block_size = block_size;
      args.scale = 1.0f / std::sqrt(float(D));
      args.cluster_decode = true;

      RopeKvArgs unfused = rope;  // the reference: two launches
      unfused.qkv = d_qkv_ref.get();
      unfused.k_cache = d_k_ref.get();
      unfused.v_cache = d_v_ref.get();
      launch_rope_kv_write(unfused, nullptr);
      AttentionArgs reference = args;
      reference.q = d_qkv_ref.get();
      reference.k_cache = d_k_ref.get();
      reference.v_cache = d_v_ref.get();
      reference.out = d_out_ref.get();
      launch_paged_attention(reference, nullptr);

      AttentionArgs fused = args;  // one launch on the raw qkv rows
      fused.q = d_qkv.get();
      fused.k_cache = d_k.get();
      fused.v_cache = d_v.get();
      fused.out = d_out.get();
      fused.fuse_rope = true;
      fused.rope = rope;
      fused.rope.qkv = d_qkv.get();
      fused.rope.k_cache = d_k.get();
      fused.rope.v_cache = d_v.get();
      launch_paged_attention(fused, nullptr);

      const std::vector<float> want = to_f32(d_out_ref.download());
      check_close(to_f32(d_out.download()), want, kAtol, kRtol, "fused attention output");
      check_close(to_f32(d_k.download()), to_f32(d_k_ref.download()), kAtol, kRtol, "k cache");
      check_close(to_f32(d_v.download()), to_f32(d_v_ref.download()), 0.0f, 0.0f, "v cache");
      // The qkv rows are left as they were (the fused path rotates in registers only).
      CHECK(d_qkv.download() == qkv.bits);

      // The angles read from the backend's table instead: the same bits as computed in place.
      if (sh.rope) {
        const int table_positions = *std::max_element(contexts.begin(), contexts.end());
        DeviceArray<float> d_table(size_t(table_positions) * D);
        launch_fill_rope_angles(d_freq.get(), D, table_positions, d_table.get(), nullptr);
        DeviceArray<uint16_t> d_k2(k.bits), d_v2(v.bits), d_out2(size_t(num_seqs) * q_dim);
        AttentionArgs tabled = fused;
        tabled.k_cache = d_k2.get();
        tabled.v_cache = d_v2.get();
        tabled.out = d_out2.get();
        tabled.rope.k_cache = d_k2.get();
        tabled.rope.v_cache = d_v2.get();
        tabled.rope.angle_table = d_table.get();
        tabled.rope.angle_table_positions = table_positions;
        launch_paged_attention(tabled, nullptr);
        CHECK(d_out2.download() == d_out.download());
        CHECK(d_k2.download() == d_k.download());
        CHECK(d_v2.download() == d_v.download());
      }
    }
  }
}

TEST_CASE("RoPE angle table: cos and sin of every position against libm") {
  // Llama 3's scaled frequencies at head dim 128 and a plain theta at 64, positions to 8,192:
  // sincosf's fp32 results against double-precision cos / sin of the same fp32 angle.
  struct Case {
    int head_dim;
    float theta;
    RopeScaling scaling;
  };
  RopeScaling llama3;
  llama3.type = "llama3";
  llama3.factor = 32.0f;
  for (const Case& cs : {Case{64, 100000.0f, RopeScaling{}}, Case{128, 500000.0f, llama3}}) {
    CAPTURE(cs.head_dim);
    const int positions = 8192, half = cs.head_dim / 2;
    std::vector<float> inv_freq(half);
    rope_inv_freq(cs.head_dim, cs.theta, cs.scaling, inv_freq.data());
    DeviceArray<float> d_freq(inv_freq), d_table(size_t(positions) * cs.head_dim);
    launch_fill_rope_angles(d_freq.get(), cs.head_dim, positions, d_table.get(), nullptr);
    const std::vector<float> table = d_table.download();
    double worst = 0.0;
    for (int p = 0; p < positions; ++p) {
      for (int i = 0; i < half; ++i) {
        const double angle = double(float(p) * inv_freq[i]);  // the fp32 angle the kernels take
        const size_t at = (size_t(p) * half + i) * 2;
        worst = std::max({worst, std::abs(table[at] - std::cos(angle)),
                          std::abs(table[at + 1] - std::sin(angle))});
      }
    }
    CHECK(worst < 1e-6);  // sincosf: within 2 ulp of the rounded result
  }
}

TEST_CASE("activations: GELU-tanh with bias, SiLU-and-mul") {
  std::mt19937 rng(8);
  const int rows = 13, width = 3072;
  const Bf16Data x = random_bf16(size_t(rows) * width, rng, -4.0f, 4.0f);
  const Bf16Data bias = random_bf16(width, rng);
  std::vector<float> expected = x.f32;
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < width; ++i) expected[size_t(r) * width + i] += bias.f32[i];
  }
  cpu::gelu_tanh(expected.data(), int64_t(expected.size()));
  DeviceArray<uint16_t> d_x(x.bits), d_bias(bias.bits);
  launch_gelu_tanh_bias(d_x.get(), d_bias.get(), rows, width, DType::kBF16, nullptr);
  check_close(to_f32(d_x.download()), expected, kAtol, kRtol, "gelu");

  const int inner = 1000;
  const Bf16Data gate_up = random_bf16(size_t(rows) * 2 * inner, rng, -4.0f, 4.0f);
  std::vector<float> ref(size_t(rows) * inner);
  cpu::silu_and_mul(gate_up.f32.data(), rows, inner, ref.data());
  DeviceArray<uint16_t> d_gu(gate_up.bits), d_out(ref.size());
  launch_silu_and_mul(d_out.get(), d_gu.get(), rows, inner, DType::kBF16, nullptr);
  check_close(to_f32(d_out.download()), ref, kAtol, kRtol, "silu_and_mul");
}

TEST_CASE("sampling: greedy ties, temperature, top-k, top-p as the CPU rule picks") {
  std::mt19937 rng(9);
  for (int vocab : {50, 50257, 128256}) {
    CAPTURE(vocab);
    std::vector<SamplingParams> params = {
        {0.0f, 0, 1.0f, 1},  {1.0f, 0, 1.0f, 2}, {0.7f, 40, 1.0f, 3}, {1.3f, 0, 0.9f, 4},
        {0.8f, 50, 0.8f, 5}, {1.0f, 1, 1.0f, 6}, {2.0f, 0, 0.5f, 7},  {0.0f, 0, 1.0f, 8},
    };
    // Many draws per parameter set: each row uses another sample index.
    const int repeats = 6;
    const int rows = int(params.size()) * repeats;
    std::vector<float> logits(size_t(rows) * vocab);
    std::normal_distribution<float> dist(0.0f, 3.0f);
    for (float& x : logits) x = dist(rng);
    // Row 0 and 7*repeats: a tie for the maximum; the lowest id must win.
    logits[size_t(0) * vocab + vocab / 2] = 100.0f;
    logits[size_t(0) * vocab + vocab / 3] = 100.0f;
    std::vector<SampleRowParams> host(rows);
    std::vector<int32_t> expected(rows);
    std::vector<float> scratch(2 * size_t(vocab));
    for (int r = 0; r < rows; ++r) {
      const SamplingParams& sp = params[r / repeats];
      const uint64_t index = uint64_t(r * 7 + 1);
      const bool do_sample = r % 11 != 10;
      host[r] =
          SampleRowParams{sp.temperature, sp.top_k, sp.top_p, do_sample ? 1 : 0, sp.seed, index};
      expected[r] = do_sample ? cpu::sample_token(&logits[size_t(r) * vocab], vocab, sp, index,
                                                  scratch.data())
                              : -1;
    }
    CHECK(expected[0] == vocab / 3);
    DeviceArray<float> d_logits(logits);
    DeviceArray<int32_t> d_out(rows);
    DeviceArray<SampleRowParams> d_params(host);
    DeviceArray<uint8_t> d_scratch(std::vector<uint8_t>(size_t(sample_scratch_bytes(rows)), 0));
    launch_sample(d_out.get(), d_logits.get(), d_params.get(), rows, vocab, d_scratch.get(),
                  nullptr);
    const std::vector<int32_t> got = d_out.download();
    for (int r = 0; r < rows; ++r) {
      CAPTURE(r);
      CHECK(got[r] == expected[r]);
    }
    // An overlapped step's targets: the second half of a two-step buffer (its offset read from
    // device memory, as the step's metadata holds it) and the device copy for the next step.
    constexpr int32_t kUntouched = -7;
    DeviceArray<int32_t> d_halves(std::vector<int32_t>(2 * size_t(rows), kUntouched));
    DeviceArray<int32_t> d_offset(std::vector<int32_t>{int32_t(rows)}), d_device(rows);
    launch_sample(SampleTargets{d_halves.get(), d_offset.get(), d_device.get()}, d_logits.get(),
                  d_params.get(), rows, vocab, d_scratch.get(), nullptr);
    const std::vector<int32_t> halves = d_halves.download();
    CHECK(std::vector<int32_t>(halves.begin(), halves.begin() + rows) ==
          std::vector<int32_t>(size_t(rows), kUntouched));
    CHECK(std::vector<int32_t>(halves.begin() + rows, halves.end()) == expected);
    CHECK(d_device.download() == expected);
  }
}

TEST_CASE("sampling: a row split over many blocks picks as one block does, launch after launch") {
  // Few rows spread each row's maximum over up to kSampleMaxSplits blocks: ties between slices
  // (the lowest id wins), a maximum in the last slice, a non-finite value in one slice only, and
  // temperature rows, whose rule runs in the last block to arrive. Launched four times on the same
  // scratch, with a row count that changes, so a counter left behind would show.
  std::mt19937 rng(31);
  const int vocab = 128256;
  DeviceArray<uint8_t> d_scratch(std::vector<uint8_t>(size_t(sample_scratch_bytes(9)), 0));
  for (int rows : {1, 3, 1, 9}) {
    CAPTURE(rows);
    REQUIRE(sample_splits(rows, vocab) > 1);
    std::vector<float> logits(size_t(rows) * vocab);
    std::normal_distribution<float> dist(0.0f, 3.0f);
    for (float& x : logits) x = dist(rng);
    std::vector<SampleRowParams> host(rows);
    std::vector<int32_t> expected(rows);
    std::vector<float> scratch(2 * size_t(vocab));
    for (int r = 0; r < rows; ++r) {
      float* row = &logits[size_t(r) * vocab];
      switch (r % 5) {
        case 0:  // a tie between the first and the last slice, and one in the middle
          row[vocab - 3] = 50.0f;
          row[vocab / 2] = 50.0f;
          row[17] = 50.0f;
          break;
        case 1:  // the maximum in the last slice alone
          row[vocab - 1] = 60.0f;
          break;
        case 2:  // a NaN in one slice
          row[vocab / 3] = std::numeric_limits<float>::quiet_NaN();
          break;
        case 3:  // an infinity in the last slice
          row[vocab - 2] = std::numeric_limits<float>::infinity();
          break;
        default:
          break;
      }
      const SamplingParams sp =
          r % 2 == 0 ? SamplingParams{0.0f, 0, 1.0f, 1} : SamplingParams{0.9f, 0, 0.95f, 7};
      const uint64_t index = uint64_t(r + 3);
      host[r] = SampleRowParams{sp.temperature, sp.top_k, sp.top_p, 1, sp.seed, index};
      // The CPU backend's flag for a row with a NaN or an infinity (cpu_backend.cpp).
      const bool finite = std::all_of(row, row + vocab, [](float v) { return std::isfinite(v); });
      expected[r] =
          finite ? cpu::sample_token(row, vocab, sp, index, scratch.data()) : kSampledNonFinite;
    }
    CHECK(expected[0] == 17);
    DeviceArray<float> d_logits(logits);
    DeviceArray<int32_t> d_out(rows);
    DeviceArray<SampleRowParams> d_params(host);
    launch_sample(d_out.get(), d_logits.get(), d_params.get(), rows, vocab, d_scratch.get(),
                  nullptr);
    const std::vector<int32_t> got = d_out.download();
    for (int r = 0; r < rows; ++r) {
      CAPTURE(r);
      CHECK(got[r] == expected[r]);
    }
  }
}

TEST_CASE("gemv: small-batch x W^T against cpu::linear, bf16 and fp32 outputs") {
  std::mt19937 rng(10);
  struct Shape {
    int n, in, out;
  };
  for (Shape sh :
       {Shape{1, 2048, 3072}, Shape{4, 768, 2304}, Shape{3, 200, 50}, Shape{2, 8192, 130}}) {
    CAPTURE(sh.n);
    CAPTURE(sh.in);
    REQUIRE(gemv_supported(sh.n, sh.in));
    const Bf16Data x = random_bf16(size_t(sh.n) * sh.in, rng);
    const Bf16Data w = random_bf16(size_t(sh.out) * sh.in, rng, -0.1f, 0.1f);
    std::vector<float> expected(size_t(sh.n) * sh.out);
    cpu::linear(x.f32.data(), w.f32.data(), nullptr, sh.n, sh.in, sh.out, expected.data());
    DeviceArray<uint16_t> d_x(x.bits), d_w(w.bits), d_y(expected.size());
    DeviceArray<float> d_y32(expected.size());
    launch_gemv(d_x.get(), d_w.get(), d_y.get(), sh.n, sh.in, sh.out, false, DType::kBF16, nullptr);
    check_close(to_f32(d_y.download()), expected, kAtol, kRtol, "gemv bf16");
    launch_gemv(d_x.get(), d_w.get(), d_y32.get(), sh.n, sh.in, sh.out, true, DType::kBF16,
                nullptr);
    check_close(d_y32.download(), expected, 1e-4f, 1e-4f, "gemv fp32");
  }
  CHECK_FALSE(gemv_supported(5, 64));
  CHECK_FALSE(gemv_supported(1, 12));
}

TEST_CASE("gemv: dot products split over 1, 2 and 4 warps, ragged K and partly idle blocks") {
  // gemv_split picks the warps per feature; these shapes cover every split, `in` not a multiple
  // of the split's chunk stride (warps with no chunk at all), and `out` below one block's share.
  std::mt19937 rng(12);
  struct Shape {
    int n, in, out, split;
  };
  for (Shape sh :
       {Shape{4, 504, 7, 1}, Shape{2, 1024, 8200, 1}, Shape{1, 1000, 3, 2}, Shape{1, 768, 768, 2},
        Shape{4, 1288, 5, 4}, Shape{2, 2056, 6, 4}, Shape{3, 8192, 2048, 4}}) {
    CAPTURE(sh.n);
    CAPTURE(sh.in);
    CAPTURE(sh.out);
    REQUIRE(gemv_split(sh.in, sh.out) == sh.split);
    const Bf16Data x = random_bf16(size_t(sh.n) * sh.in, rng);
    const Bf16Data w = random_bf16(size_t(sh.out) * sh.in, rng, -0.1f, 0.1f);
    std::vector<float> expected(size_t(sh.n) * sh.out);
    cpu::linear(x.f32.data(), w.f32.data(), nullptr, sh.n, sh.in, sh.out, expected.data());
    DeviceArray<float> d_y32(expected.size());
    DeviceArray<uint16_t> d_x(x.bits), d_w(w.bits);
    launch_gemv(d_x.get(), d_w.get(), d_y32.get(), sh.n, sh.in, sh.out, true, DType::kBF16,
                nullptr);
    check_close(d_y32.download(), expected, 1e-4f, 1e-4f, "gemv split fp32");
  }
}

TEST_CASE("gemv: row r of an n-row product has the bits of the 1-row product of row r") {
  // Batches of 1, 2 and 3-4 rows run kernels compiled for 1, 2 and 4 rows (fewer registers at
  // batch 1); each row's sum must not depend on which one ran or on the other rows. Every split,
  // fp32 and bf16 outputs, and the fused gelu and silu epilogues.
  std::mt19937 rng(14);
  struct Shape {
    int in, out;
  };
  for (Shape sh : {Shape{2048, 3072}, Shape{8192, 2048}, Shape{768, 768}, Shape{1288, 37}}) {
    CAPTURE(sh.in);
    CAPTURE(sh.out);
    const int n = 4;
    const Bf16Data x = random_bf16(size_t(n) * sh.in, rng);
    const Bf16Data w = random_bf16(size_t(2) * sh.out * sh.in, rng, -0.1f, 0.1f);  // gate | up
    const Bf16Data b = random_bf16(size_t(sh.out), rng);
    DeviceArray<uint16_t> d_x(x.bits), d_w(w.bits), d_b(b.bits);
    // kind 0: fp32 out, 1: bf16 out, 2: gelu(x W^T + b), 3: silu(x G^T) * (x U^T).
    const auto product = [&](int kind, int rows, int first_row) {
      const void* xr = d_x.get() + size_t(first_row) * sh.in;
      DeviceArray<float> y32(size_t(rows) * sh.out);
      DeviceArray<uint16_t> y16(size_t(rows) * sh.out);
      if (kind == 0) {
        launch_gemv(xr, d_w.get(), y32.get(), rows, sh.in, sh.out, true, DType::kBF16, nullptr);
        const std::vector<float> v = y32.download();
        std::vector<uint32_t> bits(v.size());
        std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
        return bits;
      }
      if (kind == 1) {
        launch_gemv(xr, d_w.get(), y16.get(), rows, sh.in, sh.out, false, DType::kBF16, nullptr);
      } else {
        launch_gemv_act(xr, d_w.get(), d_b.get(), y16.get(), rows, sh.in, sh.out,
                        kind == 2 ? GemvActivation::kGeluTanhBias : GemvActivation::kSiluMul,
                        DType::kBF16, nullptr);
      }
      const std::vector<uint16_t> v = y16.download();
      return std::vector<uint32_t>(v.begin(), v.end());
    };
    for (int kind = 0; kind < 4; ++kind) {
      CAPTURE(kind);
      std::vector<uint32_t> single;
      for (int r = 0; r < n; ++r) {
        const std::vector<uint32_t> one = product(kind, 1, r);
        single.insert(single.end(), one.begin(), one.end());
      }
      for (int rows = 2; rows <= n; ++rows) {
        CAPTURE(rows);
        const std::vector<uint32_t> many = product(kind, rows, 0);
        CHECK(std::equal(many.begin(), many.end(), single.begin()));
      }
    }
  }
}

TEST_CASE("gemv_mma: tensor-core x W^T against cpu::linear, bf16 and fp16, every tile count") {
  // 1-32 rows run 1-4 column tiles of 8 (ragged: 3, 9, 17, 25), 1, 2 and 4 row tiles a block (16
  // features each) and the rule's choice; `in` of 1-448 warp steps (ragged over the block's 8
  // warps), `out` ragged against the block's features. Outputs in fp32 and in the input dtype.
  std::mt19937 rng(43);
  struct Shape {
    int n, in, out;
  };
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    for (Shape sh :
         {Shape{3, 2048, 3072}, Shape{8, 32, 50}, Shape{9, 768, 2304}, Shape{16, 14336, 200},
          Shape{17, 2048, 8200}, Shape{25, 1056, 8192}, Shape{32, 4096, 1030}, Shape{1, 96, 17}}) {
      CAPTURE(dtype == DType::kBF16);
      CAPTURE(sh.n);
      CAPTURE(sh.in);
      CAPTURE(sh.out);
      REQUIRE(gemv_mma_supported(sh.n, sh.in));
      const Operand x = random_operand(size_t(sh.n) * sh.in, 1.0f, dtype, rng);
      const Operand w = random_operand(size_t(sh.out) * sh.in, 0.05f, dtype, rng);
      std::vector<float> expected(size_t(sh.n) * sh.out);
      cpu::linear(x.f32.data(), w.f32.data(), nullptr, sh.n, sh.in, sh.out, expected.data());
      DeviceArray<uint16_t> d_x(x.bits), d_w(w.bits);
      for (int tiles : {0, 1, 2, 4}) {  // the rule, then each row-tile count
        for (bool f32_out : {true, false}) {
          CAPTURE(tiles);
          CAPTURE(f32_out);
          const ScopedKernelSwitches row_tiles(
              [&](KernelSwitches& s) { s.gemv_mma_row_tiles = tiles; });
          DeviceArray<uint8_t> d_y(expected.size() * (f32_out ? 4 : 2));
          launch_gemv_mma(d_x.get(), d_w.get(), d_y.get(), sh.n, sh.in, sh.out, f32_out, dtype,
                          nullptr);
          const std::vector<uint8_t> y = d_y.download();
          std::vector<float> got(expected.size());
          for (size_t i = 0; i < got.size(); ++i) got[i] = output_value(y, i, f32_out, dtype);
          // fp32 accumulation in another order than cpu::linear's: sums of up to 14,336 products.
          check_close(got, expected, f32_out ? 2e-3f : kAtol, f32_out ? 1e-4f : kRtol, "gemv_mma");
        }
      }
    }
  }
  CHECK_FALSE(gemv_mma_supported(33, 64));
  CHECK_FALSE(gemv_mma_supported(4, 48));
  CHECK_FALSE(gemv_mma_supported(0, 64));
}

TEST_CASE("gemv_mma: row r of an n-row product has the bits of the 1-row product of row r") {
  // The header's promise: each output's sum is fixed by `in` alone, whatever the column tiles.
  std::mt19937 rng(44);
  const int n = 32;
  for (int out : {3072, 8200, 200}) {
    for (int tiles : {0, 4}) {
      CAPTURE(out);
      CAPTURE(tiles);
      const ScopedKernelSwitches row_tiles(
          [&](KernelSwitches& s) { s.gemv_mma_row_tiles = tiles; });
      const int in = 2080;  // 65 warp steps: the block's warps take 8 or 9
      const Operand x = random_operand(size_t(n) * in, 1.0f, DType::kBF16, rng);
      const Operand w = random_operand(size_t(out) * in, 0.05f, DType::kBF16, rng);
      DeviceArray<uint16_t> d_x(x.bits), d_w(w.bits);
      DeviceArray<float> many(size_t(n) * out), one(static_cast<size_t>(out));
      launch_gemv_mma(d_x.get(), d_w.get(), many.get(), n, in, out, true, DType::kBF16, nullptr);
      const std::vector<float> all = many.download();
      for (int r : {0, 7, 8, 19, 31}) {
        CAPTURE(r);
        launch_gemv_mma(d_x.get() + size_t(r) * in, d_w.get(), one.get(), 1, in, out, true,
                        DType::kBF16, nullptr);
        const std::vector<float> single = one.download();
        CHECK(std::memcmp(single.data(), all.data() + size_t(r) * out, single.size() * 4) == 0);
      }
    }
  }
}

TEST_CASE("gemv: the one-wave kernel (weights loaded before the wait) gives gemv_kernel's bits") {
  // gemv.cu runs a product whose rows its first chunks cover whole on gemv_wave_kernel, the rest on
  // gemv_kernel; each feature's sum is the same sequence of operations on both. Shapes: SmolLM2's
  // qkv, o, down (rows covered whole), gpt2's qkv, llama-1b's qkv and a ragged one (partly
  // preloaded), a grid of more groups than are resident (8200 features: blocks take several), and
  // every epilogue: fp32 and bf16 stores, the residual add, gelu with bias, silu(gate) * up.
  std::mt19937 rng(41);
  struct Shape {
    int in, out;
  };
  for (Shape sh : {Shape{576, 960}, Shape{576, 576}, Shape{1536, 576}, Shape{768, 2304},
                   Shape{2048, 3072}, Shape{1288, 37}, Shape{512, 8200}}) {
    for (int n = 1; n <= kGemvMaxRows; ++n) {
      CAPTURE(sh.in);
      CAPTURE(sh.out);
      CAPTURE(n);
      const Bf16Data x = random_bf16(size_t(n) * sh.in, rng);
      const Bf16Data w = random_bf16(size_t(2) * sh.out * sh.in, rng, -0.1f, 0.1f);  // gate | up
      const Bf16Data b = random_bf16(size_t(sh.out), rng);
      std::vector<float> residual(size_t(n) * sh.out);
      for (size_t i = 0; i < residual.size(); ++i) residual[i] = float(i % 13) - 6.0f;
      DeviceArray<uint16_t> d_x(x.bits), d_w(w.bits), d_b(b.bits);
      // kind 0: fp32 out, 1: bf16 out, 2: residual add, 3: gelu(x W^T + b), 4: silu * up.
      const auto product = [&](int kind, int wave) {
        const ScopedKernelSwitches kernel([&](KernelSwitches& s) { s.gemv_wave = wave; });
        DeviceArray<float> y32(residual);
        DeviceArray<uint16_t> y16(size_t(n) * sh.out);
        if (kind <= 2) {
          GemvFusion add;
          add.residual_add = kind == 2;
          void* y = kind == 1 ? static_cast<void*>(y16.get()) : static_cast<void*>(y32.get());
          launch_gemv(d_x.get(), d_w.get(), y, n, sh.in, sh.out, kind == 0, DType::kBF16, nullptr,
                      add);
        } else {
          launch_gemv_act(d_x.get(), d_w.get(), d_b.get(), y16.get(), n, sh.in, sh.out,
                          kind == 3 ? GemvActivation::kGeluTanhBias : GemvActivation::kSiluMul,
                          DType::kBF16, nullptr);
        }
        if (kind == 1 || kind >= 3) {
          const std::vector<uint16_t> v = y16.download();
          return std::vector<uint32_t>(v.begin(), v.end());
        }
        const std::vector<float> v = y32.download();
        std::vector<uint32_t> bits(v.size());
        std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
        return bits;
      };
      for (int kind = 0; kind < 5; ++kind) {
        CAPTURE(kind);
        const std::vector<uint32_t> plain = product(kind, 0), wave = product(kind, 1);
        CHECK(plain == wave);
        CHECK(std::any_of(plain.begin(), plain.end(), [](uint32_t v) { return v != 0; }));
      }
    }
  }
}

TEST_CASE("gemv with fused activation: gelu(x W^T + b) and silu(x G^T) * (x U^T) vs cpu ops") {
  std::mt19937 rng(11);
  for (int n : {1, 3, 4}) {
    CAPTURE(n);
    const int in = 768, out = 520;
    const Bf16Data x = random_bf16(size_t(n) * in, rng);
    // GPT-2: one weight matrix and a bias.
    const Bf16Data w = random_bf16(size_t(out) * in, rng, -0.1f, 0.1f);
    const Bf16Data b = random_bf16(size_t(out), rng);
    std::vector<float> expected(size_t(n) * out);
    cpu::linear(x.f32.data(), w.f32.data(), b.f32.data(), n, in, out, expected.data());
    cpu::gelu_tanh(expected.data(), int64_t(expected.size()));
    DeviceArray<uint16_t> d_x(x.bits), d_w(w.bits), d_b(b.bits), d_y(expected.size());
    launch_gemv_act(d_x.get(), d_w.get(), d_b.get(), d_y.get(), n, in, out,
                    GemvActivation::kGeluTanhBias, DType::kBF16, nullptr);
    check_close(to_f32(d_y.download()), expected, kAtol, kRtol, "gemv gelu");
    // Llama: rows gate | up.
    const Bf16Data gu = random_bf16(size_t(2 * out) * in, rng, -0.1f, 0.1f);
    std::vector<float> gate_up(size_t(n) * 2 * out), expected_act(size_t(n) * out);
    cpu::linear(x.f32.data(), gu.f32.data(), nullptr, n, in, 2 * out, gate_up.data());
    cpu::silu_and_mul(gate_up.data(), n, out, expected_act.data());
    DeviceArray<uint16_t> d_gu(gu.bits), d_act(expected_act.size());
    launch_gemv_act(d_x.get(), d_gu.get(), nullptr, d_act.get(), n, in, out,
                    GemvActivation::kSiluMul, DType::kBF16, nullptr);
    check_close(to_f32(d_act.download()), expected_act, kAtol, kRtol, "gemv silu");
  }
}

TEST_CASE("gemv with the residual add fused out: the add-norm kernel's residual bits") {
  // With fused norms (gemv_fusion.cuh) a decode layer's o and down GEMVs add their outputs to the
  // fp32 residual stream. That must give exactly what launch_gemv storing the output and then
  // launch_add_norm adding it give. Hidden sizes of SmolLM2 (576), llama-1b (2048) and llama-8b
  // (4096); 1 to 4 rows.
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  for (int hidden : {576, 2048, 4096}) {
    for (int n = 1; n <= kGemvMaxRows; ++n) {
      CAPTURE(hidden);
      CAPTURE(n);
      const int in = 1024;  // the o / down input
      std::vector<float> residual(size_t(n) * hidden);
      for (float& x : residual) x = dist(rng) + 0.5f;
      const Bf16Data norm_w = random_bf16(hidden, rng, 0.5f, 1.5f);
      const Bf16Data x = random_bf16(size_t(n) * in, rng);
      const Bf16Data w = random_bf16(size_t(hidden) * in, rng, -0.1f, 0.1f);
      DeviceArray<uint16_t> d_x(x.bits), d_w(w.bits), d_norm_w(norm_w.bits),
          d_delta(size_t(n) * hidden), d_normed(size_t(n) * hidden);
      DeviceArray<float> residual_ref(residual), residual_fused(residual);
      launch_gemv(d_x.get(), d_w.get(), d_delta.get(), n, in, hidden, false, DType::kBF16, nullptr);
      AddNormArgs norm;
      norm.residual = residual_ref.get();
      norm.delta = d_delta.get();
      norm.weight = d_norm_w.get();
      norm.out = d_normed.get();
      norm.num_rows = n;
      norm.hidden = hidden;
      norm.kind = NormKind::kRmsNorm;
      launch_add_norm(norm, nullptr);
      GemvFusion add;
      add.residual_add = true;
      launch_gemv(d_x.get(), d_w.get(), residual_fused.get(), n, in, hidden, false, DType::kBF16,
                  nullptr, add);
      const std::vector<float> want = residual_ref.download(), got = residual_fused.download();
      CHECK(std::memcmp(want.data(), got.data(), want.size() * 4) == 0);
      CHECK(want != residual);  // the add changed it
    }
  }
  // The residual add follows the plain bf16 product only.
  DeviceArray<uint16_t> x(8 * 64), w(8 * 64);
  DeviceArray<float> y(64);
  GemvFusion add;
  add.residual_add = true;
  CHECK_THROWS(launch_gemv(x.get(), w.get(), y.get(), 1, 64, 8, true, DType::kBF16, nullptr, add));
}

TEST_CASE("gemv with the norm fused in: the add-norm kernel's normalized rows, bit for bit") {
  // Where gemv_norm_input_supported, the dense GEMV normalizes the fp32 residual rows itself (the
  // one-wave kernel, once per block). Its output must be exactly launch_add_norm's normalized rows
  // through the plain GEMV, for the plain product (qkv) and gate|up with SiLU: SmolLM2's (in 576),
  // tiny's (in 256) and llama-1b's qkv (in 2048, out 3072: the largest that takes it), 1 to 4
  // rows.
  std::mt19937 rng(37);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  struct Shape {
    int in, out;
    bool gated;
  };
  for (const Shape& shape : {Shape{576, 960, false}, Shape{576, 1536, true}, Shape{256, 384, false},
                             Shape{256, 688, true}, Shape{2048, 3072, false}}) {
    for (int n = 1; n <= kGemvMaxRows; ++n) {
      CAPTURE(shape.in);
      CAPTURE(shape.out);
      CAPTURE(n);
      REQUIRE(gemv_norm_input_supported(n, shape.in, shape.out));
      std::vector<float> residual(size_t(n) * shape.in);
      for (float& v : residual) v = dist(rng) + 0.25f;
      const Bf16Data norm_w = random_bf16(shape.in, rng, 0.5f, 1.5f);
      const int weight_rows = shape.gated ? 2 * shape.out : shape.out;
      const Bf16Data w = random_bf16(size_t(weight_rows) * shape.in, rng, -0.1f, 0.1f);
      DeviceArray<uint16_t> d_w(w.bits), d_norm_w(norm_w.bits), d_normed(residual.size()),
          d_zero(residual.size()), y_ref(size_t(n) * shape.out), y_fused(size_t(n) * shape.out);
      DeviceArray<float> d_residual(residual);
      ROSE_CUDA_CHECK(cudaMemset(d_zero.get(), 0, residual.size() * 2));
      AddNormArgs norm;  // residual + 0: the residual as it is, normalized into d_normed
      norm.residual = d_residual.get();
      norm.delta = d_zero.get();
      norm.weight = d_norm_w.get();
      norm.out = d_normed.get();
      norm.num_rows = n;
      norm.hidden = shape.in;
      norm.kind = NormKind::kRmsNorm;
      launch_add_norm(norm, nullptr);
      GemvFusion norm_in;
      norm_in.norm_residual = d_residual.get();
      norm_in.norm_weight = d_norm_w.get();
      norm_in.norm_eps = norm.eps;
      if (shape.gated) {
        launch_gemv_act(d_normed.get(), d_w.get(), nullptr, y_ref.get(), n, shape.in, shape.out,
                        GemvActivation::kSiluMul, DType::kBF16, nullptr);
        launch_gemv_act(nullptr, d_w.get(), nullptr, y_fused.get(), n, shape.in, shape.out,
                        GemvActivation::kSiluMul, DType::kBF16, nullptr, norm_in);
      } else {
        launch_gemv(d_normed.get(), d_w.get(), y_ref.get(), n, shape.in, shape.out, false,
                    DType::kBF16, nullptr);
        launch_gemv(nullptr, d_w.get(), y_fused.get(), n, shape.in, shape.out, false, DType::kBF16,
                    nullptr, norm_in);
      }
      const std::vector<uint16_t> want = y_ref.download(), got = y_fused.download();
      CHECK(want == got);
      CHECK(std::count(want.begin(), want.end(), uint16_t(0)) < int64_t(want.size()) / 2);
    }
  }
  // Refused: a product off the one-wave kernel (llama-1b's gate|up), fp32 output, the residual
  // add together with a norm input, GELU.
  CHECK(!gemv_norm_input_supported(1, 2048, 8192));
  DeviceArray<uint16_t> w(8 * 64);
  DeviceArray<float> y(64);
  GemvFusion norm_in;
  norm_in.norm_residual = y.get();
  norm_in.norm_weight = w.get();
  CHECK_THROWS(
      launch_gemv(nullptr, w.get(), y.get(), 1, 2048, 8192, false, DType::kBF16, nullptr, norm_in));
  CHECK_THROWS(
      launch_gemv(nullptr, w.get(), y.get(), 1, 64, 8, true, DType::kBF16, nullptr, norm_in));
  norm_in.residual_add = true;
  CHECK_THROWS(
      launch_gemv(nullptr, w.get(), y.get(), 1, 64, 8, false, DType::kBF16, nullptr, norm_in));
  norm_in.residual_add = false;
  CHECK_THROWS(launch_gemv_act(nullptr, w.get(), w.get(), y.get(), 1, 64, 8,
                               GemvActivation::kGeluTanhBias, DType::kBF16, nullptr, norm_in));
}
