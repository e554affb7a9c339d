#pragma once
// The CUDA kernels' measurement switches in one place: which kernel variant or launch shape a
// launcher picks, each set by a ROSEINFER_* environment variable for before/after comparisons with
// one binary, and by tests that compare two variants bit for bit. The defaults are what the
// measurements chose (each launcher's comment says where); a switch never changes what a product
// computes beyond the variants' documented bits, only which kernel computes it.
//
// Plain C++17 (the .cu files include it; no CUDA): the launchers read kernel_switches(); nothing
// else reads the environment for them.
#include <functional>

namespace rose {

struct KernelSwitches {
  // Flags on by default take 0 (off) or 1. ROSEINFER_CUDA_PDL=0: launches without programmatic
  // dependent launch (plain stream order).
  bool pdl = true;
  // ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA=0: the scalar cluster decode attention kernel.
  bool cluster_attention_mma = true;
  // ROSEINFER_CUDA_ATTENTION_KV_EVICT_FIRST=0: the cluster decode attention's K/V loads never take
  // the L2 evict_first policy (plain loads, as before it).
  bool attention_kv_evict_first = true;
  // ROSEINFER_CUDA_ATTENTION_ROWS_MMA=0: the split-KV decode launches of head_dim 64 and 128 (rows
  // past the cluster kernel's, no shared prefix, GQA groups of two or more) on the scalar rows
  // kernel instead of its tensor-core form (attention.cu, paged_attention_mma_rows_kernel).
  bool attention_rows_mma = true;
  // ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS=4, 8 or 16: the blocks of each cluster of the
  // tensor-core cluster decode attention, for every launch (0, unset:
  // AttentionArgs::cluster_splits, the backend's rule). A shape whose merge does not fit that many
  // (a block's share of the heads x head_dim outputs past its 128 threads) keeps 8.
  int cluster_attention_splits = 0;

  // Dense GEMV (gemv.cu). ROSEINFER_CUDA_GEMV_WAVE=0 / =1: the one-wave kernel never / always;
  // -1 (unset): the rule (rows its pre-wait chunks cover whole).
  int gemv_wave = -1;
  // ROSEINFER_CUDA_GEMV_SPLIT=1: one warp per feature (4, the default: up to four warps share a
  // dot product).
  int gemv_max_split = 4;
  // ROSEINFER_CUDA_GEMV_ROWS=4: every row count on the kernel compiled for 4 rows.
  bool gemv_rows_specialized = true;
  // ROSEINFER_CUDA_GEMV_PREFETCH=bytes: each weight row's first bytes asked into L2 before the
  // PDL wait (0: off).
  int gemv_prefetch_bytes = 768;

  // Quantized GEMV (gemv_quant.cu, gemv_quant_mma.cu).
  // ROSEINFER_CUDA_GEMV_QUANT_EARLY=0: every weight load after the PDL wait.
  bool gemv_quant_early = true;
  // ROSEINFER_CUDA_GEMV_QUANT_DIRECT=0: every type and row count through the staged dp4a kernel
  // (the direct kernel's bit reference).
  bool gemv_quant_direct = true;
  // ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS=2 or 4 (8, the default): rows above that go to the
  // staged kernel.
  int gemv_quant_direct_max_rows = 8;
  // ROSEINFER_CUDA_GEMV_QUANT_TWO_BLOCKS=0: never the 64-register two-blocks-an-SM build.
  bool gemv_quant_two_blocks = true;
  // ROSEINFER_CUDA_GEMV_QUANT_ONE_ROW_NORM=0: the direct GEMV's one-row norm input through the
  // general prologue (three trips to memory) instead of norm_quantize_one_row (one).
  bool gemv_quant_one_row_norm = true;
  // ROSEINFER_CUDA_GEMV_QUANT_EVICT_FIRST=0: the direct GEMV's weight loads with the L2's normal
  // eviction priority instead of evict_first.
  bool gemv_quant_evict_first = true;
  // ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS=256: the direct kernel's blocks at 256 threads (512,
  // the default).
  int gemv_quant_direct_threads = 512;
  // ROSEINFER_CUDA_GEMV_QUANT_MMA_STAGED=0: Q4_K's four column tiles of the int8 GEMV on the
  // register path instead of the shared-memory stages.
  bool gemv_quant_mma_staged = true;

  // Dense tensor-core GEMV (gemv_mma.cu). ROSEINFER_CUDA_GEMV_MMA_ROW_TILES=1, 2 or 4: that many
  // 16-feature row tiles a block for every product; 0 (unset): the rule (row_tiles_for).
  int gemv_mma_row_tiles = 0;

  // Tile-decoding quantized GEMM (gemm_quant.cu).
  // ROSEINFER_GEMM_QUANT_SPLIT_K: -1 (unset or empty) the rule, else that many k slices (0 and 1:
  // none).
  int gemm_quant_split_k = -1;
  // ROSEINFER_GEMM_QUANT_WGMMA=0: mma.sync tiles only.
  bool gemm_quant_wgmma = true;
  // ROSEINFER_GEMM_QUANT_SPLIT_TILES=0: the tile choice as before split-K, whatever the slices.
  bool gemm_quant_split_tiles = true;
  // ROSEINFER_GEMM_QUANT_PIPELINE=0: the wgmma tiles decode a sub-step only after the previous
  // sub-step's wgmmas are done (the loop before the software pipeline).
  bool gemm_quant_pipeline = true;
};

// The switches a lookup (a variable's value, or null when unset) gives: each variable is read as
// its comment above says, unset or empty keeps the default, and any other value is refused with a
// rose::Error naming the variable (the CUDA backend reads them while it is built, so a run stops
// before its first step).
KernelSwitches kernel_switches_from(const std::function<const char*(const char*)>& lookup);
KernelSwitches kernel_switches_from_env();

// What the launchers use: from the environment at first use, until set_kernel_switches replaces
// them. Set them only while no other thread launches kernels (tests and benches do, between
// launches).
const KernelSwitches& kernel_switches();
void set_kernel_switches(const KernelSwitches& switches);

// Changes switches for one scope and puts the previous ones back at its end (tests, benches).
class ScopedKernelSwitches {
 public:
  explicit ScopedKernelSwitches(const std::function<void(KernelSwitches&)>& change)
      : saved_(kernel_switches()) {
    KernelSwitches changed = saved_;
    change(changed);
    set_kernel_switches(changed);
  }
  ~ScopedKernelSwitches() { set_kernel_switches(saved_); }
  ScopedKernelSwitches(const ScopedKernelSwitches&) = delete;
  ScopedKernelSwitches& operator=(const ScopedKernelSwitches&) = delete;

 private:
  KernelSwitches saved_;
};

}  // namespace rose
