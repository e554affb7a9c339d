// The CUDA backend: bf16 (or fp16) weights and KV cache, fp32 accumulation and residual stream.
// Everything is allocated at construction (weights, the KV pool, workspaces sized by the token and
// sequence budgets); execute() copies the plan's small arrays in with one cudaMemcpyAsync, runs the
// forward pass (eagerly, or as a CUDA graph for pure-decode steps), samples on the GPU and copies
// only the sampled ids back: one synchronisation per step.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/stored_upload.h"
#include "engine/common/error.h"
#include "engine/model/rope.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/fill.cuh"
#include "kernels/cuda/gemm_invariant.h"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/rope_kv.cuh"
#include "kernels/cuda/sampling.cuh"

namespace rose {
namespace {

constexpr int64_t kAlign = 256;
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
constexpr int64_t kStagingFloats = int64_t(16) << 20;  // checkpoint upload chunk (64 MB)
constexpr int kMaxSplits = 32;
// --batch-invariant attention: keys per split, aligned to position 0. 512 is 4 tiles per warp of
// the row-shared kernel at llama's head_dim 64 (16 at 128 with 8 heads): enough keys per block to
// pay for its query load, warp merge and partial write, yet a batch-1 decode at 2k-8k context
// still gets 4-16 splits per KV head to spread over the SMs (2048 would leave 1-4).
constexpr int kInvariantSplitKeys = 512;
// Bound on the invariant attention partials: the launcher runs the rows in launches that fit.
constexpr int64_t kInvariantPartialBytes = int64_t(128) << 20;

int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

struct LayerWeights {
  const void* attn_norm_w = nullptr;  // (H,)
  const void* attn_norm_b = nullptr;  // (H,) GPT-2
  const void* qkv_w = nullptr;        // (qkv_dim, H)
  const void* qkv_b = nullptr;        // (qkv_dim,) GPT-2, Qwen2
  const void* o_w = nullptr;          // (H, q_dim)
  const void* o_b = nullptr;          // (H,) GPT-2
  const void* mlp_norm_w = nullptr;   // (H,)
  const void* mlp_norm_b = nullptr;   // (H,) GPT-2
  const void* up_w = nullptr;         // GPT-2 (I, H); Llama (2I, H) rows gate | up
  const void* up_b = nullptr;         // (I,) GPT-2
  const void* down_w = nullptr;       // (H, I)
  const void* down_b = nullptr;       // (H,) GPT-2
};

// Where each per-step array lives inside the one metadata buffer (same offsets on host and device).
// The offsets depend only on the step's token and sequence counts, so the arrays are packed
// tightly (one small copy per step) and a graph captured for a batch size keeps reading the right
// addresses: every replay of that bucket has the same counts.
struct MetaLayout {
  int64_t sample_params = 0;  // (num_seqs,) SampleRowParams
  int64_t query_start = 0;    // (num_seqs + 1,) int32
  int64_t context_lens = 0;   // (num_seqs,)
  int64_t sample_rows = 0;    // (num_seqs,) flat index of each sequence's last token
  int64_t table_stride = 0;   // (1,) block table stride of this step
  int64_t token_ids = 0;      // (num_tokens,)
  int64_t positions = 0;      // (num_tokens,)
  int64_t slot_mapping = 0;   // (num_tokens,)
  int64_t token_seq = 0;      // (num_tokens,) sequence of each token
  int64_t block_tables = 0;   // (num_seqs, table stride) packed with this step's stride
};

MetaLayout meta_layout(int64_t num_tokens, int64_t num_seqs) {
  MetaLayout m;
  int64_t off = 0;
  auto take = [&](int64_t bytes) {
    const int64_t at = off;
    off = align_up(off + bytes, 16);
    return at;
  };
  m.sample_params = take(num_seqs * int64_t(sizeof(SampleRowParams)));
  m.query_start = take((num_seqs + 1) * 4);
  m.context_lens = take(num_seqs * 4);
  m.sample_rows = take(num_seqs * 4);
  m.table_stride = take(4);
  m.token_ids = take(num_tokens * 4);
  m.positions = take(num_tokens * 4);
  m.slot_mapping = take(num_tokens * 4);
  m.token_seq = take(num_tokens * 4);
  m.block_tables = off;
  return m;
}

// The fp32 path of load_weights (checkpoints without stored_parts): a pinned buffer for the
// largest such tensor and a device buffer it goes up through, allocated at first use and freed
// after load.
struct HostF32Upload {
  int64_t max_numel = 0;     // of the tensors read through read_f32
  float* pinned = nullptr;   // (max_numel,)
  float* staging = nullptr;  // (min(max_numel, kStagingFloats),)
  int tensors = 0;
  HostF32Upload() = default;
  HostF32Upload(const HostF32Upload&) = delete;
  HostF32Upload& operator=(const HostF32Upload&) = delete;
  ~HostF32Upload() {  // an error path: finish() did not run; errors ignored, destructors never
                      // throw
    if (pinned) cudaFreeHost(pinned);
    if (staging) cudaFree(staging);
  }
  void finish(cudaStream_t stream) {
    if (!pinned) return;
    ROSE_CUDA_CHECK(cudaStreamSynchronize(stream));
    ROSE_CUDA_CHECK(cudaFreeHost(pinned));
    ROSE_CUDA_CHECK(cudaFree(staging));
    pinned = nullptr;
    staging = nullptr;
  }
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const WeightSource& weights, const BackendOptions& options);
  ~CudaBackend() override;

  void execute(const StepPlan& plan, StepOutput& out) override;
  const PlanLimits& limits() const override { return limits_; }
  std::string device_name() const override { return device_name_; }
  const ModelConfig& config() const override { return config_; }
  int64_t weight_bytes() const override { return weight_bytes_; }
  std::string weight_types() const override { return options_.dtype; }
  int64_t kv_bytes_per_token() const override { return config_.kv_elements_per_token() * 2; }

 private:
  void* device_alloc(int64_t bytes);
  void load_weights(const WeightSource& weights);
  void fill_synthetic(const SyntheticInit& init, void* dst, int64_t numel);
  void upload_f32(const WeightSource& weights, const TensorSpec& spec, void* dst,
                  HostF32Upload& host);
  void validate(const StepPlan& plan) const;
  // Packs the plan (plus padding rows up to padded_seqs for graph replay) into the pinned buffer;
  // returns the bytes to copy.
  int64_t pack(const StepPlan& plan, int padded_seqs);
  // max_query_len: the step's longest query chunk (1 for pure decode); it picks the attention
  // kernel and sizes the prefill kernel's grid.
  void forward(int num_tokens, int num_seqs, int max_query_len);
  void gemm(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out);
  // The fused small-batch gemv paths: off under --batch-invariant (their reduction differs from
  // the GEMM's, so a row's bits would depend on the batch size).
  bool use_gemv(int n, int in) const { return !invariant_gemm_ && gemv_supported(n, in); }
  std::vector<GemmShape> gemm_shapes() const;
  template <typename T>
  T* meta(int64_t offset) const {  // a device pointer into this step's metadata
    return reinterpret_cast<T*>(static_cast<char*>(meta_device_) + offset);
  }
  int graph_bucket(int num_seqs) const;
  void warm_up();

  ModelConfig config_;
  BackendOptions options_;
  DType dtype_ = DType::kBF16;
  bool gpt2_ = false;
  int block_size_ = 16;
  int num_kv_blocks_ = 0;
  int max_seqs_ = 0;
  int max_tokens_ = 0;
  int max_model_len_ = 0;
  PlanLimits limits_;  // set once the KV pool is sized
  int max_table_stride_ = 0;
  int target_blocks_ = 0;
  int invariant_splits_ = 0;  // --batch-invariant: attention grid splits, for max_model_len_
  int invariant_rows_ = 0;    // --batch-invariant: attention query rows per launch at that grid
  // --batch-invariant: the attention grid's splits for the next forward(): invariant_splits_ for a
  // graph (replayed at any context), the step's longest context for an eager step. A row's bits do
  // not depend on the grid (splits past its keys exit), so a smaller grid only saves launches.
  int step_splits_ = 0;
  int64_t weight_bytes_ = 0;
  std::string device_name_;

  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  // --batch-invariant: every linear layer through algorithms pinned per (shape, row bucket).
  std::unique_ptr<InvariantGemm> invariant_gemm_;
  std::vector<void*> allocations_;
  void* pinned_meta_ = nullptr;
  int32_t* pinned_sampled_ = nullptr;
  int64_t meta_bytes_ = 0;  // capacity of the metadata buffers
  void* meta_device_ = nullptr;

  std::map<std::string, void*> tensors_;
  const void* tok_emb_ = nullptr;
  const void* pos_emb_ = nullptr;
  std::vector<LayerWeights> layers_;
  const void* final_norm_w_ = nullptr;
  const void* final_norm_b_ = nullptr;
  const void* lm_head_ = nullptr;
  float* inv_freq_ = nullptr;  // (head_dim / 2,) Llama; nullptr for GPT-2

  void* kv_pool_ = nullptr;  // per layer K then V: (num_blocks, block_size, n_kv_heads, head_dim)
  int64_t kv_layer_elems_ = 0;

  float* residual_ = nullptr;     // (max_tokens, H) fp32
  void* normed_ = nullptr;        // (max_tokens, H)
  void* qkv_ = nullptr;           // (max_tokens, qkv_dim)
  void* attn_ = nullptr;          // (max_tokens, q_dim)
  void* proj_ = nullptr;          // (max_tokens, H) o and down outputs
  void* mlp_ = nullptr;           // (max_tokens, up_rows)
  void* act_ = nullptr;           // (max_tokens, I) Llama
  void* final_normed_ = nullptr;  // (max_seqs, H)
  float* logits_ = nullptr;       // (max_seqs, V) fp32
  int32_t* sampled_ = nullptr;    // (max_seqs,)
  float* partial_out_ = nullptr;  // attention split partials
  float* partial_lse_ = nullptr;
  int32_t* merge_counters_ = nullptr;  // attention's fused split merge, zero between launches
  void* cublas_workspace_ = nullptr;

  std::map<int, cudaGraphExec_t> graphs_;  // by padded batch size

  // Where execute()'s host time goes (ROSEINFER_CUDA_STATS=1 prints it when the backend is
  // destroyed): seconds in validate, pack + H2D copy, launches, and the wait for the step.
  struct Stats {
    int64_t steps = 0, replays = 0, captures = 0, eager = 0, copy_bytes = 0;
    double validate_s = 0, pack_s = 0, launch_s = 0, sync_s = 0;
  };
  Stats stats_;
  bool print_stats_ = false;
};

double host_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void* CudaBackend::device_alloc(int64_t bytes) {
  void* ptr = nullptr;
  ROSE_CUDA_CHECK(cudaMalloc(&ptr, static_cast<size_t>(std::max<int64_t>(bytes, kAlign))));
  allocations_.push_back(ptr);
  return ptr;
}

CudaBackend::CudaBackend(const WeightSource& weights, const BackendOptions& options)
    : config_(weights.config()), options_(options) {
  const ModelConfig& c = config_;
  if (options.dtype == "bf16") {
    dtype_ = DType::kBF16;
  } else if (options.dtype == "fp16") {
    dtype_ = DType::kFP16;
  } else {
    fail("--dtype {}: the CUDA backend supports bf16 and fp16", options.dtype);
  }
  gpt2_ = c.arch == Arch::kGpt2;
  if (!attention_supports_head_dim(c.head_dim)) {
    fail("model {}: head_dim {} is not supported by the CUDA backend (8, 16, 32, 64 or 128)",
         c.name, c.head_dim);
  }
  if (c.hidden_size > 8192) fail("model {}: hidden_size above 8192 is not supported", c.name);
  if (options.block_size < 1) fail("--block-size must be positive, got {}", options.block_size);
  if (options.max_num_seqs < 1 || options.max_num_batched_tokens < 1) {
    fail("max_num_seqs ({}) and max_num_batched_tokens ({}) must be positive", options.max_num_seqs,
         options.max_num_batched_tokens);
  }
  block_size_ = options.block_size;
  max_seqs_ = options.max_num_seqs;
  max_tokens_ = std::max(options.max_num_batched_tokens, max_seqs_);
  max_model_len_ = options.max_model_len > 0 ? options.max_model_len : c.max_position_embeddings;
  max_table_stride_ = (max_model_len_ + block_size_ - 1) / block_size_;

  const int device = options.device;
  ROSE_CUDA_CHECK(cudaSetDevice(device));  // the stream, cuBLAS handle and memory below live here
  cudaDeviceProp prop{};
  ROSE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  device_name_ = prop.name;
  const char* stats_env = std::getenv("ROSEINFER_CUDA_STATS");
  print_stats_ = stats_env && stats_env[0] == '1';
  target_blocks_ = 4 * prop.multiProcessorCount;

  ROSE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  ROSE_CUBLAS_CHECK(cublasCreate(&cublas_));
  ROSE_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // A fixed workspace keeps cuBLAS from allocating during graph capture.
  cublas_workspace_ = device_alloc(kCublasWorkspaceBytes);
  ROSE_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));

  load_weights(weights);

  // Workspaces.
  const int64_t T = max_tokens_, S = max_seqs_, H = c.hidden_size;
  const int64_t up_rows = gpt2_ ? c.intermediate_size : 2 * int64_t(c.intermediate_size);
  residual_ = static_cast<float*>(device_alloc(T * H * 4));
  normed_ = device_alloc(T * H * 2);
  qkv_ = device_alloc(T * c.qkv_dim() * 2);
  attn_ = device_alloc(T * c.q_dim() * 2);
  proj_ = device_alloc(T * H * 2);
  mlp_ = device_alloc(T * up_rows * 2);
  if (!gpt2_) act_ = device_alloc(T * c.intermediate_size * 2);
  final_normed_ = device_alloc(S * H * 2);
  logits_ = static_cast<float*>(device_alloc(S * c.vocab_size * 4));
  sampled_ = static_cast<int32_t*>(device_alloc(S * 4));
  int64_t partial_rows = 0;  // (token, head, split) triples at the worst batch size
  if (options.batch_invariant) {
    invariant_splits_ = (max_model_len_ + kInvariantSplitKeys - 1) / kInvariantSplitKeys;
    const int64_t row_bytes = int64_t(c.num_heads) * invariant_splits_ * (c.head_dim + 1) * 4;
    invariant_rows_ = int(std::clamp<int64_t>(kInvariantPartialBytes / row_bytes, 1, T));
    partial_rows = int64_t(invariant_rows_) * c.num_heads * invariant_splits_;
  }
  for (int n = 1; n <= T && !options.batch_invariant; ++n) {
    const int splits =
        attention_num_splits(n, c.num_kv_heads, c.num_heads, target_blocks_, kMaxSplits);
    if (splits > 1)
      partial_rows = std::max<int64_t>(partial_rows, int64_t(n) * c.num_heads * splits);
  }
  partial_out_ = static_cast<float*>(device_alloc(partial_rows * c.head_dim * 4));
  partial_lse_ = static_cast<float*>(device_alloc(partial_rows * 4));
  const int64_t counters = attention_merge_counters(int(T), c.num_kv_heads, c.num_heads);
  merge_counters_ = static_cast<int32_t*>(device_alloc(counters * 4));
  ROSE_CUDA_CHECK(cudaMemsetAsync(merge_counters_, 0, size_t(counters) * 4, stream_));

  // The per-step metadata: one pinned buffer mirrored by one device buffer, sized for the largest
  // step (the layout only grows with the token and sequence counts).
  meta_bytes_ = meta_layout(T, S).block_tables + S * max_table_stride_ * int64_t(4);
  meta_device_ = device_alloc(meta_bytes_);
  ROSE_CUDA_CHECK(cudaMallocHost(&pinned_meta_, static_cast<size_t>(meta_bytes_)));
  ROSE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned_sampled_), S * 4));
  std::memset(pinned_meta_, 0, static_cast<size_t>(meta_bytes_));

  if (options.batch_invariant) {  // before the KV pool: the self-check's scratch is freed again
    invariant_gemm_ = std::make_unique<InvariantGemm>(gemm_shapes(), dtype_, stream_);
    if (print_stats_) std::fprintf(stderr, "%s\n", invariant_gemm_->describe().c_str());
  }

  // The KV pool last, from what is left.
  const int64_t block_bytes =
      int64_t(2) * c.num_layers * block_size_ * c.kv_dim() * int64_t(dtype_size(dtype_));
  if (options.num_kv_blocks > 0) {
    num_kv_blocks_ = options.num_kv_blocks;
  } else {
    size_t free_bytes = 0, total_bytes = 0;
    ROSE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const double used = double(total_bytes) - double(free_bytes);
    const double budget = double(total_bytes) * options.gpu_memory_utilization - used;
    // Headroom for CUDA graphs and the driver.
    const double kv_budget = budget - double(int64_t(256) << 20);
    if (kv_budget < double(block_bytes)) {
      fail(
          "--gpu-memory-utilization {}: no room for the KV cache on {} ({:.1f} GiB in use of "
          "{:.1f} GiB after weights and workspaces)",
          options.gpu_memory_utilization, device_name_, used / (1 << 30),
          double(total_bytes) / (1 << 30));
    }
    num_kv_blocks_ = static_cast<int>(std::min<double>(
        kv_budget / double(block_bytes), double((int64_t(1) << 31) / block_size_ - 1)));
  }
  limits_ =
      PlanLimits{max_tokens_, max_seqs_, max_model_len_, num_kv_blocks_, block_size_, c.vocab_size};
  kv_layer_elems_ = int64_t(num_kv_blocks_) * block_size_ * c.kv_dim();
  kv_pool_ = device_alloc(int64_t(num_kv_blocks_) * block_bytes);
  // Zeroed so the padding rows of graph replays (which read block 0) see finite values.
  ROSE_CUDA_CHECK(
      cudaMemsetAsync(kv_pool_, 0, size_t(num_kv_blocks_) * size_t(block_bytes), stream_));
  ROSE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  warm_up();
}

// Runs, before the first real step, what would otherwise be paid inside a measured run: the first
// use of a step shape loads kernels and picks cuBLAS algorithms, and the first pure-decode step of
// a batch size captures its graph (together tens of milliseconds: seed000 offline took 2x as long
// as online, which ran after it on the same backend). Warm-up steps write nothing (slot -1) and
// read block 0; prefill steps of several sizes, then one decode step per graph bucket, largest
// first.
void CudaBackend::warm_up() {
  StepPlan plan;
  StepOutput out;
  const int seq_len = std::min(512, max_model_len_);
  for (int n = max_tokens_; n >= 16; n /= 4) {
    const int num_seqs = (n + seq_len - 1) / seq_len;
    if (num_seqs > max_seqs_) continue;
    plan.clear();
    for (int q = 0; q < num_seqs; ++q) {
      const int len = std::min(seq_len, n - q * seq_len);
      for (int i = 0; i < len; ++i) plan.positions.push_back(i);
      plan.query_start.push_back(plan.query_start.back() + len);
      plan.context_lens.push_back(len);
    }
    plan.token_ids.assign(n, 0);
    plan.slot_mapping.assign(n, -1);
    plan.block_table_stride = (seq_len + block_size_ - 1) / block_size_;
    plan.block_tables.assign(size_t(num_seqs) * plan.block_table_stride, 0);
    plan.do_sample.assign(num_seqs, 1);
    plan.sampling.assign(num_seqs, SamplingParams{});
    plan.sample_index.assign(num_seqs, 0);
    execute(plan, out);
  }
  if (!options_.cuda_graphs) {
    stats_ = Stats{};
    return;
  }
  std::vector<int> buckets;
  for (int s = 1; s <= max_seqs_; ++s) {
    const int bucket = graph_bucket(s);
    if (buckets.empty() || buckets.back() != bucket) buckets.push_back(bucket);
  }
  for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) {
    const int n = *it;
    plan.clear();
    plan.token_ids.assign(n, 0);
    plan.positions.assign(n, 0);
    plan.slot_mapping.assign(n, -1);
    for (int i = 1; i <= n; ++i) plan.query_start.push_back(i);
    plan.context_lens.assign(n, 1);
    plan.block_table_stride = 1;
    plan.block_tables.assign(n, 0);
    plan.do_sample.assign(n, 1);
    plan.sampling.assign(n, SamplingParams{});
    plan.sample_index.assign(n, 0);
    execute(plan, out);
  }
  stats_ = Stats{};
}

CudaBackend::~CudaBackend() {
  if (print_stats_ && stats_.steps > 0) {
    const Stats& st = stats_;
    const double per = 1e6 / double(st.steps);
    std::fprintf(stderr,
                 "cuda stats: %lld steps (%lld graph replays, %lld captures, %lld eager); per step "
                 "us: validate %.1f, pack+copy %.1f (%lld B), launch %.1f, wait %.1f\n",
                 static_cast<long long>(st.steps), static_cast<long long>(st.replays),
                 static_cast<long long>(st.captures), static_cast<long long>(st.eager),
                 st.validate_s * per, st.pack_s * per,
                 static_cast<long long>(st.copy_bytes / st.steps), st.launch_s * per,
                 st.sync_s * per);
  }
  // Destructors must not throw: errors here are ignored on purpose.
  cudaSetDevice(options_.device);
  for (auto& [bucket, exec] : graphs_) cudaGraphExecDestroy(exec);
  invariant_gemm_.reset();
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
  for (void* ptr : allocations_) cudaFree(ptr);
  if (pinned_meta_) cudaFreeHost(pinned_meta_);
  if (pinned_sampled_) cudaFreeHost(pinned_sampled_);
}

void CudaBackend::fill_synthetic(const SyntheticInit& init, void* dst, int64_t numel) {
  if (init.kind == SyntheticInit::Kind::kUniform) {
    launch_fill_uniform(dst, dtype_, numel, init.seed, init.scale, stream_);
  } else {
    launch_fill_constant(dst, dtype_, numel, init.value, stream_);
  }
}

// The pinned buffer holds the whole fp32 tensor (read_f32 fills it in one call); it goes up in
// kStagingFloats chunks through one device buffer.
void CudaBackend::upload_f32(const WeightSource& weights, const TensorSpec& spec, void* dst,
                             HostF32Upload& host) {
  if (!host.pinned) {
    ROSE_CUDA_CHECK(
        cudaMallocHost(reinterpret_cast<void**>(&host.pinned), size_t(host.max_numel) * 4));
    ROSE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&host.staging),
                               size_t(std::min(host.max_numel, kStagingFloats)) * 4));
  }
  ROSE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the previous tensor left `pinned`
  weights.read_f32(spec.name, std::span<float>(host.pinned, size_t(spec.numel())));
  for (int64_t begin = 0; begin < spec.numel(); begin += kStagingFloats) {
    const int64_t count = std::min(kStagingFloats, spec.numel() - begin);
    ROSE_CUDA_CHECK(cudaMemcpyAsync(host.staging, host.pinned + begin, size_t(count) * 4,
                                    cudaMemcpyHostToDevice, stream_));
    launch_convert_from_f32(static_cast<char*>(dst) + begin * 2, dtype_, host.staging, count,
                            stream_);
  }
  ++host.tensors;
}

// Stored GGUF blocks are decoded on the device (StoredUploader); other checkpoints are read as
// fp32 on the host and converted on the device; presets are generated on the device.
void CudaBackend::load_weights(const WeightSource& weights) {
  const ModelConfig& c = config_;
  const std::vector<TensorSpec> specs = canonical_tensors(c);
  const auto start = std::chrono::steady_clock::now();
  HostF32Upload host;
  int64_t total = 0, staging_bytes = 0;
  std::vector<std::optional<std::vector<StoredPart>>> stored(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    total += align_up(specs[i].numel() * 2, kAlign);
    if (weights.synthetic(specs[i].name)) continue;
    stored[i] = weights.stored_parts(specs[i].name);
    if (stored[i] && !device_decodable(*stored[i])) stored[i].reset();
    if (stored[i]) {
      staging_bytes = std::max(staging_bytes, StoredUploader::staging_bytes_for(*stored[i]));
    } else {
      host.max_numel = std::max(host.max_numel, specs[i].numel());
    }
  }
  char* base = static_cast<char*>(device_alloc(total));
  std::optional<StoredUploader> uploader;
  if (staging_bytes > 0) uploader.emplace(staging_bytes, stream_);
  int generated = 0, decoded = 0;
  int64_t off = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    void* dst = base + off;
    off += align_up(spec.numel() * 2, kAlign);
    tensors_[spec.name] = dst;
    if (const std::optional<SyntheticInit> init = weights.synthetic(spec.name)) {
      fill_synthetic(*init, dst, spec.numel());
      ++generated;
    } else if (stored[i]) {
      uploader->upload(*stored[i], dst, dtype_);
      ++decoded;
    } else {
      upload_f32(weights, spec, dst, host);
    }
  }
  if (uploader) uploader->finish();
  host.finish(stream_);
  if (print_stats_) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr,
                 "cuda load: %d tensors decoded on the device (%.1f MB of GGUF blocks), %d read as "
                 "fp32 on the host, %d generated; %.2f s\n",
                 decoded, double(uploader ? uploader->bytes_uploaded() : 0) / 1e6, host.tensors,
                 generated, seconds);
  }

  auto get = [&](const std::string& name) -> const void* {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : it->second;
  };
  auto need = [&](const std::string& name) -> const void* {
    const void* p = get(name);
    if (!p) fail("model {}: canonical tensor {} is missing", c.name, name);
    return p;
  };
  tok_emb_ = need("tok_emb");
  if (gpt2_) pos_emb_ = need("pos_emb");
  layers_.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerWeights& w = layers_[l];
    w.attn_norm_w = need(p + "attn_norm.weight");
    w.attn_norm_b = get(p + "attn_norm.bias");
    w.qkv_w = need(p + "qkv.weight");
    w.qkv_b = get(p + "qkv.bias");
    w.o_w = need(p + "o.weight");
    w.o_b = get(p + "o.bias");
    w.mlp_norm_w = need(p + "mlp_norm.weight");
    w.mlp_norm_b = get(p + "mlp_norm.bias");
    w.up_w = need(p + "up.weight");
    w.up_b = get(p + "up.bias");
    w.down_w = need(p + "down.weight");
    w.down_b = get(p + "down.bias");
  }
  final_norm_w_ = need("final_norm.weight");
  final_norm_b_ = get("final_norm.bias");
  lm_head_ = c.tie_word_embeddings ? tok_emb_ : need("lm_head.weight");

  // Bytes a forward pass reads: every matrix and vector except the embedding tables (only rows
  // are gathered), plus the lm_head (tied or not).
  weight_bytes_ = 0;
  for (const TensorSpec& spec : specs) {
    if (spec.name != "tok_emb" && spec.name != "pos_emb" && spec.name != "lm_head.weight") {
      weight_bytes_ += spec.numel() * 2;
    }
  }
  weight_bytes_ += int64_t(c.vocab_size) * c.hidden_size * 2;

  if (!gpt2_) {
    std::vector<float> inv_freq(c.head_dim / 2);
    rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling, inv_freq.data());
    inv_freq_ = static_cast<float*>(device_alloc(int64_t(inv_freq.size()) * 4));
    ROSE_CUDA_CHECK(
        cudaMemcpy(inv_freq_, inv_freq.data(), inv_freq.size() * 4, cudaMemcpyHostToDevice));
  }
}

void CudaBackend::validate(const StepPlan& plan) const {
  validate_step_plan(plan, limits_);
  if (gpt2_) {  // learned position embeddings have no row past the model's positions
    for (int32_t position : plan.positions) {
      if (position >= config_.max_position_embeddings) {
        fail("step plan: position {} exceeds the model's {} positions", position,
             config_.max_position_embeddings);
      }
    }
  }
}

int64_t CudaBackend::pack(const StepPlan& plan, int padded_seqs) {
  const int n = plan.num_tokens(), s = plan.num_seqs();
  char* host = static_cast<char*>(pinned_meta_);
  auto at = [&](int64_t offset) { return reinterpret_cast<int32_t*>(host + offset); };
  const MetaLayout m = meta_layout(n + (padded_seqs - s), padded_seqs);
  // Padding (graph replay only: then n == s): one token per row, slot -1, context 1 over block 0.
  int stride = 1;
  for (int i = 0; i < s; ++i) {
    stride = std::max(stride, (plan.context_lens[i] + block_size_ - 1) / block_size_);
  }
  auto* params = reinterpret_cast<SampleRowParams*>(host + m.sample_params);
  int32_t* query_start = at(m.query_start);
  int32_t* context_lens = at(m.context_lens);
  int32_t* sample_rows = at(m.sample_rows);
  int32_t* token_ids = at(m.token_ids);
  int32_t* positions = at(m.positions);
  int32_t* slots = at(m.slot_mapping);
  int32_t* token_seq = at(m.token_seq);
  int32_t* tables = at(m.block_tables);
  *at(m.table_stride) = stride;
  for (int i = 0; i < s; ++i) {
    const SamplingParams& sp = plan.sampling[i];
    params[i] =
        SampleRowParams{sp.temperature,      sp.top_k, sp.top_p, plan.do_sample[i] ? 1 : 0, sp.seed,
                        plan.sample_index[i]};
    query_start[i] = plan.query_start[i];
    context_lens[i] = plan.context_lens[i];
    sample_rows[i] = plan.query_start[i + 1] - 1;
    const int needed = (plan.context_lens[i] + block_size_ - 1) / block_size_;
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
  return m.block_tables + int64_t(padded_seqs) * stride * 4;
}

// Every (out, in, f32_out) forward() passes to gemm(), with the most rows it passes.
std::vector<GemmShape> CudaBackend::gemm_shapes() const {
  const ModelConfig& c = config_;
  const int H = c.hidden_size, I = c.intermediate_size;
  const int up_rows = gpt2_ ? I : 2 * I;
  return {
      GemmShape{c.qkv_dim(), H, false, max_tokens_},  // qkv
      GemmShape{H, c.q_dim(), false, max_tokens_},    // o
      GemmShape{up_rows, H, false, max_tokens_},      // up (GPT-2) or gate|up (Llama)
      GemmShape{H, I, false, max_tokens_},            // down
      GemmShape{c.vocab_size, H, true, max_seqs_},    // lm_head, fp32 logits
  };
}

void CudaBackend::gemm(const void* x, const void* w, void* y, int n, int in, int out,
                       bool f32_out) {
  // Row-major y (n, out) = x (n, in) W^T with W (out, in): in cuBLAS's column-major terms
  // y^T (out, n) = W^T-as-stored (op T of the (in, out) column-major view) times x^T (in, n).
  if (invariant_gemm_) {  // --batch-invariant: row r's bits do not depend on n
    invariant_gemm_->run(x, w, y, n, in, out, f32_out, stream_);
    return;
  }
  if (gemv_supported(n, in)) {  // small-batch decode: stream the weights with enough blocks
    launch_gemv(x, w, y, n, in, out, f32_out, dtype_, stream_);
    return;
  }
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t t = dtype_ == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  ROSE_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &alpha, w, t, in, x,
                                 t, in, &beta, y, f32_out ? CUDA_R_32F : t, out, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::forward(int n, int num_seqs, int max_query_len) {
  const ModelConfig& c = config_;
  const int H = c.hidden_size, I = c.intermediate_size;
  const int up_rows = gpt2_ ? I : 2 * I;
  const MetaLayout m = meta_layout(n, num_seqs);
  launch_embedding(residual_, tok_emb_, pos_emb_, meta<int32_t>(m.token_ids),
                   meta<int32_t>(m.positions), n, H, dtype_, stream_);
  const int splits =
      attention_num_splits(n, c.num_kv_heads, c.num_heads, target_blocks_, kMaxSplits);
  const NormKind norm = gpt2_ ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  const void* pending = nullptr;       // the previous sub-layer's output, not yet in residual_
  const void* pending_bias = nullptr;  // and its bias
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = layers_[l];
    AddNormArgs an;
    an.residual = residual_;
    an.delta = pending;
    an.delta_bias = pending_bias;
    an.weight = w.attn_norm_w;
    an.bias = w.attn_norm_b;
    an.out = normed_;
    an.num_rows = n;
    an.hidden = H;
    an.eps = c.norm_eps;
    an.kind = norm;
    an.dtype = dtype_;
    launch_add_norm(an, stream_);
    gemm(normed_, w.qkv_w, qkv_, n, H, c.qkv_dim(), false);

    char* k_cache = static_cast<char*>(kv_pool_) + int64_t(2 * l) * kv_layer_elems_ * 2;
    char* v_cache = k_cache + kv_layer_elems_ * 2;
    RopeKvArgs rk;
    rk.qkv = qkv_;
    rk.qkv_bias = w.qkv_b;
    rk.k_cache = k_cache;
    rk.v_cache = v_cache;
    rk.positions = meta<int32_t>(m.positions);
    rk.slot_mapping = meta<int32_t>(m.slot_mapping);
    rk.inv_freq = inv_freq_;
    rk.num_tokens = n;
    rk.num_heads = c.num_heads;
    rk.num_kv_heads = c.num_kv_heads;
    rk.head_dim = c.head_dim;
    rk.dtype = dtype_;
    launch_rope_kv_write(rk, stream_);

    AttentionArgs at;
    at.q = qkv_;
    at.q_stride = c.qkv_dim();
    at.k_cache = k_cache;
    at.v_cache = v_cache;
    at.block_tables = meta<int32_t>(m.block_tables);
    at.block_table_stride = meta<int32_t>(m.table_stride);
    at.query_start = meta<int32_t>(m.query_start);
    at.context_lens = meta<int32_t>(m.context_lens);
    at.token_seq = meta<int32_t>(m.token_seq);
    at.out = attn_;
    at.partial_out = partial_out_;
    at.partial_lse = partial_lse_;
    at.merge_counters = merge_counters_;
    at.num_tokens = n;
    at.num_heads = c.num_heads;
    at.num_kv_heads = c.num_kv_heads;
    at.head_dim = c.head_dim;
    at.block_size = block_size_;
    at.num_splits = splits;
    if (options_.batch_invariant) {  // fixed splits from position 0: see kInvariantSplitKeys
      at.split_keys = kInvariantSplitKeys;
      at.num_splits = step_splits_;
      // The partials hold invariant_rows_ rows of invariant_splits_ splits: more rows of fewer.
      at.rows_per_launch = int(std::min<int64_t>(
          max_tokens_, int64_t(invariant_rows_) * invariant_splits_ / step_splits_));
    }
    at.scale = 1.0f / std::sqrt(float(c.head_dim));
    at.dtype = dtype_;
    // Steps with prefill rows run the tensor-core kernel (one block per 64 query rows); pure
    // decode keeps split-KV, which spreads few rows over the GPU. Invariant mode keeps one fixed
    // schedule for now (not this kernel).
    if (max_query_len > 1 && !options_.batch_invariant && prefill_attention_supported(at)) {
      launch_prefill_attention(at, num_seqs, max_query_len, stream_);
    } else {
      launch_paged_attention(at, stream_);
    }
    gemm(attn_, w.o_w, proj_, n, c.q_dim(), H, false);

    an.delta = proj_;
    an.delta_bias = w.o_b;
    an.weight = w.mlp_norm_w;
    an.bias = w.mlp_norm_b;
    launch_add_norm(an, stream_);
    if (use_gemv(n, H) && use_gemv(n, I)) {  // small batch: activation fused
      void* hidden_act = gpt2_ ? mlp_ : act_;
      launch_gemv_act(normed_, w.up_w, w.up_b, hidden_act, n, H, I,
                      gpt2_ ? GemvActivation::kGeluTanhBias : GemvActivation::kSiluMul, dtype_,
                      stream_);
      gemm(hidden_act, w.down_w, proj_, n, I, H, false);
    } else if (gpt2_) {
      gemm(normed_, w.up_w, mlp_, n, H, up_rows, false);
      launch_gelu_tanh_bias(mlp_, w.up_b, n, I, dtype_, stream_);
      gemm(mlp_, w.down_w, proj_, n, I, H, false);
    } else {
      gemm(normed_, w.up_w, mlp_, n, H, up_rows, false);
      launch_silu_and_mul(act_, mlp_, n, I, dtype_, stream_);
      gemm(act_, w.down_w, proj_, n, I, H, false);
    }
    pending = proj_;
    pending_bias = w.down_b;
  }
  // Final norm and lm_head on each sequence's last token only.
  AddNormArgs fin;
  fin.residual = residual_;
  fin.delta = pending;
  fin.delta_bias = pending_bias;
  fin.weight = final_norm_w_;
  fin.bias = final_norm_b_;
  fin.out = final_normed_;
  fin.row_index = meta<int32_t>(m.sample_rows);
  fin.write_residual = false;
  fin.num_rows = num_seqs;
  fin.hidden = H;
  fin.eps = c.norm_eps;
  fin.kind = norm;
  fin.dtype = dtype_;
  launch_add_norm(fin, stream_);
  gemm(final_normed_, lm_head_, logits_, num_seqs, H, c.vocab_size, true);
  launch_sample(sampled_, logits_, meta<SampleRowParams>(m.sample_params), num_seqs, c.vocab_size,
                stream_);
}

int CudaBackend::graph_bucket(int num_seqs) const {
  int bucket = num_seqs <= 1 ? 1 : num_seqs <= 2 ? 2 : num_seqs <= 4 ? 4 : num_seqs <= 8 ? 8 : 0;
  if (bucket == 0) bucket = (num_seqs + 7) / 8 * 8;
  return std::min(bucket, max_seqs_);
}

void CudaBackend::execute(const StepPlan& plan, StepOutput& out) {
  // Another replica's backend may have run on this thread since (cluster.h): select ours.
  ROSE_CUDA_CHECK(cudaSetDevice(options_.device));
  const double t0 = host_seconds();
  validate(plan);
  const int n = plan.num_tokens(), s = plan.num_seqs();
  out.sampled.assign(s, -1);
  out.logits.clear();
  if (s == 0) return;

  const bool use_graph = options_.cuda_graphs && plan.is_pure_decode();
  const int padded = use_graph ? graph_bucket(s) : s;
  const int max_context = *std::max_element(plan.context_lens.begin(), plan.context_lens.end());
  step_splits_ =
      use_graph ? invariant_splits_ : (max_context + kInvariantSplitKeys - 1) / kInvariantSplitKeys;
  const double t1 = host_seconds();
  const int64_t bytes = pack(plan, padded);
  ROSE_CUDA_CHECK(
      cudaMemcpyAsync(meta_device_, pinned_meta_, size_t(bytes), cudaMemcpyHostToDevice, stream_));
  const double t2 = host_seconds();
  ++stats_.steps;
  stats_.copy_bytes += bytes;
  if (use_graph) {
    auto it = graphs_.find(padded);
    if (it != graphs_.end()) {
      ROSE_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
      ++stats_.replays;
    } else {
      // First use of this batch size: run it eagerly (loads kernels, picks cuBLAS algorithms),
      // then capture the same launches for the next steps.
      forward(padded, padded, 1);
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      ROSE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        forward(padded, padded, 1);
      } catch (...) {
        cudaStreamEndCapture(stream_, &graph);
        if (graph) cudaGraphDestroy(graph);
        throw;
      }
      ROSE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      ROSE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      ROSE_CUDA_CHECK(cudaGraphDestroy(graph));
      graphs_[padded] = exec;
      ++stats_.captures;
    }
  } else {
    int max_query_len = 0;
    for (int i = 0; i < s; ++i) {
      max_query_len = std::max(max_query_len, plan.query_start[i + 1] - plan.query_start[i]);
    }
    forward(n, s, max_query_len);
    ++stats_.eager;
  }
  ROSE_CUDA_CHECK(
      cudaMemcpyAsync(pinned_sampled_, sampled_, size_t(s) * 4, cudaMemcpyDeviceToHost, stream_));
  const double t3 = host_seconds();
  ROSE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const double t4 = host_seconds();
  stats_.validate_s += t1 - t0;
  stats_.pack_s += t2 - t1;
  stats_.launch_s += t3 - t2;
  stats_.sync_s += t4 - t3;
  std::memcpy(out.sampled.data(), pinned_sampled_, size_t(s) * 4);
  if (plan.return_logits) {
    const int V = config_.vocab_size;
    out.logits.resize(size_t(s) * V);
    ROSE_CUDA_CHECK(
        cudaMemcpy(out.logits.data(), logits_, size_t(s) * V * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < s; ++i) {
      if (!plan.do_sample[i]) std::fill_n(out.logits.begin() + int64_t(i) * V, V, 0.0f);
    }
  }
}

}  // namespace

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
