// The CUDA backend's measurement switches (engine/backend/cuda/backend_switches.h): each
// ROSEINFER_CUDA_* variable read as documented, and a value a switch does not take refused with
// the variable's name. Plain host code: runs without a GPU.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "engine/backend/cuda/backend_switches.h"
#include "kernels/common/error.h"

using namespace rose;

namespace {

BackendSwitches from(const std::map<std::string, std::string>& vars) {
  return backend_switches_from(
      [&](const char* name) -> const char* {
        const auto found = vars.find(name);
        return found == vars.end() ? nullptr : found->second.c_str();
      },
      BackendSwitchLimits{4, 32, 32});
}

// The error one variable's value gives, or "" when it is taken.
std::string refusal(const std::string& name, const std::string& value) {
  try {
    from({{name, value}});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("backend switches: with nothing set (or set empty), the defaults") {
  for (const BackendSwitches& s : {from({}), from({{"ROSEINFER_CUDA_STATS", ""},
                                                   {"ROSEINFER_CUDA_SKIP", ""},
                                                   {"ROSEINFER_CUDA_GEMM_QUANT_ROWS", ""}})}) {
    CHECK(s.stats == 0);
    CHECK(s.profile_step == -1);
    CHECK(s.graph_replays == 1);
    CHECK(s.skip_kernels == 0u);
    CHECK(s.attention_probe == 0);
    CHECK(s.shared_prefix);
    CHECK(s.bucketed_gemm);
    CHECK_FALSE(s.invariant_split_attention);
    CHECK(s.gemv_max_rows == -1);
    CHECK(s.gemv_push_max_rows == 1);
    CHECK(s.tc_decode_min_seqs == 0);
    CHECK(s.gemm_quant_rows == std::array<int, 3>{-1, -1, -1});
    CHECK_FALSE(s.gemm_quant_invariant);
    CHECK(s.recapture_graphs);
    CHECK(s.fused_rope);
    CHECK(s.cluster_attention_max_rows == -1);
    CHECK(s.fused_norm_rows == -1);
    CHECK(s.quant_mma_min_rows == -1);
    CHECK(s.quant_mma_max_rows == -1);
    CHECK(s.gemv_mma_max_rows == -1);
    CHECK_FALSE(s.quant_mma_all_types);
    CHECK(s.quant_mma_q6k);
    CHECK(s.rope_table);
    CHECK_FALSE(s.sample_copy);
    CHECK(s.fused_embedding);
    CHECK(s.trace_file.empty());
  }
}

TEST_CASE("backend switches: the values the scripts and docs use are read as meant") {
  CHECK(from({{"ROSEINFER_CUDA_STATS", "2"}}).stats == 2);
  CHECK(from({{"ROSEINFER_CUDA_PROFILE_STEP", "40"}}).profile_step == 40);
  CHECK(from({{"ROSEINFER_CUDA_REPLAY", "3"}}).graph_replays == 3);
  CHECK(from({{"ROSEINFER_CUDA_SKIP", "attention"}}).skip_kernels == kSkipAttention);
  CHECK(from({{"ROSEINFER_CUDA_SKIP", "norm,rope,attention,gemv"}}).skip_kernels ==
        (kSkipNorm | kSkipRope | kSkipAttention | kSkipGemv));
  CHECK(from({{"ROSEINFER_CUDA_SKIP", "collective"}}).skip_kernels == kSkipCollective);
  CHECK(from({{"ROSEINFER_CUDA_ATTENTION_PROBE", "1"}}).attention_probe == 1);
  CHECK(from({{"ROSEINFER_CUDA_INVARIANT_ATTENTION", "split"}}).invariant_split_attention);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_MAX_ROWS", "0"}}).gemv_max_rows == 0);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_PUSH", "0"}}).gemv_push_max_rows == 0);
  CHECK(from({{"ROSEINFER_CUDA_GEMM_QUANT_ROWS", "16,16,128"}}).gemm_quant_rows ==
        std::array<int, 3>{16, 16, 128});
  CHECK(from({{"ROSEINFER_CUDA_GEMM_QUANT_ROWS", "-1,0,64"}}).gemm_quant_rows ==
        std::array<int, 3>{-1, 0, 64});
  CHECK(from({{"ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS", "0"}}).gemm_quant_rows ==
        std::array<int, 3>{0, 0, 0});
  // The three-limit form wins over the all-classes one (it is read after).
  CHECK(from({{"ROSEINFER_CUDA_GEMM_QUANT_MAX_ROWS", "0"},
              {"ROSEINFER_CUDA_GEMM_QUANT_ROWS", "8,8,8"}})
            .gemm_quant_rows == std::array<int, 3>{8, 8, 8});
  CHECK(from({{"ROSEINFER_CUDA_GEMM_QUANT_INVARIANT", "1"}}).gemm_quant_invariant);
  CHECK_FALSE(from({{"ROSEINFER_CUDA_RECAPTURE_GRAPHS", "0"}}).recapture_graphs);
  CHECK_FALSE(from({{"ROSEINFER_CUDA_FUSED_ROPE", "0"}}).fused_rope);
  CHECK(from({{"ROSEINFER_CUDA_FUSED_NORM", "0"}}).fused_norm_rows == 0);
  CHECK(from({{"ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS", "32"}}).quant_mma_max_rows == 32);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS", "0"}}).gemv_mma_max_rows == 0);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS", "16"}}).gemv_mma_max_rows == 16);
  CHECK(from({{"ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS", "9"}}).quant_mma_min_rows == 9);
  CHECK(from({{"ROSEINFER_CUDA_QUANT_MMA_ALL_TYPES", "1"}}).quant_mma_all_types);
  CHECK_FALSE(from({{"ROSEINFER_CUDA_QUANT_MMA_Q6K", "0"}}).quant_mma_q6k);
  CHECK_FALSE(from({{"ROSEINFER_CUDA_ROPE_TABLE", "0"}}).rope_table);
  CHECK(from({{"ROSEINFER_CUDA_SAMPLE_COPY", "1"}}).sample_copy);
  CHECK_FALSE(from({{"ROSEINFER_CUDA_FUSED_EMBEDDING", "0"}}).fused_embedding);
  CHECK_FALSE(from({{"ROSEINFER_CUDA_BUCKETED_GEMM", "0"}}).bucketed_gemm);
  CHECK_FALSE(from({{"ROSEINFER_CUDA_SHARED_PREFIX", "0"}}).shared_prefix);
  CHECK(from({{"ROSEINFER_CUDA_TC_DECODE_MIN_SEQS", "64"}}).tc_decode_min_seqs == 64);
  CHECK(from({{"ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS", "0"}}).cluster_attention_max_rows == 0);
  CHECK(from({{"ROSEINFER_CUDA_TRACE_FILE", "/tmp/trace.txt"}}).trace_file == "/tmp/trace.txt");
}

TEST_CASE("backend switches: what used to fall back or be clamped silently is refused by name") {
  // Each of these once ran the default (or a clamped value) without a word.
  CHECK(refusal("ROSEINFER_CUDA_STATS", "yes") ==
        "ROSEINFER_CUDA_STATS=yes: want 0, 1 (totals at exit) or 2 (and a line a step)");
  CHECK(refusal("ROSEINFER_CUDA_SKIP", "gemv,atention") ==
        "ROSEINFER_CUDA_SKIP=gemv,atention: want a comma-separated list of norm, rope, "
        "attention, gemv, collective");
  CHECK(refusal("ROSEINFER_CUDA_SKIP", "gemv,").find("ROSEINFER_CUDA_SKIP=gemv,: want") == 0);
  CHECK(refusal("ROSEINFER_CUDA_GEMV_MAX_ROWS", "8") ==
        "ROSEINFER_CUDA_GEMV_MAX_ROWS=8: want 0-4 rows");
  CHECK(refusal("ROSEINFER_CUDA_GEMV_PUSH", "-1") ==
        "ROSEINFER_CUDA_GEMV_PUSH=-1: want 0-4 rows (0 turns it off)");
  CHECK(refusal("ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS", "64") ==
        "ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS=64: want 0-32 rows (0: never)");
  CHECK(refusal("ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS", "33") ==
        "ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS=33: want 0-32 rows (0: never)");
  CHECK(refusal("ROSEINFER_CUDA_REPLAY", "0") ==
        "ROSEINFER_CUDA_REPLAY=0: want a replay count of at least 1");
  CHECK(refusal("ROSEINFER_CUDA_FUSED_NORM", "4x") ==
        "ROSEINFER_CUDA_FUSED_NORM=4x: want a row count (0: never)");
  CHECK(refusal("ROSEINFER_CUDA_INVARIANT_ATTENTION", "tensor") ==
        "ROSEINFER_CUDA_INVARIANT_ATTENTION=tensor: want split (the split-KV kernel under "
        "--batch-invariant)");
  CHECK(refusal("ROSEINFER_CUDA_RECAPTURE_GRAPHS", "no") ==
        "ROSEINFER_CUDA_RECAPTURE_GRAPHS=no: want 0 or 1");
  CHECK(refusal("ROSEINFER_CUDA_ATTENTION_PROBE", "3") ==
        "ROSEINFER_CUDA_ATTENTION_PROBE=3: want 0, 1 (return after the PDL wait) or 2 (no "
        "cluster merge)");
  CHECK(refusal("ROSEINFER_CUDA_PROFILE_STEP", "-1") ==
        "ROSEINFER_CUDA_PROFILE_STEP=-1: want a step number (0 on)");
  for (const char* rows :
       {"16,16", "16,16,128,4", "16,,128", "16;16;128", "-2,16,16", "a,b,c", "16,16,128 "}) {
    CAPTURE(rows);
    CHECK(refusal("ROSEINFER_CUDA_GEMM_QUANT_ROWS", rows) ==
          std::string("ROSEINFER_CUDA_GEMM_QUANT_ROWS=") + rows +
              ": want three row limits SQUARE,DOWN,WIDE (each -1 for the rule, 0 for off, or "
              "rows)");
  }
}

TEST_CASE("backend switches: the row bounds are the kernels' (BackendSwitchLimits)") {
  const auto lookup = [](const char* name) -> const char* {
    return std::string(name) == "ROSEINFER_CUDA_GEMV_MAX_ROWS" ? "3" : nullptr;
  };
  CHECK(backend_switches_from(lookup, BackendSwitchLimits{4, 32}).gemv_max_rows == 3);
  CHECK_THROWS_WITH(backend_switches_from(lookup, BackendSwitchLimits{2, 16}),
                    "ROSEINFER_CUDA_GEMV_MAX_ROWS=3: want 0-2 rows");
}
