// Paged attention for small decode batches (AttentionArgs::cluster_decode): a batch-1 step's
// attention reads ~1 MB of K/V per layer, so its time is the chain of dependent memory trips and
// barriers, not bytes. The split-KV kernel (attention.cu) pays for its spread over the GPU with
// partials written to global memory, a fence, an atomic count and a merge that reads them back.
// Here each (query row, KV head) is one thread-block cluster of kClusterSplits blocks:
//   - tile t of the row's keys goes to warp (t / kClusterSplits) % kWarps of block
//     t % kClusterSplits, so the first tiles spread over the cluster's 8 SMs;
//   - a warp's first tile of keys written by earlier steps is loaded before the PDL wait (the
//     kernel before this one, RoPE + KV write, writes only this step's keys; every kernel of the
//     step waits on its predecessor before it lets its successor start, so everything older is
//     complete and visible), the keys of this step after it;
//   - the blocks merge their results through distributed shared memory: each block combines its
//     warps, the cluster syncs, and block r merges every block's values for its share of the
//     output columns.
#include <cooperative_groups.h>

#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/launch.cuh"

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
  const int token = blockIdx.x, split = blockIdx.z;            // split: rank in the cluster
  const int group = args.num_heads / args.num_kv_heads;
  const int chunks = (group + kAttentionMaxGroup - 1) / kAttentionMaxGroup;
  const int kv_head = blockIdx.y / chunks;
  const int head_begin = kv_head * group + (blockIdx.y % chunks) * kAttentionMaxGroup;
  const int heads = min(kAttentionMaxGroup, kv_head * group + group - head_begin);
  // Metadata, the block table and the K/V of earlier steps: before the PDL wait (see the top).
  const int seq = args.token_seq[token];
  const int seq_end = args.query_start[seq + 1];
  const int context = args.context_lens[seq];
  const int num_keys = context - (seq_end - 1 - token);
  const int first_new_key = context - (seq_end - args.query_start[seq]);  // this step's keys
  // Fused RoPE: the tiles cover the cached keys, the one new key is attended from registers.
  const bool fused = args.fuse_rope;
  const int tile_keys_end = fused ? first_new_key : num_keys;
  const int num_tiles = (tile_keys_end + Tiles::kTileKeys - 1) / Tiles::kTileKeys;
  const int first_tile = warp * kClusterSplits + split;
  const int32_t* table = args.block_tables + int64_t(seq) * (*args.block_table_stride);
  int32_t blocks[kSteps];
  fetch_tile_blocks<D, G>(table, args.block_size, 0, tile_keys_end, first_tile, num_tiles, lane,
                          blocks);
  uint4 k_raw[kSteps], v_raw[kSteps];
#pragma unroll
  for (int i = 0; i < kSteps; ++i) k_raw[i] = v_raw[i] = make_uint4(0, 0, 0, 0);
  load_tile_kv<T, D, G>(args, kv_head, 0, first_tile, lane, 0, first_new_key, blocks, k_raw, v_raw);
  // Fused RoPE: the angles of this lane's 8 columns (position and frequencies are no kernel's
  // output), as rope_kv.cu computes them.
  float sines[8], cosines[8];
  const bool rotate = fused && args.rope.inv_freq;
  if (rotate) {
    const float pos = static_cast<float>(args.rope.positions[token]);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      sincosf(pos * args.rope.inv_freq[(col + e) % (D / 2)], &sines[e], &cosines[e]);
  }
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
  cluster.sync();  // every block's value_s and lse_s written and visible to the cluster

  // Block `split` merges output columns split * kThreads + threadIdx.x, + kClusterSplits *
  // kThreads, ...: the splits in rank order, weighted as merge_column weighs partials.
  for (int i = split * kThreads + threadIdx.x; i < heads * D; i += kClusterSplits * kThreads) {
    const int g = i / D, d = i % D;
    float lse[kClusterSplits];
    float lse_max = -INFINITY;
#pragma unroll
    for (int r = 0; r < kClusterSplits; ++r) {
      lse[r] = *cluster.map_shared_rank(&lse_s[g], r);
      lse_max = fmaxf(lse_max, lse[r]);
    }
    float total = 0.0f, o = 0.0f;
#pragma unroll
    for (int r = 0; r < kClusterSplits; ++r) {
      if (lse[r] == -INFINITY) continue;
      const float w = exp2f(lse[r] - lse_max);
      total += w;
      o += w * *cluster.map_shared_rank(&value_s[g][d], r);
    }
    // NaN passes (total != 0), as in combine_warps.
    static_cast<T*>(args.out)[(int64_t(token) * args.num_heads + head_begin + g) * D + d] =
        from_float<T>(total != 0.0f ? o / total : 0.0f);
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
}

template <typename T, int D>
void launch_typed(const AttentionArgs& args, cudaStream_t stream) {
  const int group = args.num_heads / args.num_kv_heads;
  const int chunks = (group + kAttentionMaxGroup - 1) / kAttentionMaxGroup;
  const dim3 grid(args.num_tokens, args.num_kv_heads * chunks, kClusterSplits);
  const dim3 cluster(1, 1, kClusterSplits);
  const int heads = group < kAttentionMaxGroup ? group : kAttentionMaxGroup;  // per block
  if (heads <= 1) {
    launch_cluster_kernel(cluster_decode_attention_kernel<T, D, 1>, grid, kThreads, cluster, 0,
                          stream, args);
  } else if (heads <= 2) {
    launch_cluster_kernel(cluster_decode_attention_kernel<T, D, 2>, grid, kThreads, cluster, 0,
                          stream, args);
  } else if (heads <= 4) {
    launch_cluster_kernel(cluster_decode_attention_kernel<T, D, 4>, grid, kThreads, cluster, 0,
                          stream, args);
  } else {
    launch_cluster_kernel(cluster_decode_attention_kernel<T, D, kAttentionMaxGroup>, grid, kThreads,
                          cluster, 0, stream, args);
  }
  ROSE_CUDA_CHECK_LAUNCH();
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
}  // namespace rose
