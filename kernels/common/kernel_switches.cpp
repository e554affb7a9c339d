#include "kernels/common/kernel_switches.h"

#include <initializer_list>
#include <limits>
#include <utility>

#include "kernels/common/switch_reader.h"

namespace rose {
namespace {

// A non-negative decimal count, or `fallback` when unset or empty.
int count_or(const SwitchLookup& lookup, const char* name, int fallback) {
  return switch_count(lookup, name, fallback, std::numeric_limits<int>::max(),
                      "a non-negative whole number");
}

KernelSwitches& current() {
  static KernelSwitches switches = kernel_switches_from_env();
  return switches;
}

}  // namespace

KernelSwitches kernel_switches_from(const SwitchLookup& lookup) {
  KernelSwitches s;
  s.pdl = switch_on_off(lookup, "ROSEINFER_CUDA_PDL", s.pdl);
  s.cluster_attention_mma =
      switch_on_off(lookup, "ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA", s.cluster_attention_mma);
  s.attention_kv_evict_first =
      switch_on_off(lookup, "ROSEINFER_CUDA_ATTENTION_KV_EVICT_FIRST", s.attention_kv_evict_first);
  s.attention_rows_mma =
      switch_on_off(lookup, "ROSEINFER_CUDA_ATTENTION_ROWS_MMA", s.attention_rows_mma);
  s.cluster_attention_splits = switch_one_of(
      lookup, "ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS", {{"4", 4}, {"8", 8}, {"16", 16}},
      s.cluster_attention_splits, "4, 8 or 16 (blocks a cluster)");

  s.gemv_wave = switch_one_of(lookup, "ROSEINFER_CUDA_GEMV_WAVE", {{"0", 0}, {"1", 1}}, s.gemv_wave,
                              "0 (never the one-wave kernel) or 1 (always)");
  s.gemv_max_split = switch_one_of(lookup, "ROSEINFER_CUDA_GEMV_SPLIT", {{"1", 1}, {"4", 4}},
                                   s.gemv_max_split, "1 or 4 (warps a dot product)");
  s.gemv_rows_specialized =
      switch_one_of(lookup, "ROSEINFER_CUDA_GEMV_ROWS", {{"4", 0}}, s.gemv_rows_specialized ? 1 : 0,
                    "4 (every row count on the 4-row kernel)") == 1;
  s.gemv_prefetch_bytes = count_or(lookup, "ROSEINFER_CUDA_GEMV_PREFETCH", s.gemv_prefetch_bytes);

  s.gemv_quant_early = switch_on_off(lookup, "ROSEINFER_CUDA_GEMV_QUANT_EARLY", s.gemv_quant_early);
  s.gemv_quant_direct =
      switch_on_off(lookup, "ROSEINFER_CUDA_GEMV_QUANT_DIRECT", s.gemv_quant_direct);
  s.gemv_quant_direct_max_rows =
      switch_one_of(lookup, "ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS", {{"2", 2}, {"4", 4}, {"8", 8}},
                    s.gemv_quant_direct_max_rows, "2, 4 or 8");
  s.gemv_quant_two_blocks =
      switch_on_off(lookup, "ROSEINFER_CUDA_GEMV_QUANT_TWO_BLOCKS", s.gemv_quant_two_blocks);
  s.gemv_quant_one_row_norm =
      switch_on_off(lookup, "ROSEINFER_CUDA_GEMV_QUANT_ONE_ROW_NORM", s.gemv_quant_one_row_norm);
  s.gemv_quant_evict_first =
      switch_on_off(lookup, "ROSEINFER_CUDA_GEMV_QUANT_EVICT_FIRST", s.gemv_quant_evict_first);
  s.gemv_quant_direct_threads =
      switch_one_of(lookup, "ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS",
                    {{"256", 256}, {"512", 512}}, s.gemv_quant_direct_threads, "256 or 512");
  s.gemv_mma_row_tiles =
      switch_one_of(lookup, "ROSEINFER_CUDA_GEMV_MMA_ROW_TILES", {{"1", 1}, {"2", 2}, {"4", 4}},
                    s.gemv_mma_row_tiles, "1, 2 or 4 (row tiles a block)");
  s.gemv_quant_mma_staged =
      switch_on_off(lookup, "ROSEINFER_CUDA_GEMV_QUANT_MMA_STAGED", s.gemv_quant_mma_staged);

  s.gemm_quant_split_k = count_or(lookup, "ROSEINFER_GEMM_QUANT_SPLIT_K", s.gemm_quant_split_k);
  s.gemm_quant_wgmma = switch_on_off(lookup, "ROSEINFER_GEMM_QUANT_WGMMA", s.gemm_quant_wgmma);
  s.gemm_quant_split_tiles =
      switch_on_off(lookup, "ROSEINFER_GEMM_QUANT_SPLIT_TILES", s.gemm_quant_split_tiles);
  s.gemm_quant_pipeline =
      switch_on_off(lookup, "ROSEINFER_GEMM_QUANT_PIPELINE", s.gemm_quant_pipeline);
  return s;
}

KernelSwitches kernel_switches_from_env() { return kernel_switches_from(switch_from_environment); }

const KernelSwitches& kernel_switches() { return current(); }

void set_kernel_switches(const KernelSwitches& switches) { current() = switches; }

}  // namespace rose
