#include "kernels/common/kernel_switches.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "kernels/common/error.h"

namespace rose {
namespace {

using Lookup = std::function<const char*(const char*)>;

// A variable that is set to something this reader does not know stops the run here: a switch
// silently left at its default would make a comparison measure the wrong kernel.
[[noreturn]] void refuse(const char* name, std::string_view value, const char* want) {
  throw Error(std::string(name) + "=" + std::string(value) + ": want " + want);
}

// The value paired with the variable's text among `choices`, or `fallback` when it is unset or
// empty; anything else is refused with `want` as the message.
int one_of(const Lookup& lookup, const char* name,
           std::initializer_list<std::pair<const char*, int>> choices, int fallback,
           const char* want) {
  const char* value = lookup(name);
  if (value == nullptr || *value == '\0') return fallback;
  for (const auto& [text, result] : choices) {
    if (std::string_view(value) == text) return result;
  }
  refuse(name, value, want);
}

// 0 turns an on-by-default switch off, 1 leaves it on.
bool on_off(const Lookup& lookup, const char* name, bool fallback) {
  return one_of(lookup, name, {{"0", 0}, {"1", 1}}, fallback ? 1 : 0, "0 or 1") == 1;
}

// A non-negative decimal count, or `fallback` when unset or empty.
int count_or(const Lookup& lookup, const char* name, int fallback) {
  const char* value = lookup(name);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string_view text(value);
  int result = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), result);
  if (error != std::errc() || end != text.data() + text.size() || result < 0) {
    refuse(name, text, "a non-negative whole number");
  }
  return result;
}

KernelSwitches& current() {
  static KernelSwitches switches = kernel_switches_from_env();
  return switches;
}

}  // namespace

KernelSwitches kernel_switches_from(const Lookup& lookup) {
  KernelSwitches s;
  s.pdl = on_off(lookup, "ROSEINFER_CUDA_PDL", s.pdl);
  s.cluster_attention_mma =
      on_off(lookup, "ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA", s.cluster_attention_mma);

  s.gemv_wave = one_of(lookup, "ROSEINFER_CUDA_GEMV_WAVE", {{"0", 0}, {"1", 1}}, s.gemv_wave,
                       "0 (never the one-wave kernel) or 1 (always)");
  s.gemv_max_split = one_of(lookup, "ROSEINFER_CUDA_GEMV_SPLIT", {{"1", 1}, {"4", 4}},
                            s.gemv_max_split, "1 or 4 (warps a dot product)");
  s.gemv_rows_specialized =
      one_of(lookup, "ROSEINFER_CUDA_GEMV_ROWS", {{"4", 0}}, s.gemv_rows_specialized ? 1 : 0,
             "4 (every row count on the 4-row kernel)") == 1;
  s.gemv_prefetch_bytes = count_or(lookup, "ROSEINFER_CUDA_GEMV_PREFETCH", s.gemv_prefetch_bytes);

  s.gemv_quant_early = on_off(lookup, "ROSEINFER_CUDA_GEMV_QUANT_EARLY", s.gemv_quant_early);
  s.gemv_quant_direct = on_off(lookup, "ROSEINFER_CUDA_GEMV_QUANT_DIRECT", s.gemv_quant_direct);
  s.gemv_quant_direct_max_rows =
      one_of(lookup, "ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS", {{"2", 2}, {"4", 4}, {"8", 8}},
             s.gemv_quant_direct_max_rows, "2, 4 or 8");
  s.gemv_quant_two_blocks =
      on_off(lookup, "ROSEINFER_CUDA_GEMV_QUANT_TWO_BLOCKS", s.gemv_quant_two_blocks);
  s.gemv_quant_direct_threads =
      one_of(lookup, "ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS", {{"256", 256}, {"512", 512}},
             s.gemv_quant_direct_threads, "256 or 512");
  s.gemv_quant_mma_staged =
      on_off(lookup, "ROSEINFER_CUDA_GEMV_QUANT_MMA_STAGED", s.gemv_quant_mma_staged);

  s.gemm_quant_split_k = count_or(lookup, "ROSEINFER_GEMM_QUANT_SPLIT_K", s.gemm_quant_split_k);
  s.gemm_quant_wgmma = on_off(lookup, "ROSEINFER_GEMM_QUANT_WGMMA", s.gemm_quant_wgmma);
  s.gemm_quant_split_tiles =
      on_off(lookup, "ROSEINFER_GEMM_QUANT_SPLIT_TILES", s.gemm_quant_split_tiles);
  return s;
}

KernelSwitches kernel_switches_from_env() {
  return kernel_switches_from([](const char* name) { return std::getenv(name); });
}

const KernelSwitches& kernel_switches() { return current(); }

void set_kernel_switches(const KernelSwitches& switches) { current() = switches; }

}  // namespace rose
