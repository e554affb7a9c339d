// The grid workload of reference/benchmarks.md run directly on the CUDA backend (no scheduler):
// B sequences x 512 prompt tokens, then 128 decode steps replayed from CUDA graphs; prints prefill
// and decode tok/s and the decode step's share of the bandwidth floor. A timing driver, not a
// test: built as gpu_bench_cuda, not run by ctest; scripts/gpu_check.sh and gpu_perf.sh run it with
// --no-skip. Its checks make sure
// the timed steps did real work (every sampled id in the vocabulary).
//   ROSEINFER_BENCH_MODELS=gpt2,llama-1b  ROSEINFER_BENCH_BATCHES=1,16,64,256
//   ROSEINFER_BENCH_GRAPHS=on|off|both    ROSEINFER_BENCH_PROFILE_STEP=k (cudaProfilerStart/Stop
//   around decode step k, for `ncu --profile-from-start off`)  ROSEINFER_BENCH_PROFILE_PREFILL=1
//   (the same around the first prefill step)
#include <cuda_profiler_api.h>
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/weights.h"

using namespace rose;

namespace {

std::vector<std::string> split_list(const char* text, const std::string& fallback) {
  const std::string list = text ? text : fallback;
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    if (end > begin) items.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct GridResult {
  double prefill_tok_s = 0, decode_tok_s = 0, floor_pct = 0, step_ms = 0;
  bool ids_valid = true;
};

GridResult run_grid(Backend& backend, int batch, int prompt_len, int decode_steps,
                    int max_batched_tokens, double bandwidth_bytes_s, int profile_step) {
  const int bs = backend.block_size();
  const int vocab = backend.config().vocab_size;
  const int max_len = prompt_len + decode_steps + 1;
  const int blocks_per_seq = (max_len + bs - 1) / bs;
  REQUIRE(int64_t(batch) * blocks_per_seq + 1 <= backend.num_kv_blocks());
  GridResult result;
  auto table_row = [&](int s, std::vector<int32_t>& tables) {
    for (int b = 0; b < blocks_per_seq; ++b) tables.push_back(1 + s * blocks_per_seq + b);
  };
  StepPlan plan;
  StepOutput out;
  std::vector<int> context(batch, 0);
  std::vector<int32_t> last(batch, 0);
  // Prefill: whole prompts packed into steps of at most max_batched_tokens tokens.
  const double t0 = now_s();
  for (int s0 = 0; s0 < batch;) {
    plan.clear();
    plan.block_table_stride = blocks_per_seq;
    int tokens = 0, s = s0;
    for (; s < batch && tokens + prompt_len <= max_batched_tokens; ++s) {
      for (int p = 0; p < prompt_len; ++p) {
        plan.token_ids.push_back((s * 7919 + p * 31) % vocab);
        plan.positions.push_back(p);
        const int block = 1 + s * blocks_per_seq + p / bs;
        plan.slot_mapping.push_back(block * bs + p % bs);
      }
      tokens += prompt_len;
      plan.query_start.push_back(tokens);
      plan.context_lens.push_back(prompt_len);
      table_row(s, plan.block_tables);
      plan.do_sample.push_back(1);
      plan.sampling.push_back(SamplingParams{});
      plan.sample_index.push_back(0);
    }
    const bool profile = s0 == 0 && std::getenv("ROSEINFER_BENCH_PROFILE_PREFILL") != nullptr;
    if (profile) REQUIRE(cudaProfilerStart() == cudaSuccess);
    backend.execute(plan, out);
    if (profile) REQUIRE(cudaProfilerStop() == cudaSuccess);
    for (int i = s0; i < s; ++i) {
      last[i] = out.sampled[i - s0];
      context[i] = prompt_len;
      result.ids_valid &= last[i] >= 0 && last[i] < vocab;
    }
    s0 = s;
  }
  const double t1 = now_s();
  result.prefill_tok_s = double(batch) * prompt_len / (t1 - t0);
  // Decode: one warm-up step (captures the graph), then timed steps.
  double kv_tokens_read = 0;
  double t2 = 0;
  for (int step = 0; step <= decode_steps; ++step) {
    if (step == 1) t2 = now_s();
    plan.clear();
    plan.block_table_stride = blocks_per_seq;
    for (int s = 0; s < batch; ++s) {
      const int p = context[s];
      plan.token_ids.push_back(last[s]);
      plan.positions.push_back(p);
      const int block = 1 + s * blocks_per_seq + p / bs;
      plan.slot_mapping.push_back(block * bs + p % bs);
      plan.query_start.push_back(s + 1);
      plan.context_lens.push_back(p + 1);
      table_row(s, plan.block_tables);
      plan.do_sample.push_back(1);
      plan.sampling.push_back(SamplingParams{});
      plan.sample_index.push_back(uint64_t(step + 1));
      if (step >= 1) kv_tokens_read += p + 1;
    }
    if (step == profile_step) REQUIRE(cudaProfilerStart() == cudaSuccess);
    backend.execute(plan, out);
    if (step == profile_step) REQUIRE(cudaProfilerStop() == cudaSuccess);
    for (int s = 0; s < batch; ++s) {
      last[s] = out.sampled[s];
      context[s] += 1;
      result.ids_valid &= last[s] >= 0 && last[s] < vocab;
    }
  }
  const double t3 = now_s();
  result.decode_tok_s = double(batch) * decode_steps / (t3 - t2);
  result.step_ms = (t3 - t2) / decode_steps * 1e3;
  const double bytes = double(backend.weight_bytes()) * decode_steps +
                       kv_tokens_read * double(backend.kv_bytes_per_token());
  const double floor_s = bytes / bandwidth_bytes_s;
  result.floor_pct = 100.0 * floor_s / (t3 - t2);
  return result;
}

}  // namespace

TEST_CASE("bench: grid workload (prefill 512, decode 128) on the presets" * doctest::skip(true)) {
  const std::vector<std::string> models =
      split_list(std::getenv("ROSEINFER_BENCH_MODELS"), "gpt2,llama-1b");
  const std::vector<std::string> batch_list =
      split_list(std::getenv("ROSEINFER_BENCH_BATCHES"), "1,16,64,256");
  const char* graphs_env = std::getenv("ROSEINFER_BENCH_GRAPHS");
  const std::string graphs_mode = graphs_env ? graphs_env : "both";
  const char* profile_env = std::getenv("ROSEINFER_BENCH_PROFILE_STEP");
  const int profile_step = profile_env ? std::atoi(profile_env) : -1;
  const double bandwidth = 3.0e12;  // measured device-to-device copy on the lent H100
  std::printf("%-10s %5s %6s %14s %13s %9s %10s\n", "model", "B", "graphs", "prefill tok/s",
              "decode tok/s", "step ms", "% floor");
  for (const std::string& name : models) {
    std::unique_ptr<WeightSource> weights = open_model(name);
    for (bool graphs : {true, false}) {
      if (graphs_mode != "both" && graphs_mode != (graphs ? "on" : "off")) continue;
      BackendOptions options;
      options.max_num_seqs = 256;
      options.max_num_batched_tokens = 8192;
      options.max_model_len = 1024;
      options.cuda_graphs = graphs;
      std::unique_ptr<Backend> backend = make_cuda_backend(*weights, options);
      for (const std::string& batch_text : batch_list) {
        const int batch = std::atoi(batch_text.c_str());
        if (!graphs && graphs_mode == "both" && batch != 1 && batch != 64) continue;
        const GridResult r = run_grid(*backend, batch, 512, 128, 8192, bandwidth, profile_step);
        std::printf("%-10s %5d %6s %14.0f %13.0f %9.3f %9.1f%%\n", name.c_str(), batch,
                    graphs ? "on" : "off", r.prefill_tok_s, r.decode_tok_s, r.step_ms, r.floor_pct);
        std::fflush(stdout);
        CHECK(r.ids_valid);
      }
    }
  }
}
