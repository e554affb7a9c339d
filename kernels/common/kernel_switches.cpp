#include "kernels/common/kernel_switches.h"

#include <algorithm>
#include <cstdlib>

namespace rose {
namespace {

using Lookup = std::function<const char*(const char*)>;

// On unless the variable starts with '0'.
bool unless_zero(const Lookup& lookup, const char* name, bool fallback) {
  const char* value = lookup(name);
  return value && value[0] == '0' ? false : fallback;
}

// A non-negative count when the variable is set and non-empty (atoi, negatives as 0), else
// `fallback`.
int count_or(const Lookup& lookup, const char* name, int fallback) {
  const char* value = lookup(name);
  return value && *value ? std::max(0, std::atoi(value)) : fallback;
}

KernelSwitches& current() {
  static KernelSwitches switches = kernel_switches_from_env();
  return switches;
}

}  // namespace

KernelSwitches kernel_switches_from(const Lookup& lookup) {
  KernelSwitches s;
  s.pdl = unless_zero(lookup, "ROSEINFER_CUDA_PDL", s.pdl);
  s.cluster_attention_mma =
      unless_zero(lookup, "ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA", s.cluster_attention_mma);

  if (const char* wave = lookup("ROSEINFER_CUDA_GEMV_WAVE");
      wave && (wave[0] == '0' || wave[0] == '1')) {
    s.gemv_wave = wave[0] - '0';
  }
  if (const char* split = lookup("ROSEINFER_CUDA_GEMV_SPLIT"); split && split[0] == '1') {
    s.gemv_max_split = 1;
  }
  if (const char* rows = lookup("ROSEINFER_CUDA_GEMV_ROWS"); rows && rows[0] == '4') {
    s.gemv_rows_specialized = false;
  }
  s.gemv_prefetch_bytes = count_or(lookup, "ROSEINFER_CUDA_GEMV_PREFETCH", s.gemv_prefetch_bytes);

  s.gemv_quant_early = unless_zero(lookup, "ROSEINFER_CUDA_GEMV_QUANT_EARLY", s.gemv_quant_early);
  s.gemv_quant_direct =
      unless_zero(lookup, "ROSEINFER_CUDA_GEMV_QUANT_DIRECT", s.gemv_quant_direct);
  if (const char* rows = lookup("ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS");
      rows && (rows[0] == '2' || rows[0] == '4')) {
    s.gemv_quant_direct_max_rows = rows[0] - '0';
  }
  s.gemv_quant_two_blocks =
      unless_zero(lookup, "ROSEINFER_CUDA_GEMV_QUANT_TWO_BLOCKS", s.gemv_quant_two_blocks);
  if (const char* threads = lookup("ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS");
      threads && std::atoi(threads) == 256) {
    s.gemv_quant_direct_threads = 256;
  }
  s.gemv_quant_mma_staged =
      unless_zero(lookup, "ROSEINFER_CUDA_GEMV_QUANT_MMA_STAGED", s.gemv_quant_mma_staged);

  s.gemm_quant_split_k = count_or(lookup, "ROSEINFER_GEMM_QUANT_SPLIT_K", s.gemm_quant_split_k);
  s.gemm_quant_wgmma = unless_zero(lookup, "ROSEINFER_GEMM_QUANT_WGMMA", s.gemm_quant_wgmma);
  s.gemm_quant_split_tiles =
      unless_zero(lookup, "ROSEINFER_GEMM_QUANT_SPLIT_TILES", s.gemm_quant_split_tiles);
  return s;
}

KernelSwitches kernel_switches_from_env() {
  return kernel_switches_from([](const char* name) { return std::getenv(name); });
}

const KernelSwitches& kernel_switches() { return current(); }

void set_kernel_switches(const KernelSwitches& switches) { current() = switches; }

}  // namespace rose
