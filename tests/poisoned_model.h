#pragma once
// A model whose logits go non-finite for one token, and a three-request run over it: shared by
// the CPU test (tests/test_non_finite.cpp) and the CUDA one (tests/gpu/test_cuda_non_finite.cpp).
#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/weights.h"
#include "engine/scheduler/engine.h"

namespace rose::test {

inline constexpr int32_t kPoisonedToken = 77;

// A model with one embedding row set to NaN: only prompts holding that token go wrong. The head
// must be untied (tiny-qwen2), or the NaN row would also be a NaN logit of every request.
class PoisonedEmbedding : public WeightSource {
 public:
  explicit PoisonedEmbedding(const WeightSource& base) : base_(base) {}
  const ModelConfig& config() const override { return base_.config(); }
  void read_f32(const std::string& name, std::span<float> dst) const override {
    base_.read_f32(name, dst);
    if (name != "tok_emb") return;
    const int64_t hidden = config().hidden_size;
    std::fill_n(dst.begin() + kPoisonedToken * hidden, hidden, NAN);
  }

 private:
  const WeightSource& base_;
};

inline const WeightSource& tiny_weights() {
  static const std::unique_ptr<WeightSource> weights =
      open_model("tests/fixtures/models/tiny-qwen2");
  return *weights;
}

// The backend under test: make_cpu_backend or make_cuda_backend.
using BackendFactory = std::unique_ptr<Backend> (*)(const WeightSource&, const BackendOptions&);

// Three requests, the second holding the poisoned token, the third sampled with a seed.
inline RunResult run_three(const WeightSource& weights, std::vector<EngineRequest>& requests,
                           BackendFactory make_backend) {
  BackendOptions options;
  options.num_kv_blocks = 64;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 128;
  const std::unique_ptr<Backend> backend = make_backend(weights, options);
  EngineConfig config;
  config.max_num_seqs = 8;
  config.max_num_batched_tokens = 128;
  requests.assign(3, EngineRequest{});
  requests[0].prompt = {1, 2, 3, 4};
  requests[1].prompt = {5, kPoisonedToken, 6};
  requests[2].prompt = {7, 8};
  for (EngineRequest& r : requests) {
    r.max_tokens = 5;
    r.ignore_eos = true;
  }
  requests[2].sampling.temperature = 0.7f;
  requests[2].sampling.seed = 11;
  Engine engine(*backend, config, "tiny-qwen2");
  return engine.run(requests);
}

}  // namespace rose::test
