#pragma once
// A test WeightSource of random canonical tensors: each seeded by its name (FNV-1a), so any read
// order and any slice of it (tensor parallel) gives the same model; norm weights 1 +- range, every
// other tensor (biases included, unlike a preset's zeros) uniform in [-range, range). `round`
// (e.g. to bf16) makes the values exactly representable on a GPU backend.
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <utility>

#include "engine/model/weights.h"

namespace rose::test {

class RandomWeights : public WeightSource {
 public:
  explicit RandomWeights(ModelConfig config, float range = 0.2f, float (*round)(float) = nullptr)
      : config_(std::move(config)), range_(range), round_(round) {}
  const ModelConfig& config() const override { return config_; }
  void read_f32(const std::string& name, std::span<float> dst) const override {
    uint32_t seed = 2166136261u;  // FNV-1a of the name
    for (char ch : name) seed = (seed ^ uint8_t(ch)) * 16777619u;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-range_, range_);
    const bool norm_weight = name.find("norm.weight") != std::string::npos;
    for (float& x : dst) {
      x = norm_weight ? 1.0f + dist(rng) : dist(rng);
      if (round_) x = round_(x);
    }
  }

 private:
  ModelConfig config_;
  float range_;
  float (*round_)(float);
};

}  // namespace rose::test
