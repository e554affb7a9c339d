#include <algorithm>
#include <cmath>

#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_tiles.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.cuh"

namespace rose {
namespace {

using namespace attention_detail;  // kWarps, kThreads, the row tiles and the warp merge
// Query heads per block; larger GQA groups use several blocks (kernels/common/attention_split.h).
constexpr int kMaxGroup = kAttentionMaxGroup;
constexpr int kTile = 32;             // keys per warp iteration: one key per lane for Q.K
constexpr int kDeepMaxTokens = 1024;  // query rows up to which the deep-unrolled variant runs

// Query row `token` attends to keys 0..its position.
__device__ __forceinline__ int row_num_keys(const AttentionArgs& args, int token, int seq) {
  return args.context_lens[seq] - (args.query_start[seq + 1] - 1 - token);
}

// Splits that hold keys of a row with num_keys keys. Invariant mode: a function of the row alone,
// so a row takes the one-split (direct write) or the partials+merge path whatever the batch.
__device__ __forceinline__ int row_splits(const AttentionArgs& args, int num_keys) {
  return args.split_keys > 0 ? (num_keys + args.split_keys - 1) / args.split_keys : args.num_splits;
}

// First element of (token, head)'s partials: the partial buffers hold this launch's rows only.
// Slots 0..prefix_splits-1 belong to the shared-prefix launch, the key splits follow.
__device__ __forceinline__ int64_t partial_base(const AttentionArgs& args, int token, int head) {
  return (int64_t(token - args.token_offset) * args.num_heads + head) *
         (args.prefix_splits + args.num_splits);
}

// Merges the shared-prefix partials 0..prefix_count-1, then splits 0..splits-1 (in that order) of
// output column d of (token, head). The partials were written by other blocks of this grid (fused
// merge) or a previous kernel: read through L2, never a stale L1 line.
template <typename T>
__device__ __forceinline__ void merge_column(const AttentionArgs& args, int token, int head, int d,
                                             int prefix_count, int splits) {
  const int64_t base = partial_base(args, token, head);
  const int64_t first_split = base + args.prefix_splits;
  float lse_max = -INFINITY;
  for (int s = 0; s < prefix_count; ++s)
    lse_max = fmaxf(lse_max, __ldcg(args.partial_lse + base + s));
#pragma unroll 8
  for (int s = 0; s < splits; ++s)
    lse_max = fmaxf(lse_max, __ldcg(args.partial_lse + first_split + s));
  float total = 0.0f, o = 0.0f;
  for (int s = 0; s < prefix_count; ++s) {
    const float lse = __ldcg(args.partial_lse + base + s);
    if (lse == -INFINITY) continue;
    const float w = exp2f(lse - lse_max);
    total += w;
    o += w * __ldcg(args.partial_out + (base + s) * args.head_dim + d);
  }
#pragma unroll 8
  for (int s = 0; s < splits; ++s) {
    const float lse = __ldcg(args.partial_lse + first_split + s);
    if (lse == -INFINITY) continue;
    const float w = exp2f(lse - lse_max);
    total += w;
    o += w * __ldcg(args.partial_out + (first_split + s) * args.head_dim + d);
  }
  static_cast<T*>(args.out)[(int64_t(token) * args.num_heads + head) * args.head_dim + d] =
      from_float<T>(total != 0.0f ? o / total : 0.0f);  // NaN passes, as in finish_block
}

// What one block of either attention kernel computes. The grid is (query tokens, KV heads x head
// chunks of at most kMaxGroup query heads, splits); a split covers tiles [tile_begin, tile_end) of
// the token's keys, at least one tile per warp (fewer leaves warps idle and only adds partials to
// merge; splits past the keys stay empty and the merge skips them). In invariant mode a split is
// split_keys / tile_keys tiles from absolute key 0 instead, and `splits` counts the row's non-empty
// splits (blocks of the others exit at once).
// With a shared prefix (args.shared_keys), a sharing row's splits cover keys [key_begin, num_keys)
// only, and prefix_count partials of the shared-prefix launch precede them in the merge.
struct BlockWork {
  int token, seq, kv_head, head_begin, heads, split, splits, num_keys, tile_begin, tile_end;
  int key_begin, prefix_count;
};

// Splits of the shared-prefix launch that hold keys of a prefix of `shared` keys, for its tiles of
// tile_keys keys: the same rule as block_work's (at least one tile per warp).
__device__ __forceinline__ int prefix_tiles_per_split(const AttentionArgs& args, int shared,
                                                      int tile_keys) {
  const int tiles = (shared + tile_keys - 1) / tile_keys;
  return max(kWarps, (tiles + args.prefix_splits - 1) / args.prefix_splits);
}
__device__ __forceinline__ int prefix_splits_used(const AttentionArgs& args, int shared,
                                                  int tile_keys) {
  const int tiles = (shared + tile_keys - 1) / tile_keys;
  const int per_split = prefix_tiles_per_split(args, shared, tile_keys);
  return (tiles + per_split - 1) / per_split;
}

__device__ __forceinline__ BlockWork block_work(const AttentionArgs& args, int tile_keys,
                                                int prefix_tile_keys = 0) {
  BlockWork w;
  w.token = blockIdx.x + args.token_offset;
  const int group = args.num_heads / args.num_kv_heads;
  const int chunks = (group + kMaxGroup - 1) / kMaxGroup;
  w.kv_head = blockIdx.y / chunks;
  w.head_begin = w.kv_head * group + (blockIdx.y % chunks) * kMaxGroup;
  w.heads = min(kMaxGroup, w.kv_head * group + group - w.head_begin);
  w.split = blockIdx.z;
  w.seq = args.token_seq[w.token];
  w.num_keys = row_num_keys(args, w.token, w.seq);
  w.splits = row_splits(args, w.num_keys);
  w.key_begin = 0;
  w.prefix_count = 0;
  if (args.shared_keys && args.shares_prefix[w.seq]) {
    w.key_begin = *args.shared_keys;  // < num_keys: the host leaves every sharing row a key
    w.prefix_count = prefix_splits_used(args, w.key_begin, prefix_tile_keys);
  }
  const int num_tiles = (w.num_keys - w.key_begin + tile_keys - 1) / tile_keys;
  const int tiles_per_split =
      args.split_keys > 0 ? args.split_keys / tile_keys
                          : max(kWarps, (num_tiles + args.num_splits - 1) / args.num_splits);
  w.tile_begin = w.split * tiles_per_split;
  w.tile_end = min(num_tiles, w.tile_begin + tiles_per_split);
  // With the fused merge, a row's splits are only those that hold keys: the blocks of the others
  // exit at once instead of publishing empty partials and counting in, and the merge reads fewer
  // partials. The bits are the same: an empty split's partial weighed 0 in the merge, and a row
  // left with one split writes what merging that split alone gives (see finish_block).
  if (args.split_keys == 0 && args.merge_counters) {
    w.splits = min(args.num_splits, (num_tiles + tiles_per_split - 1) / tiles_per_split);
  }
  return w;
}

// Combines the 4 warps' online-softmax states (m_s, l_s, o_s, already written) into the block's
// result for its heads: the output (one split) or this split's partial, which the last split block
// to finish merges (given merge_counters). Starts with the barrier that publishes the states.
// `splits` is the row's split count (BlockWork::splits). A single split writes its value directly,
// which is what merging one split gives bit for bit (weight exp2(0) = 1, o * 1 / 1 = o; only a
// -0 would come out +0). Either way a row takes the same path whatever its batch.

template <typename T, int D, int G>
__device__ __forceinline__ void finish_block(const AttentionArgs& args, const float (*m_s)[G],
                                             const float (*l_s)[G], const float (*o_s)[G][D],
                                             int token, int head_begin, int heads, int split,
                                             int splits, int prefix_count = 0) {
  __syncthreads();
  const bool direct = splits == 1 && prefix_count == 0;
  for (int i = threadIdx.x; i < heads * D; i += kThreads) {
    const int g = i / D, d = i % D;
    float value, lse;
    combine_warps<D, G>(m_s, l_s, o_s, g, d, value, lse);
    const int head = head_begin + g;
    if (direct) {
      static_cast<T*>(args.out)[(int64_t(token) * args.num_heads + head) * D + d] =
          from_float<T>(value);
    } else {
      const int64_t part = partial_base(args, token, head) + args.prefix_splits + split;
      args.partial_out[part * D + d] = value;
      if (d == 0) args.partial_lse[part] = lse;
    }
  }
  if (!direct && args.merge_counters) {
    // Classic last-block reduction: publish this block's partials, count it in, and let the block
    // that completes the count merge every split of these heads.
    __shared__ int is_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      int32_t* counter = args.merge_counters + int64_t(blockIdx.x) * gridDim.y + blockIdx.y;
      is_last = atomicAdd(counter, 1) == splits - 1;
      if (is_last) *counter = 0;  // every split has counted in: ready for the next launch
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    for (int i = threadIdx.x; i < heads * D; i += kThreads) {
      merge_column<T>(args, token, head_begin + i / D, i % D, prefix_count, splits);
    }
  }
}

// kDeep unrolls the K loads and the P.V loop deeply: several loads in flight per warp, which is
// what decode rows need (few warps, each a chain of dependent memory trips), at the cost of
// registers (96 vs ~64 at head_dim 64), i.e. occupancy, which prefill's many blocks need more:
// measured, a deep-unrolled prefill ran 7-14% slower (docs/gpu-notes.md, run 5).
template <typename T, int D, bool kDeep>
__global__ void __launch_bounds__(kThreads) paged_attention_kernel(AttentionArgs args) {
  pdl_wait();
  pdl_launch_dependents();
  static_assert(D % 8 == 0 && D <= 256, "head_dim must be a multiple of 8, at most 256");
  constexpr int kDimsPerLane = D >= 32 ? D / 32 : 1;  // V and output columns owned by each lane
  constexpr int kKVec = 8;                            // 16-byte loads of K
  __shared__ __align__(16) float q_s[kMaxGroup][D];
  __shared__ float p_s[kWarps][kMaxGroup][kTile];
  __shared__ float m_s[kWarps][kMaxGroup];
  __shared__ float l_s[kWarps][kMaxGroup];
  __shared__ float o_s[kWarps][kMaxGroup][D];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const BlockWork work = block_work(args, kTile);
  const int token = work.token, seq = work.seq, kv_head = work.kv_head;
  const int head_begin = work.head_begin, heads = work.heads, split = work.split;
  const int num_keys = work.num_keys, tile_begin = work.tile_begin, tile_end = work.tile_end;
  if (split >= work.splits) return;  // a split past this row's keys (see block_work)

  // Queries pre-scaled so the softmax runs in base 2.
  const float qscale = args.scale * 1.4426950408889634f;
  const T* q = static_cast<const T*>(args.q) + int64_t(token) * args.q_stride;
  for (int i = threadIdx.x; i < heads * D; i += kThreads) {
    q_s[i / D][i % D] = to_float(q[(head_begin + i / D) * D + i % D]) * qscale;
  }
  __syncthreads();

  float m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][kDimsPerLane];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < kDimsPerLane; ++e) acc[g][e] = 0.0f;
  }

  const T* k_cache = static_cast<const T*>(args.k_cache);
  const T* v_cache = static_cast<const T*>(args.v_cache);
  const int32_t* table = args.block_tables + int64_t(seq) * (*args.block_table_stride);
  const bool owns_dims = lane * kDimsPerLane < D;

  for (int tile = tile_begin + warp; tile < tile_end; tile += kWarps) {
    const int key = tile * kTile + lane;
    const bool valid = key < num_keys;
    int64_t row = 0;  // element offset of this key's row for kv_head, in K and V alike
    float s[kMaxGroup];
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) s[g] = 0.0f;
    if (valid) {
      const int64_t block = table[key / args.block_size];
      row = ((block * args.block_size + key % args.block_size) * args.num_kv_heads + kv_head) * D;
      const T* k = k_cache + row;
#pragma unroll(kDeep ? D / kKVec : 4)
      for (int c = 0; c < D / kKVec; ++c) {
        float kv[kKVec];
        load_as_float<T, kKVec>(k + c * kKVec, kv);
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g < heads) {
            const float4 qa = *reinterpret_cast<const float4*>(&q_s[g][c * kKVec]);
            const float4 qb = *reinterpret_cast<const float4*>(&q_s[g][c * kKVec + 4]);
            s[g] += qa.x * kv[0] + qa.y * kv[1] + qa.z * kv[2] + qa.w * kv[3] + qb.x * kv[4] +
                    qb.y * kv[5] + qb.z * kv[6] + qb.w * kv[7];
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g < heads) {
        // The tile holds at least one valid key, so m_new is finite.
        const float m_new = fmaxf(m[g], warp_max(valid ? s[g] : -INFINITY));
        const float correction = exp2f(m[g] - m_new);
        const float p = valid ? exp2f(s[g] - m_new) : 0.0f;
        l[g] = l[g] * correction + p;  // per-lane partial sum, reduced once at the end
        m[g] = m_new;
#pragma unroll
        for (int e = 0; e < kDimsPerLane; ++e) acc[g][e] *= correction;
        p_s[warp][g][lane] = p;
      }
    }
    __syncwarp();
    const int keys_here = min(kTile, num_keys - tile * kTile);
    // Unrolled deep so several V rows are in flight: this loop is latency bound.
#pragma unroll(kDeep ? 16 : 4)
    for (int t = 0; t < keys_here; ++t) {
      const int64_t v_row = __shfl_sync(0xffffffffu, row, t);
      if (owns_dims) {
        float v[kDimsPerLane];
        load_as_float<T, kDimsPerLane>(v_cache + v_row + lane * kDimsPerLane, v);
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g < heads) {
            const float p = p_s[warp][g][t];
#pragma unroll
            for (int e = 0; e < kDimsPerLane; ++e) acc[g][e] += p * v[e];
          }
        }
      }
    }
    __syncwarp();
  }

  // Merge the warps' states.
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g < heads) {
      const float lsum = warp_sum(l[g]);
      if (lane == 0) {
        m_s[warp][g] = m[g];
        l_s[warp][g] = lsum;
      }
      if (owns_dims) {
#pragma unroll
        for (int e = 0; e < kDimsPerLane; ++e) o_s[warp][g][lane * kDimsPerLane + e] = acc[g][e];
      }
    }
  }
  finish_block<T, D, kMaxGroup>(args, m_s, l_s, o_s, token, head_begin, heads, split, work.splits);
}

// Query vectors of the shared-prefix launch: kRows query rows of kHeads heads each (the GQA group
// rounded up), kAttentionMaxGroup vectors in all.
constexpr int kPrefixVectors = kMaxGroup;

// Decode-oriented variant for head_dim 64 and 128: a group of D/8 lanes shares one K (and V) row,
// each lane loading 16 contiguous bytes, so a warp load instruction reads 32/(D/8) whole rows
// (coalesced 128/256-byte rows, not 32 lanes each in its own row). A warp tile is kSteps such
// loads of K and of V, all issued before any arithmetic (16 independent 16-byte loads per lane in
// flight) with the next tile's block-table entries fetched meanwhile. Q.K: 8-element partial dot
// per lane, reduced over the row's lanes by shuffles; P.V: each lane accumulates its 8 columns over
// its own keys, and the lane groups are summed once at the end. G (1, 2, 4 or 8) is the number of
// query heads per block rounded up, so gpt2's group of 1 does not carry 8 heads of registers.
template <typename T, int D, int G>
__global__ void __launch_bounds__(kThreads) paged_attention_rows_kernel(AttentionArgs args) {
  using Tiles = RowTiles<D, G>;
  __shared__ float m_s[kWarps][G];
  __shared__ float l_s[kWarps][G];
  __shared__ __align__(16) float o_s[kWarps][G][D];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col = (lane % Tiles::kLanesPerRow) * Tiles::kVec;  // first of this lane's 8 columns
  const BlockWork work = block_work(args, Tiles::kTileKeys, RowTiles<D, kPrefixVectors>::kTileKeys);
  const int token = work.token, seq = work.seq, kv_head = work.kv_head;
  const int head_begin = work.head_begin, heads = work.heads, split = work.split;
  if (split >= work.splits) return;  // a split past this row's keys (see block_work)
  // The step's metadata and block tables were copied in before its first kernel and no kernel of
  // the step writes them: block_work and the first tile's table entries are read before the PDL
  // wait, so their dependent trips overlap the previous kernel's end. The queries and this row's
  // new K/V come from the previous kernel (RoPE + KV write): only after the wait.
  const int32_t* table = args.block_tables + int64_t(seq) * (*args.block_table_stride);
  int32_t blocks[Tiles::kSteps];
  fetch_tile_blocks<D, G>(table, args.block_size, work.key_begin, work.num_keys,
                          work.tile_begin + warp, work.tile_end, lane, blocks);
  pdl_wait();
  pdl_launch_dependents();

  // This lane's 8 columns of each query head, pre-scaled so the softmax runs in base 2. Heads past
  // `heads` (a group that does not fill G) stay zero: harmless, never written out.
  const float qscale = args.scale * 1.4426950408889634f;
  const T* q_row = static_cast<const T*>(args.q) + int64_t(token) * args.q_stride;
  float q[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (g < heads) {
      load_as_float<T, 8>(q_row + (head_begin + g) * D + col, q[g]);
#pragma unroll
      for (int e = 0; e < 8; ++e) q[g][e] *= qscale;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) q[g][e] = 0.0f;
    }
  }

  float m[G], l[G], acc[G][8];
  reset_state<G>(m, l, acc);
  attend_row_tiles<T, D, G>(args, table, kv_head, work.key_begin, work.num_keys,
                            work.tile_begin + warp, work.tile_end, kWarps, lane, q, m, l, acc,
                            blocks);
  publish_warp_state<D, G>(warp, lane, m, l, acc, m_s, l_s, o_s);
  finish_block<T, D, G>(args, m_s, l_s, o_s, token, head_begin, heads, split, work.splits,
                        work.prefix_count);
}

// The mma rows kernel's chunks (below). Its keys lie in KV blocks whose size is a multiple of
// kChunkKeys (mma_rows_apply), so a chunk's 16 keys are consecutive cache slots of one block:
// each lane's six K/V slices sit at fixed offsets from the chunk's first slot, and a chunk costs
// one block-table entry. A warp's chunks are first_chunk + k * kWarps, k = 0, 1, ...; lane j holds
// the byte offset of the first slot of the warp's chunk k = 32 * round + j, read for 32 chunks at
// once, and a chunk takes it by shuffle. The cluster kernel's locate_chunk and fetch_chunk, which
// this replaces here, took ~240 instructions a chunk on the per-key division and 64-bit address
// math (cuobjdump of this kernel at 64 dims) against the ~155 of attend_chunk itself.
template <int D>
struct RowChunks {
  const char* k_lane;  // this lane's K slices of a chunk's key 0 at slot 0
  const char* v_lane;  // its V slices, the same way
  int k_row[2];        // bytes from there to its keys g, g + 8 of the chunk
  int v_row[4];        // to its keys 2t, 2t + 1, 2t + 8, 2t + 9
  int64_t lane_slot;   // byte offset of the first slot of the warp's chunk 32 * round + lane
  int first_chunk, chunk_end;

  // K slices: lane t's uint4 w of a key holds dims w * 32 + t * 8 .. + 8, so one load
  // instruction's 4 lanes of a key read 64 consecutive bytes (two whole sectors; the cluster
  // kernel's slices of D/4 consecutive dims use half of each sector a load touches). The Q
  // fragments follow the same order: any order of a dot product's terms is a valid one
  // (attend_chunk); this one changes the sums' rounding, not what they mean.
  __device__ __forceinline__ void init(const AttentionArgs& args, int kv_head, int lane) {
    const int slot_bytes = args.num_kv_heads * D * 2;  // 2-byte K/V elements
    const int64_t head_bytes = int64_t(kv_head) * D * 2;
    k_lane = static_cast<const char*>(args.k_cache) + head_bytes + (lane % 4) * 16;
    v_lane = static_cast<const char*>(args.v_cache) + head_bytes + (lane / 4) * (D / 64) * 16;
#pragma unroll
    for (int r = 0; r < 2; ++r) k_row[r] = chunk_key(r, lane) * slot_bytes;
#pragma unroll
    for (int r = 0; r < 4; ++r) v_row[r] = chunk_key(2 + r, lane) * slot_bytes;
  }

  // Reads lane j's slot for the warp's chunk 32 * round + j (block tables are no kernel's output:
  // the first round is read before the PDL wait).
  __device__ __forceinline__ void load_round(const AttentionArgs& args, const int32_t* table,
                                             int round, int lane) {
    const int chunk = first_chunk + (32 * round + lane) * kWarps;
    lane_slot = 0;
    if (chunk < chunk_end) {
      const int key = chunk * kChunkKeys, bs = args.block_size;
      lane_slot =
          (int64_t(__ldg(table + key / bs)) * bs + key % bs) * (int64_t(args.num_kv_heads) * D * 2);
    }
  }

  // The byte offset of the warp's chunk k; k goes up by one from 0 (a new round every 32).
  __device__ __forceinline__ int64_t slot(const AttentionArgs& args, const int32_t* table, int k,
                                          int lane) {
    if (k % 32 == 0 && k > 0) load_round(args, table, k / 32, lane);
    return __shfl_sync(0xffffffffu, lane_slot, k % 32);
  }
};

// Loads a chunk's K/V slices (all 16 keys: the slots past a row's keys are in the same allocated
// block; attend_row_chunk zeroes their V). `slot`: RowChunks::slot's.
template <int D, bool kEvictFirst>
__device__ __forceinline__ void fetch_row_chunk(const RowChunks<D>& rc, int64_t slot,
                                                ChunkKv<D>& kv) {
  const StreamHint hint = StreamHint::make(true);
  const auto load = [&](const char* p) {
    if constexpr (kEvictFirst) {
      return hint.load_read_only(reinterpret_cast<const uint4*>(p));
    } else {
      return __ldg(reinterpret_cast<const uint4*>(p));
    }
  };
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int w = 0; w < D / 32; ++w) kv.k[r][w] = load(rc.k_lane + (slot + rc.k_row[r]) + 64 * w);
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
#pragma unroll
    for (int w = 0; w < D / 64; ++w) kv.v[r][w] = load(rc.v_lane + (slot + rc.v_row[r]) + 16 * w);
  }
}

// attend_chunk on a fetched chunk; a row's last chunk first zeroes the V slices of keys past its
// keys (slots of the block not yet written: anything, NaN included, and P = 0 there would not
// hide a NaN). K needs no zeroing: attend_chunk gives those keys -inf before the softmax.
template <typename T, int D>
__device__ __forceinline__ void attend_row_chunk(ChunkKv<D>& kv, const uint32_t (&qa)[D / 16][2],
                                                 int base, int keys_end, float qscale, int lane,
                                                 float& m, float& l, float (&o)[D / 8][4]) {
  if (base + kChunkKeys > keys_end) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      if (base + chunk_key(2 + r, lane) >= keys_end) {
#pragma unroll
        for (int w = 0; w < D / 64; ++w) kv.v[r][w] = make_uint4(0, 0, 0, 0);
      }
    }
  }
  attend_chunk<T, D>(kv, qa, base, keys_end, qscale, lane, m, l, o);
}

// The warp's chunks, two in flight: `a` computes while `b` loads, then b's registers are copied
// into a (~32 moves a chunk). Alternating the two without the copy (a loop unrolled by two) took
// 168 registers at 64 dims and spilled at 128 (ptxas -v), against 146 and 247 here.
template <typename T, int D, bool kEvictFirst>
__device__ __forceinline__ void attend_row_chunks(const AttentionArgs& args, const int32_t* table,
                                                  RowChunks<D>& rc, const uint32_t (&qa)[D / 16][2],
                                                  int keys_end, float qscale, int lane, float& m,
                                                  float& l, float (&o)[D / 8][4]) {
  const int n = rc.first_chunk < rc.chunk_end
                    ? (rc.chunk_end - rc.first_chunk + kWarps - 1) / kWarps
                    : 0;  // this warp's chunks
  ChunkKv<D> a, b;
  if (n > 0) fetch_row_chunk<D, kEvictFirst>(rc, rc.slot(args, table, 0, lane), a);
  if (n > 1) fetch_row_chunk<D, kEvictFirst>(rc, rc.slot(args, table, 1, lane), b);
  for (int k = 0; k < n; ++k) {
    attend_row_chunk<T, D>(a, qa, (rc.first_chunk + k * kWarps) * kChunkKeys, keys_end, qscale,
                           lane, m, l, o);
    a = b;
    if (k + 2 < n) fetch_row_chunk<D, kEvictFirst>(rc, rc.slot(args, table, k + 2, lane), b);
  }
}

// The rows kernel's work (block_work's rows, KV head, query heads and key split; finish_block's
// merge) with each warp's keys in 16-key chunks on the tensor cores (attend_chunk, the cluster
// kernel's: the group's query heads as the M rows of mma.m16n8k16), for head_dim 64 and 128
// without a shared prefix, in KV blocks of a multiple of 16 keys (RowChunks). At 256 rows
// (llama-1b) the rows kernel above spent roughly 70-80 warp instructions a key (from its IPC and
// duration) on its shuffle-reduced dot products: issue slots 54% busy at 3 warps a scheduler while
// DRAM ran at 32% (results/2026-12-01-attention-staged/ncu). With the cluster kernel's chunk
// location and loads, ncu counted ~29 warp instructions a key and group at the same shape, 24
// mmas a 16-key chunk among them (results/2026-12-01-attention-mma-rows/ncu); RowChunks takes most
// of the location's share away.
// At D == 64 the kernel needs ~146 registers, three blocks an SM; capped at 128 four blocks fit,
// for a few spilled bytes outside the chunk loop (ptxas: 84). D == 128 needs ~247: one block's
// worth either way.
template <typename T, int D, int G>
__global__ void __launch_bounds__(kThreads, D == 64 ? 4 : 1)
    paged_attention_mma_rows_kernel(AttentionArgs args) {
  __shared__ __align__(16) T q_s[G][D];  // the block's query heads as stored
  __shared__ float m_s[kWarps][G];
  __shared__ float l_s[kWarps][G];
  __shared__ __align__(16) float o_s[kWarps][G][D];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const BlockWork work = block_work(args, kChunkKeys);
  const int token = work.token, kv_head = work.kv_head;
  const int head_begin = work.head_begin, heads = work.heads, split = work.split;
  if (split >= work.splits) return;  // a split past this row's keys (see block_work)
  const int keys_end = work.num_keys;
  const int32_t* table = args.block_tables + int64_t(work.seq) * (*args.block_table_stride);
  RowChunks<D> rc;
  rc.first_chunk = work.tile_begin + warp;
  rc.chunk_end = work.tile_end;
  rc.init(args, kv_head, lane);
  rc.load_round(args, table, 0, lane);
  pdl_wait();
  pdl_launch_dependents();

  const T* q_row = static_cast<const T*>(args.q) + int64_t(token) * args.q_stride;
  for (int i = int(threadIdx.x); i < heads * (D / 8); i += kThreads) {
    const int h = i / (D / 8), c = (i % (D / 8)) * 8;
    *reinterpret_cast<uint4*>(&q_s[h][c]) =
        *reinterpret_cast<const uint4*>(q_row + (head_begin + h) * D + c);
  }
  __syncthreads();
  uint32_t qa[D / 16][2];  // head g's A fragments (attend_chunk), in RowChunks' K order
  load_q_fragments<KSlices::kSectors, T, D>(q_s, g, t, heads, qa);

  const float qscale = args.scale * 1.4426950408889634f;  // the softmax in base 2
  float m = -INFINITY, l = 0.0f, o[D / 8][4] = {};
  if (kv_evict_first(args, keys_end)) {
    attend_row_chunks<T, D, true>(args, table, rc, qa, keys_end, qscale, lane, m, l, o);
  } else {
    attend_row_chunks<T, D, false>(args, table, rc, qa, keys_end, qscale, lane, m, l, o);
  }
  publish_chunk_state<D, G>(m_s, l_s, o_s, warp, lane, heads, m, l, o);
  finish_block<T, D, G>(args, m_s, l_s, o_s, token, head_begin, heads, split, work.splits,
                        work.prefix_count);
}

// Shared-prefix decode (args.shared_keys): keys [0, *shared_keys) are the same physical blocks
// for every sharing row, so one block attends kRows rows x kHeads heads (kPrefixVectors query
// vectors) to them, loading each K/V tile once instead of once per row. Grid (ceil(num_tokens /
// kRows), KV heads, prefix_splits); each block writes partial slot `split` of its rows, which the
// rows kernel's merge reads before its own splits. The prefix is read through sequence 0's block
// table (the host enables this only when every real row shares it).
template <typename T, int D, int kHeads>
__global__ void __launch_bounds__(kThreads) shared_prefix_attention_kernel(AttentionArgs args) {
  constexpr int G = kPrefixVectors, kRows = G / kHeads;
  using Tiles = RowTiles<D, G>;
  __shared__ float m_s[kWarps][G];
  __shared__ float l_s[kWarps][G];
  __shared__ __align__(16) float o_s[kWarps][G][D];
  const int shared = *args.shared_keys;
  const int per_split = prefix_tiles_per_split(args, shared, Tiles::kTileKeys);
  const int split = blockIdx.z;
  const int tile_begin = split * per_split;
  const int tile_end =
      min((shared + Tiles::kTileKeys - 1) / Tiles::kTileKeys, tile_begin + per_split);
  if (tile_begin >= tile_end) return;  // no shared prefix, or a split past it

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col = (lane % Tiles::kLanesPerRow) * Tiles::kVec;
  const int group = args.num_heads / args.num_kv_heads;  // <= kHeads: one block per KV head
  const int kv_head = blockIdx.y, head_begin = kv_head * group;
  // Metadata and the prefix's table entries before the PDL wait (see the rows kernel).
  bool active[G];
#pragma unroll
  for (int v = 0; v < G; ++v) {
    const int token = blockIdx.x * kRows + v / kHeads, g = v % kHeads;
    active[v] = token < args.num_tokens && g < group && args.shares_prefix[args.token_seq[token]];
  }
  int32_t blocks[Tiles::kSteps];
  fetch_tile_blocks<D, G>(args.block_tables, args.block_size, 0, shared, tile_begin + warp,
                          tile_end, lane, blocks);
  pdl_wait();
  pdl_launch_dependents();
  const float qscale = args.scale * 1.4426950408889634f;
  float q[G][8];
#pragma unroll
  for (int v = 0; v < G; ++v) {
    const int token = blockIdx.x * kRows + v / kHeads, g = v % kHeads;
    if (active[v]) {
      const T* q_row = static_cast<const T*>(args.q) + int64_t(token) * args.q_stride;
      load_as_float<T, 8>(q_row + (head_begin + g) * D + col, q[v]);
#pragma unroll
      for (int e = 0; e < 8; ++e) q[v][e] *= qscale;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) q[v][e] = 0.0f;
    }
  }
  float m[G], l[G], acc[G][8];
  reset_state<G>(m, l, acc);
  attend_row_tiles<T, D, G>(args, args.block_tables, kv_head, 0, shared, tile_begin + warp,
                            tile_end, kWarps, lane, q, m, l, acc, blocks);
  publish_warp_state<D, G>(warp, lane, m, l, acc, m_s, l_s, o_s);
  __syncthreads();
  for (int i = threadIdx.x; i < G * D; i += kThreads) {
    const int v = i / D, d = i % D;
    if (!active[v]) continue;
    float value, lse;
    combine_warps<D, G>(m_s, l_s, o_s, v, d, value, lse);
    const int token = blockIdx.x * kRows + v / kHeads, head = head_begin + v % kHeads;
    const int64_t part = partial_base(args, token, head) + split;
    args.partial_out[part * D + d] = value;
    if (d == 0) args.partial_lse[part] = lse;
  }
}

// One block per (query token, head), one thread per output column.
template <typename T>
__global__ void merge_splits_kernel(AttentionArgs args) {
  pdl_wait();
  pdl_launch_dependents();
  const int token = blockIdx.x + args.token_offset;
  const int splits = args.split_keys > 0
                         ? row_splits(args, row_num_keys(args, token, args.token_seq[token]))
                         : args.num_splits;
  if (splits <= 1) return;  // invariant mode: written directly by its only split
  if (int(threadIdx.x) < args.head_dim)
    merge_column<T>(args, token, blockIdx.y, threadIdx.x, 0, splits);
}

// Without merge_counters the split partials are merged by a separate kernel.
template <typename T, int D>
void launch_merge_if_needed(const AttentionArgs& args, cudaStream_t stream) {
  if (args.num_splits > 1 && !args.merge_counters) {
    const int threads = D < 32 ? 32 : D;
    launch_kernel(merge_splits_kernel<T>, dim3(args.num_tokens, args.num_heads), threads, 0, stream,
                  args);
    ROSE_CUDA_CHECK_LAUNCH();
  }
}

// Grid of either attention kernel: (query rows, KV heads x head chunks, splits).
dim3 attention_grid(const AttentionArgs& args) {
  const int group = args.num_heads / args.num_kv_heads;
  const int chunks = (group + kMaxGroup - 1) / kMaxGroup;
  return dim3(args.num_tokens, args.num_kv_heads * chunks, args.num_splits);
}

// The row-shared kernel, its G from the GQA group (a model constant, never the batch).
template <typename T, int D>
void launch_rows_kernel(const AttentionArgs& args, cudaStream_t stream) {
  const dim3 grid = attention_grid(args);
  const int group = args.num_heads / args.num_kv_heads;
  const int heads = group < kMaxGroup ? group : kMaxGroup;  // per block
  if (heads <= 1) {
    launch_kernel(paged_attention_rows_kernel<T, D, 1>, grid, kThreads, 0, stream, args);
  } else if (heads <= 2) {
    launch_kernel(paged_attention_rows_kernel<T, D, 2>, grid, kThreads, 0, stream, args);
  } else if (heads <= 4) {
    launch_kernel(paged_attention_rows_kernel<T, D, 4>, grid, kThreads, 0, stream, args);
  } else {
    launch_kernel(paged_attention_rows_kernel<T, D, kMaxGroup>, grid, kThreads, 0, stream, args);
  }
  ROSE_CUDA_CHECK_LAUNCH();
}

// The tensor-core rows kernel for GQA groups of two or more query heads; KernelSwitches::
// attention_rows_mma false (ROSEINFER_CUDA_ATTENTION_ROWS_MMA=0): the scalar one for all. A
// single query head fills one of the mma's 16 rows, so its chunks carry little arithmetic for
// their bytes, and the scalar kernel's deeper loads (16 slices a lane in flight against the mma
// kernel's two chunks) won at 256 rows on gpt2: 2.239 against 2.423 ms a step (at 64 rows it
// lost, 1.092 against 1.044), where every GQA shape measured gained 8-16% a step
// (results/2026-12-01-attention-mma-rows). KV blocks of other sizes than multiples of 16 keys
// (--block-size) take the scalar kernel too: RowChunks reads one block-table entry a chunk.
bool mma_rows_apply(const AttentionArgs& args) {
  return kernel_switches().attention_rows_mma && args.num_heads / args.num_kv_heads >= 2 &&
         args.block_size % kChunkKeys == 0;
}

template <typename T, int D>
void launch_mma_rows_kernel(const AttentionArgs& args, cudaStream_t stream) {
  const dim3 grid = attention_grid(args);
  const int group = args.num_heads / args.num_kv_heads;
  const int heads = group < kMaxGroup ? group : kMaxGroup;  // per block
  if (heads <= 2) {                                         // mma_rows_apply: at least two
    launch_kernel(paged_attention_mma_rows_kernel<T, D, 2>, grid, kThreads, 0, stream, args);
  } else if (heads <= 4) {
    launch_kernel(paged_attention_mma_rows_kernel<T, D, 4>, grid, kThreads, 0, stream, args);
  } else {
    launch_kernel(paged_attention_mma_rows_kernel<T, D, kMaxGroup>, grid, kThreads, 0, stream,
                  args);
  }
  ROSE_CUDA_CHECK_LAUNCH();
}

// Invariant mode: one kernel for every token count (which kernel, and its unrolling, could change
// the FMA contraction, so it is never chosen by the batch), run in launches of rows_per_launch
// query rows that share the partial buffers. A row's bits do not depend on the launch it is in.
template <typename T, int D>
void launch_invariant(const AttentionArgs& args, cudaStream_t stream) {
  for (int first = 0; first < args.num_tokens; first += args.rows_per_launch) {
    AttentionArgs part = args;
    part.token_offset = first;
    part.num_tokens = std::min(args.rows_per_launch, args.num_tokens - first);
    if constexpr (D == 64 || D == 128) {
      launch_rows_kernel<T, D>(part, stream);
    } else {
      launch_kernel(paged_attention_kernel<T, D, true>, attention_grid(part), kThreads, 0, stream,
                    part);
      ROSE_CUDA_CHECK_LAUNCH();
    }
    launch_merge_if_needed<T, D>(part, stream);
  }
}

// The shared-prefix launch (before the rows kernel, which merges its partials).
template <typename T, int D>
void launch_shared_prefix(const AttentionArgs& args, cudaStream_t stream) {
  const int rows = attention_prefix_rows_per_block(args.num_kv_heads, args.num_heads);
  const dim3 grid((args.num_tokens + rows - 1) / rows, args.num_kv_heads, args.prefix_splits);
  if (rows == 8) {
    launch_kernel(shared_prefix_attention_kernel<T, D, 1>, grid, kThreads, 0, stream, args);
  } else if (rows == 4) {
    launch_kernel(shared_prefix_attention_kernel<T, D, 2>, grid, kThreads, 0, stream, args);
  } else {
    launch_kernel(shared_prefix_attention_kernel<T, D, 4>, grid, kThreads, 0, stream, args);
  }
  ROSE_CUDA_CHECK_LAUNCH();
}

template <typename T, int D>
void launch_typed(const AttentionArgs& args, cudaStream_t stream) {
  if (args.split_keys > 0) return launch_invariant<T, D>(args, stream);
  const dim3 grid = attention_grid(args);
  if constexpr (D == 64 || D == 128) {
    if (args.cluster_decode && !args.shared_keys) {
      launch_cluster_decode_attention(args, stream);
      return;
    }
    if (args.shared_keys) {
      launch_shared_prefix<T, D>(args, stream);
      launch_rows_kernel<T, D>(args, stream);
      return;
    }
    if (args.num_tokens <= kDeepMaxTokens) {
      if (mma_rows_apply(args)) {
        launch_mma_rows_kernel<T, D>(args, stream);
      } else {
        launch_rows_kernel<T, D>(args, stream);
      }
      launch_merge_if_needed<T, D>(args, stream);
      return;
    }
  }
  if (args.num_tokens <= kDeepMaxTokens) {
    launch_kernel(paged_attention_kernel<T, D, true>, grid, kThreads, 0, stream, args);
  } else {
    launch_kernel(paged_attention_kernel<T, D, false>, grid, kThreads, 0, stream, args);
  }
  ROSE_CUDA_CHECK_LAUNCH();
  launch_merge_if_needed<T, D>(args, stream);
}

template <typename T>
void launch_dim(const AttentionArgs& args, cudaStream_t stream) {
  switch (args.head_dim) {
    case 8:
      return launch_typed<T, 8>(args, stream);
    case 16:
      return launch_typed<T, 16>(args, stream);
    case 32:
      return launch_typed<T, 32>(args, stream);
    case 64:
      return launch_typed<T, 64>(args, stream);
    case 128:
      return launch_typed<T, 128>(args, stream);
    default:
      cuda_fail("unsupported head_dim for paged attention (8, 16, 32, 64 or 128)",
                "launch_paged_attention", __FILE__, __LINE__);
  }
}

}  // namespace

bool attention_supports_head_dim(int head_dim) {
  return head_dim == 8 || head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128;
}

void launch_paged_attention(const AttentionArgs& args, cudaStream_t stream) {
  if (args.num_tokens <= 0) return;
  if (args.num_heads % args.num_kv_heads != 0) {
    cuda_fail("num_heads must be a multiple of num_kv_heads", "launch_paged_attention", __FILE__,
              __LINE__);
  }
  if (args.shared_keys &&
      (args.split_keys > 0 || !args.merge_counters || args.num_tokens > kDeepMaxTokens ||
       args.prefix_splits < 1 ||
       !attention_shared_prefix_supported(args.num_kv_heads, args.num_heads, args.head_dim))) {
    cuda_fail(
        "a shared prefix needs the fused merge, head_dim 64 or 128, a GQA group below 8, "
        "prefix_splits >= 1 and at most 1024 rows, outside invariant mode",
        "launch_paged_attention", __FILE__, __LINE__);
  }
  if (args.fuse_rope && (!args.cluster_decode || args.shared_keys || args.split_keys > 0 ||
                         (args.head_dim != 64 && args.head_dim != 128))) {
    cuda_fail(
        "the fused RoPE + KV write runs in the cluster decode kernel only (head_dim 64 or "
        "128, no shared prefix, outside invariant mode)",
        "launch_paged_attention", __FILE__, __LINE__);
  }
  if (args.split_keys > 0 && (args.split_keys % kTile != 0 || args.rows_per_launch < 1)) {
    cuda_fail("invariant attention needs split_keys a multiple of 32 and rows_per_launch >= 1",
              "launch_paged_attention", __FILE__, __LINE__);
  }
  if (args.dtype == DType::kBF16) {
    launch_dim<__nv_bfloat16>(args, stream);
  } else {
    launch_dim<__half>(args, stream);
  }
}

}  // namespace rose
