// The CUDA backend's construction (in phases), warm-up and execute() (cuda_backend.h).
#include "engine/backend/cuda/cuda_backend.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "engine/common/error.h"
#include "engine/parallel/shard_plan.h"
#include "kernels/common/kernel_switches.h"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/gemm_quant.cuh"
#include "kernels/cuda/trace_probe.h"

namespace rose {
namespace {

constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
// KV pool headroom left for CUDA graphs and the driver.
constexpr double kKvHeadroomBytes = double(int64_t(256) << 20);

double host_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The most rows a dense product runs on the tensor-core GEMV (gemv_mma.cuh) past the GEMV's. On
// an H200 (results/2026-12-02-gemv-mma/4_kept) it made decode steps of 5-32 rows 10-33% shorter
// than cuBLAS on gpt2 (hidden 768) and on SmolLM2-135M's shape (hidden 576), most of all through
// gpt2's lm_head (50,257 features: cuBLAS 100-112 us at 8-32 rows, this kernel 24-50), and lost
// on llama-1b and llama-8b at every row count (cuBLAS streams their products at 3.2-4.2 TB/s, the
// kernel at 2.3-3.5). So models under hidden size 2,048 take it.
// ROSEINFER_CUDA_GEMV_MMA_MAX_ROWS=N (0-32) sets it (comparisons).
int gemv_mma_rows_for(const ModelConfig& config, const BackendSwitches& switches) {
  if (switches.gemv_mma_max_rows >= 0) return switches.gemv_mma_max_rows;
  return config.hidden_size < 2048 ? kGemvMmaMaxRows : 0;
}

// The most rows a dense product takes the GEMV at. Its 3- and 4-row steps run on the kernel
// compiled for 4 rows, which streams wide rows slower than cuBLAS: on an H200 (bf16, batch-n
// decode steps, results/2026-11-29-tp-prefetch/8_final) llama-8b took 6.29/6.32 ms at 3/4 rows
// on the GEMV against 4.91/4.98 on cuBLAS, llama-1b 1.31/1.31 against 1.11/1.12, while gpt2
// (hidden 768) kept the GEMV's 0.39/0.41 against 0.56/0.59, and at 2 rows the two were within
// 4-6% either way (llama-1b 1.03 on the GEMV against 1.10, llama-8b 4.90 against 4.70). So models
// of hidden size 2,048 and up (measured: llama-1b and llama-8b) stop at 2 rows. The smaller ones,
// whose rows past the GEMV's go to the tensor-core GEMV (gemv_mma_rows_for), stop at 2 as well:
// against it the 4-row kernel lost at 3 and 4 rows (H200, results/2026-12-03-small-gemv-rows/:
// SmolLM2-135M's shape 0.894/0.901 ms a step against 0.653/0.660, gpt2 0.391/0.410 against
// 0.358/0.384) and won at 1 and 2 (SmolLM2 0.458/0.626 against 0.624/0.638, gpt2 0.254/0.297
// against 0.304/0.324). Without that kernel they keep 4.
// ROSEINFER_CUDA_GEMV_MAX_ROWS=N (0-4) sets it (comparisons).
int gemv_rows_for(const ModelConfig& config, const BackendSwitches& switches, int gemv_mma_rows) {
  constexpr int kGemvMaxRowsBeforeMma = 2;
  if (switches.gemv_max_rows >= 0) return switches.gemv_max_rows;
  if (config.hidden_size >= 2048 || gemv_mma_rows > kGemvMaxRowsBeforeMma) {
    return kGemvMaxRowsBeforeMma;
  }
  return kGemvMaxRows;
}

}  // namespace

CudaBackend::CudaBackend(const WeightSource& weights, const BackendOptions& options)
    : config_(weights.config()),
      options_(options),
      // A one-rank collective (--tensor-parallel 1 through the wrapper) has nothing to combine.
      collective_(options.collective && options.collective->size() > 1 ? options.collective
                                                                       : nullptr),
      add_norm_reducer_(dynamic_cast<AddNormReducer*>(collective_)),
      logits_gatherer_(dynamic_cast<LogitsGatherer*>(collective_)),
      graphs_(options.max_num_seqs),
      switches_(backend_switches_from_env(
          BackendSwitchLimits{kGemvMaxRows, kGemvQuantMmaMaxRows, kGemvMmaMaxRows})) {
  resolve_options();
  gemv_mma_max_rows_ = gemv_mma_rows_for(config_, switches_);
  gemv_max_rows_ = gemv_rows_for(config_, switches_, gemv_mma_max_rows_);
  push_max_rows_ = switches_.gemv_push_max_rows;
  if (add_norm_reducer_ && push_max_rows_ > 0) push_target_ = add_norm_reducer_->push_target();
  open_device();
  try {
    weights_ = upload_weights(weights, dtype_, stream_, arena_, print_stats_,
                              !options_.dequantize_weights);
  } catch (const Error& e) {  // out of memory: a model larger than the GPU, said so
    size_t free_bytes = 0, total_bytes = 0;
    if (std::string_view(e.what()).find("out of memory") == std::string_view::npos ||
        cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      throw;
    }
    fail(
        "model {}: its weights do not fit on GPU {} ({:.1f} of {:.1f} GB free; "
        "--tensor-parallel splits a model over GPUs, --quantize shrinks it): {}",
        config_.name, options_.device, free_bytes / 1e9, total_bytes / 1e9, e.what());
  }
  allocate_workspaces();
  if (options_.batch_invariant) {  // before the KV pool: the self-check's scratch is freed again
    invariant_gemm_ = std::make_unique<InvariantGemm>(gemm_shapes(), dtype_, stream_);
    if (print_stats_) std::fprintf(stderr, "%s\n", invariant_gemm_->describe().c_str());
  } else if (switches_.bucketed_gemm) {
    bucketed_gemm_ = std::make_unique<BucketedGemm>(gemm_shapes(), dtype_, cublas_workspace_,
                                                    kCublasWorkspaceBytes);
    if (print_stats_) std::fprintf(stderr, "%s\n", bucketed_gemm_->describe().c_str());
  }
  allocate_kv_pool();
  build_layer_args();
  if (options_.batch_invariant) {
    invariant_tensor_core_attention_ = !switches_.invariant_split_attention &&
                                       config_.num_layers > 0 &&
                                       prefill_attention_supported(layer_args_[0].attention);
  }
  quant_gemm_split_k_ = !gemm_quant_split_k_disabled();
  cluster_attention_tensor_cores_ = cluster_attention_uses_tensor_cores();
  if (switches_.fused_norm_rows >= 0) fused_norm_cap_ = switches_.fused_norm_rows;
  quant_mma_min_rows_ = std::max(fused_norm_cap_, kFusedNormDefaultRows) + 1;
  if (switches_.quant_mma_min_rows >= 0) quant_mma_min_rows_ = switches_.quant_mma_min_rows;
  if (switches_.quant_mma_max_rows >= 0) quant_mma_max_rows_ = switches_.quant_mma_max_rows;
  fused_norm_rows_ = fused_norm_max_rows();
  if (!options_.defer_warm_up) warm_up();
}

void CudaBackend::resolve_options() {
  const ModelConfig& c = config_;
  const BackendOptions& options = options_;
  if (options.dtype == "bf16") {
    dtype_ = DType::kBF16;
  } else if (options.dtype == "fp16") {
    dtype_ = DType::kFP16;
  } else {
    fail("--dtype {}: the CUDA backend supports bf16 and fp16", options.dtype);
  }
  element_size_ = int64_t(dtype_size(dtype_));
  if (!attention_supports_head_dim(c.head_dim)) {
    fail("model {}: head_dim {} is not supported by the CUDA backend (8, 16, 32, 64 or 128)",
         c.name, c.head_dim);
  }
  if (c.hidden_size > 8192) fail("model {}: hidden_size above 8192 is not supported", c.name);
  if (!switches_.trace_file.empty() && !trace_probe::built()) {
    fail(
        "ROSEINFER_CUDA_TRACE_FILE={}: this build has no step timeline probe (configure with "
        "-DROSEINFER_TRACE_PROBE=ON)",
        switches_.trace_file);
  }
  if (options.block_size < 1) fail("--block-size must be positive, got {}", options.block_size);
  if (options.max_num_seqs < 1 || options.max_num_batched_tokens < 1) {
    fail("max_num_seqs ({}) and max_num_batched_tokens ({}) must be positive", options.max_num_seqs,
         options.max_num_batched_tokens);
  }
  max_model_len_ = options.max_model_len > 0 ? options.max_model_len : c.max_position_embeddings;
  const Collective* collective = options.collective;
  check_shard_rank(c, collective ? collective->rank() : 0, collective ? collective->size() : 1);
}

void CudaBackend::open_device() {
  const int device = options_.device;
  ROSE_CUDA_CHECK(cudaSetDevice(device));  // the stream, cuBLAS handle and memory below live here
  cudaDeviceProp prop{};
  ROSE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  device_name_ = prop.name;
  print_stats_ = switches_.stats >= 1;
  print_step_times_ = switches_.stats == 2;
  read_measurement_switches();

  num_sms_ = prop.multiProcessorCount;

  ROSE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  ROSE_CUBLAS_CHECK(cublasCreate(&cublas_));
  ROSE_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // A fixed workspace keeps cuBLAS from allocating during graph capture.
  cublas_workspace_ = arena_.alloc(kCublasWorkspaceBytes);
  ROSE_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));
}

void CudaBackend::read_measurement_switches() {
  // The kernels' own switches are read at their first use; reading them here makes a malformed
  // one fail now, with its name, rather than at the first kernel launch.
  static_cast<void>(kernel_switches());
  if (switches_.skip_kernels != 0) {
    std::fprintf(stderr, "roseinfer: ROSEINFER_CUDA_SKIP=%s: kernels left out, outputs are wrong\n",
                 std::getenv("ROSEINFER_CUDA_SKIP"));
  }
  if (switches_.attention_probe != 0) {
    std::fprintf(stderr,
                 "roseinfer: ROSEINFER_CUDA_ATTENTION_PROBE=%d: the decode attention cut short, "
                 "outputs are wrong\n",
                 switches_.attention_probe);
  }
}

// After the weights: the dequantization scratch is sized by the largest matrix kept quantized.
void CudaBackend::allocate_workspaces() {
  WorkspaceInputs in;
  in.max_num_batched_tokens = options_.max_num_batched_tokens;
  in.max_num_seqs = options_.max_num_seqs;
  in.max_model_len = max_model_len_;
  in.block_size = options_.block_size;
  in.batch_invariant = options_.batch_invariant;
  in.element_size = element_size_;
  in.num_sms = num_sms_;
  in.max_quantized_elems = weights_.max_quantized_elems;
  plan_ = plan_workspaces(config_, in);
  const WorkspaceBytes& b = plan_.bytes;
  residual_ = arena_.alloc_as<float>(b.residual);
  normed_ = arena_.alloc(b.normed);
  qkv_ = arena_.alloc(b.qkv);
  attn_ = arena_.alloc(b.attn);
  proj_ = arena_.alloc(b.proj);
  mlp_ = arena_.alloc(b.mlp);
  if (b.act > 0) act_ = arena_.alloc(b.act);
  if (b.dequantized > 0) dequantized_ = arena_.alloc(b.dequantized);
  if (b.quant_mma_x > 0) quant_mma_x_ = arena_.alloc(b.quant_mma_x);
  if (b.quant_gemm_split > 0) {
    quant_gemm_split_ = arena_.alloc(b.quant_gemm_split);
    ROSE_CUDA_CHECK(cudaMemsetAsync(quant_gemm_split_, 0, size_t(b.quant_gemm_split), stream_));
  }
  final_normed_ = arena_.alloc(b.final_normed);
  logits_ = arena_.alloc_as<float>(b.logits);
  if (b.shard_logits > 0) {
    shard_logits_ = arena_.alloc_as<float>(b.shard_logits);
    gathered_logits_ = arena_.alloc_as<float>(b.gathered_logits);
  }
  sample_scratch_ = arena_.alloc(b.sample_scratch);
  ROSE_CUDA_CHECK(cudaMemsetAsync(sample_scratch_, 0, size_t(b.sample_scratch), stream_));
  partial_out_ = arena_.alloc_as<float>(b.partial_out);
  partial_lse_ = arena_.alloc_as<float>(b.partial_lse);
  merge_counters_ = arena_.alloc_as<int32_t>(b.merge_counters);
  ROSE_CUDA_CHECK(cudaMemsetAsync(merge_counters_, 0, size_t(b.merge_counters), stream_));
  // Every position's RoPE angles, once: the batch-1 attention kernel computed its eight sines and
  // cosines before its PDL wait, ~2,100 of a block's ~4,800 cycles there, on the step's critical
  // path (results/2026-11-29-attention-inbox). ROSEINFER_CUDA_ROPE_TABLE=0 computes them in place
  // (comparisons).
  if (b.rope_angles > 0 && weights_.inv_freq && switches_.rope_table) {
    rope_angles_ = arena_.alloc_as<float>(b.rope_angles);
    launch_fill_rope_angles(weights_.inv_freq, config_.head_dim, max_model_len_, rope_angles_,
                            stream_);
  }

  // The per-step metadata: a device buffer sized for the largest step, and two pinned mirrors of
  // it, so a step can be packed while the one before it is still being copied in.
  meta_device_ = arena_.alloc(b.meta);
  ROSE_CUDA_CHECK(cudaMallocHost(&pinned_meta_, static_cast<size_t>(2 * b.meta)));
  // The sampler writes the ids straight into pinned, mapped host memory, so a step ends with its
  // last kernel and no copy (ROSEINFER_CUDA_SAMPLE_COPY=1: a device buffer and a copy, for
  // comparisons); one half per step in flight.
  ROSE_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&pinned_sampled_), size_t(2 * b.sampled),
                                cudaHostAllocMapped | cudaHostAllocPortable));
  if (switches_.sample_copy) {
    sampled_ = arena_.alloc_as<int32_t>(2 * b.sampled);
    sample_target_ = sampled_;
  } else {
    ROSE_CUDA_CHECK(
        cudaHostGetDevicePointer(reinterpret_cast<void**>(&sample_target_), pinned_sampled_, 0));
  }
  previous_ids_ = arena_.alloc_as<int32_t>(b.sampled);
  std::memset(pinned_meta_, 0, static_cast<size_t>(2 * b.meta));
  for (InFlight& step : in_flight_) {
    ROSE_CUDA_CHECK(cudaEventCreateWithFlags(&step.done, cudaEventDisableTiming));
  }
}

// The KV pool last, from what is left.
void CudaBackend::allocate_kv_pool() {
  const ModelConfig& c = config_;
  const int block_size = options_.block_size;
  const int64_t block_bytes = kv_block_bytes(c, block_size, element_size_);
  if (options_.num_kv_blocks > 0) {
    num_kv_blocks_ = options_.num_kv_blocks;
  } else {
    size_t free_bytes = 0, total_bytes = 0;
    ROSE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const double used = double(total_bytes) - double(free_bytes);
    const double budget = double(total_bytes) * options_.gpu_memory_utilization - used;
    const double kv_budget = budget - kKvHeadroomBytes;
    if (kv_budget < double(block_bytes)) {
      fail(
          "--gpu-memory-utilization {}: no room for the KV cache on {} ({:.1f} GiB in use of "
          "{:.1f} GiB after weights and workspaces)",
          options_.gpu_memory_utilization, device_name_, used / (1 << 30),
          double(total_bytes) / (1 << 30));
    }
    num_kv_blocks_ = static_cast<int>(std::min<double>(
        kv_budget / double(block_bytes), double((int64_t(1) << 31) / block_size - 1)));
  }
  limits_ = PlanLimits{plan_.max_tokens, plan_.max_seqs, max_model_len_,
                       num_kv_blocks_,   block_size,     c.vocab_size};
  kv_layer_bytes_ = int64_t(num_kv_blocks_) * block_size * c.kv_dim() * element_size_;
  kv_pool_ = arena_.alloc(int64_t(num_kv_blocks_) * block_bytes);
  // Zeroed so the padding rows of graph replays (which read block 0) see finite values.
  ROSE_CUDA_CHECK(
      cudaMemsetAsync(kv_pool_, 0, size_t(num_kv_blocks_) * size_t(block_bytes), stream_));
  ROSE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// Runs, before the first real step, what would otherwise be paid inside a measured run: the first
// use of a step shape loads kernels and picks cuBLAS algorithms, and the first pure-decode step of
// a batch size captures its graph (together tens of milliseconds: seed000 offline took 2x as long
// as online, which ran after it on the same backend). Warm-up steps write nothing (slot -1) and
// read block 0.
void CudaBackend::warm_up() {
  ROSE_CUDA_CHECK(cudaSetDevice(options_.device));  // the caller's thread may not have selected it
  warming_up_ = true;
  if (bucketed_gemm_) warm_up_gemms();
  StepPlan plan;
  StepOutput out;
  warm_up_prefill(plan, out);
  if (options_.cuda_graphs) {
    warm_up_graphs(plan, out, graphs_.buckets());
    // With kept quantized matrices the graph that first captured the tile-decoding GEMM replayed
    // slower than the same graph captured again (llama-1b Q4_K, batch 16, H100: 3.07 against
    // 2.50 ms a step; with PDL off both 2.77; ncu times its kernels alike). Why is not known;
    // capturing those buckets' graphs a second time removes it (results/2026-11-24-quant-gemm).
    if (dequantized_ && switches_.recapture_graphs) {
      std::vector<int> again;
      for (int bucket : graphs_.buckets()) {
        if (!use_quant_gemv(bucket) && quant_gemm_in_some_product(bucket)) again.push_back(bucket);
      }
      for (int bucket : again) graphs_.forget(bucket);
      warm_up_graphs(plan, out, again);
    }
  }
  stats_ = Stats{};
  warming_up_ = false;
}

// Runs every bucket's algorithm once, on layer 0's weights and the step buffers (whatever they
// hold): the first run of a cuBLAS algorithm costs the host milliseconds, which a step of a row
// count never seen before would otherwise pay (results/2026-11-24-small-steps/step_times).
void CudaBackend::warm_up_gemms() {
  if (config_.num_layers == 0) return;
  const LayerWeights& w = weights_.layers[0];
  const bool gated = config_.mlp_kind() == MlpKind::kSiluGated;
  for (int n : BucketedGemm::bucket_bounds(plan_.max_tokens)) {
    if (n <= 4) continue;  // the GEMV's rows
    gemm(normed_, w.qkv, qkv_, n, false);
    gemm(attn_, w.o, proj_, n, false);
    gemm(normed_, w.up, mlp_, n, false);
    gemm(gated ? act_ : mlp_, w.down, proj_, n, false);
  }
  for (int n : BucketedGemm::bucket_bounds(plan_.max_seqs)) {
    if (n > 4) gemm(final_normed_, weights_.lm_head, logits_, n, true);
  }
  ROSE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// Prefill steps of several sizes: the token budget, then a quarter of it, down to 16 tokens.
void CudaBackend::warm_up_prefill(StepPlan& plan, StepOutput& out) {
  const int block_size = options_.block_size;
  const int seq_len = std::min(512, max_model_len_);
  for (int n = plan_.max_tokens; n >= 16; n /= 4) {
    const int num_seqs = (n + seq_len - 1) / seq_len;
    if (num_seqs > plan_.max_seqs) continue;
    plan.clear();
    for (int q = 0; q < num_seqs; ++q) {
      const int len = std::min(seq_len, n - q * seq_len);
      for (int i = 0; i < len; ++i) plan.positions.push_back(i);
      plan.query_start.push_back(plan.query_start.back() + len);
      plan.context_lens.push_back(len);
    }
    plan.token_ids.assign(n, 0);
    plan.slot_mapping.assign(n, -1);
    plan.block_table_stride = (seq_len + block_size - 1) / block_size;
    plan.block_tables.assign(size_t(num_seqs) * plan.block_table_stride, 0);
    plan.do_sample.assign(num_seqs, 1);
    plan.sampling.assign(num_seqs, SamplingParams{});
    plan.sample_index.assign(num_seqs, 0);
    execute(plan, out);
  }
}

// One decode step per bucket of `buckets`, largest first; then, where the shared-prefix attention
// applies, one whose rows share a prefix (the bucket's second graph) for buckets of 2 rows up.
void CudaBackend::warm_up_graphs(StepPlan& plan, StepOutput& out, const std::vector<int>& buckets) {
  const int shared_context = 8 * options_.block_size + 1;  // 8 whole blocks shared (>= 128 keys)
  const bool shared =
      !options_.batch_invariant && shared_context <= max_model_len_ &&
      attention_shared_prefix_supported(config_.num_kv_heads, config_.num_heads, config_.head_dim);
  for (int context : {1, shared_context}) {
    if (context > 1 && !shared) break;
    for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) {
      const int n = *it;
      if (context > 1 && n < 2) continue;
      plan.clear();
      plan.token_ids.assign(n, 0);
      plan.positions.assign(n, context - 1);
      plan.slot_mapping.assign(n, -1);
      for (int i = 1; i <= n; ++i) plan.query_start.push_back(i);
      plan.context_lens.assign(n, context);
      plan.block_table_stride = (context + options_.block_size - 1) / options_.block_size;
      plan.block_tables.assign(size_t(n) * plan.block_table_stride, 0);  // every row: block 0
      plan.do_sample.assign(n, 1);
      plan.sampling.assign(n, SamplingParams{});
      plan.sample_index.assign(n, 0);
      execute(plan, out);
    }
  }
}

CudaBackend::~CudaBackend() {
  if (print_stats_ && stats_.steps > 0) {
    const Stats& st = stats_;
    const double per = 1e6 / double(st.steps);
    std::fprintf(stderr,
                 "cuda stats: %lld steps (%lld graph replays, %lld captures, %lld eager, %lld with "
                 "a shared prefix); per step us: validate %.1f, pack+copy %.1f (%lld B), launch "
                 "%.1f, wait %.1f\n",
                 static_cast<long long>(st.steps), static_cast<long long>(st.replays),
                 static_cast<long long>(st.captures), static_cast<long long>(st.eager),
                 static_cast<long long>(st.shared_prefix), st.validate_s * per, st.pack_s * per,
                 static_cast<long long>(st.copy_bytes / st.steps), st.launch_s * per,
                 st.sync_s * per);
  }
  // Destructors must not throw: errors here are ignored on purpose (the trace file's are said).
  cudaSetDevice(options_.device);
  if (stream_) cudaStreamSynchronize(stream_);  // a step submitted and never collected
  if (!switches_.trace_file.empty()) {
    const std::string path = options_.device > 0
                                 ? switches_.trace_file + ".gpu" + std::to_string(options_.device)
                                 : switches_.trace_file;
    std::string error;
    if (!trace_probe::write_file(path, &error)) {
      std::fprintf(stderr, "roseinfer: ROSEINFER_CUDA_TRACE_FILE: %s\n", error.c_str());
    }
  }
  for (InFlight& step : in_flight_) {
    if (step.done) cudaEventDestroy(step.done);
  }
  graphs_.clear();
  invariant_gemm_.reset();
  bucketed_gemm_.reset();
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
  arena_.release();
  if (pinned_meta_) cudaFreeHost(pinned_meta_);
  if (pinned_sampled_) cudaFreeHost(pinned_sampled_);
}

void CudaBackend::validate(const StepPlan& plan) const {
  validate_step_plan(plan, limits_, previous_rows_);
  if (config_.uses_learned_positions()) {  // the table has no row past the model's positions
    for (int32_t position : plan.positions) {
      if (position >= config_.max_position_embeddings) {
        fail("step plan: position {} exceeds the model's {} positions", position,
             config_.max_position_embeddings);
      }
    }
  }
}

int64_t CudaBackend::pack(const StepPlan& plan, int padded_seqs, char* host,
                          int32_t sample_offset) {
  const int n = plan.num_tokens(), s = plan.num_seqs(), block_size = options_.block_size;
  auto at = [&](int64_t offset) { return reinterpret_cast<int32_t*>(host + offset); };
  const MetaLayout layout = meta_layout(n + (padded_seqs - s), padded_seqs);
  // Padding (graph replay only: then n == s): one token per row, slot -1, context 1 over block 0.
  int stride = 1;
  for (int i = 0; i < s; ++i) {
    stride = std::max(stride, (plan.context_lens[i] + block_size - 1) / block_size);
  }
  auto* params = reinterpret_cast<SampleRowParams*>(host + layout.sample_params);
  int32_t* query_start = at(layout.query_start);
  int32_t* context_lens = at(layout.context_lens);
  int32_t* sample_rows = at(layout.sample_rows);
  int32_t* token_ids = at(layout.token_ids);
  int32_t* positions = at(layout.positions);
  int32_t* slots = at(layout.slot_mapping);
  int32_t* token_seq = at(layout.token_seq);
  int32_t* tables = at(layout.block_tables);
  *at(layout.table_stride) = stride;
  *at(layout.sample_slot) = sample_offset;
  for (int i = 0; i < s; ++i) {
    const SamplingParams& sp = plan.sampling[i];
    params[i] =
        SampleRowParams{sp.temperature,      sp.top_k, sp.top_p, plan.do_sample[i] ? 1 : 0, sp.seed,
                        plan.sample_index[i]};
    query_start[i] = plan.query_start[i];
    context_lens[i] = plan.context_lens[i];
    sample_rows[i] = plan.query_start[i + 1] - 1;
    const int needed = (plan.context_lens[i] + block_size - 1) / block_size;
    std::memcpy(tables + int64_t(i) * stride,
                plan.block_tables.data() + int64_t(i) * plan.block_table_stride,
                size_t(needed) * 4);
    for (int j = plan.query_start[i]; j < plan.query_start[i + 1]; ++j) token_seq[j] = i;
  }
  query_start[s] = n;
  std::memcpy(token_ids, plan.token_ids.data(), size_t(n) * 4);
  std::memcpy(positions, plan.positions.data(), size_t(n) * 4);
  std::memcpy(slots, plan.slot_mapping.data(), size_t(n) * 4);
  for (int i = s, t = n; i < padded_seqs; ++i, ++t) {
    params[i] = SampleRowParams{0.0f, 0, 1.0f, 0, 0, 0};
    query_start[i + 1] = t + 1;
    context_lens[i] = 1;
    sample_rows[i] = t;
    tables[int64_t(i) * stride] = 0;
    token_ids[t] = 0;
    positions[t] = 0;
    slots[t] = -1;
    token_seq[t] = i;
  }
  *at(layout.shared_keys) = step_shared_keys_;
  int32_t* shares = at(layout.shares_prefix);
  for (int i = 0; i < padded_seqs; ++i) shares[i] = i < s && step_shared_keys_ > 0 ? 1 : 0;
  return layout.block_tables + int64_t(padded_seqs) * stride * 4;
}

int CudaBackend::graph_variant(int padded) const {
  return decode_graph_variant(step_shared_keys_ > 0, step_cluster_splits_, padded,
                              cluster_max_rows(0), step_cluster_max_rows_);
}

int CudaBackend::cluster_max_rows(int max_context) const {
  if (switches_.cluster_attention_max_rows >= 0) return switches_.cluster_attention_max_rows;
  return cluster_attention_tensor_cores_ ? cluster_attention_max_rows(config_, max_context)
                                         : kScalarClusterAttentionMaxRows;
}

int CudaBackend::shared_prefix_keys(const StepPlan& plan) const {
  // Below this the prefix launch saves less than it costs (it reads the prefix once per 8 query
  // vectors instead of once per row, but is one more launch per layer).
  constexpr int kMinSharedKeys = 128;
  const int s = plan.num_seqs(), block_size = options_.block_size;
  if (s < 2 || !switches_.shared_prefix || options_.batch_invariant || !plan.is_pure_decode() ||
      !attention_shared_prefix_supported(config_.num_kv_heads, config_.num_heads,
                                         config_.head_dim)) {
    return 0;
  }
  int min_context = plan.context_lens[0];
  for (int i = 1; i < s; ++i) min_context = std::min(min_context, plan.context_lens[i]);
  // Whole blocks below every row's last key.
  int blocks = (min_context - 1) / block_size;
  const int32_t* first = plan.block_tables.data();
  for (int i = 1; i < s && blocks > 0; ++i) {
    const int32_t* row = first + int64_t(i) * plan.block_table_stride;
    int same = 0;
    while (same < blocks && row[same] == first[same]) ++same;
    blocks = same;
  }
  const int keys = blocks * block_size;
  return keys >= kMinSharedKeys ? keys : 0;
}

void CudaBackend::execute(const StepPlan& plan, StepOutput& out) {
  if (num_in_flight_ > 0) {
    fail("execute: {} submitted steps are still to be collected", num_in_flight_);
  }
  enqueue(plan);
  collect(out);
  if (plan.return_logits && plan.num_seqs() > 0) copy_logits(plan, out);
}

void CudaBackend::submit(const StepPlan& plan) {
  // The logits buffer is the next step's too: only a step collected before another is enqueued
  // can still copy them.
  if (plan.return_logits) fail("step plan: return_logits needs execute(), not submit()");
  enqueue(plan);
}

void CudaBackend::enqueue(const StepPlan& plan) {
  if (num_in_flight_ == 2) fail("step plan: two submitted steps are still to be collected");
  // Another replica's backend may have run on this thread since (cluster.h): select ours.
  ROSE_CUDA_CHECK(cudaSetDevice(options_.device));
  const double t0 = host_seconds();
  validate(plan);
  const int half = (first_in_flight_ + num_in_flight_) % 2;
  InFlight& step = in_flight_[half];
  const int s = plan.num_seqs();
  step.num_seqs = s;
  step.graph = options_.cuda_graphs && plan.is_pure_decode();
  if (s > 0) {
    const int padded = step.graph ? graphs_.bucket(s) : s;
    const int max_context = *std::max_element(plan.context_lens.begin(), plan.context_lens.end());
    step_splits_ = step.graph ? plan_.invariant_splits
                              : (max_context + kInvariantSplitKeys - 1) / kInvariantSplitKeys;
    step_shared_keys_ = shared_prefix_keys(plan);
    if (step_shared_keys_ > 0) ++stats_.shared_prefix;
    step_cluster_splits_ = cluster_attention_splits(config_, padded, max_context);
    step_cluster_max_rows_ = cluster_max_rows(max_context);
    const double t1 = host_seconds();
    char* host = static_cast<char*>(pinned_meta_) + half * plan_.bytes.meta;
    const int32_t sample_offset = int32_t(half * plan_.max_seqs);
    const int64_t bytes = pack(plan, padded, host, sample_offset);
    ROSE_CUDA_CHECK(
        cudaMemcpyAsync(meta_device_, host, size_t(bytes), cudaMemcpyHostToDevice, stream_));
    const double t2 = host_seconds();
    const bool profile = stats_.steps == switches_.profile_step;
    if (profile) ROSE_CUDA_CHECK(cudaProfilerStart());
    ++stats_.steps;
    stats_.copy_bytes += bytes;
    if (step.graph) {
      for (int replay = 0; replay < switches_.graph_replays;
           ++replay) {  // measurement: more than 1
        const auto run = graphs_.run(
            padded, stream_, [&] { forward(padded, padded, 1); }, graph_variant(padded));
        ++(run == GraphCache::Run::kReplayed ? stats_.replays : stats_.captures);
      }
    } else {
      launch_eager(plan);
    }
    if (sampled_) {
      ROSE_CUDA_CHECK(cudaMemcpyAsync(pinned_sampled_ + sample_offset, sampled_ + sample_offset,
                                      size_t(s) * 4, cudaMemcpyDeviceToHost, stream_));
    }
    if (profile) ROSE_CUDA_CHECK(cudaProfilerStop());
    const double t3 = host_seconds();
    stats_.validate_s += t1 - t0;
    stats_.pack_s += t2 - t1;
    stats_.launch_s += t3 - t2;
    step.pack_us = (t2 - t1) * 1e6;
    step.launch_us = (t3 - t2) * 1e6;
  }
  ROSE_CUDA_CHECK(cudaEventRecord(step.done, stream_));
  ++num_in_flight_;
  previous_rows_ = s;
}

void CudaBackend::collect(StepOutput& out) {
  if (num_in_flight_ == 0) fail("collect: no step was submitted");
  ROSE_CUDA_CHECK(cudaSetDevice(options_.device));
  const int half = first_in_flight_;
  const InFlight& step = in_flight_[half];
  const double t0 = host_seconds();
  ROSE_CUDA_CHECK(cudaEventSynchronize(step.done));
  const double t1 = host_seconds();
  first_in_flight_ = (first_in_flight_ + 1) % 2;
  --num_in_flight_;
  out.logits.clear();
  const int32_t* ids = pinned_sampled_ + int64_t(half) * plan_.max_seqs;
  out.sampled.assign(ids, ids + step.num_seqs);
  if (step.num_seqs == 0) return;
  stats_.sync_s += t1 - t0;
  if (print_step_times_ && !warming_up_) {
    std::fprintf(stderr,
                 "cuda step %lld: %d seqs, %s; us: pack+copy %.1f, launch %.1f, wait %.1f\n",
                 static_cast<long long>(stats_.steps - 1 - num_in_flight_), step.num_seqs,
                 step.graph ? "graph" : "eager", step.pack_us, step.launch_us, (t1 - t0) * 1e6);
  }
}

namespace {

// Two CUDA events, destroyed however the timing ends.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    ROSE_CUDA_CHECK(cudaEventCreate(&start));
    ROSE_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

constexpr int kCollectiveWarmUpCalls = 3;

// The copy bandwidth's copies: each at most 1 GiB and at least 256 MiB (five times an H100's or
// H200's 50 MB L2, so the bytes come from HBM), after 2 untimed ones.
constexpr int64_t kCopyMaxBytes = int64_t(1) << 30;
constexpr int64_t kCopyMinBytes = int64_t(256) << 20;
constexpr int kCopyWarmUpCalls = 2;
constexpr int kCopyTimedCalls = 8;

}  // namespace

// The first half of the KV pool copied onto the second: no sequence holds KV yet, so nothing is
// lost, and the bytes copied are the pool's zeros or KV values, finite as graph replays' padding
// rows (which read block 0) need.
std::optional<double> CudaBackend::measure_copy_bandwidth_gbps() {
  ROSE_CUDA_CHECK(cudaSetDevice(options_.device));
  const int64_t pool_bytes =
      int64_t(num_kv_blocks_) * kv_block_bytes(config_, options_.block_size, element_size_);
  const int64_t half = pool_bytes / 2 / 256 * 256;  // where the copies land
  const int64_t bytes = std::min(half, kCopyMaxBytes);
  if (bytes < kCopyMinBytes) return std::nullopt;
  char* source = static_cast<char*>(kv_pool_);
  char* target = source + half;
  const auto copy = [&] {
    ROSE_CUDA_CHECK(
        cudaMemcpyAsync(target, source, size_t(bytes), cudaMemcpyDeviceToDevice, stream_));
  };
  for (int i = 0; i < kCopyWarmUpCalls; ++i) copy();
  EventPair events;
  ROSE_CUDA_CHECK(cudaEventRecord(events.start, stream_));
  for (int i = 0; i < kCopyTimedCalls; ++i) copy();
  ROSE_CUDA_CHECK(cudaEventRecord(events.stop, stream_));
  ROSE_CUDA_CHECK(cudaEventSynchronize(events.stop));
  float ms = 0;
  ROSE_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
  if (ms <= 0.0f) return std::nullopt;
  return 2.0 * double(bytes) * kCopyTimedCalls / (double(ms) / 1e3) / 1e9;
}

// A pure-decode step of `rows` sequences runs at its graph bucket (execute()): all_reduce_proj()
// on (padded, H) twice per layer, or where the collective fuses it with the add-norm after it, that
// kernel (timed against the plain add-norm: its extra time is the exchange's), and
// gather_logits() of (padded, stride) fp32 (the peer kernel or the all-gather and its copies into
// place, as the step runs it). Each
// is enqueued on the step's stream over the step's buffers (proj_ zeroed first, so the repeated
// in-place sums stay 0) and timed with events around `iterations` calls, replayed from a graph
// when the steps use graphs.
std::optional<CollectiveTiming> CudaBackend::time_collectives(int rows, int iterations) {
  if (!collective_ || skipped(kSkipCollective)) return std::nullopt;
  ROSE_CUDA_CHECK(cudaSetDevice(options_.device));
  const ModelConfig& c = config_;
  CollectiveTiming t;
  t.ranks = collective_->size();
  const int clamped = std::clamp(rows, 1, std::min(plan_.max_tokens, plan_.max_seqs));
  t.rows = options_.cuda_graphs ? graphs_.bucket(clamped) : clamped;
  t.iterations = std::max(1, iterations);
  const int64_t count = int64_t(t.rows) * c.hidden_size;
  const int64_t gather_count = int64_t(t.rows) * vocab_shard_stride(c.vocab_size, c.tp_size);
  t.all_reduces_per_step = 2 * c.num_layers;
  t.all_reduce_bytes = count * element_size_;
  t.all_gathers_per_step = 1;
  t.all_gather_bytes = gather_count * int64_t(sizeof(float));
  const CollectiveType type = dtype_ == DType::kBF16 ? CollectiveType::kBF16 : CollectiveType::kF16;
  ROSE_CUDA_CHECK(cudaMemsetAsync(proj_, 0, size_t(t.all_reduce_bytes), stream_));
  EventPair events;
  // With CUDA graphs the calls are captured into one graph and replayed, as a decode step runs
  // them (eager launches add several microseconds each at decode sizes).
  const auto time_calls = [&](const auto& call) {
    for (int i = 0; i < kCollectiveWarmUpCalls; ++i) call();
    cudaGraphExec_t exec = nullptr;
    if (options_.cuda_graphs) {
      cudaGraph_t graph = nullptr;
      ROSE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < t.iterations; ++i) call();
      ROSE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
      ROSE_CUDA_CHECK(cudaGraphDestroy(graph));
      ROSE_CUDA_CHECK(instantiated);
      ROSE_CUDA_CHECK(cudaGraphUpload(exec, stream_));
    }
    // One untimed call first: every rank's stream leaves it together (it waits for every rank), so
    // the timed calls do not include one rank waiting for the other to start (which, timed, made
    // llama-8b's batch-1 exchanges read 0.5-0.8 ms a step on two H200s, where leaving them all out
    // saves ~0.2).
    call();
    ROSE_CUDA_CHECK(cudaEventRecord(events.start, stream_));
    if (exec) {
      ROSE_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    } else {
      for (int i = 0; i < t.iterations; ++i) call();
    }
    ROSE_CUDA_CHECK(cudaEventRecord(events.stop, stream_));
    if (exec) ROSE_CUDA_CHECK(cudaGraphExecDestroy(exec));
    ROSE_CUDA_CHECK(cudaEventSynchronize(events.stop));
    float ms = 0;
    ROSE_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
    return double(ms) / 1e3 / t.iterations;
  };
  // As the step's layer add-norms run: fused with the all-reduce where the collective takes them.
  AddNormArgs norm = layer_args_.empty() ? AddNormArgs{} : layer_args_[0].mlp_norm;
  norm.num_rows = t.rows;
  t.fused_add_norm =
      add_norm_reducer_ && !layer_args_.empty() && add_norm_reducer_->fuses_add_norm(norm);
  if (t.fused_add_norm) {
    const double fused_s =
        time_calls([&] { add_norm_reducer_->all_reduce_add_norm(norm, false, stream_); });
    const double plain_s = time_calls([&] { launch_add_norm(norm, stream_); });
    t.all_reduce_s = std::max(0.0, fused_s - plain_s);
  } else {
    t.all_reduce_s = time_calls([&] { collective_->all_reduce_sum(proj_, count, type, stream_); });
  }
  t.all_gather_s = time_calls([&] { gather_logits(t.rows); });
  return t;
}

void CudaBackend::launch_eager(const StepPlan& plan) {
  const int s = plan.num_seqs();
  int max_query_len = 0;
  for (int i = 0; i < s; ++i) {
    max_query_len = std::max(max_query_len, plan.query_start[i + 1] - plan.query_start[i]);
  }
  forward(plan.num_tokens(), s, max_query_len);
  ++stats_.eager;
}

// Tests only: the sampled rows' logits, after the step's synchronisation.
void CudaBackend::copy_logits(const StepPlan& plan, StepOutput& out) const {
  const int s = plan.num_seqs(), V = config_.vocab_size;
  out.logits.resize(size_t(s) * V);
  ROSE_CUDA_CHECK(
      cudaMemcpy(out.logits.data(), logits_, size_t(s) * V * 4, cudaMemcpyDeviceToHost));
  for (int i = 0; i < s; ++i) {
    if (!plan.do_sample[i]) std::fill_n(out.logits.begin() + int64_t(i) * V, V, 0.0f);
  }
}

bool cuda_available(std::string* why_not) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    if (why_not) *why_not = std::string("CUDA: ") + cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return false;
  }
  if (count == 0) {
    if (why_not) *why_not = "CUDA: no device found";
    return false;
  }
  return true;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // as above: leave no error behind for later calls
    return 0;
  }
  return count;
}

std::unique_ptr<Backend> make_cuda_backend(const WeightSource& weights,
                                           const BackendOptions& options) {
  std::string why;
  if (!cuda_available(&why)) fail("--device cuda: no usable GPU ({})", why);
  return std::make_unique<CudaBackend>(weights, options);
}

}  // namespace rose
