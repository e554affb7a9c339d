#pragma once
// A backend executes one step plan: one forward pass over a flat batch that mixes prefill chunks
// and decode tokens of several sequences over the paged KV cache, then samples. It owns device
// memory (weights, KV pool, workspaces); the scheduler and KV bookkeeping are host code shared by
// all backends (DESIGN.md).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/parallel/collective.h"
#include "kernels/common/sampling_rule.h"

namespace rose {

// One step. Sequence s owns tokens [query_start[s], query_start[s+1]) of the flat arrays; those are
// its newest tokens, at positions context_lens[s] - n_s .. context_lens[s] - 1. Each layer first
// writes every token's K and V into its slot, then runs causal attention for each query token over
// positions 0..its own position of its sequence, read through the block table. So a sequence whose
// prefix came from the prefix cache, or was written by another sequence earlier in this same step,
// reads it from the pages.
struct StepPlan {
  std::vector<int32_t> token_ids;  // (num_tokens,)
  std::vector<int32_t> positions;  // (num_tokens,)
  std::vector<int32_t>
      slot_mapping;  // (num_tokens,) block_id * block_size + offset; -1 writes nothing
  std::vector<int32_t> query_start;  // (num_seqs + 1,) cumulative query lengths, query_start[0] = 0
  std::vector<int32_t> context_lens;  // (num_seqs,) tokens in the cache after this step's writes
  std::vector<int32_t>
      block_tables;  // (num_seqs, block_table_stride) block ids, rows padded with -1
  int block_table_stride = 0;
  // Per sequence: sample a token from the logits of its last query token? (false for a prefill
  // chunk that does not reach the end of the prompt).
  std::vector<uint8_t> do_sample;        // (num_seqs,)
  std::vector<SamplingParams> sampling;  // (num_seqs,)
  std::vector<uint64_t> sample_index;    // (num_seqs,) tokens the request has generated so far
  bool return_logits = false;            // tests: copy the sampled rows' fp32 logits to the host

  int num_seqs() const { return static_cast<int>(context_lens.size()); }
  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  // Every sequence has exactly one query token and samples (the shape CUDA graphs replay).
  bool is_pure_decode() const;
  void clear();
};

// What a backend was sized for, resolved once by the backend from BackendOptions and the model
// (the one owner of these numbers); the Engine derives its limits from them. A plan outside them
// is a bug upstream, reported as rose::Error before any kernel could read or write out of bounds.
struct PlanLimits {
  int max_num_tokens = 0;
  int max_num_seqs = 0;
  int max_model_len = 0;
  int num_kv_blocks = 0;
  int block_size = 0;
  int vocab_size = 0;
};
// Checks every array size, range, block-table entry, position and sampling parameter of `plan`.
// `previous_rows`: rows of the step submitted before it, which previous_step_token ids may name
// (sampling_rule.h; 0: none may appear).
void validate_step_plan(const StepPlan& plan, const PlanLimits& limits, int previous_rows = 0);

struct StepOutput {
  // (num_seqs,) the sampled id, -1 where do_sample was false, kSampledNonFinite (sampling.h) where
  // the logits were not all finite.
  std::vector<int32_t> sampled;
  std::vector<float> logits;  // (num_seqs, vocab) fp32 when return_logits; rows of unsampled: 0
};

struct BackendOptions {
  int block_size = 16;
  int num_kv_blocks = 0;              // 0: size from memory (gpu_memory_utilization / cpu_kv_bytes)
  int max_num_seqs = 256;             // upper bound of num_seqs in any plan
  int max_num_batched_tokens = 8192;  // upper bound of num_tokens in any plan
  int max_model_len = 0;              // 0: the model's max_position_embeddings
  double gpu_memory_utilization = 0.9;
  int64_t cpu_kv_bytes = int64_t(1) << 30;  // CPU KV pool budget when num_kv_blocks == 0
  std::string dtype = "bf16";               // GPU: bf16 or fp16; the CPU backend is fp32
  // CUDA: linear-layer weights stored as ggml blocks (a GGUF, --quantize) are kept in their blocks
  // on the device (decode reads them directly) unless this asks for them decoded into `dtype`.
  bool dequantize_weights = false;
  bool cuda_graphs = true;
  // CUDA: a request's tokens do not depend on what else is in its steps (GEMMs and attention with
  // reduction orders fixed by the weight shape and the absolute position, never by the batch).
  // The CPU backend is batch-invariant always.
  bool batch_invariant = false;
  // CUDA: the GPU this backend lives on. One thread may drive several backends (in-process
  // replicas), so the backend selects it in its constructor, destructor and every execute().
  int device = 0;
  // Tensor parallel (engine/parallel): this rank's collective, the weights then being its shard
  // (ModelConfig::is_shard). Null: the whole model on one device.
  Collective* collective = nullptr;
  // The constructor leaves warm_up() to the caller. Tensor parallel does: warm-up runs
  // collectives, so it starts only once every rank's construction (weights, KV pool) succeeded;
  // a rank that failed there would otherwise leave the others waiting in a collective forever.
  bool defer_warm_up = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // One step, start to finish. Its plan holds ids only (no previous-step tokens).
  virtual void execute(const StepPlan& plan, StepOutput& out) = 0;
  // The same in two halves, for overlapped steps (engine.h): submit() enqueues a step and may
  // return before it runs; collect() waits for the oldest submitted step and returns its output.
  // At most two steps are submitted and not collected; a plan's previous_step_token ids name rows
  // of the step submitted just before it. By default submit() runs the step at once through
  // execute(), those ids replaced on the host by what that step sampled, and collect() hands its
  // output back: the same results, no overlap. A backend that overlaps overrides all three.
  virtual void submit(const StepPlan& plan);
  virtual void collect(StepOutput& out);
  // Whether submit() returns before the step has run (the engine then overlaps by default).
  virtual bool overlaps_steps() const { return false; }
  virtual const PlanLimits& limits() const = 0;
  int num_kv_blocks() const { return limits().num_kv_blocks; }
  int block_size() const { return limits().block_size; }
  virtual std::string device_name() const = 0;  // e.g. "cpu (2 threads)" or "NVIDIA H100 80GB HBM3"
  virtual const ModelConfig& config() const = 0;
  // Bytes read from weights per forward pass (for the achieved-bandwidth figure): quantized
  // matrices count their blocks' bytes.
  virtual int64_t weight_bytes() const = 0;
  // The formats the linear layers ran in, for reports: "bf16", "fp32", or "Q4_1 x 120, Q8_0 x 1"
  // when ggml blocks are kept on the device.
  virtual std::string weight_types() const = 0;
  virtual int64_t kv_bytes_per_token() const = 0;
  // First-use costs paid before the first step (CUDA: kernels, cuBLAS algorithms, decode graphs).
  // The constructor calls it unless BackendOptions::defer_warm_up.
  virtual void warm_up() {}
  // The device's copy bandwidth in GB/s, measured now: bytes read plus bytes written per second by
  // device-to-device copies large enough to leave the caches behind (under tensor parallel, every
  // GPU copying at once, summed). bench holds decode's bytes against it (the "% of floor"). The
  // copies go through the KV pool: call it before any sequence holds KV. nullopt where nothing is
  // measured (the CPU backend, or a pool too small to leave L2 behind).
  virtual std::optional<double> measure_copy_bandwidth_gbps() { return std::nullopt; }
  // Tensor parallel: times the collectives of one pure-decode step of `rows` sequences
  // (CollectiveTiming), `iterations` calls of each after warm-up calls, on the backend's own
  // collective, stream and preallocated buffers (nothing is allocated; rows is clamped to what the
  // workspaces hold). Call it between steps: it overwrites step workspaces. nullopt when the steps
  // run no collectives (a whole model on one device). A shard backend (one with a collective) must
  // be called on every rank at once, as its steps are.
  virtual std::optional<CollectiveTiming> time_collectives(int rows, int iterations) {
    (void)rows;
    (void)iterations;
    return std::nullopt;
  }

 private:
  // The default submit() / collect(): outputs of steps run but not yet collected, oldest at
  // queued_head_; the ids the last submitted step sampled; and the plan with them filled in.
  StepOutput queued_[2];
  int queued_head_ = 0, queued_count_ = 0;
  std::vector<int32_t> last_sampled_;
  StepPlan resolved_;
};

std::unique_ptr<Backend> make_cpu_backend(const WeightSource& weights,
                                          const BackendOptions& options);
// Throws rose::Error when the binary was built without CUDA or no GPU can be used.
std::unique_ptr<Backend> make_cuda_backend(const WeightSource& weights,
                                           const BackendOptions& options);
// true when a CUDA device can be used; `why_not` says why not otherwise.
bool cuda_available(std::string* why_not);
// GPUs this process can use: 0 without CUDA or without a device (what --data-parallel is checked
// against on --device cuda).
int cuda_device_count();

}  // namespace rose
