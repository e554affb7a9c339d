// Weight upload and binding for the CUDA backend (device_weights.h).
#include "engine/backend/cuda/device_weights.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "engine/backend/cuda/stored_upload.h"
#include "engine/backend/cuda/workspace_plan.h"
#include "engine/common/error.h"
#include "engine/model/quantized_source.h"
#include "engine/model/rope.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/fill.cuh"
#include "kernels/cuda/gemv_quant.cuh"

namespace rose {

int64_t DeviceMatrix::bytes(int64_t element_size) const {
  if (!quantized()) return rows * cols * element_size;
  int64_t total = 0;
  for (const QuantRange& range : ranges) {
    total += range.rows * gemv_quant_row_bytes(uint32_t(range.type), int(cols));
  }
  return total;
}

namespace {

constexpr int64_t kStagingFloats = int64_t(16) << 20;  // checkpoint upload chunk (64 MB)

// The fp32 path (checkpoints without stored_parts): a pinned buffer for the largest such tensor
// and a device buffer it goes up through, allocated at first use and freed after load.
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

// One tensor's place in the weight allocation.
struct PlacedTensor {
  void* data = nullptr;
  const TensorSpec* spec = nullptr;
};
using TensorMap = std::map<std::string, PlacedTensor>;

// How each tensor gets to the device, decided before anything is allocated so the staging
// buffers can be sized for the largest tensor of each path.
struct UploadPlan {
  int64_t total_bytes = 0;  // the one weight allocation: each tensor kDeviceAlign-aligned
  int64_t staging_bytes = 0;
  std::vector<std::optional<std::vector<StoredPart>>> stored;  // per spec: device-decodable parts
};

class Uploader {
 public:
  Uploader(const WeightSource& weights, DType dtype, cudaStream_t stream)
      : weights_(weights),
        dtype_(dtype),
        element_size_(int64_t(dtype_size(dtype))),
        stream_(stream) {}
  TensorMap run(const std::vector<TensorSpec>& specs, DeviceArena& arena, bool print_stats);

 private:
  UploadPlan make_plan(const std::vector<TensorSpec>& specs);
  void fill_synthetic(const SyntheticInit& init, void* dst, int64_t numel);
  void upload_f32(const TensorSpec& spec, void* dst);

  const WeightSource& weights_;
  DType dtype_;
  int64_t element_size_;
  cudaStream_t stream_;
  HostF32Upload host_;
};

UploadPlan Uploader::make_plan(const std::vector<TensorSpec>& specs) {
  UploadPlan plan;
  plan.stored.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    plan.total_bytes += align_up(specs[i].numel() * element_size_, kDeviceAlign);
    if (weights_.synthetic(specs[i].name)) continue;
    std::optional<std::vector<StoredPart>>& stored = plan.stored[i];
    stored = weights_.stored_parts(specs[i].name);
    if (stored && !device_decodable(*stored)) stored.reset();
    if (stored) {
      plan.staging_bytes = std::max(plan.staging_bytes, StoredUploader::staging_bytes_for(*stored));
    } else {
      host_.max_numel = std::max(host_.max_numel, specs[i].numel());
    }
  }
  return plan;
}

// Stored GGUF blocks are decoded on the device (StoredUploader); other checkpoints are read as
// fp32 on the host and converted on the device; presets are generated on the device.
TensorMap Uploader::run(const std::vector<TensorSpec>& specs, DeviceArena& arena,
                        bool print_stats) {
  const auto start = std::chrono::steady_clock::now();
  const UploadPlan plan = make_plan(specs);
  char* base = static_cast<char*>(arena.alloc(plan.total_bytes));
  std::optional<StoredUploader> stored_uploader;
  if (plan.staging_bytes > 0) stored_uploader.emplace(plan.staging_bytes, stream_);
  TensorMap tensors;
  int generated = 0, decoded = 0;
  int64_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& spec = specs[i];
    void* dst = base + offset;
    offset += align_up(spec.numel() * element_size_, kDeviceAlign);
    tensors[spec.name] = PlacedTensor{dst, &spec};
    if (const std::optional<SyntheticInit> init = weights_.synthetic(spec.name)) {
      fill_synthetic(*init, dst, spec.numel());
      ++generated;
    } else if (plan.stored[i]) {
      stored_uploader->upload(*plan.stored[i], dst, dtype_);
      ++decoded;
    } else {
      upload_f32(spec, dst);
    }
  }
  if (stored_uploader) stored_uploader->finish();
  host_.finish(stream_);
  if (print_stats) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int64_t stored_bytes = stored_uploader ? stored_uploader->bytes_uploaded() : 0;
    std::fprintf(stderr,
                 "cuda load: %d tensors decoded on the device (%.1f MB of GGUF blocks), %d read as "
                 "fp32 on the host, %d generated; %.2f s\n",
                 decoded, double(stored_bytes) / 1e6, host_.tensors, generated, seconds);
  }
  return tensors;
}

void Uploader::fill_synthetic(const SyntheticInit& init, void* dst, int64_t numel) {
  if (init.kind == SyntheticInit::Kind::kUniform && !init.rows.empty()) {  // a shard's slice
    char* out = static_cast<char*>(dst);
    for (const RowRun& run : init.rows) {
      launch_fill_uniform_slice(out, dtype_, run.count, init.cols, run.begin, init.source_cols,
                                init.col_begin, init.seed, init.scale, stream_);
      out += run.count * init.cols * element_size_;
    }
  } else if (init.kind == SyntheticInit::Kind::kUniform) {
    launch_fill_uniform(dst, dtype_, numel, init.seed, init.scale, stream_);
  } else {
    launch_fill_constant(dst, dtype_, numel, init.value, stream_);
  }
}

// The pinned buffer holds the whole fp32 tensor (read_f32 fills it in one call); it goes up in
// kStagingFloats chunks through one device buffer.
void Uploader::upload_f32(const TensorSpec& spec, void* dst) {
  HostF32Upload& host = host_;
  if (!host.pinned) {
    ROSE_CUDA_CHECK(
        cudaMallocHost(reinterpret_cast<void**>(&host.pinned), size_t(host.max_numel) * 4));
    ROSE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&host.staging),
                               size_t(std::min(host.max_numel, kStagingFloats)) * 4));
  }
  ROSE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the previous tensor left `pinned`
  weights_.read_f32(spec.name, std::span<float>(host.pinned, size_t(spec.numel())));
  for (int64_t begin = 0; begin < spec.numel(); begin += kStagingFloats) {
    const int64_t count = std::min(kStagingFloats, spec.numel() - begin);
    ROSE_CUDA_CHECK(cudaMemcpyAsync(host.staging, host.pinned + begin, size_t(count) * 4,
                                    cudaMemcpyHostToDevice, stream_));
    launch_convert_from_f32(static_cast<char*>(dst) + begin * element_size_, dtype_, host.staging,
                            count, stream_);
  }
  ++host.tensors;
}

// The linear matrices kept in their ggml blocks, by canonical name.
using QuantizedMap = std::map<std::string, DeviceMatrix>;

// Uploads, in one allocation, every linear matrix whose stored parts the quantized GEMV reads.
QuantizedMap upload_kept_quantized(const WeightSource& weights,
                                   const std::vector<TensorSpec>& specs, DeviceArena& arena) {
  std::vector<std::pair<const TensorSpec*, std::vector<StoredPart>>> kept;
  int64_t total = 0;
  for (const TensorSpec& spec : specs) {
    if (spec.shape.size() != 2 || !is_linear_matrix(weights.config(), spec.name)) continue;
    std::optional<std::vector<StoredPart>> parts = weights.stored_parts(spec.name);
    if (!parts || !can_keep_quantized(*parts)) continue;
    total += quantized_upload_bytes(*parts);
    kept.emplace_back(&spec, std::move(*parts));
  }
  QuantizedMap quantized;
  if (kept.empty()) return quantized;
  char* base = static_cast<char*>(arena.alloc(total));
  for (const auto& [spec, parts] : kept) {
    DeviceMatrix m;
    m.rows = spec->shape[0];
    m.cols = spec->shape[1];
    m.ranges = upload_quantized(parts, base);
    base += quantized_upload_bytes(parts);
    quantized.emplace(spec->name, std::move(m));
  }
  return quantized;
}

// Binds the canonical names (engine/model/weights.h) to the per-layer structs; a tensor the
// model must have and does not is a user error (a broken checkpoint), an optional one is nullptr.
class Binder {
 public:
  Binder(const ModelConfig& config, const TensorMap& tensors, const QuantizedMap& quantized)
      : config_(config), tensors_(tensors), quantized_(quantized) {}

  const void* get(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : it->second.data;
  }
  const void* need(const std::string& name) const {
    const void* data = get(name);
    if (!data) fail("model {}: canonical tensor {} is missing", config_.name, name);
    return data;
  }
  DeviceMatrix matrix(const std::string& name) const {
    if (auto it = quantized_.find(name); it != quantized_.end()) return it->second;
    need(name);
    const TensorSpec& spec = *tensors_.at(name).spec;
    ROSE_ASSERT(spec.shape.size() == 2);
    return DeviceMatrix{tensors_.at(name).data, spec.shape[0], spec.shape[1], {}};
  }
  LayerWeights layer(int index) const;
  // The tied lm_head reads tok_emb's blocks when they were kept, else its dense rows.
  DeviceMatrix lm_head() const {
    return matrix(config_.tie_word_embeddings ? "tok_emb" : "lm_head.weight");
  }

 private:
  const ModelConfig& config_;
  const TensorMap& tensors_;
  const QuantizedMap& quantized_;
};

LayerWeights Binder::layer(int index) const {
  const std::string p = "layers." + std::to_string(index) + ".";
  LayerWeights w;
  w.attn_norm_w = need(p + "attn_norm.weight");
  w.attn_norm_b = get(p + "attn_norm.bias");
  w.qkv = matrix(p + "qkv.weight");
  w.qkv_b = get(p + "qkv.bias");
  w.o = matrix(p + "o.weight");
  w.o_b = get(p + "o.bias");
  w.mlp_norm_w = need(p + "mlp_norm.weight");
  w.mlp_norm_b = get(p + "mlp_norm.bias");
  w.up = matrix(p + "up.weight");
  w.up_b = get(p + "up.bias");
  w.down = matrix(p + "down.weight");
  w.down_b = get(p + "down.bias");
  return w;
}

// Every tensor but the embedding tables and the lm_head, each matrix at its own storage size,
// then the lm_head (tied or not) at its size.
int64_t bytes_per_forward(const std::vector<TensorSpec>& specs, const QuantizedMap& quantized,
                          const DeviceMatrix& lm_head, int64_t element_size) {
  int64_t bytes = 0;
  for (const TensorSpec& spec : specs) {
    if (spec.name == "tok_emb" || spec.name == "pos_emb" || spec.name == "lm_head.weight") continue;
    auto it = quantized.find(spec.name);
    bytes += it != quantized.end() ? it->second.bytes(element_size) : spec.numel() * element_size;
  }
  return bytes + lm_head.bytes(element_size);
}

// "Q4_1 x 120, Q8_0 x 1" (kept matrices per type), then "bf16 x N" for linear matrices left
// dense; just the dtype's name when nothing was kept.
std::string weight_types_text(const DeviceWeights& w, DType dtype) {
  const std::string dense = dtype == DType::kBF16 ? "bf16" : "fp16";
  WeightTypeCounts counts;
  auto add = [&](const DeviceMatrix& m) {
    if (!m.quantized()) return counts.add_dense(dense);
    std::vector<GgmlType> types;
    for (const QuantRange& range : m.ranges) types.push_back(range.type);
    counts.add_matrix(types);
  };
  for (const LayerWeights& layer : w.layers) {
    for (const DeviceMatrix* m : {&layer.qkv, &layer.o, &layer.up, &layer.down}) add(*m);
  }
  add(w.lm_head);
  return counts.has_ggml() ? counts.text() : dense;
}

float* upload_inv_freq(const ModelConfig& c, DeviceArena& arena) {
  std::vector<float> inv_freq(c.head_dim / 2);
  rope_inv_freq(c.head_dim, c.rope_theta, c.rope_scaling, inv_freq.data());
  float* device = arena.alloc_as<float>(int64_t(inv_freq.size()) * 4);
  ROSE_CUDA_CHECK(cudaMemcpy(device, inv_freq.data(), inv_freq.size() * 4, cudaMemcpyHostToDevice));
  return device;
}

}  // namespace

DeviceWeights upload_weights(const WeightSource& weights, DType dtype, cudaStream_t stream,
                             DeviceArena& arena, bool print_stats, bool keep_quantized) {
  const ModelConfig& c = weights.config();
  const std::vector<TensorSpec> specs = canonical_tensors(c);
  const QuantizedMap quantized =
      keep_quantized ? upload_kept_quantized(weights, specs, arena) : QuantizedMap{};
  std::vector<TensorSpec> dense_specs;  // the rest, and tok_emb always (its rows are gathered)
  for (const TensorSpec& spec : specs) {
    if (spec.name == "tok_emb" || !quantized.count(spec.name)) dense_specs.push_back(spec);
  }
  const TensorMap tensors = Uploader(weights, dtype, stream).run(dense_specs, arena, print_stats);
  const Binder bind(c, tensors, quantized);
  DeviceWeights w;
  w.tok_emb = bind.need("tok_emb");
  if (c.uses_learned_positions()) w.pos_emb = bind.need("pos_emb");
  for (int l = 0; l < c.num_layers; ++l) w.layers.push_back(bind.layer(l));
  w.final_norm_w = bind.need("final_norm.weight");
  w.final_norm_b = bind.get("final_norm.bias");
  w.lm_head = bind.lm_head();
  const int64_t element_size = int64_t(dtype_size(dtype));
  w.bytes_per_forward = bytes_per_forward(specs, quantized, w.lm_head, element_size);
  for (const auto& [name, matrix] : quantized) {
    w.max_quantized_elems = std::max(w.max_quantized_elems, matrix.rows * matrix.cols);
  }
  w.types = weight_types_text(w, dtype);
  if (c.uses_rope()) w.inv_freq = upload_inv_freq(c, arena);
  if (print_stats && !quantized.empty()) {
    std::fprintf(stderr, "cuda load: %zu matrices kept in ggml blocks (%s)\n", quantized.size(),
                 w.types.c_str());
  }
  return w;
}

}  // namespace rose
