#pragma once
// The CUDA backend: bf16 (or fp16) weights and KV cache, fp32 accumulation and residual stream.
// Everything is allocated at construction (weights, the KV pool, workspaces sized by the token and
// sequence budgets); a step copies the plan's small arrays in with one cudaMemcpyAsync, runs the
// forward pass (eagerly, or as a CUDA graph for pure-decode steps), samples on the GPU and writes
// only the sampled ids to the host: one synchronisation per step. submit() returns once the step
// is enqueued, so the engine can enqueue the next behind it (overlapped steps, engine.h): the
// host buffers come in two halves, one per step in flight, and the sampler also leaves its ids
// on the device, where the next step's embedding reads its previous-step tokens.
//
// The parts: cuda_backend.cpp (construction, execute), device_weights (upload and binding),
// workspace_plan (buffer sizes, plain C++), graph_cache (decode graphs), forward.cpp (the layers).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/add_norm_reducer.h"
#include "engine/backend/cuda/backend_switches.h"
#include "engine/backend/cuda/device_arena.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/backend/cuda/graph_cache.h"
#include "engine/backend/cuda/logits_gatherer.h"
#include "engine/backend/cuda/workspace_plan.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/gemm_bucketed.h"
#include "kernels/cuda/gemm_invariant.h"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/gemv_mma.cuh"
#include "kernels/cuda/gemv_quant.cuh"
#include "kernels/cuda/gemv_quant_mma.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/rope_kv.cuh"

namespace rose {

// One layer's kernel arguments, filled once at construction with everything that does not change
// between steps (weights, workspaces, KV pages, model shape); forward() copies them and sets only
// the step's fields (StepFields). Tensor parallel would build these per GPU with its shard's heads.
struct LayerArgs {
  AddNormArgs attn_norm;  // residual += the previous layer's down output (+ bias), then norm
  RopeKvArgs rope_kv;     // this layer's K and V pages
  AttentionArgs attention;
  AddNormArgs mlp_norm;  // residual += the o output (+ bias), then norm
};

// What changes between steps in the kernels' arguments: counts, the attention grid, and where the
// step's metadata arrays sit (their offsets depend on the counts).
struct StepFields {
  int num_tokens = 0;
  int num_seqs = 0;
  int num_splits = 1;                     // attention key splits
  int rows_per_launch = 0;                // --batch-invariant attention: query rows per launch
  const int32_t* positions = nullptr;     // (num_tokens,)
  const int32_t* slot_mapping = nullptr;  // (num_tokens,)
  const int32_t* token_ids = nullptr;     // (num_tokens,)
  const int32_t* token_seq = nullptr;     // (num_tokens,)
  const int32_t* query_start = nullptr;   // (num_seqs + 1,)
  const int32_t* context_lens = nullptr;  // (num_seqs,)
  const int32_t* sample_rows = nullptr;   // (num_seqs,)
  const int32_t* block_tables = nullptr;  // (num_seqs, *table_stride)
  const int32_t* table_stride = nullptr;  // (1,)
  const int32_t* sample_slot = nullptr;   // (1,) this step's offset into the sampled ids' buffer
  const SampleRowParams* sample_params = nullptr;  // (num_seqs,)
  // Set on steps whose decode rows share a prefix (CudaBackend::shared_prefix_keys): the attention
  // runs the shared-prefix launch first (AttentionArgs::shared_keys).
  const int32_t* shared_keys = nullptr;    // (1,)
  const int32_t* shares_prefix = nullptr;  // (num_seqs,)
  int prefix_splits = 0;
  // The norms after layer 0's run inside the GEMVs (CudaBackend::fused_norm_rows_): qkv and gate|up
  // normalize the residual stream themselves, o and down add their outputs to it.
  bool fused_norms = false;
};

// Steps of up to this many rows run their norms inside the decode GEMVs when qkv and up are
// quantized or on the dense one-wave kernel (fused_norm_max_rows). Each fused GEMV block reads the
// residual rows itself, a cost that grows with the rows while the add-norm launch it saves does
// not. On the H100 (results/2026-11-25-fused-norm) fusing gained 15-17% (llama-1b Q4_K) and 5-6%
// (llama-8b Q4_K) at batch 1, 7-9% and 4-5% at batch 2, and, once the rows' reductions ran on
// different warps (pairs/), 2.7% and 3.6% at batch 4; at batch 8 it lost 8-10% (measured before
// that change).
constexpr int kFusedNormDefaultRows = 4;

class CudaBackend final : public Backend {
 public:
  CudaBackend(const WeightSource& weights, const BackendOptions& options);
  ~CudaBackend() override;

  void execute(const StepPlan& plan, StepOutput& out) override;
  void submit(const StepPlan& plan) override;  // not for return_logits plans (execute())
  void collect(StepOutput& out) override;
  bool overlaps_steps() const override { return true; }
  const PlanLimits& limits() const override { return limits_; }
  std::string device_name() const override { return device_name_; }
  const ModelConfig& config() const override { return config_; }
  // Steps of at most this many rows run their norms inside the GEMVs (0: none; tests).
  int fused_norm_rows() const { return fused_norm_rows_; }
  int64_t weight_bytes() const override { return weights_.bytes_per_forward; }
  std::string weight_types() const override { return weights_.types; }
  int64_t kv_bytes_per_token() const override {
    return config_.kv_elements_per_token() * element_size_;
  }
  void warm_up() override;
  std::optional<CollectiveTiming> time_collectives(int rows, int iterations) override;
  std::optional<double> measure_copy_bandwidth_gbps() override;

 private:
  // Construction, in this order (cuda_backend.cpp).
  void resolve_options();            // dtype, model and budget checks, max_model_len
  void open_device();                // device, stream, cuBLAS and its workspace; the SM count
  void read_measurement_switches();  // the kernels' switches now; warns of SKIP, PROBE
  void allocate_workspaces();        // plan_ first: it needs the SM count and the kept weights
  void allocate_kv_pool();           // last: it takes what memory is left
  void build_layer_args();
  AddNormArgs norm_args() const;
  RopeKvArgs rope_kv_args(int layer) const;
  AttentionArgs attention_args(int layer) const;
  void* k_cache(int layer) const;
  void* v_cache(int layer) const;
  void warm_up_prefill(StepPlan& plan, StepOutput& out);
  void warm_up_gemms();  // each BucketedGemm bucket's algorithm run once, at its largest n
  // One decode step per bucket in `buckets` (captured at its first step), largest first.
  void warm_up_graphs(StepPlan& plan, StepOutput& out, const std::vector<int>& buckets);

  // One step (cuda_backend.cpp).
  void validate(const StepPlan& plan) const;
  // Enqueues the step (copy in, forward, sampler) into the next free half of the host buffers.
  void enqueue(const StepPlan& plan);
  // Packs the plan (plus padding rows up to padded_seqs for graph replay) into `host`, one half
  // of the pinned buffer, its sampler writing at `sample_offset`; returns the bytes to copy.
  int64_t pack(const StepPlan& plan, int padded_seqs, char* host, int32_t sample_offset);
  // Keys every row of a pure-decode step holds in the same physical blocks (whole blocks, each
  // row keeping at least one key of its own), or 0 when too few to be worth the prefix launch or
  // when the shared-prefix attention does not apply (attention.cuh).
  int shared_prefix_keys(const StepPlan& plan) const;
  // The GraphCache variant of the next forward() of `padded` rows (decode_graph_variant: shared
  // prefix, 16-block attention clusters, long rows off the cluster attention).
  int graph_variant(int padded) const;
  // The most rows a pure-decode step whose longest row has `max_context` keys runs on the cluster
  // decode attention: ROSEINFER_CUDA_CLUSTER_ATTENTION_MAX_ROWS when set, 4 on the scalar kernel,
  // else cluster_attention_max_rows (by the model and the context).
  int cluster_max_rows(int max_context) const;
  void launch_eager(const StepPlan& plan);
  void copy_logits(const StepPlan& plan, StepOutput& out) const;

  // The forward pass (forward.cpp). max_query_len: the step's longest query chunk (1 for pure
  // decode); it picks the attention kernel and sizes the prefill kernel's grid.
  void forward(int num_tokens, int num_seqs, int max_query_len);
  StepFields step_fields(int num_tokens, int num_seqs) const;
  void attention_block(const LayerArgs& layer, const LayerWeights& w, const StepFields& step,
                       int max_query_len);
  void mlp_block(const LayerArgs& layer, const LayerWeights& w, const StepFields& step,
                 bool last_layer);
  // y (n, w.rows) = x (n, w.cols) W^T; y in fp32 when f32_out, else in the activation dtype.
  // Dispatches on the weight's storage: dense, or ggml blocks (quantized GEMV, or a decoded copy).
  // `fusion` (gemv_fusion.cuh; only where the product runs on a GEMV kernel, fused_norm_rows_): a
  // norm input instead of x (a quantized w, or a dense one on the one-wave kernel), or y the fp32
  // residual stream to add to.
  void gemm(const void* x, const DeviceMatrix& w, void* y, int n, bool f32_out,
            const GemvFusion& fusion = {});
  // The norm a GEMV applies to its input instead of `norm`'s add-norm kernel (whose delta the
  // previous GEMV has already added to the residual stream).
  GemvFusion norm_input(const AddNormArgs& norm) const;
  // The most rows a step may have for its norms to run inside the GEMVs (0: never): every linear
  // layer a GEMV at that size, qkv and up quantized or dense on the one-wave kernel
  // (gemv_norm_input_supported), SiLU-gated, one process (no collective), RMSNorm with no
  // sub-layer biases, not --batch-invariant, at most kFusedNormDefaultRows
  // (ROSEINFER_CUDA_FUSED_NORM=N sets that cap, 0 turns it off). Read once at start.
  int fused_norm_max_rows() const;
  // The o or down projection of x: into proj_ for the next add-norm, or added to the residual
  // stream in the GEMV when step.fused_norms.
  // next_norm_gathers: the add-norm after it is the final norm, which sums gathered rows only.
  void project_out(const void* x, const DeviceMatrix& w, const StepFields& step,
                   bool next_norm_gathers = false);
  // Whether project_out's GEMV of w at n rows stores its partial into the peers' staging as well
  // (peer_push.cuh): the dense GEMV runs it, and the next add-norm fuses the all-reduce and sums
  // the same rows.
  bool pushes_partial(const DeviceMatrix& w, int n, bool next_norm_gathers) const;
  // Tensor parallel: a row-parallel layer's output proj_ (n, H) summed over the ranks, in place.
  void all_reduce_proj(int n);
  // A sub-layer's add-norm (`run_norm` false: ROSEINFER_CUDA_SKIP=norm leaves it out). First
  // completes the all-reduce of proj_ that project_out left pending, in the same kernel where the
  // collective fuses them (AddNormReducer), else as an all-reduce before the add-norm.
  void add_norm(const AddNormArgs& norm, bool run_norm = true);
  // The lm_head's logits into logits_ (num_seqs, V): this rank's vocab rows, gathered from every
  // rank under tensor parallel.
  void lm_head_logits(int num_seqs);
  // Tensor parallel: every rank's shard_logits_ (num_seqs, its vocab rows) into logits_.
  void gather_logits(int num_seqs);
  // y (n, out) = x (n, in) W^T with W (out, in) dense in the activation dtype, W a weight of the
  // run: the GEMVs at small batches (they load W before their PDL wait), else library_gemm.
  void dense_gemm(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out,
                  const GemvFusion& fusion = {});
  // The same product through the pinned GEMM (--batch-invariant) or cuBLAS alone, for any W,
  // also one the step's previous kernel wrote (dequantize()'s copy).
  void library_gemm(const void* x, const void* w, void* y, int n, int in, int out, bool f32_out);
  // A quantized matrix decoded into dequantized_; returns it.
  const void* dequantize(const DeviceMatrix& w);
  // Quantized matrices: the GEMV on their blocks for up to kGemvQuantMaxRows rows, off under
  // --batch-invariant (a decoded copy through the pinned GEMM keeps a row's bits independent of n).
  bool use_quant_gemv(int n) const { return !invariant_gemm_ && n <= kGemvQuantMaxRows; }
  // Quantized matrices with more rows than the GEMV takes: the tile-decoding tensor-core GEMM on
  // their blocks (gemm_quant.cuh) when every range's type has it and n <= quant_gemm_limit(w),
  // else a decoded copy and cuBLAS. Under --batch-invariant a decoded copy and the pinned GEMM
  // for every n, unless quant_gemm_invariant_ (then this GEMM for every n: its sums follow the
  // weight shape only, so a row's bits do not depend on n either).
  bool use_quant_gemm(const DeviceMatrix& w, int n) const;
  // Quantized matrices whose every range is Q4_K or Q6_K (quant_mma_all_types_: or Q8_0, Q4_0,
  // Q4_1), at quant_mma_min_rows_ (the first row count past the fused-norm steps') to
  // quant_mma_max_rows_ rows with no fusion asked: the int8 tensor-core GEMV (gemv_quant_mma.cuh)
  // ahead of the dp4a GEMV and the tile-decoding GEMM; off under --batch-invariant, like the dp4a
  // GEMV.
  bool use_quant_mma(const DeviceMatrix& w, int n, const GemvFusion& fusion) const;
  // The most rows w's products take the tile-decoding GEMM for: quant_gemm_row_limit (by shape,
  // workspace_plan.h; the rule before split-K when ROSEINFER_GEMM_QUANT_SPLIT_K turns it off),
  // unless quant_gemm_rows_ overrides w's class.
  int quant_gemm_limit(const DeviceMatrix& w) const;
  // Whether a step of n rows runs the tile-decoding GEMM in any product (warm_up's recapture).
  bool quant_gemm_in_some_product(int n) const;
  // Whether the MLP's up projection runs with its activation fused (gemv_act).
  bool use_fused_up(const DeviceMatrix& up, int n) const;
  // The MLP's first projection with its activation fused, at small batch (use_gemv): y (n, out)
  // with out = w.rows, or w.rows / 2 for the gated kSiluMul (rows gate | up).
  // `norm`: the norm input (gemv_fusion.cuh), x unused.
  void gemv_act(const void* x, const DeviceMatrix& w, const void* bias, void* y, int n,
                GemvActivation act, const GemvFusion& norm = {});
  // The fused small-batch gemv paths: off under --batch-invariant (their reduction differs from
  // the GEMM's, so a row's bits would depend on the batch size).
  bool use_gemv(int n, int in) const {
    return !invariant_gemm_ && n <= gemv_max_rows_ && gemv_supported(n, in);
  }
  // The most rows a dense product runs on the GEMV, more going to cuBLAS (gemv_rows_for).
  int gemv_max_rows_ = kGemvMaxRows;
  // Past the GEMV's rows, up to this many run on the tensor-core GEMV (gemv_mma.cuh,
  // gemv_mma_rows_for), off under --batch-invariant like the GEMV.
  bool use_gemv_mma(int n, int in) const {
    return !invariant_gemm_ && n <= gemv_mma_max_rows_ && gemv_mma_supported(n, in);
  }
  int gemv_mma_max_rows_ = kGemvMmaMaxRows;
  std::vector<GemmShape> gemm_shapes() const;
  template <typename T>
  T* meta(int64_t offset) const {  // a device pointer into this step's metadata
    return reinterpret_cast<T*>(static_cast<char*>(meta_device_) + offset);
  }

  ModelConfig config_;
  BackendOptions options_;
  DType dtype_ = DType::kBF16;
  int64_t element_size_ = 2;  // dtype_size(dtype_)
  int max_model_len_ = 0;
  WorkspacePlan plan_;  // sizes of every buffer below, and the resolved budgets
  PlanLimits limits_;   // set once the KV pool is sized
  int num_kv_blocks_ = 0;
  // --batch-invariant: the attention grid's splits for the next forward(): invariant_splits for a
  // graph (replayed at any context), the step's longest context for an eager step. A row's bits do
  // not depend on the grid (splits past its keys exit), so a smaller grid only saves launches.
  int step_splits_ = 0;
  // Keys of the next forward()'s shared prefix (shared_prefix_keys), 0: the plain attention. The
  // graph of a bucket has a variant with the prefix launch (GraphCache variant 1).
  int step_shared_keys_ = 0;
  // The next forward()'s blocks a cluster of the cluster decode attention
  // (cluster_attention_splits: 16 for few clusters past 1,024 keys). The graph of a bucket has a
  // variant with 16 (GraphCache variant 2).
  int step_cluster_splits_ = kClusterAttentionSplits;
  std::string device_name_;
  int num_sms_ = 0;
  bool print_stats_ = false;
  // ROSEINFER_CUDA_STATS=2: also one line per step (after warm-up) with its host enqueue and wait
  // times, to tell a first use's host-side cost (kernel loading, algorithm choice) from GPU time.
  bool print_step_times_ = false;
  bool warming_up_ = false;  // inside warm_up(): no per-step lines
  // --batch-invariant: every step's attention on the tensor-core kernel (attention_prefill.cuh),
  // when it supports the model; ROSEINFER_CUDA_INVARIANT_ATTENTION=split keeps the split-KV
  // kernel with fixed splits (the schedule before, for comparisons).
  bool invariant_tensor_core_attention_ = false;
  // The next forward()'s pure-decode steps of at most this many rows run the cluster decode
  // attention (attention.cuh, cluster_decode), outside --batch-invariant and the shared-prefix
  // launch; 0: none. cluster_max_rows of the step's longest row, set in enqueue.
  int step_cluster_max_rows_ = 0;
  bool cluster_attention_tensor_cores_ = true;  // cluster_attention_uses_tensor_cores()
  // False when ROSEINFER_GEMM_QUANT_SPLIT_K is 0 or 1 (gemm_quant_split_k_disabled): the GEMM
  // runs unsplit and the row limits are those before split-K (comparisons).
  bool quant_gemm_split_k_ = true;
  // The most rows a step's norms may run inside the GEMVs: kFusedNormDefaultRows, or
  // ROSEINFER_CUDA_FUSED_NORM=N (0: never; comparisons).
  int fused_norm_cap_ = kFusedNormDefaultRows;
  // The int8 tensor-core GEMV's first row count: past the fused-norm steps', or
  // ROSEINFER_CUDA_QUANT_MMA_MIN_ROWS=N (comparisons).
  int quant_mma_min_rows_ = kFusedNormDefaultRows + 1;
  // Its last row count: kGemvQuantMmaMaxRows, or ROSEINFER_CUDA_QUANT_MMA_MAX_ROWS=N (0: never;
  // comparisons and the tests that compare other paths' bits).
  int quant_mma_max_rows_ = kGemvQuantMmaMaxRows;
  // Steps of at most this many rows run their norms inside the GEMVs (fused_norm_max_rows).
  int fused_norm_rows_ = 0;
  bool skipped(SkipKernel kind) const { return (switches_.skip_kernels & kind) != 0; }

  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  // Tensor parallel: this rank's NCCL collective (config_ is its shard); null for a whole model.
  Collective* collective_ = nullptr;
  // The same collective where it fuses an all-reduce with the add-norm after it; else null.
  AddNormReducer* add_norm_reducer_ = nullptr;
  // The same collective where it gathers the vocab-split logits in one kernel; else null.
  LogitsGatherer* logits_gatherer_ = nullptr;
  // Rows of proj_ that still hold this rank's partial: project_out leaves the all-reduce to the
  // next add_norm() when add_norm_reducer_ is set (0: nothing pending).
  int unreduced_rows_ = 0;
  // Those rows are in the peers' staging already: the GEMV that wrote them pushed them
  // (pushes_partial), so the fused add-norm does not.
  bool unreduced_pushed_ = false;
  // Where the row-parallel GEMVs push (AddNormReducer::push_target; size 0: never), at up to
  // push_max_rows_ rows (gemv_push_max_rows, ROSEINFER_CUDA_GEMV_PUSH).
  PeerPush push_target_;
  int push_max_rows_ = 0;
  // --batch-invariant: every linear layer through algorithms pinned per (shape, row bucket).
  std::unique_ptr<InvariantGemm> invariant_gemm_;
  // Otherwise, above the GEMV's rows: cuBLASLt algorithms per row bucket chosen at start, so a new
  // row count costs no algorithm choice (ROSEINFER_CUDA_BUCKETED_GEMM=0: cublasGemmEx alone).
  std::unique_ptr<BucketedGemm> bucketed_gemm_;
  DeviceArena arena_;  // every device buffer below, freed in the destructor
  void* cublas_workspace_ = nullptr;
  void* pinned_meta_ = nullptr;        // (2, plan_.bytes.meta) host mirrors of meta_device_,
                                       // one per step in flight
  int32_t* pinned_sampled_ = nullptr;  // (2, S) mapped: the sampler's output, one half per step
                                       // in flight, read after its event
  void* meta_device_ = nullptr;        // (plan_.bytes.meta) this step's MetaLayout
  // Steps submitted and not yet collected: half h of the host buffers is step (first + k) % 2's.
  struct InFlight {
    int num_seqs = 0;
    bool graph = false;
    double pack_us = 0, launch_us = 0;  // host time (ROSEINFER_CUDA_STATS=2)
    cudaEvent_t done = nullptr;         // recorded after its last operation
  };
  InFlight in_flight_[2];
  int first_in_flight_ = 0, num_in_flight_ = 0;
  int previous_rows_ = 0;  // rows of the last enqueued step (its previous-step tokens' range)

  DeviceWeights weights_;
  std::vector<LayerArgs> layer_args_;  // (num_layers,)
  AddNormArgs final_norm_args_;        // the last layer's output, normed at each sampled row

  void* kv_pool_ = nullptr;  // per layer K then V: (num_blocks, block_size, n_kv_heads, head_dim)
  int64_t kv_layer_bytes_ = 0;  // one layer's K (or V): num_blocks * block_size * kv_dim elements

  // Workspaces (T = plan_.max_tokens, S = plan_.max_seqs): sizes in workspace_plan.h.
  float* residual_ = nullptr;      // (T, H) fp32
  void* normed_ = nullptr;         // (T, H)
  void* qkv_ = nullptr;            // (T, qkv_dim)
  void* attn_ = nullptr;           // (T, q_dim)
  void* proj_ = nullptr;           // (T, H) o and down outputs
  void* mlp_ = nullptr;            // (T, mlp_up_rows)
  void* act_ = nullptr;            // (T, I) gated MLPs
  void* quant_mma_x_ = nullptr;    // (quant_mma_x bytes) x quantized for the int8 tensor-core GEMV
  void* dequantized_ = nullptr;    // (largest quantized rows * cols) a kept matrix, decoded for a
                                   // product of more rows than the quantized GEMV takes
  void* final_normed_ = nullptr;   // (S, H)
  float* logits_ = nullptr;        // (S, V) fp32
  float* shard_logits_ = nullptr;  // (S, vocab_shard_stride) fp32: tensor parallel, this rank's
  float* gathered_logits_ = nullptr;   // (tp_size, S, vocab_shard_stride) fp32: every rank's
  int32_t* sampled_ = nullptr;         // (2, S) only with ROSEINFER_CUDA_SAMPLE_COPY=1
  int32_t* sample_target_ = nullptr;   // (2, S) where the sampler writes: pinned_sampled_'s
                                       // device address, or sampled_
  int32_t* previous_ids_ = nullptr;    // (S,) the last step's sampled ids, also on the device
  void* sample_scratch_ = nullptr;     // (sample_scratch_bytes(S)) zeroed once (sampling.cuh)
  float* partial_out_ = nullptr;       // (partial_rows, head_dim) attention split partials
  float* partial_lse_ = nullptr;       // (partial_rows,)
  int32_t* merge_counters_ = nullptr;  // attention's fused split merge, zero between launches
  float* rope_angles_ = nullptr;       // (max_model_len_, head_dim / 2, 2) cos, sin; RoPE models
  void* quant_gemm_split_ = nullptr;   // (plan_.bytes.quant_gemm_split) the tile-decoding GEMM's
                                       // split-K counters and partials, zeroed once

  GraphCache graphs_;
  // The ROSEINFER_CUDA_* measurement switches, read first (backend_switches.h, where each says why
  // its default is what it is); the members above with a computed default apply theirs.
  BackendSwitches switches_;

  // Where execute()'s host time goes (ROSEINFER_CUDA_STATS=1 prints it when the backend is
  // destroyed): seconds in validate, pack + H2D copy, launches, and the wait for the step.
  struct Stats {
    int64_t steps = 0, replays = 0, captures = 0, eager = 0, copy_bytes = 0, shared_prefix = 0;
    double validate_s = 0, pack_s = 0, launch_s = 0, sync_s = 0;
  };
  Stats stats_;
};

}  // namespace rose
