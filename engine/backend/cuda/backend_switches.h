#pragma once
// The CUDA backend's measurement switches (ROSEINFER_CUDA_*), read once when a backend is built:
// each field documents its variable; the kernels' own switches are
// kernels/common/kernel_switches.h. A value a switch does not take stops the run with its name
// (kernels/common/switch_reader.h). Plain C++ without CUDA, so the CPU tests check the reading.
#include <array>
#include <cstdint>

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
};

// -1 in a row count: the backend's own rule (cuda_backend.h says why each default is what it is).
struct BackendSwitches {
  // ROSEINFER_CUDA_STATS: 0 off, 1 totals at exit, 2 also one line a step after warm-up.
  int stats = 0;
  // ROSEINFER_CUDA_PROFILE_STEP=k: cudaProfilerStart/Stop around step k after warm-up; -1 off.
  int64_t profile_step = -1;
  // ROSEINFER_CUDA_REPLAY=K (>= 1): every graphed step's graph replayed K times.
  int graph_replays = 1;
  // ROSEINFER_CUDA_SKIP=norm,rope,attention,gemv,collective (any of them, comma-separated):
  // kernels left out of every forward (SkipKernel bits). The outputs are wrong.
  unsigned skip_kernels = 0;
  // ROSEINFER_CUDA_ATTENTION_PROBE=1|2: the cluster decode attention cut short (AttentionArgs).
  int attention_probe = 0;
  bool shared_prefix = true;  // ROSEINFER_CUDA_SHARED_PREFIX=0: never the shared-prefix launch
  bool bucketed_gemm = true;  // ROSEINFER_CUDA_BUCKETED_GEMM=0: cublasGemmEx alone
  // ROSEINFER_CUDA_INVARIANT_ATTENTION=split: --batch-invariant keeps the split-KV attention.
  bool invariant_split_attention = false;
  int gemv_max_rows = -1;  // ROSEINFER_CUDA_GEMV_MAX_ROWS: 0..gemv_max_rows
  // The most rows a tensor-parallel row-parallel GEMV pushes its partial at (pushes_partial),
  // ROSEINFER_CUDA_GEMV_PUSH: 0..gemv_max_rows (0: the fused kernel takes them). One: on two
  // H200s (results/2026-11-29-tp-low-latency) the push took 10-12 us off llama-8b's batch-1 step
  // (2.421 against 2.431-2.433 ms) and nothing at two rows (2.801 against 2.803).
  int gemv_push_max_rows = 1;
  int tc_decode_min_seqs = 0;  // ROSEINFER_CUDA_TC_DECODE_MIN_SEQS (0: never)
  // The tile GEMM's row limits per shape class (square, down, wide):
  // ROSEINFER_CUDA_GEMM_QUANT_ROWS=S,D,W (each -1 for the rule, 0 off, or a row count), or
  // ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS=R for all three.
  std::array<int, 3> gemm_quant_rows = {-1, -1, -1};
  bool gemm_quant_invariant = false;    // ROSEINFER_CUDA_GEMM_QUANT_INVARIANT=1
  bool recapture_graphs = true;         // ROSEINFER_CUDA_RECAPTURE_GRAPHS=0
  bool fused_rope = true;               // ROSEINFER_CUDA_FUSED_ROPE=0
  int cluster_attention_max_rows = -1;  // ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS (0: off)
  int fused_norm_rows = -1;             // ROSEINFER_CUDA_FUSED_NORM (0: never)
  int quant_mma_min_rows = -1;          // ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS
  int quant_mma_max_rows = -1;          // ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS: 0..quant_mma_max_rows
  bool quant_mma_all_types = false;     // ROSEINFER_CUDA_QUANT_MMA_ALL_TYPES=1
  bool quant_mma_q6k = true;            // ROSEINFER_CUDA_QUANT_MMA_Q6K=0
  bool rope_table = true;               // ROSEINFER_CUDA_ROPE_TABLE=0: angles computed in place
  bool sample_copy = false;             // ROSEINFER_CUDA_SAMPLE_COPY=1: ids copied, not mapped
  bool fused_embedding = true;          // ROSEINFER_CUDA_FUSED_EMBEDDING=0
};

BackendSwitches backend_switches_from(const SwitchLookup& lookup,
                                      const BackendSwitchLimits& limits);
BackendSwitches backend_switches_from_env(const BackendSwitchLimits& limits);

}  // namespace rose
