#pragma once
// The CUDA backend's measurement switches (ROSEINFER_CUDA_*), read once when a backend is built:
// each field documents its variable; the kernels' own switches are
// kernels/common/kernel_switches.h. A value a switch does not take stops the run with its name
// (kernels/common/switch_reader.h). Plain C++ without CUDA, so the CPU tests check the reading.
#include <array>
#include <cstdint>
#include <string>

#include "kernels/common/switch_reader.h"

namespace rose {

// Bits of BackendSwitches::skip_kernels (CudaBackend::skipped).
enum SkipKernel : unsigned {
  kSkipNorm = 1,
  kSkipRope = 2,
  kSkipAttention = 4,
  kSkipGemv = 8,
  kSkipCollective = 16,  // tensor parallel's all-reduces and the logits' gather
};

// The bounds some switches are checked against (the kernels' compiled row counts).
struct BackendSwitchLimits {
  int gemv_max_rows = 4;        // kGemvMaxRows
  int quant_mma_max_rows = 32;  // kGemvQuantMmaMaxRows
  int gemv_mma_max_rows = 32;   // kGemvMmaMaxRows
};

// -1 in a row count: the backend's own rule (cuda_backend.h says why each default is what it is).
struct BackendSwitches {
  // ROSEINFER_CUDA_STATS: 0 off, 1 totals at exit, 2 also one line a step after warm-up.
  int stats = 0;
  // ROSEINFER_CUDA_PROFILE_STEP=k: cudaProfilerStart/Stop around the k-th step after warm-up, for
  // `ncu --profile-from-start off`; -1: off.
  int64_t profile_step = -1;
  // ROSEINFER_CUDA_REPLAY=K (>= 1): every graphed step's graph replayed K times back to back (the
  // same inputs, so the same KV writes and ids). Replays after the first are queued while the GPU
  // runs, so (TPOT at K) - (TPOT at 1) is K - 1 steps of GPU time alone, and what is left of one
  // step is the time the GPU waits on the host
  // (results/2026-11-25-norm-after/host_gap_replay_h200).
  int graph_replays = 1;
  // ROSEINFER_CUDA_SKIP=norm,rope,attention,gemv,collective (any of them, comma-separated): those
  // kernels left out of every forward (SkipKernel bits), so a step's time without them shows what
  // they cost inside the graph. The outputs are wrong.
  unsigned skip_kernels = 0;
  // ROSEINFER_CUDA_ATTENTION_PROBE=1|2: the cluster decode attention returns right after its PDL
  // wait, or skips its merge across the cluster (AttentionArgs::probe). The outputs are wrong.
  int attention_probe = 0;
  bool shared_prefix = true;  // ROSEINFER_CUDA_SHARED_PREFIX=0: never the shared-prefix launch
  bool bucketed_gemm = true;  // ROSEINFER_CUDA_BUCKETED_GEMM=0: cublasGemmEx alone
  // ROSEINFER_CUDA_INVARIANT_ATTENTION=split: --batch-invariant keeps the split-KV attention.
  bool invariant_split_attention = false;
  int gemv_max_rows = -1;  // ROSEINFER_CUDA_GEMV_MAX_ROWS: 0..gemv_max_rows
  // ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS: the most rows a dense product runs on the tensor-core GEMV
  // (gemv_mma.cuh) past the GEMV's, 0..gemv_mma_max_rows (0: cuBLAS takes them all).
  int gemv_mma_max_rows = -1;
  // The most rows a tensor-parallel row-parallel GEMV pushes its partial at (pushes_partial),
  // ROSEINFER_CUDA_GEMV_PUSH: 0..gemv_max_rows (0: the fused kernel takes them). One: on two
  // H200s (results/2026-11-29-tp-low-latency) the push took 10-12 us off llama-8b's batch-1 step
  // (2.421 against 2.431-2.433 ms) and nothing at two rows (2.801 against 2.803).
  int gemv_push_max_rows = 1;
  // Default mode: pure-decode steps of at least this many sequences run the tensor-core attention
  // (0: never). ROSEINFER_CUDA_TC_DECODE_MIN_SEQS sets it (experiment).
  int tc_decode_min_seqs = 0;
  // The tile GEMM's row limits per shape class (square, down, wide):
  // ROSEINFER_CUDA_GEMM_QUANT_ROWS=S,D,W (each -1 for the rule, 0 off, or a row count), or
  // ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=R for all three.
  std::array<int, 3> gemm_quant_rows = {-1, -1, -1};
  // --batch-invariant: every product of a kept matrix through the tile-decoding GEMM instead of a
  // decoded copy and the pinned GEMM. Off: on the H100 at llama-1b Q4_K, batch 64, it decoded at
  // 18,319 tok/s against 18,797 and prefilled at 107k against 261k (it decodes 28% faster at batch
  // 1; results/2026-11-24-quant-gemm/check). ROSEINFER_CUDA_GEMM_QUANT_INVARIANT=1 turns it on.
  bool gemm_quant_invariant = false;
  // Warm-up captures the graphs of buckets that run the tile-decoding GEMM twice (warm_up());
  // ROSEINFER_CUDA_RECAPTURE_GRAPHS=0 keeps the first capture (comparisons).
  bool recapture_graphs = true;
  // The cluster attention also does the step's RoPE and KV write (AttentionArgs::fuse_rope);
  // ROSEINFER_CUDA_FUSED_ROPE=0 keeps the separate kernel (comparisons).
  bool fused_rope = true;
  int cluster_attention_max_rows = -1;  // ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS (0: off)
  int fused_norm_rows = -1;             // ROSEINFER_CUDA_FUSED_NORM (0: never)
  int quant_mma_min_rows = -1;          // ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS
  int quant_mma_max_rows = -1;          // ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS: 0..quant_mma_max_rows
  // The int8 tensor-core GEMV takes Q4_K only, unless ROSEINFER_CUDA_QUANT_MMA_ALL_TYPES=1 (Q8_0,
  // Q4_0 and Q4_1 too): their 34- and 18-byte blocks are read with 2-byte loads, and on llama-1b
  // and llama-8b at 8-32 rows its steps took 5-25% longer than on the dp4a GEMV and the tile GEMM
  // (results/2026-11-30-quant-mma/6_types; gpt2's Q8_0 at 16 rows 13% faster).
  bool quant_mma_all_types = false;
  // Q6_K (Q4_K_M's lm_head, and down and v in some layers) takes it too, so Q4_K_M's mixed qkv
  // does: Q4_K_M decode at 8 rows 20-22% faster than on the dp4a GEMV (llama-1b 1.392 -> 1.109
  // ms, llama-8b 5.370 -> 4.202), llama-1b 9.7% faster at 16 rows and even at 32 against the
  // paths past 8 rows (H200, results/2026-11-30-q6k-mma). ROSEINFER_CUDA_QUANT_MMA_Q6K=0: not
  // (comparisons).
  bool quant_mma_q6k = true;
  bool rope_table = true;       // ROSEINFER_CUDA_ROPE_TABLE=0: angles computed in place
  bool sample_copy = false;     // ROSEINFER_CUDA_SAMPLE_COPY=1: ids copied, not mapped
  bool fused_embedding = true;  // ROSEINFER_CUDA_FUSED_EMBEDDING=0
  // ROSEINFER_CUDA_TRACE_FILE=path: when the backend ends, the step timeline probe's records of
  // its GPU (kernels/cuda/trace_probe.h; scripts/timeline.py reads them) into path, or
  // path.gpuN for a backend on GPU N > 0. Only builds configured with -DROSEINFER_TRACE_PROBE=ON
  // have the probe; the others refuse the switch when the backend is built. Empty: off.
  std::string trace_file;
};

BackendSwitches backend_switches_from(const SwitchLookup& lookup,
                                      const BackendSwitchLimits& limits);
BackendSwitches backend_switches_from_env(const BackendSwitchLimits& limits);

}  // namespace rose
