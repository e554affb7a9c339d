#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/tile_ptx.cuh"

namespace rose {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 16;               // the M of one m16n8k16 mma
constexpr int kTileQ = kWarps * kRowsPerWarp;  // query rows per thread block
constexpr int kTileK = 64;                     // keys per K/V tile
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kTileK % 16 == 0, "P.V consumes keys 16 at a time (the K of the mma)");

// ---- Shared-memory tiles ------------------------------------------------------------------------
// A tile is rows of D 2-byte elements; each row is D / 8 chunks of 16 bytes. Chunk c of row r is
// stored at chunk c ^ (r & 7): the 8 row addresses one ldmatrix matrix reads (8 consecutive rows,
// the same logical chunk) then fall in 8 different 16-byte bank groups instead of all in one.
template <int D>
__device__ __forceinline__ int tile_offset(int row, int col) {  // col: a multiple of 8
  static_assert(D % 64 == 0, "the swizzle permutes 8 chunks within each row");
  return row * D + (((col >> 3) ^ (row & 7)) << 3);
}

// ---- Fragments (layouts and the PTX wrappers: tile_ptx.cuh) -----------------------------------

// A fragment of rows [row0, row0+16) x columns [col0, col0+16) of a row-major tile.
// Matrix i = lane / 8 covers rows row0 + (i & 1) * 8 and columns col0 + (i >> 1) * 8, giving
// a0..a3 in the order tile_ptx.cuh gives.
template <int D>
__device__ __forceinline__ void load_a_fragment(uint32_t (&a)[4], const void* tile, int row0,
                                                int col0, int lane) {
  const int i = lane >> 3, r = lane & 7;
  const void* p = static_cast<const uint16_t*>(tile) +
                  tile_offset<D>(row0 + r + (i & 1) * 8, col0 + (i >> 1) * 8);
  ldmatrix_x4(a, shared_address(p));
}

// B fragments of K^T for S = Q K^T, from K stored (key, d): B[k = d][n = key]. Row n of the tile
// is key n, its columns are k, so a plain ldmatrix gives lane l key g, d 2t..2t+1 = b0's layout.
// Covers keys [key0, key0+16) (two n-tiles) x d [d0, d0+16): matrix i reads keys key0 + (i >> 1)*8,
// d d0 + (i & 1) * 8, so b[0], b[1] are n-tile key0 and b[2], b[3] n-tile key0 + 8.
template <int D>
__device__ __forceinline__ void load_k_fragments(uint32_t (&b)[4], const void* tile, int key0,
                                                 int d0, int lane) {
  const int i = lane >> 3, r = lane & 7;
  const void* p = static_cast<const uint16_t*>(tile) +
                  tile_offset<D>(key0 + r + (i >> 1) * 8, d0 + (i & 1) * 8);
  ldmatrix_x4(b, shared_address(p));
}

// B fragments of V for O += P V, from V stored (key, d): B[k = key][n = d]. k must be the fast
// index of each register pair, so the 8x8 matrices (rows = keys) are loaded transposed: lane l gets
// keys 2t..2t+1 of column d = g. Covers keys [key0, key0+16) x d [d0, d0+16): matrix i reads keys
// key0 + (i & 1) * 8, d d0 + (i >> 1) * 8, so b[0], b[1] are n-tile d0 and b[2], b[3] n-tile d0+8.
template <int D>
__device__ __forceinline__ void load_v_fragments(uint32_t (&b)[4], const void* tile, int key0,
                                                 int d0, int lane) {
  const int i = lane >> 3, r = lane & 7;
  const void* p = static_cast<const uint16_t*>(tile) +
                  tile_offset<D>(key0 + r + (i & 1) * 8, d0 + (i >> 1) * 8);
  ldmatrix_x4<true>(b, shared_address(p));
}

// ---- The kernel ---------------------------------------------------------------------------------
// Grid: one block per (query tile, sequence, query head), flattened with the head fastest (the
// heads of one GQA group read the same K/V, close together in time: L2 hits) and the query tiles
// in reverse (the last tiles of long chunks have the most keys; starting them first shortens the
// tail). Blocks past their sequence's chunk exit at once.
//
// Shared memory (dynamic, swizzled rows, see tile_offset):
//   q_s (kTileQ, D)          the block's query rows (rows past the chunk zero)
//   k_s (2, kTileK, D)       double-buffered key tile, keys past the last query's position zero
//   v_s (2, kTileK, D)       same for values
template <typename T, int D, bool kDecode>
__global__ void __launch_bounds__(kThreads)
    prefill_attention_kernel(AttentionArgs args, int num_seqs, int tiles_per_seq) {
  // kDecode (pure decode, one query token per sequence): a block per (sequence, KV head) whose
  // tile rows are that KV head's query heads, all at the sequence's last position, so each K/V
  // tile is read once per KV head. A row's arithmetic is the same as in a one-head tile (rows
  // never mix), so a position gets the same bits either way.
  static_assert(D == 64 || D == 128, "head_dim 64 or 128");
  constexpr int kChunks = D / 8;                    // 16-byte chunks per row
  constexpr int kRowsPerPass = kThreads / kChunks;  // rows one pass of the block copies
  static_assert(kThreads % kChunks == 0 && kTileK % kRowsPerPass == 0 && kTileQ % kRowsPerPass == 0,
                "each thread copies the same chunk column of every row it touches");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* k_s = q_s + kTileQ * D;
  T* v_s = k_s + 2 * kTileK * D;

  const int group = args.num_heads / args.num_kv_heads;
  const int blocks_per_seq = kDecode ? args.num_kv_heads : args.num_heads;
  const int head = int(blockIdx.x % unsigned(blocks_per_seq));  // kDecode: the KV head
  const int rest = int(blockIdx.x / unsigned(blocks_per_seq));
  const int seq = rest % num_seqs;
  const int tile = tiles_per_seq - 1 - rest / num_seqs;

  pdl_wait();
  const int q_begin = args.query_start[seq];
  const int q_len = args.query_start[seq + 1] - q_begin;
  const int row0 = tile * kTileQ;  // first chunk row of this block
  if (row0 >= q_len) return;
  const int rows = kDecode ? group : min(kTileQ, q_len - row0);
  const int ctx = args.context_lens[seq];
  const int first_pos = ctx - q_len + row0;  // position of the block's row 0
  const int last_pos = kDecode ? first_pos : first_pos + rows - 1;
  const int num_key_tiles = last_pos / kTileK + 1;  // keys past last_pos are never needed
  const int kv_head = kDecode ? head : head / group;
  const int32_t* table = args.block_tables + int64_t(seq) * *args.block_table_stride;
  const T* q = static_cast<const T*>(args.q);
  const T* k_cache = static_cast<const T*>(args.k_cache);
  const T* v_cache = static_cast<const T*>(args.v_cache);
  const int block_size = args.block_size;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int chunk = tid % kChunks, first_row = tid / kChunks;

  // Query rows of the chunk; rows past it read nothing and stay zero.
  for (int r = first_row; r < kTileQ; r += kRowsPerPass) {
    const bool valid = r < rows;
    // Row r: query head `head` of chunk token row0 + r, or (kDecode) query head kv_head * group + r
    // of the one token.
    const int64_t token = kDecode ? q_begin : q_begin + row0 + r;
    const int q_head = kDecode ? kv_head * group + r : head;
    const T* src = valid ? q + token * args.q_stride + q_head * D + chunk * 8 : q;
    cp_async16(q_s + tile_offset<D>(r, chunk * 8), src, valid ? 16 : 0);
  }
  // Key tile kt into buffer buf, each key found through the block table. Keys past last_pos (past
  // the context too, where the table holds no valid block) read nothing and are zero, so masked
  // scores times zero values add exactly nothing.
  auto load_kv = [&](int kt, int buf) {
    T* k_dst = k_s + buf * kTileK * D;
    T* v_dst = v_s + buf * kTileK * D;
    for (int r = first_row; r < kTileK; r += kRowsPerPass) {
      const int key = kt * kTileK + r;
      const bool valid = key <= last_pos;
      int64_t offset = 0;
      if (valid) {
        const int64_t slot = int64_t(table[key / block_size]) * block_size + key % block_size;
        offset = (slot * args.num_kv_heads + kv_head) * D + chunk * 8;
      }
      cp_async16(k_dst + tile_offset<D>(r, chunk * 8), k_cache + offset, valid ? 16 : 0);
      cp_async16(v_dst + tile_offset<D>(r, chunk * 8), v_cache + offset, valid ? 16 : 0);
    }
  };
  load_kv(0, 0);
  cp_async_commit();

  // This thread's two rows of the warp's 16 (C layout: g and g + 8) and their positions; rows past
  // the chunk take the last row's position (finite, never written).
  const int g = lane >> 2, t = lane & 3;
  const int warp_row0 = warp * kRowsPerWarp;
  const int pos_lo = kDecode ? last_pos : min(first_pos + warp_row0 + g, last_pos);
  const int pos_hi = kDecode ? last_pos : min(first_pos + warp_row0 + g + 8, last_pos);
  const int warp_first_pos = kDecode ? last_pos : first_pos + warp_row0;
  const float scale_log2 = args.scale * kLog2e;

  uint32_t q_frag[D / 16][4];  // A fragments of the warp's 16 query rows, k-step by k-step
  float o[D / 8][4] = {};      // output accumulator: n-tile j = columns 8j..8j+7 (C layout)
  float m_lo = -INFINITY, m_hi = -INFINITY;  // running max (log2 domain) of rows g, g + 8
  float l_lo = 0.0f, l_hi = 0.0f;            // this thread's part of the running sums

  for (int kt = 0; kt < num_key_tiles; ++kt) {
    if (kt + 1 < num_key_tiles) {
      load_kv(kt + 1, (kt + 1) & 1);  // into the buffer the previous iteration finished with
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (kt == 0) {
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks)
        load_a_fragment<D>(q_frag[ks], q_s, warp_row0, ks * 16, lane);
    }
    const T* k_tile = k_s + (kt & 1) * kTileK * D;
    const T* v_tile = v_s + (kt & 1) * kTileK * D;

    // S = Q K^T for the warp's 16 rows x 64 keys: n-tile j = keys 8j..8j+7 of the tile.
    float s[kTileK / 8][4] = {};
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
      for (int j = 0; j < kTileK / 8; j += 2) {
        uint32_t b[4];
        load_k_fragments<D>(b, k_tile, j * 8, ks * 16, lane);
        mma_16816<T>(s[j], q_frag[ks], b[0], b[1]);
        mma_16816<T>(s[j + 1], q_frag[ks], b[2], b[3]);
      }
    }

    // Scale into the log2 domain; the causal mask only where a key can pass a row's position.
    const int key_base = kt * kTileK;
    const bool diagonal = key_base + kTileK - 1 > warp_first_pos;
    float tile_max_lo = -INFINITY, tile_max_hi = -INFINITY;
#pragma unroll
    for (int j = 0; j < kTileK / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key_base + j * 8 + 2 * t + (e & 1);
        float x = s[j][e] * scale_log2;
        if (diagonal && key > (e < 2 ? pos_lo : pos_hi)) x = -INFINITY;
        s[j][e] = x;
      }
      tile_max_lo = fmaxf(tile_max_lo, fmaxf(s[j][0], s[j][1]));
      tile_max_hi = fmaxf(tile_max_hi, fmaxf(s[j][2], s[j][3]));
    }
    // A row's 64 scores are spread over the 4 lanes of its quad (same g).
#pragma unroll
    for (int offset = 1; offset < 4; offset <<= 1) {
      tile_max_lo = fmaxf(tile_max_lo, __shfl_xor_sync(0xffffffffu, tile_max_lo, offset));
      tile_max_hi = fmaxf(tile_max_hi, __shfl_xor_sync(0xffffffffu, tile_max_hi, offset));
    }
    const float new_m_lo = fmaxf(m_lo, tile_max_lo), new_m_hi = fmaxf(m_hi, tile_max_hi);
    // A row that has seen only masked keys keeps m = -inf; subtract 0 then (exp2(-inf) = 0).
    const float base_lo = new_m_lo == -INFINITY ? 0.0f : new_m_lo;
    const float base_hi = new_m_hi == -INFINITY ? 0.0f : new_m_hi;
    const float alpha_lo = exp2f(m_lo - base_lo), alpha_hi = exp2f(m_hi - base_hi);
    m_lo = new_m_lo;
    m_hi = new_m_hi;
    float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
    for (int j = 0; j < kTileK / 8; ++j) {
      s[j][0] = exp2f(s[j][0] - base_lo);
      s[j][1] = exp2f(s[j][1] - base_lo);
      s[j][2] = exp2f(s[j][2] - base_hi);
      s[j][3] = exp2f(s[j][3] - base_hi);
      sum_lo += s[j][0] + s[j][1];
      sum_hi += s[j][2] + s[j][3];
    }
    l_lo = l_lo * alpha_lo + sum_lo;
    l_hi = l_hi * alpha_hi + sum_hi;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[j][0] *= alpha_lo;
      o[j][1] *= alpha_lo;
      o[j][2] *= alpha_hi;
      o[j][3] *= alpha_hi;
    }

    // O += P V, 16 keys per k-step. The C fragments of n-tiles 2kk and 2kk+1 of S are exactly the
    // A fragment of keys 16kk..16kk+15: a0 = (row g, keys 2t..) = s[2kk][0..1], a1 = row g+8 =
    // s[2kk][2..3], a2 = (row g, keys 2t+8..) = s[2kk+1][0..1], a3 = s[2kk+1][2..3].
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk) {
      const uint32_t p[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                             pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                             pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int j = 0; j < D / 8; j += 2) {
        uint32_t b[4];
        load_v_fragments<D>(b, v_tile, kk * 16, j * 8, lane);
        mma_16816<T>(o[j], p, b[0], b[1]);
        mma_16816<T>(o[j + 1], p, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
  pdl_launch_dependents();

#pragma unroll
  for (int offset = 1; offset < 4; offset <<= 1) {
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, offset);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, offset);
  }
  // l >= 1 for every live row (its max term is exp2(0)); a NaN score makes it NaN, which must
  // reach the output as in the split-KV kernel.
  const float inv_lo = 1.0f / l_lo, inv_hi = 1.0f / l_hi;
  const int row_lo = warp_row0 + g, row_hi = row_lo + 8;
  const int64_t out_stride = int64_t(args.num_heads) * D;
  uint32_t* out = static_cast<uint32_t*>(args.out);  // pairs of T
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    // Row r's place: (token, head) as its query was read above.
    auto at = [&](int r) {
      const int64_t token = kDecode ? q_begin : q_begin + row0 + r;
      const int q_head = kDecode ? kv_head * group + r : head;
      return (token * out_stride + q_head * D + j * 8 + 2 * t) / 2;
    };
    if (row_lo < rows) out[at(row_lo)] = pack2<T>(o[j][0] * inv_lo, o[j][1] * inv_lo);
    if (row_hi < rows) out[at(row_hi)] = pack2<T>(o[j][2] * inv_hi, o[j][3] * inv_hi);
  }
}

template <int D>
constexpr size_t smem_bytes() {
  return size_t(kTileQ + 4 * kTileK) * D * 2;  // q_s, k_s and v_s (two buffers each)
}

template <typename T, int D, bool kDecode>
void launch_typed(const AttentionArgs& args, int num_seqs, int max_query_len, cudaStream_t stream) {
  auto* kernel = prefill_attention_kernel<T, D, kDecode>;
  constexpr size_t smem = smem_bytes<D>();
  // Above 48 KiB needs the opt-in, a property of the function on the current device (replicas on
  // several GPUs, driven from several threads).
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), int(smem));
  const int tiles_per_seq = (max_query_len + kTileQ - 1) / kTileQ;
  const int64_t blocks =
      int64_t(num_seqs) * tiles_per_seq * (kDecode ? args.num_kv_heads : args.num_heads);
  if (blocks > int64_t(0x7fffffff)) {
    cuda_fail("grid too large", "launch_prefill_attention", __FILE__, __LINE__);
  }
  launch_kernel(kernel, dim3(unsigned(blocks)), dim3(kThreads), smem, stream, args, num_seqs,
                tiles_per_seq);
}

template <typename T>
void launch_dim(const AttentionArgs& args, int num_seqs, int max_query_len, cudaStream_t stream) {
  // Pure decode with a GQA group that fits one tile: the query heads of a KV head share a block.
  const bool decode = max_query_len == 1 && args.num_heads / args.num_kv_heads <= kTileQ;
  if (args.head_dim == 64) {
    decode ? launch_typed<T, 64, true>(args, num_seqs, max_query_len, stream)
           : launch_typed<T, 64, false>(args, num_seqs, max_query_len, stream);
  } else {
    decode ? launch_typed<T, 128, true>(args, num_seqs, max_query_len, stream)
           : launch_typed<T, 128, false>(args, num_seqs, max_query_len, stream);
  }
}

}  // namespace

bool prefill_attention_supported(const AttentionArgs& args) {
  return (args.head_dim == 64 || args.head_dim == 128) && args.num_kv_heads > 0 &&
         args.num_heads % args.num_kv_heads == 0 && args.block_size >= 1 &&
         args.q_stride % 8 == 0;  // 16-byte aligned query rows for cp.async
}

void launch_prefill_attention(const AttentionArgs& args, int num_seqs, int max_query_len,
                              cudaStream_t stream) {
  if (!prefill_attention_supported(args)) {
    cuda_fail("unsupported shape (head_dim 64/128, GQA, q_stride % 8)", "launch_prefill_attention",
              __FILE__, __LINE__);
  }
  if (num_seqs <= 0 || max_query_len <= 0) return;
  if (args.dtype == DType::kBF16) {
    launch_dim<__nv_bfloat16>(args, num_seqs, max_query_len, stream);
  } else {
    launch_dim<__half>(args, num_seqs, max_query_len, stream);
  }
}

}  // namespace rose
