// The sampling rule of kernels/common/sampling_rule.h as implemented by rose::cpu::sample_token:
// exact properties (greedy ties, top-k/top-p limits, determinism) and loose frequency checks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "kernels/common/sampling_rule.h"
#include "kernels/cpu/ops.h"

namespace {

struct Sampler {
  std::vector<float> scratch;
  int32_t operator()(const std::vector<float>& logits, const rose::SamplingParams& params,
                     uint64_t index) {
    scratch.assign(2 * logits.size(), NAN);
    return rose::cpu::sample_token(logits.data(), int(logits.size()), params, index,
                                   scratch.data());
  }
};

// Counts over `draws` consecutive token indices.
std::vector<int> histogram(const std::vector<float>& logits, const rose::SamplingParams& params,
                           int draws) {
  Sampler sample;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts.at(sample(logits, params, uint64_t(i)));
  return counts;
}

// Pearson chi-square of counts against probabilities (cells with p == 0 must have no counts).
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int draws) {
  double chi = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0.0) {
      CHECK(counts[i] == 0);
      continue;
    }
    const double expected = probs[i] * draws;
    chi += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi;
}

}  // namespace

TEST_CASE("greedy: argmax with the lowest id on ties, whatever the seed") {
  Sampler sample;
  const std::vector<float> logits{0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  rose::SamplingParams greedy;  // temperature 0
  for (uint64_t seed : {0ull, 1ull, 99ull}) {
    greedy.seed = seed;
    CHECK(sample(logits, greedy, seed * 7) == 1);
  }
  CHECK(rose::cpu::argmax(logits.data(), 5) == 1);
  const std::vector<float> all_equal(6, -2.0f);
  CHECK(sample(all_equal, greedy, 0) == 0);
}

TEST_CASE("top_k = 1 and a tiny top_p both reduce to greedy") {
  Sampler sample;
  const std::vector<float> logits{0.1f, 1.2f, 0.3f, 1.25f, -0.5f, 1.1f};
  rose::SamplingParams top1{1.0f, 1, 1.0f, 42};
  rose::SamplingParams tiny_p{1.0f, 0, 1e-6f, 42};
  for (uint64_t index = 0; index < 200; ++index) {
    CHECK(sample(logits, top1, index) == 3);
    CHECK(sample(logits, tiny_p, index) == 3);
  }
}

TEST_CASE("same (seed, index) gives the same token; different indices and seeds vary") {
  Sampler sample;
  const std::vector<float> flat(16, 0.0f);
  rose::SamplingParams params{1.0f, 0, 1.0f, 7};
  std::set<int32_t> seen;
  for (uint64_t index = 0; index < 64; ++index) {
    const int32_t token = sample(flat, params, index);
    CHECK(token == sample(flat, params, index));
    seen.insert(token);
  }
  CHECK(seen.size() > 8);  // 64 draws over 16 equal tokens
  int differing = 0;
  rose::SamplingParams other = params;
  other.seed = 8;
  for (uint64_t index = 0; index < 64; ++index) {
    differing += sample(flat, params, index) != sample(flat, other, index);
  }
  CHECK(differing > 32);
}

TEST_CASE("the token is picked by the uniform walking the ids in ascending order") {
  // p = (0.25, 0.75) exactly: token 0 iff 0.25 > u.
  Sampler sample;
  const std::vector<float> logits{0.0f, std::log(3.0f)};
  rose::SamplingParams params{1.0f, 0, 1.0f, 1234};
  int zeros = 0;
  for (uint64_t index = 0; index < 400; ++index) {
    const float u = rose::sampling_uniform(params.seed, index);
    const int32_t want = u < 0.25f - 1e-6f ? 0 : u > 0.25f + 1e-6f ? 1 : -1;
    if (want >= 0) CHECK(sample(logits, params, index) == want);
    zeros += want == 0;
  }
  CHECK(zeros > 50);
  CHECK(zeros < 150);
}

TEST_CASE("temperature sampling follows softmax(logits / T)") {
  const std::vector<float> logits{1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f, -2.0f, 0.25f};
  const int draws = 40000;
  for (float temperature : {1.0f, 0.5f, 2.0f}) {
    CAPTURE(temperature);
    std::vector<double> probs(logits.size());
    double sum = 0.0;
    for (size_t i = 0; i < logits.size(); ++i) sum += probs[i] = std::exp(logits[i] / temperature);
    for (double& p : probs) p /= sum;
    const auto counts = histogram(logits, {temperature, 0, 1.0f, 5}, draws);
    // 7 degrees of freedom: P(chi2 > 30) < 1e-4 for a correct sampler.
    CHECK(chi_square(counts, probs, draws) < 30.0);
  }
}

TEST_CASE("top_k keeps the k largest, all boundary ties included, renormalised") {
  const std::vector<float> logits{3.0f, 2.0f, 2.0f, 1.0f, 0.0f};
  const int draws = 30000;
  const auto counts = histogram(logits, {1.0f, 2, 1.0f, 11}, draws);
  // The second largest logit is 2, shared by ids 1 and 2: both stay.
  const double z = std::exp(3.0) + 2 * std::exp(2.0);
  const std::vector<double> probs{std::exp(3.0) / z, std::exp(2.0) / z, std::exp(2.0) / z, 0, 0};
  CHECK(chi_square(counts, probs, draws) < 25.0);  // 2 degrees of freedom
  CHECK(counts[1] > 0);
  CHECK(counts[2] > 0);
}

TEST_CASE("top_p keeps the smallest high-probability set that reaches p") {
  // p = (0.1, 0.5, 0.15, 0.25): the sorted sums 0.5, 0.75 reach 0.7 with {ids 1, 3}.
  const std::vector<float> logits{std::log(0.1f), std::log(0.5f), std::log(0.15f), std::log(0.25f)};
  const int draws = 30000;
  const auto counts = histogram(logits, {1.0f, 0, 0.7f, 3}, draws);
  const std::vector<double> probs{0.0, 0.5 / 0.75, 0.0, 0.25 / 0.75};
  CHECK(chi_square(counts, probs, draws) < 20.0);  // 1 degree of freedom

  // top_p 0.8 needs the 0.15 token too.
  const auto wider = histogram(logits, {1.0f, 0, 0.8f, 3}, draws);
  CHECK(wider[0] == 0);
  CHECK(wider[2] > 0);

  // top_k and top_p together: top_k 3 drops id 0, then p is renormalised over the rest
  // (0.5, 0.15, 0.25) / 0.9, whose sorted sums 0.556, 0.833 reach 0.7 with ids {1, 3}.
  const auto both = histogram(logits, {1.0f, 3, 0.7f, 3}, draws);
  CHECK(both[0] == 0);
  CHECK(both[2] == 0);
  CHECK(both[1] > both[3]);
}
