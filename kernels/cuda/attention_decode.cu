// Paged attention for small decode batches (AttentionArgs::cluster_decode): a batch-1 step's
// attention reads ~1 MB of K/V per layer, so its time is the chain of dependent memory trips and
// barriers, not bytes. The split-KV kernel (attention.cu) pays for its spread over the GPU with
// partials written to global memory, a fence, an atomic count and a merge that reads them back.
// Here each (query row, KV head) is one thread-block cluster of S blocks (kClusterSplits = 8 for
// the scalar kernel; 8 or 16 for the tensor-core one, AttentionArgs::cluster_splits):
//   - tile t of the row's keys goes to warp (t / S) % kWarps of block t % S, so the first tiles
//     spread over the cluster's S SMs;
//   - a warp's first tile of keys written by earlier steps is loaded before the PDL wait (the
//     kernel before this one, RoPE + KV write, writes only this step's keys; every kernel of the
//     step waits on its predecessor before it lets its successor start, so everything older is
//     complete and visible), the keys of this step after it;
//   - the blocks merge their results through distributed shared memory: each block combines its
//     warps, and every output element is merged by one block from every block's value for it
//     (the tensor-core kernel stores them into that block's shared memory, the scalar kernel's
//     merging block reads them from the others').
// Two kernels share that plan: a warp's keys go through the tensor cores (16-key chunks, the
// default) or through shuffle-reduced dot products (tiles of 16 or 32 keys, the first version).
#include <cooperative_groups.h>

#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/l2_hint.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/tile_ptx.cuh"
#include "kernels/cuda/trace_probe.cuh"

namespace rose {
namespace attention_detail {
namespace {

namespace cg = cooperative_groups;

// One lane's raw share of a qkv head for the fused RoPE, as loaded (16 bytes each): its 8 columns
// and, for the rotation, their partners (column j pairs with j + D/2), with the bias's. Loaded
// right after the PDL wait, all at once, so the head's finishing costs one memory trip.
struct QkvSlice {
  uint4 x, x_partner, b, b_partner;
};

template <typename T, int D>
__device__ __forceinline__ QkvSlice load_qkv_slice(const T* row, const T* bias, int head_col,
                                                   int col, bool rotate) {
  constexpr int kHalf = D / 2;
  const int partner = col < kHalf ? col + kHalf : col - kHalf;
  QkvSlice s;
  s.x = *reinterpret_cast<const uint4*>(row + head_col + col);
  s.x_partner = s.b = s.b_partner = make_uint4(0, 0, 0, 0);
  if (rotate) s.x_partner = *reinterpret_cast<const uint4*>(row + head_col + partner);
  if (bias) {
    s.b = *reinterpret_cast<const uint4*>(bias + head_col + col);
    if (rotate) s.b_partner = *reinterpret_cast<const uint4*>(bias + head_col + partner);
  }
  return s;
}

template <typename T>
__device__ __forceinline__ void unpack8(const uint4& word, float (&out)[8]) {
  const T* elems = reinterpret_cast<const T*>(&word);
#pragma unroll
  for (int e = 0; e < 8; ++e) out[e] = to_float(elems[e]);
}

// The slice's 8 columns with the bias added and, when `rotate`, RoPE's rotate-half applied with
// this lane's angles (sines/cosines of column col + e's pair), rounded to T as rope_kv.cu stores
// them: the first half of a head takes a c - b s, the second b c + a s.
template <typename T, int D>
__device__ __forceinline__ void finish_qkv_slice(const QkvSlice& s, bool has_bias, int col,
                                                 bool rotate, const float (&sines)[8],
                                                 const float (&cosines)[8], float (&out)[8]) {
  float b[8];
  unpack8<T>(s.x, out);
  if (has_bias) {
    unpack8<T>(s.b, b);
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] += b[e];
  }
  if (rotate) {
    float other[8];
    unpack8<T>(s.x_partner, other);
    if (has_bias) {
      unpack8<T>(s.b_partner, b);
#pragma unroll
      for (int e = 0; e < 8; ++e) other[e] += b[e];
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      out[e] = col < D / 2 ? out[e] * cosines[e] - other[e] * sines[e]
                           : out[e] * cosines[e] + other[e] * sines[e];
    }
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) out[e] = to_float(from_float<T>(out[e]));
}

// The 8 values as T in one 16-byte word.
template <typename T>
__device__ __forceinline__ uint4 pack8(const float (&v)[8]) {
  uint4 word;
  T* elems = reinterpret_cast<T*>(&word);
#pragma unroll
  for (int e = 0; e < 8; ++e) elems[e] = from_float<T>(v[e]);
  return word;
}

// What a cluster block works on, from its block index and the step's metadata (no kernel of the
// step writes them, so both kernels read them before the PDL wait): query row `token` of sequence
// `seq`, KV head `kv_head`, query heads head_begin .. head_begin + heads (at most
// kAttentionMaxGroup a block), the row's key count and where this step's keys start, and the
// sequence's block-table row.
struct ClusterRow {
  int token, split;  // split: the block's rank in the cluster
  int kv_head, head_begin, heads;
  int num_keys, first_new_key;
  const int32_t* table;
};

__device__ __forceinline__ ClusterRow cluster_row(const AttentionArgs& args) {
  ClusterRow r;
  r.token = blockIdx.x;
  r.split = blockIdx.z;
  const int group = args.num_heads / args.num_kv_heads;
  const int chunks = (group + kAttentionMaxGroup - 1) / kAttentionMaxGroup;
  r.kv_head = blockIdx.y / chunks;
  r.head_begin = r.kv_head * group + (blockIdx.y % chunks) * kAttentionMaxGroup;
  r.heads = min(kAttentionMaxGroup, r.kv_head * group + group - r.head_begin);
  if (args.fuse_rope) {
    // Every row is its sequence's one decode row (AttentionArgs::fuse_rope): row i is sequence i,
    // so the sequence's context and table row need no token_seq load first (one dependent trip
    // fewer before the K/V loads are issued, on the step's critical path when the wait below
    // returns at once).
    const int context = args.context_lens[r.token];
    r.num_keys = context;
    r.first_new_key = context - 1;
    r.table = args.block_tables + int64_t(r.token) * (*args.block_table_stride);
    return r;
  }
  const int seq = args.token_seq[r.token];
  const int seq_end = args.query_start[seq + 1];
  const int context = args.context_lens[seq];
  r.num_keys = context - (seq_end - 1 - r.token);
  r.first_new_key = context - (seq_end - args.query_start[seq]);
  r.table = args.block_tables + int64_t(seq) * (*args.block_table_stride);
  return r;
}

// Fused RoPE: the angles of columns col .. col + 7 at the row's position (position, frequencies
// and table are no kernel's output), as rope_kv.cu computes them: read from the angle table where
// the backend filled one (the same sincosf of the same operands, so the same bits; eight sincosf
// in place cost a block ~2,100 cycles before its PDL wait, results/2026-11-29-attention-inbox).
template <int D>
__device__ __forceinline__ void rope_angles(const AttentionArgs& args, int token, int col,
                                            float (&sines)[8], float (&cosines)[8]) {
  const int position = args.rope.positions[token];
  if (args.rope.angle_table) {
    // A graph's padding rows may carry any position: clamped, their (unused) angles stay in the
    // table. col % (D/2) is a multiple of 8, so the row's 8 (cos, sin) pairs are 64-byte aligned.
    const int p = min(max(position, 0), args.rope.angle_table_positions - 1);
    const float4* pairs = reinterpret_cast<const float4*>(args.rope.angle_table) +
                          (int64_t(p) * (D / 2) + col % (D / 2)) / 2;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float4 two = pairs[k];  // (cos, sin) of columns col + 2k and col + 2k + 1
      cosines[2 * k] = two.x;
      sines[2 * k] = two.y;
      cosines[2 * k + 1] = two.z;
      sines[2 * k + 1] = two.w;
    }
    return;
  }
  const float pos = static_cast<float>(position);
#pragma unroll
  for (int e = 0; e < 8; ++e)
    sincosf(pos * args.rope.inv_freq[(col + e) % (D / 2)], &sines[e], &cosines[e]);
}

// The merged value of N partials (value r with log-sum-exp lse r, log2 domain), weighted as
// merge_column weighs them: a partial without keys (lse -inf, value 0) weighs 0; a NaN passes
// (total != 0), as in combine_warps.
template <int N>
__device__ __forceinline__ float merge_partials(const float (&lse)[N], const float (&value)[N]) {
  float lse_max = -INFINITY;
#pragma unroll
  for (int r = 0; r < N; ++r) lse_max = fmaxf(lse_max, lse[r]);
  float total = 0.0f, out = 0.0f;
#pragma unroll
  for (int r = 0; r < N; ++r) {
    const float w = lse[r] == -INFINITY ? 0.0f : exp2f(lse[r] - lse_max);
    total += w;
    out += w * value[r];
  }
  return total != 0.0f ? out / total : 0.0f;
}

// The end of the scalar cluster kernel: every block holds its keys' normalised values value_s
// (heads, D; row stride D) and their log-sum-exps lse_s (heads,); block `split` merges output
// columns split * kThreads + threadIdx.x, + kClusterSplits * kThreads, ...: the blocks in rank
// order, weighted as merge_column weighs partials, and writes them to args.out.
template <typename T, int D>
__device__ __forceinline__ void merge_cluster_blocks(cg::cluster_group& cluster,
                                                     const AttentionArgs& args, float* value_s,
                                                     float* lse_s, int token, int head_begin,
                                                     int heads, int split) {
  cluster.sync();  // every block's value_s and lse_s written and visible to the cluster
  for (int i = split * kThreads + threadIdx.x; i < heads * D; i += kClusterSplits * kThreads) {
    const int g = i / D;
    float lse[kClusterSplits], value[kClusterSplits];
#pragma unroll
    for (int r = 0; r < kClusterSplits; ++r) {
      lse[r] = *cluster.map_shared_rank(lse_s + g, r);
      value[r] = *cluster.map_shared_rank(value_s + i, r);
    }
    static_cast<T*>(args.out)[(int64_t(token) * args.num_heads + head_begin) * D + i] =
        from_float<T>(merge_partials(lse, value));
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
}

template <typename T, int D, int G>
__global__ void __launch_bounds__(kThreads) cluster_decode_attention_kernel(AttentionArgs args) {
  using Tiles = RowTiles<D, G>;
  constexpr int kSteps = Tiles::kSteps;
  constexpr int kStride = kWarps * kClusterSplits;  // tiles between one warp's tiles
  __shared__ float m_s[kWarps][G];
  __shared__ float l_s[kWarps][G];
  __shared__ __align__(16) float o_s[kWarps][G][D];
  __shared__ float value_s[G][D];  // this block's normalised result for its keys
  __shared__ float lse_s[G];       // and its log-sum-exp (log2 domain), -inf without keys
  cg::cluster_group cluster = cg::this_cluster();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col = (lane % Tiles::kLanesPerRow) * Tiles::kVec;  // first of this lane's 8 columns
  // Metadata, the block table and the K/V of earlier steps: before the PDL wait (see the top).
  const ClusterRow row = cluster_row(args);
  const int token = row.token, split = row.split, kv_head = row.kv_head;
  const int head_begin = row.head_begin, heads = row.heads;
  const int num_keys = row.num_keys, first_new_key = row.first_new_key;  // this step's keys
  // Fused RoPE: the tiles cover the cached keys, the one new key is attended from registers.
  const bool fused = args.fuse_rope;
  const int tile_keys_end = fused ? first_new_key : num_keys;
  const int num_tiles = (tile_keys_end + Tiles::kTileKeys - 1) / Tiles::kTileKeys;
  const int first_tile = warp * kClusterSplits + split;
  const int32_t* table = row.table;
  int32_t blocks[kSteps];
  fetch_tile_blocks<D, G>(table, args.block_size, 0, tile_keys_end, first_tile, num_tiles, lane,
                          blocks);
  uint4 k_raw[kSteps], v_raw[kSteps];
#pragma unroll
  for (int i = 0; i < kSteps; ++i) k_raw[i] = v_raw[i] = make_uint4(0, 0, 0, 0);
  load_tile_kv<T, D, G>(args, kv_head, 0, first_tile, lane, 0, first_new_key, blocks, k_raw, v_raw);
  // Fused RoPE: the angles of this lane's 8 columns.
  float sines[8], cosines[8];
  const bool rotate = fused && args.rope.inv_freq;
  if (rotate) rope_angles<D>(args, token, col, sines, cosines);
  const int64_t slot = fused ? args.rope.slot_mapping[token] : -1;
  pdl_wait();
  pdl_launch_dependents();
  if (!fused) {
    load_tile_kv<T, D, G>(args, kv_head, 0, first_tile, lane, first_new_key, num_keys, blocks,
                          k_raw, v_raw);
  }

  // Fused RoPE: the new key's K and V slices (its finishing lanes: the first of the cluster's last
  // warp, the last to get a tile of cached keys), loaded with the queries'.
  const T* q_row = static_cast<const T*>(args.q) + int64_t(token) * args.q_stride;
  const T* qkv_bias = static_cast<const T*>(args.rope.qkv_bias);
  const int q_dim = args.num_heads * D, kv_dim = args.num_kv_heads * D;
  const bool new_key_warp = fused && split == kClusterSplits - 1 && warp == kWarps - 1;
  const bool new_key_lane = new_key_warp && lane < Tiles::kLanesPerRow;
  QkvSlice new_k, new_v;
  if (new_key_lane) {
    new_k = load_qkv_slice<T, D>(q_row, qkv_bias, q_dim + kv_head * D, col, rotate);
    new_v = load_qkv_slice<T, D>(q_row, qkv_bias, q_dim + kv_dim + kv_head * D, col, false);
  }
  // This lane's 8 columns of each query head, pre-scaled so the softmax runs in base 2 (heads
  // past `heads` stay zero, never written out).
  const float qscale = args.scale * 1.4426950408889634f;
  float q[G][8] = {};
  if (fused) {
    QkvSlice raw[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (g < heads)
        raw[g] = load_qkv_slice<T, D>(q_row, qkv_bias, (head_begin + g) * D, col, rotate);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (g < heads)
        finish_qkv_slice<T, D>(raw[g], qkv_bias != nullptr, col, rotate, sines, cosines, q[g]);
    }
  } else {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (g < heads) load_as_float<T, 8>(q_row + (head_begin + g) * D + col, q[g]);
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int e = 0; e < 8; ++e) q[g][e] *= qscale;
  }
  float m[G], l[G], acc[G][8];
  reset_state<G>(m, l, acc);
  if (first_tile < num_tiles) {
    bool valid[kSteps];
#pragma unroll
    for (int i = 0; i < kSteps; ++i) valid[i] = blocks[i] >= 0;
    fetch_tile_blocks<D, G>(table, args.block_size, 0, num_keys, first_tile + kStride, num_tiles,
                            lane, blocks);
    attend_tile<T, D, G>(k_raw, v_raw, valid, q, m, l, acc);
    attend_row_tiles<T, D, G>(args, table, kv_head, 0, tile_keys_end, first_tile + kStride,
                              num_tiles, kStride, lane, q, m, l, acc, blocks);
  }
  // Fused RoPE: the new key, by the cluster's last warp (the last to get a tile of cached keys):
  // its K and V finished from the qkv row, attended as slot 0 of a tile of the row's first lanes,
  // and written to the cache for the next steps.
  if (new_key_warp) {
    uint4 k_new[kSteps], v_new[kSteps];
    bool valid[kSteps];
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      k_new[i] = v_new[i] = make_uint4(0, 0, 0, 0);
      valid[i] = false;
    }
    if (new_key_lane) {
      float k[8], v[8];
      finish_qkv_slice<T, D>(new_k, qkv_bias != nullptr, col, rotate, sines, cosines, k);
      finish_qkv_slice<T, D>(new_v, qkv_bias != nullptr, col, false, sines, cosines, v);
      k_new[0] = pack8<T>(k);
      v_new[0] = pack8<T>(v);
      valid[0] = true;
      if (slot >= 0) {
        const int64_t at = (slot * kv_dim + kv_head * D + col) / Tiles::kVec;
        static_cast<uint4*>(args.rope.k_cache)[at] = k_new[0];
        static_cast<uint4*>(args.rope.v_cache)[at] = v_new[0];
      }
    }
    attend_tile<T, D, G>(k_new, v_new, valid, q, m, l, acc);
  }
  publish_warp_state<D, G>(warp, lane, m, l, acc, m_s, l_s, o_s);
  __syncthreads();
  for (int i = threadIdx.x; i < heads * D; i += kThreads) {
    float value, lse;
    combine_warps<D, G>(m_s, l_s, o_s, i / D, i % D, value, lse);
    value_s[i / D][i % D] = value;
    if (i % D == 0) lse_s[i / D] = lse;
  }
  merge_cluster_blocks<T, D>(cluster, args, &value_s[0][0], lse_s, token, head_begin, heads, split);
}

// ---- The tensor-core cluster kernel (the default; ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA=0 runs the
// one above) -------------------------------------------------------------------------------------
// The mma chunk machinery (ChunkKv, locate_chunk, fetch_chunk, attend_chunk) is
// attention_tiles.cuh's, shared with the split-KV mma rows kernel (attention.cu). The new key of
// the fused RoPE is one more partial state of the last block (m = its score, l = 1, o = its V),
// merged with its warps'.

// The two halves of a cluster barrier (PTX barrier.cluster), every thread of every block, used
// once: arrive (relaxed: it orders nothing but the mbarrier's initialization, which its own fence
// publishes) and wait for every thread of the cluster to have arrived.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

// The blocks' results meet in their owners' shared memory: element i (of the block's heads x D
// outputs, i = head * D + d) is merged by block i % S (S: the cluster's blocks), which keeps source
// r's value at value[r][i / S] and its head's log-sum-exp at lse[r][head]. Sources 0 .. S - 1 are
// the cluster's blocks, source S the fused RoPE's new key.
// Every word arrives by st.async, which counts its bytes on the owner's mbarrier `full`: the
// owner expects (sources x (heads x D / S + heads)) words and waits on its own
// shared memory. A cluster barrier with release / acquire semantics costs a GPU-wide memory fence
// on sm_90 (MEMBAR.ALL.GPU in the SASS), this none.
template <int D, int G, int S>
struct MergeInbox {
  static constexpr int kSources = S + 1;
  static constexpr int kOwned = G * D / S;  // elements a block merges, at most
  static_assert(kOwned % 4 == 0 && kOwned <= kThreads,
                "four-word posts; one owned element a thread");
  __align__(16) float value[kSources][kOwned];  // rows of kOwned (a multiple of 4) words
  float lse[kSources][G];
  uint64_t full;  // mbarrier: complete once every expected word has landed
  // The sources that post: the blocks, and the new key when the RoPE is fused.
  static __device__ __forceinline__ int sources(bool fused) { return fused ? kSources : S; }
};

// Arms the inbox for `words` 4-byte words (thread 0, before the cluster barrier that tells the
// other blocks it is ready).
template <int D, int G, int S>
__device__ __forceinline__ void arm_inbox(MergeInbox<D, G, S>& inbox, int words) {
  const uint32_t full = shared_address(&inbox.full);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(full) : "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full), "r"(4 * words)
               : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// The shared-memory address in block `rank` of the cluster of what `local` is in this block.
__device__ __forceinline__ uint32_t cluster_address(const void* local, int rank) {
  uint32_t remote;
  asm("mapa.shared::cluster.u32 %0, %1, %2;"
      : "=r"(remote)
      : "r"(shared_address(local)), "r"(rank));
  return remote;
}

// One word into block `rank`'s inbox at the place `local` has in this block's (remote
// shared-memory store; no round trip).
template <int D, int G, int S>
__device__ __forceinline__ void post_to_inbox(MergeInbox<D, G, S>& inbox, const float* local,
                                              int rank, float value) {
  const uint32_t remote = cluster_address(local, rank);
  const uint32_t remote_full = cluster_address(&inbox.full, rank);
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(remote),
      "r"(__float_as_uint(value)), "r"(remote_full)
      : "memory");
}

// Four words into block `rank`'s inbox at `local`'s place (16-byte aligned) and after.
template <int D, int G, int S>
__device__ __forceinline__ void post4_to_inbox(MergeInbox<D, G, S>& inbox, const float* local,
                                               int rank, const float (&values)[4]) {
  const uint32_t remote = cluster_address(local, rank);
  const uint32_t remote_full = cluster_address(&inbox.full, rank);
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, "
      "[%5];" ::"r"(remote),
      "r"(__float_as_uint(values[0])), "r"(__float_as_uint(values[1])),
      "r"(__float_as_uint(values[2])), "r"(__float_as_uint(values[3])), "r"(remote_full)
      : "memory");
}

// Waits until every expected word is in this block's inbox (acquire at cluster scope: the
// senders' stores are visible after).
template <int D, int G, int S>
__device__ __forceinline__ void wait_inbox(MergeInbox<D, G, S>& inbox) {
  const uint32_t full = shared_address(&inbox.full);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n"
        "selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(full)
        : "memory");
  } while (!done);
}

// G (1, 2, 4 or 8): the block's query heads rounded up, which sizes its shared memory (a kernel
// with less of it can start beside the previous kernel's blocks before the PDL wait). S (4, 8 or
// 16, splits_fit): the cluster's blocks; each warp has its first two chunks, 128 S keys a row in
// all, in flight before the wait.
// The end differs from the scalar kernel's merge_cluster_blocks: each block posts its combined
// result straight into the owners' MergeInbox, every owner merges once its inbox is full, and no
// block reads another's shared memory, so no cluster barrier closes the kernel. Block-level timing
// (clock64, H200, SmolLM2's shape, results/2026-11-29-attention-inbox/) had the two cluster
// barriers and the pulled merge at ~3,200 of the ~7,200 cycles after the PDL wait.
template <typename T, int D, int G, int S>
__global__ void __launch_bounds__(kThreads)
    cluster_decode_attention_mma_kernel(AttentionArgs args) {
  constexpr int kStride = kWarps * S;    // chunks between one warp's chunks
  __shared__ __align__(16) T q_s[G][D];  // the block's query heads, finished
  __shared__ float m_s[kWarps][G];
  __shared__ float l_s[kWarps][G];
  __shared__ __align__(16) float o_s[kWarps][G][D];
  __shared__ MergeInbox<D, G, S> inbox;

  trace_probe::Stamps stamps;  // probe builds only (trace_probe.cuh)
  stamps.start();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  // Metadata, the block table and this warp's first chunks of keys of earlier steps: before the
  // PDL wait (the comment at the top says why that is safe).
  const ClusterRow row = cluster_row(args);
  const int token = row.token, split = row.split, kv_head = row.kv_head;
  const int head_begin = row.head_begin, heads = row.heads;
  const int num_keys = row.num_keys, first_new_key = row.first_new_key;  // this step's keys
  const bool fused = args.fuse_rope;
  // Every block of the cluster must have started, and armed its inbox, before any block writes
  // into another's shared memory: the cluster barrier's arrive here (heads needs no load), its
  // wait just before the first remote store, by which time it has long completed.
  if (threadIdx.x == 0) {
    arm_inbox(inbox, MergeInbox<D, G, S>::sources(fused) * (heads * D / S + heads));
  }
  cluster_arrive_relaxed();
  const int keys_end = fused ? first_new_key : num_keys;  // the keys the chunks cover
  const int num_chunks = (keys_end + kChunkKeys - 1) / kChunkKeys;
  const int first_chunk = warp * S + split;
  const int32_t* table = row.table;
  const bool kv_first = kv_evict_first(args, num_keys);
  // The warp's first two chunks (up to 128 S keys a row, every chunk) are in flight before the
  // wait; the loop below keeps one chunk ahead after that.
  ChunkKv<D> kv, next;
  clear_chunk(kv);
  clear_chunk(next);
  {
    const int second = first_chunk + kStride;
    const ChunkRows first_rows =
        first_chunk < num_chunks
            ? locate_chunk<D>(args, table, kv_head, first_chunk, lane, 0, first_new_key)
            : ChunkRows{{-1, -1}, {-1, -1, -1, -1}};
    const ChunkRows second_rows =
        second < num_chunks ? locate_chunk<D>(args, table, kv_head, second, lane, 0, first_new_key)
                            : ChunkRows{{-1, -1}, {-1, -1, -1, -1}};
    fetch_chunk<D>(args, first_rows, kv, kv_first);
    fetch_chunk<D>(args, second_rows, next, kv_first);
  }
  // Thread i finishes 8 columns of one query head (and, in the new key's warp, of the new K):
  // columns col .. col + 7 of head i / (D/8). Its RoPE angles.
  const int col = (threadIdx.x % (D / 8)) * 8;
  float sines[8], cosines[8];
  const bool rotate = fused && args.rope.inv_freq;
  if (rotate) rope_angles<D>(args, token, col, sines, cosines);
  const int64_t slot = fused ? args.rope.slot_mapping[token] : -1;
  pdl_wait();
  pdl_launch_dependents();
  stamps.wait_done();
  if (args.probe == 1) return;
  if (!fused && first_chunk < num_chunks) {
    fetch_chunk<D>(
        args, locate_chunk<D>(args, table, kv_head, first_chunk, lane, first_new_key, num_keys), kv,
        kv_first);
  }
  if (!fused && first_chunk + kStride < num_chunks) {
    fetch_chunk<D>(
        args,
        locate_chunk<D>(args, table, kv_head, first_chunk + kStride, lane, first_new_key, num_keys),
        next, kv_first);
  }

  // The query heads into q_s, and the new key's K and V slices (the last block's last warp).
  const T* q_row = static_cast<const T*>(args.q) + int64_t(token) * args.q_stride;
  const T* qkv_bias = static_cast<const T*>(args.rope.qkv_bias);
  const int q_dim = args.num_heads * D, kv_dim = args.num_kv_heads * D;
  const bool new_key_warp = fused && split == S - 1 && warp == kWarps - 1;
  const bool new_key_lane = new_key_warp && lane < D / 8;
  QkvSlice new_k, new_v;
  if (new_key_lane) {
    new_k = load_qkv_slice<T, D>(q_row, qkv_bias, q_dim + kv_head * D, col, rotate);
    new_v = load_qkv_slice<T, D>(q_row, qkv_bias, q_dim + kv_dim + kv_head * D, col, false);
  }
  const int q_head = threadIdx.x / (D / 8);
  if (q_head < heads) {
    uint4 word;
    if (fused) {
      const QkvSlice raw =
          load_qkv_slice<T, D>(q_row, qkv_bias, (head_begin + q_head) * D, col, rotate);
      float q[8];
      finish_qkv_slice<T, D>(raw, qkv_bias != nullptr, col, rotate, sines, cosines, q);
      word = pack8<T>(q);
    } else {
      word = *reinterpret_cast<const uint4*>(q_row + (head_begin + q_head) * D + col);
    }
    *reinterpret_cast<uint4*>(&q_s[q_head][col]) = word;
  }
  // The new key's K and V finished (rounded to T) and written to the cache for later steps; its
  // lanes keep them for slot kWarps below (the other lanes' stay 0).
  uint4 k_new = make_uint4(0, 0, 0, 0), v_new = make_uint4(0, 0, 0, 0);
  if (new_key_lane) {
    float k[8], v[8];
    finish_qkv_slice<T, D>(new_k, qkv_bias != nullptr, col, rotate, sines, cosines, k);
    finish_qkv_slice<T, D>(new_v, qkv_bias != nullptr, col, false, sines, cosines, v);
    k_new = pack8<T>(k);
    v_new = pack8<T>(v);
    if (slot >= 0) {
      const int64_t at = (slot * kv_dim + kv_head * D + col) / 8;
      static_cast<uint4*>(args.rope.k_cache)[at] = k_new;
      static_cast<uint4*>(args.rope.v_cache)[at] = v_new;
    }
  }
  __syncthreads();
  stamps.input_ready();
  uint32_t qa[D / 16][2];  // head g's A fragments (attend_chunk)
  load_q_fragments<KSlices::kContiguous, T, D>(q_s, g, t, heads, qa);

  const float qscale = args.scale * 1.4426950408889634f;  // the softmax in base 2
  float m = -INFINITY, l = 0.0f, o[D / 8][4] = {};
  for (int chunk = first_chunk; chunk < num_chunks; chunk += kStride) {
    attend_chunk<T, D>(kv, qa, chunk * kChunkKeys, keys_end, qscale, lane, m, l, o);
    kv = next;  // the next chunk; the one after it goes in flight while that one computes
    clear_chunk(next);
    if (chunk + 2 * kStride < num_chunks) {
      fetch_chunk<D>(args,
                     locate_chunk<D>(args, table, kv_head, chunk + 2 * kStride, lane, 0, keys_end),
                     next, kv_first);
    }
  }
  publish_chunk_state<D, G>(m_s, l_s, o_s, warp, lane, heads, m, l, o);
  __syncthreads();
  if (args.probe == 2) return;
  cluster_wait();  // the arrive near the top: every block has started and armed its inbox
  // This block's result for its keys (its warps combined as combine_warps does), into the
  // owners' inboxes as source `split`, four of an owner's consecutive slots a post: thread u
  // takes owner u % S's slots 4q .. 4q + 3 (q = u / S), elements (4q + k) * S + owner, all of
  // head 4Sq / D; the thread with the head's first
  // slots also posts the head's log-sum-exp to its owner.
  for (int u = int(threadIdx.x); u < heads * D / 4; u += kThreads) {
    const int owner = u % S, q = u / S;
    const int head = 4 * S * q / D, first_d = 4 * S * q % D;
    const WarpWeights ww = warp_weights<G>(m_s, l_s, head);
    float values[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int d = first_d + k * S + owner;
      values[k] = ww.value([&](int w) { return o_s[w][head][d]; });
    }
    post4_to_inbox(inbox, &inbox.value[split][4 * q], owner, values);
    if (first_d == 0) post_to_inbox(inbox, &inbox.lse[split][head], owner, ww.lse());
  }
  // The new key, a source of its own (its score is the log-sum-exp, since l = 1; its V is the
  // value), from the last block's last warp.
  if (new_key_warp) {
    float k[8], v[8];
    unpack8<T>(k_new, k);
    unpack8<T>(v_new, v);
    for (int h = 0; h < heads; ++h) {
      float q[8];
      load_as_float<T, 8>(&q_s[h][new_key_lane ? col : 0], q);
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) dot += q[e] * k[e];  // k is 0 past the row's D/8 lanes
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1)
        dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      if (lane < S) post_to_inbox(inbox, &inbox.lse[S][h], lane, dot * qscale);
      if (new_key_lane) {
        // Element i = h * D + col + e belongs to block i % S, at its slot i / S (D is a multiple
        // of S).
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int i = h * D + col + e;
          post_to_inbox(inbox, &inbox.value[S][i / S], i % S, v[e]);
        }
      }
    }
  }
  // The owned elements (at most one a thread: G * D / S <= kThreads), merged as
  // merge_column weighs partials: the blocks in rank order, then the new key.
  const int j = threadIdx.x, i = j * S + split;
  if (i >= heads * D) return;
  wait_inbox(inbox);
  const int h = i / D, sources = MergeInbox<D, G, S>::sources(args.fuse_rope);
  float lse[MergeInbox<D, G, S>::kSources], value[MergeInbox<D, G, S>::kSources];
#pragma unroll
  for (int r = 0; r < MergeInbox<D, G, S>::kSources; ++r) {
    lse[r] = r < sources ? inbox.lse[r][h] : -INFINITY;
    value[r] = r < sources ? inbox.value[r][j] : 0.0f;
  }
  static_cast<T*>(args.out)[(int64_t(token) * args.num_heads + head_begin) * D + i] =
      from_float<T>(merge_partials(lse, value));
  stamps.finish(-1, args.num_tokens);
}

// KernelSwitches::cluster_attention_mma false: the scalar kernel (comparisons, tests).
bool mma_enabled() { return kernel_switches().cluster_attention_mma; }

// Whether the tensor-core kernel's merge fits clusters of S blocks for G heads of D columns a
// block: a block merges G x D / S elements, at most one a thread and four-word posts, and a post
// of 4 S consecutive elements stays within one head.
template <int D, int G, int S>
constexpr bool splits_fit() {
  return G * D / S <= kThreads && (G * D / S) % 4 == 0 && D % (4 * S) == 0;
}

// The blocks of a cluster of the tensor-core kernel: KernelSwitches::cluster_attention_splits when
// set (measurements: 4, 8 or 16 for every launch), else args.cluster_splits; kClusterSplits where
// that does not fit the shape.
template <int D, int G>
int cluster_splits_for(const AttentionArgs& args) {
  const int forced = kernel_switches().cluster_attention_splits;
  const int wanted = forced > 0 ? forced : args.cluster_splits;
  if (wanted == 4 && splits_fit<D, G, 4>()) return 4;
  if (wanted == 16 && splits_fit<D, G, 16>()) return 16;
  return kClusterSplits;
}

template <typename T, int D, int G, int S>
void launch_mma_splits(const AttentionArgs& args, int kv_blocks, cudaStream_t stream) {
  if constexpr (splits_fit<D, G, S>()) {
    auto* kernel = cluster_decode_attention_mma_kernel<T, D, G, S>;
    if constexpr (S > 8) allow_non_portable_clusters(reinterpret_cast<const void*>(kernel));
    launch_cluster_kernel(kernel, dim3(args.num_tokens, kv_blocks, S), kThreads, dim3(1, 1, S), 0,
                          stream, args);
  } else {
    cuda_fail("cluster splits that do not fit the shape", "launch_mma_splits", __FILE__, __LINE__);
  }
}

// kv_blocks: the grid's y, one per (KV head, group of up to kAttentionMaxGroup query heads).
template <typename T, int D, int G>
void launch_group(const AttentionArgs& args, int kv_blocks, cudaStream_t stream) {
  if (!mma_enabled()) {
    launch_cluster_kernel(cluster_decode_attention_kernel<T, D, G>,
                          dim3(args.num_tokens, kv_blocks, kClusterSplits), kThreads,
                          dim3(1, 1, kClusterSplits), 0, stream, args);
  } else {
    const int splits = cluster_splits_for<D, G>(args);
    if (splits == 4) {
      launch_mma_splits<T, D, G, 4>(args, kv_blocks, stream);
    } else if (splits == 16) {
      launch_mma_splits<T, D, G, 16>(args, kv_blocks, stream);
    } else {
      launch_mma_splits<T, D, G, kClusterSplits>(args, kv_blocks, stream);
    }
  }
  ROSE_CUDA_CHECK_LAUNCH();
}

template <typename T, int D>
void launch_typed(const AttentionArgs& args, cudaStream_t stream) {
  const int group = args.num_heads / args.num_kv_heads;
  const int chunks = (group + kAttentionMaxGroup - 1) / kAttentionMaxGroup;
  const int kv_blocks = args.num_kv_heads * chunks;
  const int heads = group < kAttentionMaxGroup ? group : kAttentionMaxGroup;  // per block
  if (heads <= 1) return launch_group<T, D, 1>(args, kv_blocks, stream);
  if (heads <= 2) return launch_group<T, D, 2>(args, kv_blocks, stream);
  if (heads <= 4) return launch_group<T, D, 4>(args, kv_blocks, stream);
  launch_group<T, D, kAttentionMaxGroup>(args, kv_blocks, stream);
}

template <typename T>
void launch_dim(const AttentionArgs& args, cudaStream_t stream) {
  if (args.head_dim == 64) return launch_typed<T, 64>(args, stream);
  if (args.head_dim == 128) return launch_typed<T, 128>(args, stream);
  cuda_fail("cluster decode attention needs head_dim 64 or 128", "launch_cluster_decode_attention",
            __FILE__, __LINE__);
}

}  // namespace

void launch_cluster_decode_attention(const AttentionArgs& args, cudaStream_t stream) {
  if (args.dtype == DType::kBF16) {
    launch_dim<__nv_bfloat16>(args, stream);
  } else {
    launch_dim<__half>(args, stream);
  }
}

}  // namespace attention_detail

bool cluster_attention_uses_tensor_cores() { return attention_detail::mma_enabled(); }

bool trace_probe::dump_attention_decode(std::FILE* f, std::string* error) {
  return trace_probe::write_ring(f, "attention", error);
}

}  // namespace rose
