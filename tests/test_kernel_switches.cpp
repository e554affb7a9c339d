// The CUDA kernels' measurement switches (kernels/common/kernel_switches.h): each ROSEINFER_*
// variable read as documented, and the scoped override that tests and benches use. Plain host
// code: runs without a GPU.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "kernels/common/error.h"
#include "kernels/common/kernel_switches.h"

using namespace rose;

namespace {

// The switches a fixed set of variables gives (everything else unset).
KernelSwitches from(const std::map<std::string, std::string>& vars) {
  return kernel_switches_from([&](const char* name) -> const char* {
    const auto found = vars.find(name);
    return found == vars.end() ? nullptr : found->second.c_str();
  });
}

// Every field equal (written out here: the header is also compiled as C++17, without a defaulted
// operator==).
bool same(const KernelSwitches& a, const KernelSwitches& b) {
  return a.pdl == b.pdl && a.cluster_attention_mma == b.cluster_attention_mma &&
         a.attention_kv_evict_first == b.attention_kv_evict_first &&
         a.attention_rows_mma == b.attention_rows_mma &&
         a.cluster_attention_splits == b.cluster_attention_splits && a.gemv_wave == b.gemv_wave &&
         a.gemv_max_split == b.gemv_max_split &&
         a.gemv_rows_specialized == b.gemv_rows_specialized &&
         a.gemv_prefetch_bytes == b.gemv_prefetch_bytes &&
         a.gemv_quant_early == b.gemv_quant_early && a.gemv_quant_direct == b.gemv_quant_direct &&
         a.gemv_quant_direct_max_rows == b.gemv_quant_direct_max_rows &&
         a.gemv_quant_two_blocks == b.gemv_quant_two_blocks &&
         a.gemv_quant_one_row_norm == b.gemv_quant_one_row_norm &&
         a.gemv_quant_evict_first == b.gemv_quant_evict_first &&
         a.gemv_quant_direct_threads == b.gemv_quant_direct_threads &&
         a.gemv_quant_mma_staged == b.gemv_quant_mma_staged &&
         a.gemv_mma_row_tiles == b.gemv_mma_row_tiles &&
         a.gemm_quant_split_k == b.gemm_quant_split_k && a.gemm_quant_wgmma == b.gemm_quant_wgmma &&
         a.gemm_quant_split_tiles == b.gemm_quant_split_tiles &&
         a.gemm_quant_pipeline == b.gemm_quant_pipeline;
}

}  // namespace

TEST_CASE("with nothing set, every switch keeps the measured default") {
  const KernelSwitches s = from({});
  CHECK(same(s, KernelSwitches{}));
  CHECK(s.pdl);
  CHECK(s.cluster_attention_mma);
  CHECK(s.attention_kv_evict_first);
  CHECK(s.attention_rows_mma);
  CHECK(s.cluster_attention_splits == 0);
  CHECK(s.gemv_wave == -1);
  CHECK(s.gemv_max_split == 4);
  CHECK(s.gemv_rows_specialized);
  CHECK(s.gemv_prefetch_bytes == 768);
  CHECK(s.gemv_quant_early);
  CHECK(s.gemv_quant_direct);
  CHECK(s.gemv_quant_direct_max_rows == 8);
  CHECK(s.gemv_quant_two_blocks);
  CHECK(s.gemv_quant_one_row_norm);
  CHECK(s.gemv_quant_evict_first);
  CHECK(s.gemv_quant_direct_threads == 512);
  CHECK(s.gemv_quant_mma_staged);
  CHECK(s.gemv_mma_row_tiles == 0);
  CHECK(s.gemm_quant_split_k == -1);
  CHECK(s.gemm_quant_wgmma);
  CHECK(s.gemm_quant_split_tiles);
  CHECK(s.gemm_quant_pipeline);
}

TEST_CASE("a flag that is on by default takes 0 or 1; anything else is refused by name") {
  const std::pair<const char*, bool KernelSwitches::*> flags[] = {
      {"ROSEINFER_CUDA_PDL", &KernelSwitches::pdl},
      {"ROSEINFER_CUDA_CLUSTER_ATTENTION_MMA", &KernelSwitches::cluster_attention_mma},
      {"ROSEINFER_CUDA_ATTENTION_KV_EVICT_FIRST", &KernelSwitches::attention_kv_evict_first},
      {"ROSEINFER_CUDA_ATTENTION_ROWS_MMA", &KernelSwitches::attention_rows_mma},
      {"ROSEINFER_CUDA_GEMV_QUANT_EARLY", &KernelSwitches::gemv_quant_early},
      {"ROSEINFER_CUDA_GEMV_QUANT_DIRECT", &KernelSwitches::gemv_quant_direct},
      {"ROSEINFER_CUDA_GEMV_QUANT_TWO_BLOCKS", &KernelSwitches::gemv_quant_two_blocks},
      {"ROSEINFER_CUDA_GEMV_QUANT_ONE_ROW_NORM", &KernelSwitches::gemv_quant_one_row_norm},
      {"ROSEINFER_CUDA_GEMV_QUANT_EVICT_FIRST", &KernelSwitches::gemv_quant_evict_first},
      {"ROSEINFER_CUDA_GEMV_QUANT_MMA_STAGED", &KernelSwitches::gemv_quant_mma_staged},
      {"ROSEINFER_GEMM_QUANT_WGMMA", &KernelSwitches::gemm_quant_wgmma},
      {"ROSEINFER_GEMM_QUANT_SPLIT_TILES", &KernelSwitches::gemm_quant_split_tiles},
      {"ROSEINFER_GEMM_QUANT_PIPELINE", &KernelSwitches::gemm_quant_pipeline},
  };
  for (const auto& [name, member] : flags) {
    CAPTURE(name);
    CHECK_FALSE(from({{name, "0"}}).*member);
    CHECK(from({{name, "1"}}).*member);
    CHECK(from({{name, ""}}).*member);
    const std::string refused = std::string(name) + "=yes: want 0 or 1";
    CHECK_THROWS_WITH_AS(from({{name, "yes"}}), doctest::Contains(refused.c_str()), Error);
    CHECK_THROWS_AS(from({{name, "00"}}), Error);
    // Only the named switch moves.
    KernelSwitches off = from({{name, "0"}});
    off.*member = true;
    CHECK(same(off, KernelSwitches{}));
  }
}

TEST_CASE("the dense GEMV's switches") {
  CHECK(from({{"ROSEINFER_CUDA_GEMV_WAVE", "0"}}).gemv_wave == 0);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_WAVE", "1"}}).gemv_wave == 1);
  CHECK_THROWS_WITH_AS(from({{"ROSEINFER_CUDA_GEMV_WAVE", "2"}}),
                       doctest::Contains("ROSEINFER_CUDA_GEMV_WAVE=2: want 0"), Error);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_SPLIT", "1"}}).gemv_max_split == 1);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_SPLIT", "4"}}).gemv_max_split == 4);
  CHECK_THROWS_AS(from({{"ROSEINFER_CUDA_GEMV_SPLIT", "2"}}), Error);
  CHECK_FALSE(from({{"ROSEINFER_CUDA_GEMV_ROWS", "4"}}).gemv_rows_specialized);
  CHECK_THROWS_AS(from({{"ROSEINFER_CUDA_GEMV_ROWS", "2"}}), Error);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_PREFETCH", "1024"}}).gemv_prefetch_bytes == 1024);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_PREFETCH", "0"}}).gemv_prefetch_bytes == 0);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_PREFETCH", ""}}).gemv_prefetch_bytes == 768);
  for (const char* bad : {"-5", "12x", " 8", "1e3", "99999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(from({{"ROSEINFER_CUDA_GEMV_PREFETCH", bad}}),
                         doctest::Contains("a non-negative whole number"), Error);
  }
}

TEST_CASE("the cluster decode attention's blocks a cluster: 4, 8 or 16") {
  CHECK(from({{"ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS", "4"}}).cluster_attention_splits == 4);
  CHECK(from({{"ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS", "8"}}).cluster_attention_splits == 8);
  CHECK(from({{"ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS", "16"}}).cluster_attention_splits == 16);
  CHECK(from({{"ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS", ""}}).cluster_attention_splits == 0);
  CHECK_THROWS_WITH_AS(from({{"ROSEINFER_CUDA_CLUSTER_ATTENTION_SPLITS", "2"}}),
                       doctest::Contains("want 4, 8 or 16 (blocks a cluster)"), Error);
}

TEST_CASE("the dense tensor-core GEMV's row tiles: 1, 2 or 4") {
  CHECK(from({{"ROSEINFER_CUDA_GEMV_MMA_ROW_TILES", "1"}}).gemv_mma_row_tiles == 1);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_MMA_ROW_TILES", "4"}}).gemv_mma_row_tiles == 4);
  CHECK_THROWS_WITH_AS(from({{"ROSEINFER_CUDA_GEMV_MMA_ROW_TILES", "3"}}),
                       doctest::Contains("want 1, 2 or 4 (row tiles a block)"), Error);
}

TEST_CASE("the quantized GEMV's and GEMM's counts") {
  CHECK(from({{"ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS", "2"}}).gemv_quant_direct_max_rows == 2);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS", "4"}}).gemv_quant_direct_max_rows == 4);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS", "8"}}).gemv_quant_direct_max_rows == 8);
  CHECK_THROWS_AS(from({{"ROSEINFER_CUDA_GEMV_QUANT_DIRECT_ROWS", "6"}}), Error);
  CHECK(from({{"ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS", "256"}}).gemv_quant_direct_threads ==
        256);
  CHECK_THROWS_WITH_AS(from({{"ROSEINFER_CUDA_GEMV_QUANT_DIRECT_THREADS", "1024"}}),
                       doctest::Contains("want 256 or 512"), Error);
  CHECK(from({{"ROSEINFER_GEMM_QUANT_SPLIT_K", "3"}}).gemm_quant_split_k == 3);
  CHECK(from({{"ROSEINFER_GEMM_QUANT_SPLIT_K", "0"}}).gemm_quant_split_k == 0);
  CHECK(from({{"ROSEINFER_GEMM_QUANT_SPLIT_K", ""}}).gemm_quant_split_k == -1);
  CHECK_THROWS_AS(from({{"ROSEINFER_GEMM_QUANT_SPLIT_K", "two"}}), Error);
}

TEST_CASE("a scoped change is seen inside its scope and undone at its end") {
  const KernelSwitches before = kernel_switches();
  {
    const ScopedKernelSwitches outer([](KernelSwitches& s) {
      s.gemv_quant_direct = false;
      s.gemv_wave = 1;
    });
    CHECK_FALSE(kernel_switches().gemv_quant_direct);
    CHECK(kernel_switches().gemv_wave == 1);
    {
      const ScopedKernelSwitches inner([](KernelSwitches& s) { s.gemv_wave = 0; });
      CHECK(kernel_switches().gemv_wave == 0);
      CHECK_FALSE(kernel_switches().gemv_quant_direct);  // the outer change stays
    }
    CHECK(kernel_switches().gemv_wave == 1);
  }
  CHECK(same(kernel_switches(), before));
}
