#pragma once
// Device building blocks shared by the split-KV decode kernels (attention.cu) and the cluster
// decode kernel (attention_decode.cu): the row-shared K/V tiles of head_dim 64 and 128, one warp's
// online softmax over them, and the merge of a block's warp states. Internal to the attention
// kernels: included only by their .cu files.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/attention_split.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/l2_hint.cuh"
#include "kernels/cuda/tile_ptx.cuh"

namespace rose {
namespace attention_detail {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// How the block's kWarps warp states (m_s, l_s: (kWarps, G)) of vector g combine: each warp's
// scale against the largest max, and the scaled sum of their l. One per vector, shared by its
// columns (value).
struct WarpWeights {
  float m_max = -INFINITY, total = 0.0f, scale[kWarps];
  // Column d's normalised value from the warps' o (o(w): warp w's); 0 without keys.
  template <typename WarpO>
  __device__ __forceinline__ float value(WarpO o) const {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += o(w) * scale[w];
    return total != 0.0f ? sum / total : 0.0f;
  }
  // The vector's log-sum-exp (log2 domain), -inf without keys.
  __device__ __forceinline__ float lse() const {
    return total != 0.0f ? m_max + log2f(total) : -INFINITY;
  }
};

template <int G>
__device__ __forceinline__ WarpWeights warp_weights(const float (*m_s)[G], const float (*l_s)[G],
                                                    int g) {
  WarpWeights ww;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) ww.m_max = fmaxf(ww.m_max, m_s[w][g]);
    // A warp that saw no key (m = -inf) weighs 0. A NaN score leaves m finite but l NaN; it must
    // reach the output (and so the logits, where the sampler flags it), not turn into 0: hence
    // `total != 0`, not `total > 0`, and no early skip when m_max is -inf.
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    ww.scale[w] = m_s[w][g] == -INFINITY ? 0.0f : exp2f(m_s[w][g] - ww.m_max);
    ww.total += l_s[w][g] * ww.scale[w];
  }
  return ww;
}

// The block's warp states for vector g, column d combined: the normalised value and its
// log-sum-exp (log2 domain).
template <int D, int G>
__device__ __forceinline__ void combine_warps(const float (*m_s)[G], const float (*l_s)[G],
                                              const float (*o_s)[G][D], int g, int d, float& value,
                                              float& lse) {
  const WarpWeights ww = warp_weights<G>(m_s, l_s, g);
  value = ww.value([&](int w) { return o_s[w][g][d]; });
  lse = ww.lse();
}

// Decode-oriented variant for head_dim 64 and 128: a group of D/8 lanes shares one K (and V) row,
// each lane loading 16 contiguous bytes, so a warp load instruction reads 32/(D/8) whole rows
// (coalesced 128/256-byte rows, not 32 lanes each in its own row). A warp tile is kSteps such
// loads of K and of V, all issued before any arithmetic (16 independent 16-byte loads per lane in
// flight) with the next tile's block-table entries fetched meanwhile. Q.K: 8-element partial dot
// per lane, reduced over the row's lanes by shuffles; P.V: each lane accumulates its 8 columns over
// its own keys, and the lane groups are summed once at the end. G (1, 2, 4 or 8) is the number of
// query heads per block rounded up, so gpt2's group of 1 does not carry 8 heads of registers.
template <int D, int G>
struct RowTiles {
  static_assert(D == 64 || D == 128, "row-shared lanes need 8-element chunks filling the warp");
  static constexpr int kVec = 8;                          // elements per 16-byte load
  static constexpr int kLanesPerRow = D / kVec;           // 8 or 16 lanes read one row
  static constexpr int kRowsPerStep = 32 / kLanesPerRow;  // rows per warp load instruction
  // Loads of K (and of V) per tile: 8 query vectors need the registers.
  static constexpr int kSteps = G >= 8 ? 4 : 8;
  static constexpr int kTileKeys = kRowsPerStep * kSteps;  // 32 or 16 keys per warp tile
};

// The physical block of each of this lane's keys in tile `tile` of the keys [key_begin, key_end)
// (-1 past them or when tile >= tile_end).
template <int D, int G>
__device__ __forceinline__ void fetch_tile_blocks(const int32_t* table, int block_size,
                                                  int key_begin, int key_end, int tile,
                                                  int tile_end, int lane,
                                                  int32_t (&blocks)[RowTiles<D, G>::kSteps]) {
  using Tiles = RowTiles<D, G>;
  const int row_lane = lane / Tiles::kLanesPerRow;
#pragma unroll
  for (int i = 0; i < Tiles::kSteps; ++i) {
    const int key = key_begin + tile * Tiles::kTileKeys + i * Tiles::kRowsPerStep + row_lane;
    blocks[i] = tile < tile_end && key < key_end ? __ldg(table + key / block_size) : -1;
  }
}

// Loads this lane's 16-byte slices of K and V for the keys of tile `tile` (of the keys from
// key_begin, kTileKeys a tile) that lie in [load_from, load_to) and have a block (blocks[i] >= 0,
// from fetch_tile_blocks): the other slots keep what they hold. The cluster decode kernel loads a
// tile's keys written by earlier steps before its PDL wait and the keys of this step after it.
template <typename T, int D, int G>
__device__ __forceinline__ void load_tile_kv(const AttentionArgs& args, int kv_head, int key_begin,
                                             int tile, int lane, int load_from, int load_to,
                                             const int32_t (&blocks)[RowTiles<D, G>::kSteps],
                                             uint4 (&k_raw)[RowTiles<D, G>::kSteps],
                                             uint4 (&v_raw)[RowTiles<D, G>::kSteps]) {
  using Tiles = RowTiles<D, G>;
  constexpr int kVec = Tiles::kVec, kLanesPerRow = Tiles::kLanesPerRow;
  const int row_lane = lane / kLanesPerRow;      // which row of a step this lane reads
  const int col = (lane % kLanesPerRow) * kVec;  // first of the 8 columns this lane owns
  const uint4* k_cache = static_cast<const uint4*>(args.k_cache);
  const uint4* v_cache = static_cast<const uint4*>(args.v_cache);
  const int64_t kv_row_vecs = int64_t(args.num_kv_heads) * (D / kVec);  // uint4s per cache row
#pragma unroll
  for (int i = 0; i < Tiles::kSteps; ++i) {
    const int key = key_begin + tile * Tiles::kTileKeys + i * Tiles::kRowsPerStep + row_lane;
    if (blocks[i] >= 0 && key >= load_from && key < load_to) {
      const int64_t vec =
          (int64_t(blocks[i]) * args.block_size + key % args.block_size) * kv_row_vecs +
          kv_head * (D / kVec) + col / kVec;
      k_raw[i] = __ldg(k_cache + vec);
      v_raw[i] = __ldg(v_cache + vec);
    }
  }
}

// One warp tile's online-softmax update from its loaded K and V slices (valid[i]: slot i holds a
// key), for G query vectors (this lane's 8 columns of each, pre-scaled to base 2).
template <typename T, int D, int G>
__device__ __forceinline__ void attend_tile(const uint4 (&k_raw)[RowTiles<D, G>::kSteps],
                                            const uint4 (&v_raw)[RowTiles<D, G>::kSteps],
                                            const bool (&valid)[RowTiles<D, G>::kSteps],
                                            const float (&q)[G][8], float (&m)[G], float (&l)[G],
                                            float (&acc)[G][8]) {
  using Tiles = RowTiles<D, G>;
  constexpr int kVec = Tiles::kVec, kLanesPerRow = Tiles::kLanesPerRow, kSteps = Tiles::kSteps;
  float s[kSteps][G];
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const T* k_elems = reinterpret_cast<const T*>(&k_raw[i]);
    float k[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) k[e] = to_float(k_elems[e]);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < kVec; ++e) dot += q[g][e] * k[e];
#pragma unroll
      for (int offset = kLanesPerRow / 2; offset > 0; offset >>= 1)
        dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      s[i][g] = valid[i] ? dot : -INFINITY;
    }
  }
  float m_new[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float tile_max = s[0][g];
#pragma unroll
    for (int i = 1; i < kSteps; ++i) tile_max = fmaxf(tile_max, s[i][g]);
#pragma unroll
    for (int offset = kLanesPerRow; offset < 32; offset <<= 1)
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
    // The tile holds at least one valid key, so m_new is finite.
    m_new[g] = fmaxf(m[g], tile_max);
    const float correction = exp2f(m[g] - m_new[g]);
    m[g] = m_new[g];
    l[g] *= correction;
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[g][e] *= correction;
  }
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const T* v_elems = reinterpret_cast<const T*>(&v_raw[i]);
    float v[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = to_float(v_elems[e]);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float p = exp2f(s[i][g] - m_new[g]);  // 0 for keys past the end (s = -inf)
      l[g] += p;  // the same in every lane of the row: the lane groups are summed at the end
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[g][e] += p * v[e];
    }
  }
}

// One warp's online softmax over tiles first_tile, first_tile + stride, ... < tile_end of the keys
// [key_begin, key_end) read through `table`, for G query vectors: updates this lane's m, l and
// acc. `blocks` holds the first tile's entries (fetch_tile_blocks), which the kernels read before
// their PDL wait; the next tile's entries are fetched while a tile computes.
template <typename T, int D, int G>
__device__ __forceinline__ void attend_row_tiles(const AttentionArgs& args, const int32_t* table,
                                                 int kv_head, int key_begin, int key_end,
                                                 int first_tile, int tile_end, int stride, int lane,
                                                 const float (&q)[G][8], float (&m)[G],
                                                 float (&l)[G], float (&acc)[G][8],
                                                 int32_t (&blocks)[RowTiles<D, G>::kSteps]) {
  constexpr int kSteps = RowTiles<D, G>::kSteps;
  for (int tile = first_tile; tile < tile_end; tile += stride) {
    uint4 k_raw[kSteps], v_raw[kSteps];
#pragma unroll
    for (int i = 0; i < kSteps; ++i) k_raw[i] = v_raw[i] = make_uint4(0, 0, 0, 0);
    load_tile_kv<T, D, G>(args, kv_head, key_begin, tile, lane, key_begin, key_end, blocks, k_raw,
                          v_raw);
    bool valid[kSteps];
#pragma unroll
    for (int i = 0; i < kSteps; ++i) valid[i] = blocks[i] >= 0;
    // The next tile's entries, in flight while this tile computes.
    fetch_tile_blocks<D, G>(table, args.block_size, key_begin, key_end, tile + stride, tile_end,
                            lane, blocks);
    attend_tile<T, D, G>(k_raw, v_raw, valid, q, m, l, acc);
  }
}

// Sums the lane groups of attend_row_tiles' states (each saw different keys, the same m) and
// stores the warp's state in m_s, l_s, o_s for the block's merge.
template <int D, int G>
__device__ __forceinline__ void publish_warp_state(int warp, int lane, const float (&m)[G],
                                                   float (&l)[G], float (&acc)[G][8],
                                                   float (*m_s)[G], float (*l_s)[G],
                                                   float (*o_s)[G][D]) {
  constexpr int kLanesPerRow = RowTiles<D, G>::kLanesPerRow;
  const int col = (lane % kLanesPerRow) * 8;
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int offset = kLanesPerRow; offset < 32; offset <<= 1) {
      l[g] += __shfl_xor_sync(0xffffffffu, l[g], offset);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], offset);
    }
    if (lane == 0) {
      m_s[warp][g] = m[g];
      l_s[warp][g] = l[g];
    }
    if (lane < kLanesPerRow) {
#pragma unroll
      for (int e = 0; e < 8; ++e) o_s[warp][g][col + e] = acc[g][e];
    }
  }
}

template <int G>
__device__ __forceinline__ void reset_state(float (&m)[G], float (&l)[G], float (&acc)[G][8]) {
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[g][e] = 0.0f;
  }
}

// ---- 16-key chunks on the tensor cores: the cluster kernel's (attention_decode.cu) and the mma
// rows kernel's (attention.cu) -------------------------------------------------------------------
// ncu on llama-8b's batch-1 step (results/2026-11-25-attention-mma/) found the scalar cluster
// kernel latency-bound by its own instruction count: ~3,850 instructions per warp at 13.8 cycles
// each, a 16-key tile costing ~1,250 of them (shuffle-reduced dot products per key and head), with
// one warp per scheduler to hide nothing. Here a warp's chunk of 16 keys is two mma.m16n8k16
// products per 16 dimensions: S^T (query heads x keys) = Q K^T with the group's query heads as the
// M rows (rows from `heads` on are zero), then O += P V with P as two T terms (attend_chunk says
// why). The order of the terms of a dot product is free, so the head dimension is permuted inside
// each product to match the fragments to plain 16-byte loads: lane (g, t) = (lane / 4, lane % 4)
// feeds k-step s of Q K^T with dims t * D/4 + 4s .. 4s + 3 (one contiguous D/4-element slice of
// each K row it loads, keys g and g + 8 of the chunk), and output column n of the P V n-tile j is
// dim n * D/8 + j (one contiguous D/8-element slice of each V row it loads, keys 2t, 2t + 1,
// 2t + 8, 2t + 9).
constexpr int kChunkKeys = 16;  // keys per warp chunk: the K of the P V product

// One warp chunk's K and V slices, as loaded (zero where the key is past the chunk's valid keys:
// P is 0 there, and 0 * 0 keeps the product finite).
template <int D>
struct ChunkKv {
  // Keys g, g + 8: dims t * D/4 .. + D/4 (RowChunks in attention.cu loads another order).
  uint4 k[2][D / 32];
  uint4 v[4][D / 64];  // keys 2t, 2t + 1, 2t + 8, 2t + 9: dims g * D/8 .. + D/8
};

template <int D>
__device__ __forceinline__ void clear_chunk(ChunkKv<D>& kv) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int w = 0; w < D / 32; ++w) kv.k[r][w] = make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
#pragma unroll
    for (int w = 0; w < D / 64; ++w) kv.v[r][w] = make_uint4(0, 0, 0, 0);
  }
}

// Where this lane's slices of one chunk's keys are: the first uint4 of each, or -1 for a key not
// to load.
struct ChunkRows {
  int64_t k[2];  // K slices of keys g, g + 8
  int64_t v[4];  // V slices of keys 2t, 2t + 1, 2t + 8, 2t + 9
};

// This lane's key `i` of a chunk (0, 1: its K rows; 2..5: its V rows), relative to the chunk.
__device__ __forceinline__ int chunk_key(int i, int lane) {
  return i < 2 ? lane / 4 + 8 * i : 2 * (lane % 4) + ((i - 2) & 1) + 8 * ((i - 2) >> 1);
}

// (The cluster kernel's chunk location and loads; the mma rows kernel's are RowChunks'.)
// The rows of this lane's keys of chunk `chunk` that lie in [load_from, load_to) (load_to at most
// the row's key count). One block-table lookup per chunk when its 16 keys share a KV block (block
// sizes that are multiples of 16), one per key otherwise. Every lookup is issued before any
// K/V load (fetch_chunk): a load issued between them made the next address wait for it.
template <int D>
__device__ __forceinline__ ChunkRows locate_chunk(const AttentionArgs& args, const int32_t* table,
                                                  int kv_head, int chunk, int lane, int load_from,
                                                  int load_to) {
  const int base = chunk * kChunkKeys, bs = args.block_size;
  const int base_block = base / bs, base_offset = base - base_block * bs;
  bool wanted[6];
#pragma unroll
  for (int i = 0; i < 6; ++i) {
    const int key = base + chunk_key(i, lane);
    wanted[i] = key >= load_from && key < load_to;
  }
  int64_t slot[6];
  if (base_offset + kChunkKeys <= bs) {  // the same for the whole warp
    const int64_t first = int64_t(__ldg(table + base_block)) * bs + base_offset;
#pragma unroll
    for (int i = 0; i < 6; ++i) slot[i] = first + chunk_key(i, lane);
  } else {
#pragma unroll
    for (int i = 0; i < 6; ++i) {
      const int key = base + chunk_key(i, lane);
      slot[i] = wanted[i] ? int64_t(__ldg(table + key / bs)) * bs + key % bs : 0;
    }
  }
  const int64_t row_vecs = int64_t(args.num_kv_heads) * (D / 8);  // uint4s per cache slot
  const int64_t head_vec = int64_t(kv_head) * (D / 8);
  ChunkRows rows;
#pragma unroll
  for (int r = 0; r < 2; ++r)
    rows.k[r] = wanted[r] ? slot[r] * row_vecs + head_vec + (lane % 4) * (D / 32) : -1;
#pragma unroll
  for (int r = 0; r < 4; ++r)
    rows.v[r] = wanted[2 + r] ? slot[2 + r] * row_vecs + head_vec + (lane / 4) * (D / 64) : -1;
  return rows;
}

// Loads the slices locate_chunk found; the others keep what they hold.
// evict_first (kv_evict_first): with the L2 evict_first policy, else plain read-only loads.
template <int D>
__device__ __forceinline__ void fetch_chunk(const AttentionArgs& args, const ChunkRows& rows,
                                            ChunkKv<D>& kv, bool evict_first) {
  const uint4* k_cache = static_cast<const uint4*>(args.k_cache);
  const uint4* v_cache = static_cast<const uint4*>(args.v_cache);
  const StreamHint hint = StreamHint::make(true);
  const auto load = [&](const uint4* p) { return evict_first ? hint.load_read_only(p) : __ldg(p); };
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (rows.k[r] >= 0) {
#pragma unroll
      for (int w = 0; w < D / 32; ++w) kv.k[r][w] = load(k_cache + rows.k[r] + w);
    }
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    if (rows.v[r] >= 0) {
#pragma unroll
      for (int w = 0; w < D / 64; ++w) kv.v[r][w] = load(v_cache + rows.v[r] + w);
    }
  }
}

// Whether a row of num_keys keys loads its K/V with evict_first
// (AttentionArgs::kv_evict_first_keys).
__device__ __forceinline__ bool kv_evict_first(const AttentionArgs& args, int num_keys) {
  return args.kv_evict_first_keys > 0 &&
         int64_t(num_keys) * args.num_tokens > args.kv_evict_first_keys;
}

template <int N>
__device__ __forceinline__ uint32_t word_of(const uint4 (&vecs)[N], int w) {
  return reinterpret_cast<const uint32_t*>(vecs)[w];
}

// One chunk's online-softmax update of this warp's state: m (the row's running max, base 2, the
// same in the 4 lanes of a row), l (this lane's share of the row's sum; the 4 are summed at the
// end) and o (n-tile j: c0, c1 = head g, dims (2t + e) * D/8 + j; c2, c3 are the zero rows').
// qa: this lane's A fragments of Q (k-step s: head g's dims t * D/4 + 4s + {0, 1} and {2, 3}).
template <typename T, int D>
__device__ __forceinline__ void attend_chunk(const ChunkKv<D>& kv, const uint32_t (&qa)[D / 16][2],
                                             int base, int keys_end, float qscale, int lane,
                                             float& m, float& l, float (&o)[D / 8][4]) {
  const int t = lane % 4;
  float s[2][4] = {};
#pragma unroll
  for (int step = 0; step < D / 16; ++step) {
    const uint32_t a[4] = {qa[step][0], 0u, qa[step][1], 0u};
#pragma unroll
    for (int j = 0; j < 2; ++j)
      mma_16816<T>(s[j], a, word_of(kv.k[j], 2 * step), word_of(kv.k[j], 2 * step + 1));
  }
  float x[4];  // x[2j + e]: key base + 8j + 2t + e, scaled to base 2, -inf past the valid keys
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e)
      x[2 * j + e] = base + 8 * j + 2 * t + e < keys_end ? s[j][e] * qscale : -INFINITY;
  }
  float chunk_max = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
  chunk_max = fmaxf(chunk_max, __shfl_xor_sync(0xffffffffu, chunk_max, 1));
  chunk_max = fmaxf(chunk_max, __shfl_xor_sync(0xffffffffu, chunk_max, 2));
  // The chunk holds at least one valid key, so m_new is finite (or NaN from a NaN score).
  const float m_new = fmaxf(m, chunk_max);
  const float correction = exp2f(m - m_new);
  m = m_new;
  l *= correction;
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    o[j][0] *= correction;
    o[j][1] *= correction;
  }
  float p[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    p[i] = exp2f(x[i] - m_new);
    l += p[i];
  }
  // P as A fragments (head g; keys 2t, 2t + 1 and 2t + 8, 2t + 9), V as B fragments. P is
  // split into two T terms, p = hi + lo: one bf16 P (8 bits) made the real SmolLM2's greedy
  // tokens part from the CPU's earlier than the scalar kernel's fp32 P; the pair carries ~16 bits
  // for one more mma per n-tile.
  float lo[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) lo[i] = p[i] - to_float(from_float<T>(p[i]));
  const uint32_t pa_hi[4] = {pack2<T>(p[0], p[1]), 0u, pack2<T>(p[2], p[3]), 0u};
  const uint32_t pa_lo[4] = {pack2<T>(lo[0], lo[1]), 0u, pack2<T>(lo[2], lo[3]), 0u};
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    const uint32_t selector = j % 2 == 0 ? 0x5410u : 0x7632u;  // the low or the high halves
    const uint32_t b0 = __byte_perm(word_of(kv.v[0], j / 2), word_of(kv.v[1], j / 2), selector);
    const uint32_t b1 = __byte_perm(word_of(kv.v[2], j / 2), word_of(kv.v[3], j / 2), selector);
    mma_16816<T>(o[j], pa_hi, b0, b1);
    mma_16816<T>(o[j], pa_lo, b0, b1);
  }
}

// Which dims a lane's 16-byte K slices hold, so Q's fragments follow: the cluster kernel's
// contiguous slice (lane t: dims t * D/4 .. + D/4, the order the comment above describes) or
// RowChunks' whole sectors (lane t's uint4 w: dims w * 32 + t * 8 .. + 8; attention.cu).
enum class KSlices { kContiguous, kSectors };

// Lane (g, t)'s A fragments of query head g (q_s: (G, D), the block's heads as stored) for
// attend_chunk, in the dim order kSlices loads K; zero for g >= heads (the mma's zero rows).
template <KSlices kSlices, typename T, int D>
__device__ __forceinline__ void load_q_fragments(const T (*q_s)[D], int g, int t, int heads,
                                                 uint32_t (&qa)[D / 16][2]) {
  uint4 slice[D / 32] = {};
  if (g < heads) {
#pragma unroll
    for (int w = 0; w < D / 32; ++w) {
      const int dim = kSlices == KSlices::kSectors ? w * 32 + t * 8 : t * (D / 4) + w * 8;
      slice[w] = *reinterpret_cast<const uint4*>(&q_s[g][dim]);
    }
  }
#pragma unroll
  for (int step = 0; step < D / 16; ++step) {
    qa[step][0] = word_of(slice, 2 * step);
    qa[step][1] = word_of(slice, 2 * step + 1);
  }
}

// A warp's attend_chunk state into slot `warp` of the block's m_s, l_s (kWarps, G) and o_s
// (kWarps, G, D) for combine_warps / warp_weights: l summed over the row's 4 lanes; o's n-tile j
// column 2t + e is dim (2t + e) * D/8 + j. Heads from `heads` on are left unwritten. A warp that
// saw no chunk leaves m -inf, so it weighs 0.
template <int D, int G>
__device__ __forceinline__ void publish_chunk_state(float (*m_s)[G], float (*l_s)[G],
                                                    float (*o_s)[G][D], int warp, int lane,
                                                    int heads, float m, float l,
                                                    const float (&o)[D / 8][4]) {
  const int g = lane / 4, t = lane % 4;
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (g >= heads) return;
  if (t == 0) {
    m_s[warp][g] = m;
    l_s[warp][g] = l;
  }
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) o_s[warp][g][(2 * t + e) * (D / 8) + j] = o[j][e];
  }
}

// The cluster decode kernel (attention_decode.cu): query rows of every kind, head_dim 64 or 128,
// outside invariant mode and without a shared prefix. Each (row, KV head) is one cluster of
// thread blocks that merge their key splits through distributed shared memory: kClusterSplits, or
// AttentionArgs::cluster_splits for the tensor-core kernel.
constexpr int kClusterSplits = 8;
void launch_cluster_decode_attention(const AttentionArgs& args, cudaStream_t stream);

}  // namespace attention_detail
}  // namespace rose
