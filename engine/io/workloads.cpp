#include "engine/io/workloads.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <numbers>
#include <numeric>

#include "engine/common/error.h"
#include "engine/tokenizer/tokenizer.h"

namespace rose {

WorkloadRng::WorkloadRng(uint64_t seed) : engine_(seed) {}

uint64_t WorkloadRng::next() { return engine_(); }

int64_t WorkloadRng::uniform_int(int64_t lo, int64_t hi) {
  ROSE_ASSERT(lo <= hi);
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  if (range == 0) return static_cast<int64_t>(next());  // the whole 64-bit range
  // Reject the low 2^64 mod range values so every residue is equally likely.
  const uint64_t threshold = (0 - range) % range;
  for (;;) {
    const uint64_t x = next();
    if (x >= threshold) return static_cast<int64_t>(static_cast<uint64_t>(lo) + x % range);
  }
}

double WorkloadRng::uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double WorkloadRng::standard_normal() {
  if (spare_normal_) {
    const double z = *spare_normal_;
    spare_normal_.reset();
    return z;
  }
  const double u1 = 1.0 - uniform01();  // (0, 1]: log stays finite
  const double u2 = uniform01();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  spare_normal_ = radius * std::sin(angle);
  return radius * std::cos(angle);
}

double WorkloadRng::gamma(double shape) {
  ROSE_ASSERT(shape > 0);
  if (shape < 1.0) {
    // Gamma(a) = Gamma(a + 1) * U^(1/a).
    const double u = 1.0 - uniform01();
    return gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = 0, v = 0;
    do {
      x = standard_normal();
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - uniform01();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

namespace {

constexpr int kMaxSyntheticTokenId = 10000;  // ids below this, as vLLM's and nano-vllm's benches
constexpr int kShareGptDefaultOutputCap = 1024;
constexpr int kShareGptMinPromptTokens = 4;
constexpr int kShareGptDefaultNumPrompts = 1000;

struct Builder {
  const WorkloadOptions& options;
  WorkloadRng rng;
  int id_limit;
  std::vector<RequestSpec> requests;

  explicit Builder(const WorkloadOptions& o)
      : options(o), rng(o.seed), id_limit(std::min(o.vocab_size, kMaxSyntheticTokenId)) {
    ROSE_ASSERT(o.vocab_size > 0);
  }

  std::vector<int32_t> random_tokens(int n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = static_cast<int32_t>(rng.uniform_int(0, id_limit - 1));
    return ids;
  }

  void add(std::vector<int32_t> prompt, int max_tokens) {
    const int index = static_cast<int>(requests.size());
    if (options.max_model_len > 0 &&
        static_cast<int64_t>(prompt.size()) + max_tokens > options.max_model_len) {
      fail("workload '{}': request {} needs {} prompt + {} output tokens, more than the model's {}",
           options.name, index, prompt.size(), max_tokens, options.max_model_len);
    }
    RequestSpec spec;
    spec.id = fmt::format("{}-{}", options.name, index);
    spec.prompt_token_ids = std::move(prompt);
    spec.max_tokens = max_tokens;
    spec.ignore_eos = true;
    requests.push_back(std::move(spec));
  }
};

int count_or(const WorkloadOptions& o, int default_count) {
  const int n = o.num_prompts.value_or(default_count);
  if (n < 1) fail("--num-prompts must be at least 1, got {}", n);
  return n;
}

// vLLM's rule: lengths uniform in [int(L(1-r)), int(L(1+r))], at least 1.
std::pair<int, int> length_range(int length, double ratio, const char* flag) {
  if (length < 1) fail("{} must be at least 1, got {}", flag, length);
  const int lo = std::max(1, static_cast<int>(length * (1.0 - ratio)));
  const int hi = std::max(lo, static_cast<int>(length * (1.0 + ratio)));
  return {lo, hi};
}

std::vector<RequestSpec> make_random(const WorkloadOptions& o) {
  if (!(o.random_range_ratio >= 0 && o.random_range_ratio < 1)) {
    fail("--random-range-ratio must be in [0, 1), got {}", o.random_range_ratio);
  }
  const int prefix_len = o.random_prefix_len.value_or(0);
  if (prefix_len < 0) fail("--random-prefix-len must be >= 0, got {}", prefix_len);
  const auto [in_lo, in_hi] =
      length_range(o.random_input_len, o.random_range_ratio, "--random-input-len");
  const auto [out_lo, out_hi] =
      length_range(o.random_output_len.value_or(128), o.random_range_ratio, "--random-output-len");
  Builder b(o);
  const int n = count_or(o, 1000);
  const std::vector<int32_t> prefix = b.random_tokens(prefix_len);
  for (int i = 0; i < n; ++i) {
    const int input_len = static_cast<int>(b.rng.uniform_int(in_lo, in_hi));
    const int output_len = static_cast<int>(b.rng.uniform_int(out_lo, out_hi));
    std::vector<int32_t> prompt = prefix;
    const std::vector<int32_t> tail = b.random_tokens(input_len);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    b.add(std::move(prompt), output_len);
  }
  return std::move(b.requests);
}

std::vector<RequestSpec> make_shared_prefix(const WorkloadOptions& o) {
  const int input_len = o.random_input_len;
  if (input_len < 2)
    fail("--random-input-len must be at least 2 for shared-prefix, got {}", input_len);
  const int prefix_len = o.random_prefix_len.value_or(input_len * 6 / 10);
  if (prefix_len < 0 || prefix_len >= input_len) {
    fail(
        "--random-prefix-len must be in [0, --random-input-len) for shared-prefix, got {} (input "
        "{})",
        prefix_len, input_len);
  }
  if (o.num_prefix_groups < 1)
    fail("--num-prefix-groups must be at least 1, got {}", o.num_prefix_groups);
  const int output_len = o.random_output_len.value_or(128);
  if (output_len < 1) fail("--random-output-len must be at least 1, got {}", output_len);
  Builder b(o);
  std::vector<std::vector<int32_t>> prefixes;
  for (int g = 0; g < o.num_prefix_groups; ++g) prefixes.push_back(b.random_tokens(prefix_len));
  const int n = count_or(o, 1000);
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> prompt = prefixes[static_cast<size_t>(i % o.num_prefix_groups)];
    const std::vector<int32_t> tail = b.random_tokens(input_len - prefix_len);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    b.add(std::move(prompt), output_len);
  }
  return std::move(b.requests);
}

// `shared` tokens common to every request, then `input_len - shared` tokens of its own.
std::vector<RequestSpec> make_fixed(const WorkloadOptions& o, int n, int input_len, int shared,
                                    int output_len) {
  Builder b(o);
  const std::vector<int32_t> prefix = b.random_tokens(shared);
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> prompt = prefix;
    const std::vector<int32_t> tail = b.random_tokens(input_len - shared);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    b.add(std::move(prompt), output_len);
  }
  return std::move(b.requests);
}

std::vector<RequestSpec> make_nano256(const WorkloadOptions& o) {
  Builder b(o);
  const int n = count_or(o, 256);
  // Prompts first, then output lengths: the order nano-vllm's bench.py draws them in.
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) {
    prompts.push_back(b.random_tokens(static_cast<int>(b.rng.uniform_int(100, 1024))));
  }
  for (int i = 0; i < n; ++i) {
    b.add(std::move(prompts[static_cast<size_t>(i)]),
          static_cast<int>(b.rng.uniform_int(100, 1024)));
  }
  return std::move(b.requests);
}

int parse_grid_number(std::string_view text, const std::string& spec, const char* what,
                      const char* expected = "grid:B:PP:TG") {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) {
    fail("--dataset-name {}: {} must be a positive integer, got '{}' (expected {})", spec, what,
         text, expected);
  }
  return value;
}

struct GridSpec {
  int batch = 0, prompt_len = 0, output_len = 0;
};

std::vector<std::string_view> split_spec(const std::string& spec) {
  std::vector<std::string_view> parts;
  std::string_view rest(spec);
  for (size_t colon; (colon = rest.find(':')) != std::string_view::npos;) {
    parts.push_back(rest.substr(0, colon));
    rest.remove_prefix(colon + 1);
  }
  parts.push_back(rest);
  return parts;
}

GridSpec parse_grid(const std::string& spec) {
  const std::vector<std::string_view> parts = split_spec(spec);
  if (parts.size() != 4)
    fail("--dataset-name {}: expected grid:B:PP:TG, e.g. grid:64:512:128", spec);
  GridSpec grid;
  grid.batch = parse_grid_number(parts[1], spec, "B");
  grid.prompt_len = parse_grid_number(parts[2], spec, "PP");
  grid.output_len = parse_grid_number(parts[3], spec, "TG");
  return grid;
}

std::vector<RequestSpec> make_grid(const WorkloadOptions& o) {
  const GridSpec grid = parse_grid(o.name);
  return make_fixed(o, count_or(o, grid.batch), grid.prompt_len, 0, grid.output_len);
}

bool is_grid_name(const std::string& name) { return name.rfind("grid:", 0) == 0 || name == "grid"; }

bool has_prefix(const std::string& name, const char* word) {
  const std::string_view w(word);
  return name == w || (name.size() > w.size() && name.rfind(w, 0) == 0 && name[w.size()] == ':');
}

double parse_spec_real(std::string_view text, const std::string& spec, const char* what,
                       const char* expected) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !(value >= 0) ||
      !std::isfinite(value)) {
    fail("--dataset-name {}: {} must be a number >= 0, got '{}' (expected {})", spec, what, text,
         expected);
  }
  return value;
}

constexpr const char* kPrefixGroupsForm = "prefix-groups:G:P:L[:Q[:ALPHA]], L a length or xK";
constexpr const char* kChatForm = "chat:C:T[:U[:A[:GAP]]]";

struct PrefixGroupsSpec {
  int groups = 0, prompts_per_group = 0, question_len = 128;
  int prefix_len = 0;      // 0 when given as a multiple of the KV capacity
  double kv_multiple = 0;  // xK: all groups' prefixes = K x one replica's KV tokens
  double zipf_alpha = 0;   // 0: every group exactly P prompts
};

PrefixGroupsSpec parse_prefix_groups(const std::string& spec) {
  const std::vector<std::string_view> parts = split_spec(spec);
  if (parts.size() < 4 || parts.size() > 6)
    fail("--dataset-name {}: expected {}, e.g. prefix-groups:64:16:2048", spec, kPrefixGroupsForm);
  PrefixGroupsSpec p;
  p.groups = parse_grid_number(parts[1], spec, "G", kPrefixGroupsForm);
  p.prompts_per_group = parse_grid_number(parts[2], spec, "P", kPrefixGroupsForm);
  if (!parts[3].empty() && parts[3][0] == 'x') {
    p.kv_multiple = parse_spec_real(parts[3].substr(1), spec, "K of xK", kPrefixGroupsForm);
    if (!(p.kv_multiple > 0)) fail("--dataset-name {}: K of xK must be > 0", spec);
  } else {
    p.prefix_len = parse_grid_number(parts[3], spec, "L", kPrefixGroupsForm);
  }
  if (parts.size() > 4) p.question_len = parse_grid_number(parts[4], spec, "Q", kPrefixGroupsForm);
  if (parts.size() > 5) p.zipf_alpha = parse_spec_real(parts[5], spec, "ALPHA", kPrefixGroupsForm);
  return p;
}

// Group g of G drawn with probability proportional to 1 / (g + 1)^alpha (inverse CDF).
int draw_zipf(WorkloadRng& rng, const std::vector<double>& cdf) {
  const double u = rng.uniform01() * cdf.back();
  return int(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
}

// G groups of P prompts: the group's random prefix, then Q tokens of the prompt's own; shuffled so
// the groups interleave. With ALPHA > 0 each of the G*P prompts draws its group from Zipf(ALPHA).
std::vector<RequestSpec> make_prefix_groups(const WorkloadOptions& o) {
  PrefixGroupsSpec p = parse_prefix_groups(o.name);
  if (p.kv_multiple > 0) {
    if (o.replica_kv_tokens < 1) {
      fail(
          "--dataset-name {}: a prefix length xK needs one replica's KV capacity (--num-kv-blocks)",
          o.name);
    }
    p.prefix_len =
        std::max(1, int(std::ceil(p.kv_multiple * double(o.replica_kv_tokens) / p.groups)));
  }
  const int output_len = o.random_output_len.value_or(128);
  if (output_len < 1) fail("--random-output-len must be at least 1, got {}", output_len);
  Builder b(o);
  std::vector<std::vector<int32_t>> prefixes;
  for (int g = 0; g < p.groups; ++g) prefixes.push_back(b.random_tokens(p.prefix_len));
  const int n = count_or(o, p.groups * p.prompts_per_group);
  std::vector<int> group_of(static_cast<size_t>(n));
  if (p.zipf_alpha > 0) {
    std::vector<double> cdf;
    double total = 0;
    for (int g = 0; g < p.groups; ++g) cdf.push_back(total += std::pow(g + 1.0, -p.zipf_alpha));
    for (int& g : group_of) g = draw_zipf(b.rng, cdf);
  } else {
    for (int i = 0; i < n; ++i) group_of[static_cast<size_t>(i)] = i % p.groups;
    for (size_t i = group_of.size(); i > 1; --i) {
      std::swap(group_of[i - 1],
                group_of[static_cast<size_t>(b.rng.uniform_int(0, static_cast<int64_t>(i) - 1))]);
    }
  }
  for (int g : group_of) {
    std::vector<int32_t> prompt = prefixes[static_cast<size_t>(g)];
    const std::vector<int32_t> question = b.random_tokens(p.question_len);
    prompt.insert(prompt.end(), question.begin(), question.end());
    b.add(std::move(prompt), output_len);
  }
  return std::move(b.requests);
}

struct ChatSpec {
  int conversations = 0, turns = 0, user_len = 128, reply_len = 64;
  double gap_s = 2.0;
};

ChatSpec parse_chat(const std::string& spec) {
  const std::vector<std::string_view> parts = split_spec(spec);
  if (parts.size() < 3 || parts.size() > 6)
    fail("--dataset-name {}: expected {}, e.g. chat:32:6", spec, kChatForm);
  ChatSpec c;
  c.conversations = parse_grid_number(parts[1], spec, "C", kChatForm);
  c.turns = parse_grid_number(parts[2], spec, "T", kChatForm);
  if (parts.size() > 3) c.user_len = parse_grid_number(parts[3], spec, "U", kChatForm);
  if (parts.size() > 4) c.reply_len = parse_grid_number(parts[4], spec, "A", kChatForm);
  if (parts.size() > 5) c.gap_s = parse_spec_real(parts[5], spec, "GAP", kChatForm);
  return c;
}

// C conversations of T turns: turn k's prompt is turn k-1's prompt, a stand-in reply of A tokens
// and U new user tokens, so every later turn extends the earlier ones. Conversation c starts at a
// uniform time in [0, GAP) and its turns arrive GAP seconds apart; requests are in arrival order.
std::vector<RequestSpec> make_chat(const WorkloadOptions& o) {
  const ChatSpec c = parse_chat(o.name);
  Builder b(o);
  struct Turn {
    double arrival;
    std::vector<int32_t> prompt;
  };
  std::vector<Turn> all;
  for (int conv = 0; conv < c.conversations; ++conv) {
    const double start = b.rng.uniform01() * c.gap_s;
    std::vector<int32_t> history;
    for (int k = 0; k < c.turns; ++k) {
      if (k > 0) {
        const std::vector<int32_t> reply = b.random_tokens(c.reply_len);
        history.insert(history.end(), reply.begin(), reply.end());
      }
      const std::vector<int32_t> user = b.random_tokens(c.user_len);
      history.insert(history.end(), user.begin(), user.end());
      all.push_back({start + k * c.gap_s, history});
    }
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Turn& x, const Turn& y) { return x.arrival < y.arrival; });
  for (Turn& turn : all) {
    b.add(std::move(turn.prompt), c.reply_len);
    b.requests.back().arrival_time = turn.arrival;
  }
  return std::move(b.requests);
}

[[noreturn]] void unknown_workload(const std::string& name) {
  fail(
      "--dataset-name '{}': unknown; expected random, shared-prefix, sharegpt, seed000, nano256, "
      "serve, grid:B:PP:TG, {} or {}",
      name, kPrefixGroupsForm, kChatForm);
}

std::vector<RequestSpec> make_sharegpt(const WorkloadOptions& o, const Tokenizer* tokenizer) {
  const std::string& path = o.dataset_path;
  if (path.empty())
    fail("--dataset-name sharegpt needs --dataset-path FILE (a ShareGPT JSON file)");
  if (!tokenizer) fail("--dataset-name sharegpt needs a tokenizer");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("{}: no such file", path);
  if (std::filesystem::is_directory(path, ec))
    fail("{}: is a directory, expected a JSON file", path);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.load(path).get(root))
    fail("{}: invalid JSON: {}", path, simdjson::error_message(err));
  simdjson::dom::array entries;
  if (root.get_array().get(entries)) fail("{}: expected a JSON array of conversations", path);

  const int cap = o.random_output_len.value_or(kShareGptDefaultOutputCap);
  if (cap < 1) fail("--random-output-len must be at least 1, got {}", cap);
  const int want = count_or(o, kShareGptDefaultNumPrompts);

  std::vector<simdjson::dom::element> all(entries.begin(), entries.end());
  Builder b(o);
  std::vector<size_t> order(all.size());
  std::iota(order.begin(), order.end(), size_t{0});
  for (size_t i = order.size(); i > 1; --i) {  // Fisher-Yates with the workload's generator
    std::swap(order[i - 1],
              order[static_cast<size_t>(b.rng.uniform_int(0, static_cast<int64_t>(i) - 1))]);
  }
  for (size_t index : order) {
    if (static_cast<int>(b.requests.size()) == want) break;
    simdjson::dom::array turns;
    if (all[index]["conversations"].get_array().get(turns)) continue;
    std::string_view prompt, reply;
    bool have_prompt = false, have_reply = false;
    for (simdjson::dom::element turn : turns) {
      std::string_view from, value;
      if (turn["from"].get_string().get(from) || turn["value"].get_string().get(value)) continue;
      if (!have_prompt) {
        if (from == "human" || from == "user") prompt = value, have_prompt = true;
      } else {
        reply = value, have_reply = true;
        break;
      }
    }
    if (!have_prompt || !have_reply) continue;
    std::vector<int32_t> prompt_ids = tokenizer->encode(prompt);
    const int reply_tokens = static_cast<int>(tokenizer->encode(reply).size());
    if (static_cast<int>(prompt_ids.size()) < kShareGptMinPromptTokens || reply_tokens < 1)
      continue;
    const int output_len = std::min(reply_tokens, cap);
    if (o.max_model_len > 0 &&
        static_cast<int64_t>(prompt_ids.size()) + output_len > o.max_model_len) {
      continue;
    }
    b.add(std::move(prompt_ids), output_len);
  }
  if (b.requests.empty()) {
    fail("{}: no usable conversations (need a human turn of >= {} tokens followed by a reply)",
         path, kShareGptMinPromptTokens);
  }
  return std::move(b.requests);
}

}  // namespace

std::vector<RequestSpec> make_workload(const WorkloadOptions& options, const Tokenizer* tokenizer) {
  if (options.vocab_size < 1) fail("workload '{}': the model has no vocabulary", options.name);
  const std::string& name = options.name;
  if (name == "random") return make_random(options);
  if (name == "shared-prefix") return make_shared_prefix(options);
  if (name == "sharegpt") return make_sharegpt(options, tokenizer);
  if (name == "seed000") return make_fixed(options, count_or(options, 64), 856, 856, 16);
  if (name == "nano256") return make_nano256(options);
  if (name == "serve") return make_fixed(options, count_or(options, 500), 550, 330, 150);
  if (is_grid_name(name)) return make_grid(options);
  if (has_prefix(name, "prefix-groups")) return make_prefix_groups(options);
  if (has_prefix(name, "chat")) return make_chat(options);
  unknown_workload(name);
}

void check_workload_name(const std::string& name) {
  for (const char* known : {"random", "shared-prefix", "sharegpt", "seed000", "nano256", "serve"}) {
    if (name == known) return;
  }
  if (has_prefix(name, "prefix-groups")) {
    parse_prefix_groups(name);
    return;
  }
  if (has_prefix(name, "chat")) {
    parse_chat(name);
    return;
  }
  if (!is_grid_name(name)) unknown_workload(name);
  parse_grid(name);
}

std::vector<double> make_arrival_times(int num_requests, double request_rate, double burstiness,
                                       uint64_t seed) {
  if (!(request_rate > 0)) fail("--request-rate must be > 0 (or inf), got {}", request_rate);
  if (!(burstiness > 0) || !std::isfinite(burstiness)) {
    fail("--burstiness must be a positive number, got {}", burstiness);
  }
  std::vector<double> times(static_cast<size_t>(std::max(num_requests, 0)), 0.0);
  if (std::isinf(request_rate)) return times;
  // A stream of its own, so changing the rate does not change the workload's tokens.
  WorkloadRng rng(seed ^ 0xA22171A1'5EEDull);
  const double scale = 1.0 / (request_rate * burstiness);  // mean interval = shape * scale = 1/rate
  double t = 0;
  for (size_t i = 1; i < times.size(); ++i) {
    t += rng.gamma(burstiness) * scale;
    times[i] = t;
  }
  return times;
}

}  // namespace rose
