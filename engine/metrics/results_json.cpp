#include "engine/metrics/results_json.h"

#include <fmt/format.h>
#include <simdjson.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <type_traits>

#include "engine/common/error.h"
#include "engine/common/json_string.h"
#include "engine/io/atomic_file.h"

namespace rose {

// ---------------------------------------------------------------------------------------------
// Keys

std::string percentile_key(double q) {
  if (q == std::floor(q)) return fmt::format("p{}", int64_t(q));
  return fmt::format("p{}", q);  // fmt's shortest round-trip form, as Python's str(float)
}

namespace {

// The distributions in file order, with the middle of their keys ("ttft" -> mean_ttft_ms).
struct DistributionField {
  const char* name;
  Distribution BenchReport::*member;
};
constexpr DistributionField kDistributions[] = {
    {"ttft", &BenchReport::ttft_ms},   {"tpot", &BenchReport::tpot_ms},
    {"itl", &BenchReport::itl_ms},     {"e2el", &BenchReport::e2el_ms},
    {"queue", &BenchReport::queue_ms},
};

double kv_peak_usage(const KvStats& kv) {
  return kv.total_blocks > 0 ? double(kv.peak_used_blocks) / kv.total_blocks : 0.0;
}

}  // namespace

std::vector<std::pair<std::string, double>> run_numbers(const BenchReport& r) {
  std::vector<std::pair<std::string, double>> out;
  auto add = [&](std::string key, double value) { out.emplace_back(std::move(key), value); };
  add("completed", r.completed);
  add("failed", r.failed);
  add("total_input_tokens", double(r.total_input_tokens));
  add("total_output_tokens", double(r.total_output_tokens));
  add("duration", r.duration_s);
  add("request_throughput", r.request_throughput);
  add("output_throughput", r.output_throughput);
  add("total_token_throughput", r.total_token_throughput);
  if (r.goodput) add("request_goodput", *r.goodput);
  for (const DistributionField& field : kDistributions) {
    const Distribution& d = r.*field.member;
    const std::string suffix = fmt::format("_{}_ms", field.name);
    add("mean" + suffix, d.mean);
    add("median" + suffix, d.median);
    add("std" + suffix, d.std);
    add("min" + suffix, d.min);
    add("max" + suffix, d.max);
    for (const auto& [q, value] : d.percentiles) add(percentile_key(q) + suffix, value);
  }
  add("prefix_cache_lookups", double(r.cache.lookups));
  add("prefix_cache_queried_tokens", double(r.cache.queried_tokens));
  add("prefix_cache_hit_tokens", double(r.cache.hit_tokens));
  add("prefix_cache_hit_rate", r.cache.hit_rate());
  add("prefix_cache_evictions", double(r.cache.evictions));
  add("kv_block_size", r.kv.block_size);
  add("kv_total_blocks", r.kv.total_blocks);
  add("kv_peak_used_blocks", r.kv.peak_used_blocks);
  add("kv_peak_usage", kv_peak_usage(r.kv));
  add("preemptions", double(r.kv.preemptions));
  add("steps", double(r.steps.steps));
  add("prefill_tokens_computed", double(r.steps.prefill_tokens));
  add("decode_tokens", double(r.steps.decode_tokens));
  add("decode_steps", double(r.steps.decode_steps));
  add("decode_time_s", r.steps.decode_time_s);
  add("execute_time_s", r.steps.execute_time_s);
  add("schedule_time_s", r.steps.schedule_time_s);
  add("decode_bytes", r.steps.decode_bytes);
  add("decode_step_tokens", double(r.steps.decode_step_tokens));
  add("steps_ahead", double(r.steps.steps_ahead));
  add("prefill_throughput", r.prefill_throughput);
  add("decode_throughput", r.decode_throughput);
  add("decode_gbps", r.decode_gbps);
  if (r.bandwidth_floor_fraction) add("bandwidth_floor_fraction", *r.bandwidth_floor_fraction);
  if (r.collectives) {  // tensor parallel: timed standalone at the step's sizes (metrics.h)
    const CollectiveFigures& f = *r.collectives;
    add("collective_rows", double(f.rows));
    add("all_reduces_per_step", double(f.all_reduces_per_step));
    add("all_reduce_bytes", f.all_reduce_bytes);
    add("all_reduce_us", f.all_reduce_us);
    add("all_reduce_bus_gbps", f.all_reduce_bus_gbps);
    add("all_reduce_fused_add_norm", f.fused_add_norm ? 1.0 : 0.0);  // 1: all_reduce_us is fused
    add("all_gathers_per_step", double(f.all_gathers_per_step));
    add("all_gather_bytes", f.all_gather_bytes);
    add("all_gather_us", f.all_gather_us);
    add("collective_ms_per_decode_step", f.ms_per_decode_step);
    add("collective_decode_step_fraction", f.decode_step_fraction);  // null without decode steps
  }
  if (!r.per_replica.empty()) {  // a cluster: flat keys, so compare can check them too
    const RoutingFigures& g = r.routing_figures;
    add("data_parallel", double(r.per_replica.size()));
    add("routing_predicted_hit_rate", g.predicted_hit_rate);
    add("routing_delivered_hit_rate", g.delivered_hit_rate);
    add("routing_available_hit_rate", g.available_hit_rate);
    add("request_imbalance", g.request_imbalance);
    add("token_imbalance", g.token_imbalance);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Fingerprint, date, command

namespace {

class Fingerprinter {
 public:
  Fingerprinter() {
    state_ = XXH3_createState();
    ROSE_ASSERT(state_ != nullptr);
    XXH3_128bits_reset(state_);
  }
  ~Fingerprinter() { XXH3_freeState(state_); }
  Fingerprinter(const Fingerprinter&) = delete;
  Fingerprinter& operator=(const Fingerprinter&) = delete;

  void bytes(const void* data, size_t size) { XXH3_128bits_update(state_, data, size); }
  // Fixed-width integers so a field boundary can never be confused with its neighbour's bytes.
  void u64(uint64_t v) { bytes(&v, sizeof v); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    u64(bits);
  }
  std::string hex() {
    const XXH128_hash_t hash = XXH3_128bits_digest(state_);
    return fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
  }

 private:
  XXH3_state_t* state_ = nullptr;
};

}  // namespace

std::string workload_fingerprint(const std::vector<EngineRequest>& requests,
                                 std::string_view result_config) {
  Fingerprinter fp;
  constexpr std::string_view kDomain = "roseinfer-workload-v1";
  fp.bytes(kDomain.data(), kDomain.size());
  fp.u64(requests.size());
  for (const EngineRequest& request : requests) {
    fp.u64(request.prompt.size());
    fp.bytes(request.prompt.data(), request.prompt.size() * sizeof(int32_t));
    fp.u64(uint64_t(int64_t(request.max_tokens)));
    fp.f64(request.sampling.temperature);
    fp.u64(uint64_t(int64_t(request.sampling.top_k)));
    fp.f64(request.sampling.top_p);
    fp.u64(request.sampling.seed);
    fp.u64(request.ignore_eos ? 1 : 0);
    fp.f64(request.arrival_s);
  }
  fp.u64(result_config.size());
  fp.bytes(result_config.data(), result_config.size());
  return fp.hex();
}

std::string utc_timestamp_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// ---------------------------------------------------------------------------------------------
// Writer

namespace {

void append_json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  // Shortest text that reads back to the same double.
  fmt::format_to(std::back_inserter(out), "{}", v);
}

// A pretty-printing writer: objects and arrays open on their own lines, except arrays of numbers,
// which stay on one line so per-request detail does not take one line per value.
class JsonWriter {
 public:
  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  void key(std::string_view name) {
    element_start();
    append_json_string(out_, name);
    out_ += ": ";
    after_key_ = true;
  }
  void string(std::string_view s) {
    element_start();
    append_json_string(out_, s);
  }
  void number(double v) {
    element_start();
    append_json_number(out_, v);
  }
  void integer(int64_t v) {
    element_start();
    fmt::format_to(std::back_inserter(out_), "{}", v);
  }
  void boolean(bool v) {
    element_start();
    out_ += v ? "true" : "false";
  }
  void null() {
    element_start();
    out_ += "null";
  }
  template <typename T>
  void number_array(const std::vector<T>& values) {
    element_start();
    out_ += '[';
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out_ += ", ";
      append_json_number(out_, double(values[i]));
    }
    out_ += ']';
  }
  std::string take() {
    ROSE_ASSERT(depth_.empty());
    out_ += '\n';
    return std::move(out_);
  }

 private:
  void element_start() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!depth_.empty()) {
      if (depth_.back() > 0) out_ += ',';
      ++depth_.back();
      newline();
    }
  }
  void open(char bracket) {
    element_start();
    out_ += bracket;
    depth_.push_back(0);
  }
  void close(char bracket) {
    ROSE_ASSERT(!depth_.empty());
    const bool empty = depth_.back() == 0;
    depth_.pop_back();
    if (!empty) newline();
    out_ += bracket;
  }
  void newline() {
    out_ += '\n';
    out_.append(2 * depth_.size(), ' ');
  }

  std::string out_;
  std::vector<int> depth_;  // elements written so far in each open container
  bool after_key_ = false;
};

void write_config_value(JsonWriter& w, const ConfigValue& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          w.null();
        } else if constexpr (std::is_same_v<T, bool>) {
          w.boolean(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          w.integer(v);
        } else if constexpr (std::is_same_v<T, double>) {
          w.number(v);
        } else {
          w.string(v);
        }
      },
      value);
}

// --repeat N: how many runs the medians come from, which one the detail and per-replica rows are
// from, and each key's spread over them.
void write_spread(JsonWriter& w, const BenchReport& report) {
  w.key("repeats");
  w.integer(report.repeats);
  w.key("representative_repeat");
  w.integer(report.representative_repeat);
  w.key("spread");
  w.begin_object();
  for (const auto& [name, spread] : report.spread) {
    w.key(name);
    w.begin_object();
    w.key("min");
    w.number(spread.min);
    w.key("max");
    w.number(spread.max);
    w.key("ci95_low");
    w.number(spread.ci_low);
    w.key("ci95_high");
    w.number(spread.ci_high);
    w.end_object();
  }
  w.end_object();
}

// A cluster run's router name and one object per replica (the flat keys above are the totals).
void write_per_replica(JsonWriter& w, const BenchReport& report) {
  w.key("router");
  w.string(report.routing.router);
  w.key("per_replica");
  w.begin_array();
  for (const ReplicaStats& s : report.per_replica) {
    w.begin_object();
    const std::pair<const char*, double> fields[] = {{"requests", s.requests},
                                                     {"prompt_tokens", double(s.prompt_tokens)},
                                                     {"output_tokens", double(s.output_tokens)},
                                                     {"prefix_cache_hit_rate", s.cache.hit_rate()},
                                                     {"kv_peak_used_blocks", s.kv_peak_used_blocks},
                                                     {"kv_total_blocks", s.kv_total_blocks},
                                                     {"busy_s", s.busy_s}};
    for (const auto& [key, value] : fields) {
      w.key(key);
      w.number(value);
    }
    w.end_object();
  }
  w.end_array();
}

// The top-level fields that say what was measured, where and by which build.
void write_provenance(JsonWriter& w, const BenchResults& results) {
  w.key("schema");
  w.string(kResultsSchema);
  w.key("schema_version");
  w.integer(kResultsSchemaVersion);
  w.key("roseinfer_version");
  w.string(results.roseinfer_version);
  w.key("git_commit");
  w.string(results.git_commit);
  w.key("date");
  w.string(results.date);
  w.key("command");
  w.string(results.command);
  w.key("model");
  w.string(results.model);
  w.key("device");
  w.string(results.device);
}

// "config", "workload" and, for a sweep, "sweep": the inputs every run shares.
void write_run_inputs(JsonWriter& w, const BenchResults& results) {
  w.key("config");
  w.begin_object();
  for (const auto& [name, value] : results.config) {
    w.key(name);
    write_config_value(w, value);
  }
  w.end_object();

  w.key("workload");
  w.begin_object();
  w.key("name");
  w.string(results.workload.name);
  w.key("num_requests");
  w.integer(results.workload.num_requests);
  w.key("fingerprint");
  w.string(results.workload.fingerprint);
  w.key("total_input_tokens");
  w.integer(results.workload.total_input_tokens);
  w.end_object();

  if (!results.sweep_parameter.empty()) {
    w.key("sweep");
    w.begin_object();
    w.key("parameter");
    w.string(results.sweep_parameter);
    w.key("values");
    w.number_array(results.sweep_values);
    w.end_object();
  }
}

// --save-detailed: the per-request arrays and the per-step series of one run.
void write_detail(JsonWriter& w, const BenchReport& report) {
  const RequestDetail& d = report.detail;
  w.key("input_lens");
  w.number_array(d.input_lens);
  w.key("output_lens");
  w.number_array(d.output_lens);
  w.key("cached_tokens");
  w.number_array(d.cached_tokens);
  w.key("ttfts");
  w.number_array(d.ttfts);
  w.key("e2els");
  w.number_array(d.e2els);
  w.key("itls");
  w.begin_array();
  for (const std::vector<double>& gaps : d.itls) w.number_array(gaps);
  w.end_array();
  if (!d.output_ids.empty()) {
    w.key("output_ids");
    w.begin_array();
    for (const std::vector<int32_t>& ids : d.output_ids) w.number_array(ids);
    w.end_array();
  }
  w.key("arrivals");
  w.number_array(d.arrivals);
  w.key("first_scheduled");
  w.number_array(d.first_scheduled);
  const StepSeries& series = report.step_series;
  w.key("step_times");
  w.number_array(series.time);
  w.key("step_kv_used_blocks");
  w.number_array(series.kv_used_blocks);
  w.key("step_running");
  w.number_array(series.running);
  w.key("step_waiting");
  w.number_array(series.waiting);
}

void write_run(JsonWriter& w, const BenchReport& report, bool save_detailed) {
  w.begin_object();
  w.key("mode");
  w.string(report.mode);
  w.key("prefix_cache");
  w.boolean(report.prefix_cache);
  for (const auto& [name, value] : run_numbers(report)) {
    w.key(name);
    w.number(value);
  }
  if (report.repeats > 1) write_spread(w, report);
  if (!report.per_replica.empty()) write_per_replica(w, report);
  if (save_detailed) write_detail(w, report);
  w.end_object();
}

}  // namespace

std::string results_to_json(const BenchResults& results, bool save_detailed) {
  JsonWriter w;
  w.begin_object();
  write_provenance(w, results);
  write_run_inputs(w, results);
  w.key("runs");
  w.begin_array();
  for (const BenchReport& report : results.runs) write_run(w, report, save_detailed);
  w.end_array();
  w.end_object();
  return w.take();
}

void write_results_json(const std::filesystem::path& path, const BenchResults& results,
                        bool save_detailed) {
  write_file_atomically(path, results_to_json(results, save_detailed));
}

// ---------------------------------------------------------------------------------------------
// Reader

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail_field(const std::string& field, std::string_view what) const {
    fail("{}: field '{}': {}", source_, field, what);
  }

  simdjson::dom::object object(element e, const std::string& field) const {
    simdjson::dom::object obj;
    if (e.get_object().get(obj)) fail_field(field, "expected an object");
    return obj;
  }
  simdjson::dom::array array(element e, const std::string& field) const {
    simdjson::dom::array arr;
    if (e.get_array().get(arr)) fail_field(field, "expected an array");
    return arr;
  }
  std::string string(element e, const std::string& field) const {
    std::string_view s;
    if (e.get_string().get(s)) fail_field(field, "expected a string");
    return std::string(s);
  }
  bool boolean(element e, const std::string& field) const {
    bool b;
    if (e.get_bool().get(b)) fail_field(field, "expected true or false");
    return b;
  }
  // null stands for a number that was not finite when written.
  double number(element e, const std::string& field) const {
    if (e.is_null()) return std::nan("");
    double d;
    if (e.get_double().get(d)) fail_field(field, "expected a number");
    return d;
  }
  int64_t integer(element e, const std::string& field) const {
    int64_t v;
    if (e.get_int64().get(v)) fail_field(field, "expected an integer");
    return v;
  }

  // A member that must be there.
  element at(simdjson::dom::object obj, std::string_view key, const std::string& prefix) const {
    element e;
    if (obj.at_key(key).get(e)) fail("{}: missing field '{}{}'", source_, prefix, key);
    return e;
  }
  // A member that may be absent.
  std::optional<element> find(simdjson::dom::object obj, std::string_view key) const {
    element e;
    if (obj.at_key(key).get(e)) return std::nullopt;
    return e;
  }

  const std::string& source() const { return source_; }

 private:
  const std::string& source_;
};

// A count read from a file: converting an out-of-range double is undefined behaviour, and a file
// can hold anything, so clamp to T's range (NaN reads as 0).
template <typename T>
T saturating_count(double v) {
  if (std::isnan(v)) return 0;
  if (v <= double(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return T(v);
}

// Reads "p99.9" back to 99.9; nullopt when `text` is not a percentile key.
std::optional<double> parse_percentile_key(std::string_view text) {
  if (text.size() < 2 || text[0] != 'p') return std::nullopt;
  const std::string digits(text.substr(1));
  if (digits.find_first_not_of("0123456789.") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double q = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size()) return std::nullopt;
  return q;
}

BenchReport report_from_values(const std::string& mode, bool prefix_cache,
                               const std::vector<std::pair<std::string, double>>& ordered,
                               const std::map<std::string, double>& values) {
  auto get = [&](const std::string& key) {
    const auto it = values.find(key);
    return it == values.end() ? 0.0 : it->second;
  };
  auto get_optional = [&](const std::string& key) -> std::optional<double> {
    const auto it = values.find(key);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
  BenchReport r;
  r.mode = mode;
  r.prefix_cache = prefix_cache;
  r.completed = saturating_count<int>(get("completed"));
  r.failed = saturating_count<int>(get("failed"));
  r.total_input_tokens = saturating_count<int64_t>(get("total_input_tokens"));
  r.total_output_tokens = saturating_count<int64_t>(get("total_output_tokens"));
  r.duration_s = get("duration");
  r.request_throughput = get("request_throughput");
  r.output_throughput = get("output_throughput");
  r.total_token_throughput = get("total_token_throughput");
  r.goodput = get_optional("request_goodput");
  for (const DistributionField& field : kDistributions) {
    Distribution& d = r.*field.member;
    const std::string suffix = fmt::format("_{}_ms", field.name);
    d.mean = get("mean" + suffix);
    d.median = get("median" + suffix);
    d.std = get("std" + suffix);
    d.min = get("min" + suffix);
    d.max = get("max" + suffix);
    // Percentiles in the order the file lists them (the order they were asked for).
    for (const auto& [key, value] : ordered) {
      if (key.size() <= suffix.size() || !key.ends_with(suffix)) continue;
      const std::optional<double> q =
          parse_percentile_key(std::string_view(key).substr(0, key.size() - suffix.size()));
      if (q) d.percentiles.emplace_back(*q, value);
    }
  }
  r.cache.lookups = saturating_count<int64_t>(get("prefix_cache_lookups"));
  r.cache.queried_tokens = saturating_count<int64_t>(get("prefix_cache_queried_tokens"));
  r.cache.hit_tokens = saturating_count<int64_t>(get("prefix_cache_hit_tokens"));
  r.cache.evictions = saturating_count<int64_t>(get("prefix_cache_evictions"));
  r.kv.block_size = saturating_count<int>(get("kv_block_size"));
  r.kv.total_blocks = saturating_count<int>(get("kv_total_blocks"));
  r.kv.peak_used_blocks = saturating_count<int>(get("kv_peak_used_blocks"));
  r.kv.preemptions = saturating_count<int64_t>(get("preemptions"));
  r.steps.steps = saturating_count<int64_t>(get("steps"));
  r.steps.prefill_tokens = saturating_count<int64_t>(get("prefill_tokens_computed"));
  r.steps.decode_tokens = saturating_count<int64_t>(get("decode_tokens"));
  r.steps.decode_steps = saturating_count<int64_t>(get("decode_steps"));
  r.steps.decode_time_s = get("decode_time_s");
  r.steps.execute_time_s = get("execute_time_s");
  r.steps.schedule_time_s = get("schedule_time_s");
  r.steps.decode_bytes = get("decode_bytes");
  r.decode_gbps = get("decode_gbps");
  // Added after schema version 1 was first written: absent in the oldest files.
  r.steps.decode_step_tokens =
      saturating_count<int64_t>(get_optional("decode_step_tokens").value_or(0));
  r.steps.steps_ahead = saturating_count<int64_t>(get_optional("steps_ahead").value_or(0));
  r.prefill_throughput = get_optional("prefill_throughput").value_or(0.0);
  r.decode_throughput = get_optional("decode_throughput").value_or(0.0);
  r.bandwidth_floor_fraction = get_optional("bandwidth_floor_fraction");
  if (values.count("collective_ms_per_decode_step")) {  // a tensor-parallel run
    CollectiveFigures f;
    f.rows = saturating_count<int64_t>(get("collective_rows"));
    f.all_reduces_per_step = saturating_count<int64_t>(get("all_reduces_per_step"));
    f.all_reduce_bytes = get("all_reduce_bytes");
    f.all_reduce_us = get("all_reduce_us");
    f.all_reduce_bus_gbps = get("all_reduce_bus_gbps");
    f.fused_add_norm = get_optional("all_reduce_fused_add_norm").value_or(0.0) != 0.0;
    f.all_gathers_per_step = saturating_count<int64_t>(get("all_gathers_per_step"));
    f.all_gather_bytes = get("all_gather_bytes");
    f.all_gather_us = get("all_gather_us");
    f.ms_per_decode_step = get("collective_ms_per_decode_step");
    f.decode_step_fraction = get_optional("collective_decode_step_fraction").value_or(std::nan(""));
    r.collectives = f;
  }
  // A cluster run's router figures (its per_replica rows are read apart, into run_replicas).
  r.routing_figures.predicted_hit_rate = get("routing_predicted_hit_rate");
  r.routing_figures.delivered_hit_rate = get("routing_delivered_hit_rate");
  r.routing_figures.available_hit_rate = get("routing_available_hit_rate");
  r.routing_figures.request_imbalance = get("request_imbalance");
  r.routing_figures.token_imbalance = get("token_imbalance");
  return r;
}

}  // namespace

BenchReport report_from_run_numbers(const std::string& mode, bool prefix_cache,
                                    const std::vector<std::pair<std::string, double>>& numbers) {
  const std::map<std::string, double> values(numbers.begin(), numbers.end());
  return report_from_values(mode, prefix_cache, numbers, values);
}

namespace {

template <typename T>
std::vector<T> read_number_array(const Reader& reader, element e, const std::string& field) {
  std::vector<T> out;
  size_t index = 0;
  for (element item : reader.array(e, field)) {
    const double v = reader.number(item, fmt::format("{}[{}]", field, index++));
    if constexpr (std::is_integral_v<T>) {
      out.push_back(saturating_count<T>(v));
    } else {
      out.push_back(v);
    }
  }
  return out;
}

void read_detail(const Reader& reader, simdjson::dom::object run, const std::string& prefix,
                 RequestDetail& detail) {
  if (auto e = reader.find(run, "input_lens")) {
    detail.input_lens = read_number_array<int64_t>(reader, *e, prefix + "input_lens");
  }
  if (auto e = reader.find(run, "output_lens")) {
    detail.output_lens = read_number_array<int64_t>(reader, *e, prefix + "output_lens");
  }
  if (auto e = reader.find(run, "cached_tokens")) {
    detail.cached_tokens = read_number_array<int64_t>(reader, *e, prefix + "cached_tokens");
  }
  if (auto e = reader.find(run, "ttfts")) {
    detail.ttfts = read_number_array<double>(reader, *e, prefix + "ttfts");
  }
  if (auto e = reader.find(run, "e2els")) {
    detail.e2els = read_number_array<double>(reader, *e, prefix + "e2els");
  }
  if (auto e = reader.find(run, "arrivals")) {
    detail.arrivals = read_number_array<double>(reader, *e, prefix + "arrivals");
  }
  if (auto e = reader.find(run, "first_scheduled")) {
    detail.first_scheduled = read_number_array<double>(reader, *e, prefix + "first_scheduled");
  }
  if (auto e = reader.find(run, "itls")) {
    size_t index = 0;
    for (element gaps : reader.array(*e, prefix + "itls")) {
      detail.itls.push_back(
          read_number_array<double>(reader, gaps, fmt::format("{}itls[{}]", prefix, index++)));
    }
  }
}

void read_step_series(const Reader& reader, simdjson::dom::object run, const std::string& prefix,
                      StepSeries& series) {
  if (auto e = reader.find(run, "step_times")) {
    series.time = read_number_array<double>(reader, *e, prefix + "step_times");
  }
  if (auto e = reader.find(run, "step_kv_used_blocks")) {
    series.kv_used_blocks = read_number_array<int>(reader, *e, prefix + "step_kv_used_blocks");
  }
  if (auto e = reader.find(run, "step_running")) {
    series.running = read_number_array<int>(reader, *e, prefix + "step_running");
  }
  if (auto e = reader.find(run, "step_waiting")) {
    series.waiting = read_number_array<int>(reader, *e, prefix + "step_waiting");
  }
  const size_t n = series.time.size();
  if (series.kv_used_blocks.size() != n || series.running.size() != n ||
      series.waiting.size() != n) {
    fail("{}: field '{}step_*': the per-step arrays differ in length", reader.source(), prefix);
  }
}

// The numeric keys of each replica of a cluster run ("per_replica": [{...}, ...]), as found.
std::vector<std::map<std::string, double>> read_per_replica(const Reader& reader,
                                                            simdjson::dom::object run,
                                                            const std::string& prefix) {
  std::vector<std::map<std::string, double>> replicas;
  const std::optional<element> section = reader.find(run, "per_replica");
  if (!section) return replicas;
  size_t index = 0;
  for (element item : reader.array(*section, prefix + "per_replica")) {
    const std::string field = fmt::format("{}per_replica[{}]", prefix, index++);
    std::map<std::string, double>& values = replicas.emplace_back();
    for (auto [key, value] : reader.object(item, field)) {
      const element_type type = value.type();
      if (type == element_type::INT64 || type == element_type::UINT64 ||
          type == element_type::DOUBLE) {
        values[std::string(key)] = reader.number(value, field + "." + std::string(key));
      }
    }
  }
  return replicas;
}

std::map<std::string, Spread> read_spread(const Reader& reader, simdjson::dom::object run,
                                          const std::string& prefix,
                                          const std::map<std::string, double>& values) {
  std::map<std::string, Spread> spreads;
  const std::optional<element> section = reader.find(run, "spread");
  if (!section) return spreads;
  for (auto [key, value] : reader.object(*section, prefix + "spread")) {
    const std::string name(key);
    const std::string field = prefix + "spread." + name;
    const simdjson::dom::object bounds = reader.object(value, field);
    Spread spread;
    const auto median = values.find(name);
    spread.median = median == values.end() ? std::nan("") : median->second;
    spread.min = reader.number(reader.at(bounds, "min", field + "."), field + ".min");
    spread.max = reader.number(reader.at(bounds, "max", field + "."), field + ".max");
    spread.ci_low = reader.number(reader.at(bounds, "ci95_low", field + "."), field + ".ci95_low");
    spread.ci_high =
        reader.number(reader.at(bounds, "ci95_high", field + "."), field + ".ci95_high");
    if (spread.ci_low > spread.ci_high) reader.fail_field(field, "ci95_low is above ci95_high");
    spreads[name] = spread;
  }
  return spreads;
}

ConfigValue read_config_value(const Reader& reader, element e, const std::string& field) {
  switch (e.type()) {
    case element_type::NULL_VALUE:
      return std::monostate{};
    case element_type::BOOL:
      return reader.boolean(e, field);
    case element_type::INT64:
      return reader.integer(e, field);
    case element_type::UINT64:
    case element_type::DOUBLE:
      return reader.number(e, field);
    case element_type::STRING:
      return reader.string(e, field);
    default:
      reader.fail_field(field, "expected a string, number, boolean or null");
  }
}

// A roseinfer result of a version this build reads; anything else is refused before any field.
void check_schema(const Reader& reader, simdjson::dom::object top, const std::string& source) {
  const std::optional<element> schema = reader.find(top, "schema");
  if (!schema) fail("{}: not a roseinfer bench result (no 'schema' field)", source);
  const std::string schema_name = reader.string(*schema, "schema");
  if (schema_name != kResultsSchema) {
    fail("{}: not a roseinfer bench result (schema is '{}', expected '{}')", source, schema_name,
         kResultsSchema);
  }
  const int64_t version = reader.integer(reader.at(top, "schema_version", ""), "schema_version");
  if (version > kResultsSchemaVersion) {
    fail(
        "{}: field 'schema_version': {} is newer than this roseinfer reads ({}); upgrade roseinfer",
        source, version, kResultsSchemaVersion);
  }
  if (version < 1) fail("{}: field 'schema_version': {} is not a valid version", source, version);
}

// The optional provenance strings and the "config" object.
void read_provenance(const Reader& reader, simdjson::dom::object top, BenchResults& results) {
  auto optional_string = [&](std::string_view key, std::string& out) {
    if (auto e = reader.find(top, key)) out = reader.string(*e, std::string(key));
  };
  optional_string("roseinfer_version", results.roseinfer_version);
  optional_string("git_commit", results.git_commit);
  optional_string("date", results.date);
  optional_string("command", results.command);
  optional_string("model", results.model);
  optional_string("device", results.device);

  if (auto e = reader.find(top, "config")) {
    for (auto [key, value] : reader.object(*e, "config")) {
      const std::string name(key);
      results.config.emplace_back(name, read_config_value(reader, value, "config." + name));
    }
  }
}

// "workload" (its fingerprint required: compare matches runs by it) and the optional "sweep".
void read_workload_and_sweep(const Reader& reader, simdjson::dom::object top,
                             BenchResults& results) {
  const simdjson::dom::object workload = reader.object(reader.at(top, "workload", ""), "workload");
  if (auto e = reader.find(workload, "name"))
    results.workload.name = reader.string(*e, "workload.name");
  if (auto e = reader.find(workload, "num_requests")) {
    results.workload.num_requests = reader.integer(*e, "workload.num_requests");
  }
  results.workload.fingerprint =
      reader.string(reader.at(workload, "fingerprint", "workload."), "workload.fingerprint");
  if (auto e = reader.find(workload, "total_input_tokens")) {
    results.workload.total_input_tokens = reader.integer(*e, "workload.total_input_tokens");
  }

  if (auto e = reader.find(top, "sweep")) {
    const simdjson::dom::object sweep = reader.object(*e, "sweep");
    results.sweep_parameter =
        reader.string(reader.at(sweep, "parameter", "sweep."), "sweep.parameter");
    for (element v : reader.array(reader.at(sweep, "values", "sweep."), "sweep.values")) {
      // null is an infinite request rate (JSON has no inf).
      results.sweep_values.push_back(v.is_null() ? std::numeric_limits<double>::infinity()
                                                 : reader.number(v, "sweep.values"));
    }
  }
}

// runs[index]: mode and cache setting, every numeric key (in file order and by name), then the
// detail, step series, spread and per-replica parts.
void read_run(const Reader& reader, element run_element, size_t index, BenchResults& results) {
  const std::string prefix = fmt::format("runs[{}].", index);
  const simdjson::dom::object run = reader.object(run_element, prefix.substr(0, prefix.size() - 1));
  const std::string mode = reader.string(reader.at(run, "mode", prefix), prefix + "mode");
  const bool prefix_cache =
      reader.boolean(reader.at(run, "prefix_cache", prefix), prefix + "prefix_cache");
  std::vector<std::pair<std::string, double>> ordered;
  std::map<std::string, double> values;
  for (auto [key, value] : run) {
    const element_type type = value.type();
    if (type != element_type::INT64 && type != element_type::UINT64 &&
        type != element_type::DOUBLE) {
      continue;  // mode, prefix_cache, detail arrays, nulls, keys of later versions
    }
    const std::string name(key);
    const double v = reader.number(value, prefix + name);
    ordered.emplace_back(name, v);
    values[name] = v;
  }
  BenchReport report = report_from_values(mode, prefix_cache, ordered, values);
  read_detail(reader, run, prefix, report.detail);
  read_step_series(reader, run, prefix, report.step_series);
  report.spread = read_spread(reader, run, prefix, values);
  report.repeats =
      std::max(1, saturating_count<int>(values.count("repeats") ? values["repeats"] : 1));
  if (const auto it = values.find("representative_repeat"); it != values.end()) {
    report.representative_repeat = std::clamp(saturating_count<int>(it->second), 1, report.repeats);
  }
  results.runs.push_back(std::move(report));
  results.run_values.push_back(std::move(values));
  results.run_replicas.push_back(read_per_replica(reader, run, prefix));
}

}  // namespace

BenchResults parse_results_json(std::string_view content, const std::string& source) {
  simdjson::dom::parser parser;
  const simdjson::padded_string padded(content.data(), content.size());
  element root;
  if (const auto error = parser.parse(padded).get(root)) {
    fail("{}: not valid JSON: {}", source, simdjson::error_message(error));
  }
  const Reader reader(source);
  simdjson::dom::object top;
  if (root.get_object().get(top)) fail("{}: expected a JSON object at the top level", source);
  check_schema(reader, top, source);

  BenchResults results;
  read_provenance(reader, top, results);
  read_workload_and_sweep(reader, top, results);
  size_t index = 0;
  for (element run_element : reader.array(reader.at(top, "runs", ""), "runs")) {
    read_run(reader, run_element, index++, results);
  }
  return results;
}

BenchResults read_results_json(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    fail("{}: is a folder, not a file", path.string());
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("{}: cannot open the file", path.string());
  std::ostringstream content;
  content << file.rdbuf();
  if (file.bad()) fail("{}: read failed", path.string());
  return parse_results_json(content.str(), path.string());
}

}  // namespace rose
