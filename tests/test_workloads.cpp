// Synthetic workloads and arrival processes: deterministic for a seed, exact lengths, prefixes that
// are really shared, and arrival rates and burstiness with the statistics the flags promise.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>

#include "engine/common/error.h"
#include "engine/io/workloads.h"
#include "engine/tokenizer/tokenizer.h"

using namespace rose;

namespace {

WorkloadOptions named(const std::string& name, int vocab = 50257) {
  WorkloadOptions o;
  o.name = name;
  o.vocab_size = vocab;
  return o;
}

const std::vector<int32_t>& ids(const RequestSpec& r) { return r.prompt_token_ids.value(); }

std::string error_of(const WorkloadOptions& o) {
  try {
    make_workload(o, nullptr);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool same_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b, size_t n) {
  return a.size() >= n && b.size() >= n && std::equal(a.begin(), a.begin() + n, b.begin());
}

// One token per whitespace-separated word, ids by length: enough to count tokens in a test.
class WordTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> out;
    size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && text[i] == ' ') ++i;
      size_t j = i;
      while (j < text.size() && text[j] != ' ') ++j;
      if (j > i) out.push_back(static_cast<int32_t>(j - i));
      i = j;
    }
    return out;
  }
  std::string token_bytes(int32_t) const override { return ""; }
  int vocab_size() const override { return 100; }
  std::string kind() const override { return "word"; }
};

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Coefficient of variation of the gaps between consecutive arrivals.
double interval_cv(const std::vector<double>& times) {
  std::vector<double> gaps;
  for (size_t i = 1; i < times.size(); ++i) gaps.push_back(times[i] - times[i - 1]);
  const double m = mean_of(gaps);
  double var = 0;
  for (double g : gaps) var += (g - m) * (g - m);
  return std::sqrt(var / static_cast<double>(gaps.size())) / m;
}

}  // namespace

TEST_CASE("the generator is std::mt19937_64 seeded with the seed") {
  // The C++ standard fixes mt19937_64's 10000th output for the default seed 5489.
  WorkloadRng rng(5489);
  uint64_t x = 0;
  for (int i = 0; i < 10000; ++i) x = rng.next();
  CHECK(x == 9981545732273789042ull);
}

TEST_CASE("uniform_int covers its inclusive range evenly; gamma has the right mean") {
  WorkloadRng rng(1);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < 50000; ++i) {
    const int64_t v = rng.uniform_int(3, 7);
    REQUIRE(v >= 3);
    REQUIRE(v <= 7);
    ++counts[static_cast<size_t>(v - 3)];
  }
  for (int c : counts) CHECK(std::abs(c - 10000) < 400);  // ~4.5 sigma
  for (double shape : {0.3, 1.0, 4.0}) {
    double sum = 0;
    const int n = 40000;
    for (int i = 0; i < n; ++i) sum += rng.gamma(shape);
    CAPTURE(shape);
    CHECK(sum / n == doctest::Approx(shape).epsilon(0.03));
  }
}

TEST_CASE("random: deterministic for a seed, exact lengths, ids below min(vocab, 10000)") {
  WorkloadOptions o = named("random");
  o.num_prompts = 50;
  o.random_input_len = 40;
  o.random_output_len = 7;
  const auto a = make_workload(o, nullptr);
  const auto b = make_workload(o, nullptr);
  REQUIRE(a.size() == 50);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(ids(a[i]) == ids(b[i]));
    CHECK(ids(a[i]).size() == 40);
    CHECK(a[i].max_tokens == 7);
    CHECK(a[i].ignore_eos == true);
    CHECK_FALSE(a[i].prompt.has_value());
  }
  o.seed = 1;
  const auto c = make_workload(o, nullptr);
  CHECK(ids(c[0]) != ids(a[0]));

  int32_t max_id = 0, min_id = 1 << 30;
  for (const auto& r : a) {
    for (int32_t id : ids(r)) max_id = std::max(max_id, id), min_id = std::min(min_id, id);
  }
  CHECK(min_id >= 0);
  CHECK(max_id < 10000);
  CHECK(max_id > 9500);  // 2000 draws reach near the top of [0, 10000)

  WorkloadOptions small = named("random", 300);
  small.num_prompts = 20;
  small.random_input_len = 100;
  for (const auto& r : make_workload(small, nullptr)) {
    for (int32_t id : ids(r)) REQUIRE(id < 300);
  }
}

TEST_CASE("random: range ratio and a shared prefix") {
  WorkloadOptions o = named("random");
  o.num_prompts = 400;
  o.random_input_len = 100;
  o.random_output_len = 20;
  o.random_range_ratio = 0.5;
  o.random_prefix_len = 16;
  const auto reqs = make_workload(o, nullptr);
  size_t lo = 1 << 30, hi = 0;
  int out_lo = 1 << 30, out_hi = 0;
  for (const auto& r : reqs) {
    lo = std::min(lo, ids(r).size()), hi = std::max(hi, ids(r).size());
    out_lo = std::min(out_lo, *r.max_tokens), out_hi = std::max(out_hi, *r.max_tokens);
    CHECK(same_prefix(ids(r), ids(reqs[0]), 16));
  }
  // prefix 16 + input uniform in [50, 150]; output in [10, 30].
  CHECK(lo == 16 + 50);
  CHECK(hi == 16 + 150);
  CHECK(out_lo == 10);
  CHECK(out_hi == 30);
  // Past the prefix, prompts differ.
  CHECK(ids(reqs[0])[16] != ids(reqs[1])[16]);
  o.random_range_ratio = 1.0;
  CHECK(error_of(o) == "--random-range-ratio must be in [0, 1), got 1");
}

TEST_CASE("seed000, serve, nano256 and grid have their documented shapes") {
  const auto seed000 = make_workload(named("seed000"), nullptr);
  REQUIRE(seed000.size() == 64);
  for (const auto& r : seed000) {
    CHECK(ids(r) == ids(seed000[0]));
    CHECK(ids(r).size() == 856);
    CHECK(r.max_tokens == 16);
    CHECK(r.ignore_eos == true);
  }
  CHECK(seed000[0].id == "seed000-0");
  CHECK(seed000[63].id == "seed000-63");

  const auto serve = make_workload(named("serve"), nullptr);
  REQUIRE(serve.size() == 500);
  for (const auto& r : serve) {
    CHECK(ids(r).size() == 550);
    CHECK(r.max_tokens == 150);
    CHECK(same_prefix(ids(r), ids(serve[0]), 330));
  }
  std::set<int32_t> first_own_token;
  for (const auto& r : serve) first_own_token.insert(ids(r)[330]);
  CHECK(first_own_token.size() > 400);  // the unshared part really is per request

  const auto nano = make_workload(named("nano256"), nullptr);
  REQUIRE(nano.size() == 256);
  size_t in_lo = 1 << 30, in_hi = 0;
  int out_lo = 1 << 30, out_hi = 0;
  for (const auto& r : nano) {
    in_lo = std::min(in_lo, ids(r).size()), in_hi = std::max(in_hi, ids(r).size());
    out_lo = std::min(out_lo, *r.max_tokens), out_hi = std::max(out_hi, *r.max_tokens);
  }
  CHECK(in_lo >= 100);
  CHECK(in_hi <= 1024);
  CHECK(out_lo >= 100);
  CHECK(out_hi <= 1024);
  CHECK(in_lo < 150);  // 256 uniform draws spread over the range
  CHECK(in_hi > 970);
  CHECK(make_workload(named("nano256"), nullptr)[17].prompt_token_ids == nano[17].prompt_token_ids);

  const auto grid = make_workload(named("grid:4:8:3"), nullptr);
  REQUIRE(grid.size() == 4);
  for (const auto& r : grid) {
    CHECK(ids(r).size() == 8);
    CHECK(r.max_tokens == 3);
  }
  CHECK(ids(grid[0]) != ids(grid[1]));

  WorkloadOptions fewer = named("serve");
  fewer.num_prompts = 5;
  CHECK(make_workload(fewer, nullptr).size() == 5);
}

TEST_CASE("shared-prefix: groups share their own prefix") {
  WorkloadOptions o = named("shared-prefix");
  o.num_prompts = 12;
  o.random_input_len = 50;
  o.random_prefix_len = 20;
  o.num_prefix_groups = 3;
  o.random_output_len = 4;
  const auto reqs = make_workload(o, nullptr);
  REQUIRE(reqs.size() == 12);
  for (size_t i = 0; i < reqs.size(); ++i) {
    CHECK(ids(reqs[i]).size() == 50);
    CHECK(same_prefix(ids(reqs[i]), ids(reqs[i % 3]), 20));
    CHECK_FALSE(same_prefix(ids(reqs[i]), ids(reqs[(i + 1) % 12]), 20));
  }
  // The default prefix is 60% of the input.
  o.random_prefix_len.reset();
  o.num_prefix_groups = 1;
  const auto dflt = make_workload(o, nullptr);
  CHECK(same_prefix(ids(dflt[0]), ids(dflt[5]), 30));
  CHECK(ids(dflt[0])[30] != ids(dflt[5])[30]);
}

TEST_CASE("bad workload specs are clear errors") {
  CHECK(error_of(named("nope")).rfind("--dataset-name 'nope': unknown", 0) == 0);
  CHECK(error_of(named("grid:1:2")) ==
        "--dataset-name grid:1:2: expected grid:B:PP:TG, e.g. grid:64:512:128");
  CHECK(error_of(named("grid:0:2:3")) ==
        "--dataset-name grid:0:2:3: B must be a positive integer, got '0' (expected grid:B:PP:TG)");
  CHECK(
      error_of(named("grid:1:x:3")) ==
      "--dataset-name grid:1:x:3: PP must be a positive integer, got 'x' (expected grid:B:PP:TG)");
  WorkloadOptions too_long = named("seed000");
  too_long.max_model_len = 512;
  CHECK(error_of(too_long) ==
        "workload 'seed000': request 0 needs 856 prompt + 16 output tokens, more than the model's "
        "512");
  WorkloadOptions zero = named("random");
  zero.num_prompts = 0;
  CHECK(error_of(zero) == "--num-prompts must be at least 1, got 0");
  CHECK(error_of(named("sharegpt")) ==
        "--dataset-name sharegpt needs --dataset-path FILE (a ShareGPT JSON file)");
}

TEST_CASE("sharegpt: first human turn, reply length capped, short or unanswered entries left out") {
  const auto path = std::filesystem::temp_directory_path() / "roseinfer_test_sharegpt.json";
  {
    std::ofstream out(path);
    out << R"([
      {"id": "a", "conversations": [{"from": "system", "value": "ignored"},
                                    {"from": "human", "value": "one two three four five"},
                                    {"from": "gpt", "value": "r r r"}]},
      {"id": "b", "conversations": [{"from": "human", "value": "too short"},
                                    {"from": "gpt", "value": "x"}]},
      {"id": "c", "conversations": [{"from": "human", "value": "no reply at all here"}]},
      {"id": "d", "conversations": [{"from": "human", "value": "a b c d e f g"},
                                    {"from": "gpt", "value": "1 2 3 4 5 6 7 8 9 10 11 12"}]},
      {"id": "e"}
    ])";
  }
  WordTokenizer tokenizer;
  WorkloadOptions o = named("sharegpt", 100);
  o.dataset_path = path.string();
  o.random_output_len = 10;  // the cap
  const auto reqs = make_workload(o, &tokenizer);
  REQUIRE(reqs.size() == 2);
  std::set<size_t> prompt_lens;
  for (const auto& r : reqs) {
    prompt_lens.insert(ids(r).size());
    if (ids(r).size() == 5) CHECK(r.max_tokens == 3);
    if (ids(r).size() == 7) CHECK(r.max_tokens == 10);  // 12 reply tokens, capped
  }
  CHECK(prompt_lens == std::set<size_t>{5, 7});

  o.max_model_len = 14;  // 7 + 10 no longer fits
  const auto fitted = make_workload(o, &tokenizer);
  REQUIRE(fitted.size() == 1);
  CHECK(ids(fitted[0]).size() == 5);
  std::filesystem::remove(path);
}

TEST_CASE(
    "arrivals: Poisson and gamma have the asked mean rate and burstiness; inf is all at once") {
  const int n = 20000;
  const auto poisson = make_arrival_times(n, 10.0, 1.0, 0);
  REQUIRE(poisson.size() == static_cast<size_t>(n));
  CHECK(poisson[0] == 0.0);
  CHECK(std::is_sorted(poisson.begin(), poisson.end()));
  CHECK((n - 1) / poisson.back() == doctest::Approx(10.0).epsilon(0.03));
  CHECK(interval_cv(poisson) == doctest::Approx(1.0).epsilon(0.05));  // exponential gaps

  const auto regular = make_arrival_times(n, 5.0, 4.0, 0);
  CHECK((n - 1) / regular.back() == doctest::Approx(5.0).epsilon(0.03));
  CHECK(interval_cv(regular) == doctest::Approx(0.5).epsilon(0.05));  // 1/sqrt(shape)

  const auto bursty = make_arrival_times(n, 5.0, 0.25, 0);
  CHECK((n - 1) / bursty.back() == doctest::Approx(5.0).epsilon(0.06));
  CHECK(interval_cv(bursty) == doctest::Approx(2.0).epsilon(0.08));

  CHECK(make_arrival_times(n, 10.0, 1.0, 0) == poisson);
  CHECK(make_arrival_times(n, 10.0, 1.0, 1) != poisson);
  const auto all = make_arrival_times(7, INFINITY, 1.0, 0);
  CHECK(all == std::vector<double>(7, 0.0));
  CHECK_THROWS_AS(make_arrival_times(3, 0.0, 1.0, 0), Error);
  CHECK_THROWS_AS(make_arrival_times(3, 1.0, 0.0, 0), Error);
}

TEST_CASE("prefix-groups: G x P prompts, each its group's L-token prefix then Q of its own") {
  WorkloadOptions o = named("prefix-groups:3:4:20:5");
  o.random_output_len = 7;
  const auto requests = make_workload(o, nullptr);
  REQUIRE(requests.size() == 12);
  std::vector<std::vector<int32_t>> prefixes;  // distinct group prefixes seen
  std::vector<int> count;
  for (const RequestSpec& r : requests) {
    CHECK(ids(r).size() == 25);
    CHECK(r.max_tokens == 7);
    const std::vector<int32_t> head(ids(r).begin(), ids(r).begin() + 20);
    const auto it = std::find(prefixes.begin(), prefixes.end(), head);
    if (it == prefixes.end()) {
      prefixes.push_back(head);
      count.push_back(1);
    } else {
      ++count[size_t(it - prefixes.begin())];
    }
  }
  CHECK(prefixes.size() == 3);
  CHECK(count == std::vector<int>{4, 4, 4});
  // The same seed gives the same requests in the same order.
  CHECK(make_workload(o, nullptr)[5].prompt_token_ids == requests[5].prompt_token_ids);
}

TEST_CASE("prefix-groups: xK sizes the prefixes to K x one replica's KV; Zipf skews the groups") {
  WorkloadOptions o = named("prefix-groups:4:2:x2:8");
  o.replica_kv_tokens = 1000;
  // 4 groups x L = 2 x 1000 tokens: L = 500.
  CHECK(ids(make_workload(o, nullptr)[0]).size() == 508);
  o.replica_kv_tokens = 0;
  CHECK(error_of(o).find("needs one replica's KV capacity") != std::string::npos);

  WorkloadOptions z = named("prefix-groups:8:100:16:4:1.2");
  const auto requests = make_workload(z, nullptr);
  REQUIRE(requests.size() == 800);
  std::vector<std::vector<int32_t>> heads;
  std::vector<int> count;
  for (const RequestSpec& r : requests) {
    const std::vector<int32_t> head(ids(r).begin(), ids(r).begin() + 16);
    const auto it = std::find(heads.begin(), heads.end(), head);
    if (it == heads.end()) {
      heads.push_back(head);
      count.push_back(1);
    } else {
      ++count[size_t(it - heads.begin())];
    }
  }
  // Zipf(1.2) over 8 groups: the hottest has 1 / H = 1 / 2.40 ~ 42% of the prompts.
  const int hottest = *std::max_element(count.begin(), count.end());
  CHECK(hottest > 280);
  CHECK(hottest < 390);
}

TEST_CASE("chat: later turns extend earlier ones and arrive GAP apart, in arrival order") {
  WorkloadOptions o = named("chat:3:4:10:6:1.5");
  const auto requests = make_workload(o, nullptr);
  REQUIRE(requests.size() == 12);
  for (size_t i = 1; i < requests.size(); ++i)
    CHECK(*requests[i - 1].arrival_time <= *requests[i].arrival_time);
  // Group by first 10 tokens (the first user turn) and check the chain within each conversation.
  int chained = 0;
  for (const RequestSpec& a : requests) {
    for (const RequestSpec& b : requests) {
      if (ids(b).size() == ids(a).size() + 16 && same_prefix(ids(a), ids(b), ids(a).size())) {
        CHECK(*b.arrival_time == doctest::Approx(*a.arrival_time + 1.5));
        ++chained;
      }
    }
    CHECK(a.max_tokens == 6);
    CHECK(*a.arrival_time < 1.5 * 4);
  }
  CHECK(chained == 3 * 3);  // each conversation: turns 1..3 extend the one before
  CHECK(error_of(named("chat:3")).find("expected chat:C:T") != std::string::npos);
  CHECK(error_of(named("prefix-groups:2:2:y")).find("expected prefix-groups") != std::string::npos);
  CHECK_NOTHROW(check_workload_name("chat:2:2"));
  CHECK_THROWS_AS(check_workload_name("chat:0:2"), Error);
}
