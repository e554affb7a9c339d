#include "engine/backend/cuda/backend_switches.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string>
#include <string_view>

namespace rose {
namespace {

constexpr int64_t kMaxRows = std::numeric_limits<int>::max();

// ROSEINFER_CUDA_SKIP's comma-separated kernel names as SkipKernel bits.
unsigned skip_bits(const SwitchLookup& lookup) {
  const char* value = lookup("ROSEINFER_CUDA_SKIP");
  if (value == nullptr || *value == '\0') return 0;
  constexpr const char* kWant = "a comma-separated list of norm, rope, attention, gemv, collective";
  unsigned bits = 0;
  const std::string_view text(value);
  for (size_t begin = 0; begin <= text.size();) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string_view name = text.substr(begin, comma - begin);
    if (name == "norm") {
      bits |= kSkipNorm;
    } else if (name == "rope") {
      bits |= kSkipRope;
    } else if (name == "attention") {
      bits |= kSkipAttention;
    } else if (name == "gemv") {
      bits |= kSkipGemv;
    } else if (name == "collective") {
      bits |= kSkipCollective;
    } else {
      refuse_switch("ROSEINFER_CUDA_SKIP", text, kWant);
    }
    begin = comma + 1;
  }
  return bits;
}

// ROSEINFER_CUDA_GEMM_QUANT_ROWS=S,D,W: three row limits, each -1 (the rule), 0 or a count.
std::array<int, 3> quant_rows(const SwitchLookup& lookup, std::array<int, 3> fallback) {
  const char* value = lookup("ROSEINFER_CUDA_GEMM_QUANT_ROWS");
  if (value == nullptr || *value == '\0') return fallback;
  const std::string_view text(value);
  const auto refuse = [&] {
    refuse_switch("ROSEINFER_CUDA_GEMM_QUANT_ROWS", text,
                  "three row limits SQUARE,DOWN,WIDE (each -1 for the rule, 0 for off, or rows)");
  };
  std::array<int, 3> limits{};
  const char* at = text.data();
  const char* const end = at + text.size();
  for (int i = 0; i < 3; ++i) {
    if (i > 0 && (at == end || *at++ != ',')) refuse();
    const auto [next, error] = std::from_chars(at, end, limits[i]);
    if (error != std::errc() || limits[i] < -1) refuse();
    at = next;
  }
  if (at != end) refuse();
  return limits;
}

}  // namespace

BackendSwitches backend_switches_from(const SwitchLookup& lookup,
                                      const BackendSwitchLimits& limits) {
  BackendSwitches s;
  s.stats = switch_one_of(lookup, "ROSEINFER_CUDA_STATS", {{"0", 0}, {"1", 1}, {"2", 2}}, s.stats,
                          "0, 1 (totals at exit) or 2 (and a line a step)");
  s.profile_step = switch_number(lookup, "ROSEINFER_CUDA_PROFILE_STEP", s.profile_step, 0,
                                 std::numeric_limits<int64_t>::max(), "a step number (0 on)");
  s.graph_replays = int(switch_number(lookup, "ROSEINFER_CUDA_REPLAY", s.graph_replays, 1, kMaxRows,
                                      "a replay count of at least 1"));
  s.skip_kernels = skip_bits(lookup);
  s.attention_probe =
      switch_one_of(lookup, "ROSEINFER_CUDA_ATTENTION_PROBE", {{"0", 0}, {"1", 1}, {"2", 2}},
                    s.attention_probe, "0, 1 (return after the PDL wait) or 2 (no cluster merge)");
  s.shared_prefix = switch_on_off(lookup, "ROSEINFER_CUDA_SHARED_PREFIX", s.shared_prefix);
  s.bucketed_gemm = switch_on_off(lookup, "ROSEINFER_CUDA_BUCKETED_GEMM", s.bucketed_gemm);
  s.invariant_split_attention =
      switch_one_of(lookup, "ROSEINFER_CUDA_INVARIANT_ATTENTION", {{"split", 1}}, 0,
                    "split (the split-KV kernel under --batch-invariant)") == 1;
  const std::string gemv_rows = "0-" + std::to_string(limits.gemv_max_rows) + " rows";
  s.gemv_max_rows = switch_count(lookup, "ROSEINFER_CUDA_GEMV_MAX_ROWS", s.gemv_max_rows,
                                 limits.gemv_max_rows, gemv_rows.c_str());
  s.gemv_mma_max_rows = switch_count(
      lookup, "ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS", s.gemv_mma_max_rows, limits.gemv_mma_max_rows,
      ("0-" + std::to_string(limits.gemv_mma_max_rows) + " rows (0: never)").c_str());
  s.gemv_push_max_rows =
      switch_count(lookup, "ROSEINFER_CUDA_GEMV_PUSH", s.gemv_push_max_rows, limits.gemv_max_rows,
                   (gemv_rows + " (0 turns it off)").c_str());
  s.tc_decode_min_seqs =
      switch_count(lookup, "ROSEINFER_CUDA_TC_DECODE_MIN_SEQS", s.tc_decode_min_seqs, kMaxRows,
                   "a sequence count (0: never)");
  const int all = switch_count(lookup, "ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS", -1, kMaxRows,
                               "a row count (0 turns the tile GEMM off)");
  if (all >= 0) s.gemm_quant_rows = {all, all, all};
  s.gemm_quant_rows = quant_rows(lookup, s.gemm_quant_rows);
  s.gemm_quant_invariant =
      switch_on_off(lookup, "ROSEINFER_CUDA_GEMM_QUANT_INVARIANT", s.gemm_quant_invariant);
  s.recapture_graphs = switch_on_off(lookup, "ROSEINFER_CUDA_RECAPTURE_GRAPHS", s.recapture_graphs);
  s.fused_rope = switch_on_off(lookup, "ROSEINFER_CUDA_FUSED_ROPE", s.fused_rope);
  s.cluster_attention_max_rows =
      switch_count(lookup, "ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS",
                   s.cluster_attention_max_rows, kMaxRows, "a row count (0 turns it off)");
  s.fused_norm_rows = switch_count(lookup, "ROSEINFER_CUDA_FUSED_NORM", s.fused_norm_rows, kMaxRows,
                                   "a row count (0: never)");
  s.quant_mma_min_rows = switch_count(lookup, "ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS",
                                      s.quant_mma_min_rows, kMaxRows, "a row count");
  s.quant_mma_max_rows = switch_count(
      lookup, "ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS", s.quant_mma_max_rows, limits.quant_mma_max_rows,
      ("0-" + std::to_string(limits.quant_mma_max_rows) + " rows (0: never)").c_str());
  s.quant_mma_all_types =
      switch_on_off(lookup, "ROSEINFER_CUDA_QUANT_MMA_ALL_TYPES", s.quant_mma_all_types);
  s.quant_mma_q6k = switch_on_off(lookup, "ROSEINFER_CUDA_QUANT_MMA_Q6K", s.quant_mma_q6k);
  s.rope_table = switch_on_off(lookup, "ROSEINFER_CUDA_ROPE_TABLE", s.rope_table);
  s.sample_copy = switch_on_off(lookup, "ROSEINFER_CUDA_SAMPLE_COPY", s.sample_copy);
  s.fused_embedding = switch_on_off(lookup, "ROSEINFER_CUDA_FUSED_EMBEDDING", s.fused_embedding);
  if (const char* path = lookup("ROSEINFER_CUDA_TRACE_FILE")) s.trace_file = path;
  return s;
}

BackendSwitches backend_switches_from_env(const BackendSwitchLimits& limits) {
  return backend_switches_from(switch_from_environment, limits);
}

}  // namespace rose
