// The results file: written by hand, read back with simdjson, every field the same afterwards.
#include <doctest/doctest.h>
#include <simdjson.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/common/shell_quote.h"
#include "engine/metrics/results_json.h"

namespace fs = std::filesystem;

namespace {

rose::RequestResult request_result(double arrival, std::vector<double> token_times, int cached) {
  rose::RequestResult r;
  r.timeline.arrival = arrival;
  r.timeline.first_scheduled = arrival + 0.001;
  r.timeline.token_times = std::move(token_times);
  r.timeline.finish = r.timeline.token_times.empty() ? -1.0 : r.timeline.token_times.back();
  r.output_ids.assign(r.timeline.token_times.size(), 3);
  r.cached_prompt_tokens = cached;
  return r;
}

std::vector<rose::EngineRequest> sample_requests() {
  std::vector<rose::EngineRequest> requests(3);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].prompt = {1, 2, 3, int32_t(i) + 10};
    requests[i].max_tokens = 4;
    requests[i].arrival_s = 0.01 * double(i);
  }
  return requests;
}

rose::BenchReport sample_report(bool prefix_cache, const rose::Slo& slo,
                                std::optional<double> copy_gbps) {
  rose::RunResult run;
  run.requests = {request_result(0.0, {0.1, 0.13, 0.17, 0.2}, 0),
                  request_result(0.01, {0.21, 0.25}, 16), request_result(0.02, {}, 0)};
  run.duration_s = 0.3;
  run.cache = {3, 9, 4, 1};
  run.kv = {16, 512, 37, 2};
  run.steps.steps = 9;
  run.steps.prefill_tokens = 8;
  run.steps.decode_tokens = 5;
  run.steps.decode_steps = 4;
  run.steps.decode_time_s = 0.07;
  run.steps.execute_time_s = 0.25;
  run.steps.schedule_time_s = 0.003;
  run.steps.decode_bytes = 1.5e9;
  return rose::make_report(run, sample_requests(), prefix_cache ? "offline" : "online",
                           prefix_cache, {50, 95, 99, 99.9}, slo, copy_gbps);
}

rose::BenchResults sample_results() {
  rose::BenchResults results;
  results.roseinfer_version = "0.1.0";
  results.git_commit = "0123456789ab-dirty";
  results.date = "2026-11-20T09:15:02Z";
  // Quotes, backslashes, control characters and non-ASCII text must survive the trip.
  results.command = "roseinfer bench --dataset 'seed000' --tag \"a\\b\"\n\t\x01 caf\xC3\xA9";
  results.model = "gpt2";
  results.device = "NVIDIA H100 80GB HBM3";
  results.config = {{"mode", std::string("all")},
                    {"max_num_seqs", int64_t(256)},
                    {"request_rate", 8.5},
                    {"prefix_cache", true},
                    {"max_concurrency", std::monostate{}}};
  results.workload = {"seed000", 3, rose::workload_fingerprint(sample_requests(), "gpt2"), 12};
  rose::Slo slo;
  slo.ttft_ms = 150;
  results.runs = {sample_report(true, slo, 3000.0), sample_report(false, {}, std::nullopt)};
  return results;
}

void check_distribution(const rose::Distribution& a, const rose::Distribution& b) {
  CHECK(a.mean == b.mean);
  CHECK(a.median == b.median);
  CHECK(a.std == b.std);
  CHECK(a.min == b.min);
  CHECK(a.max == b.max);
  CHECK(a.percentiles == b.percentiles);
}

void check_report(const rose::BenchReport& a, const rose::BenchReport& b) {
  CHECK(a.mode == b.mode);
  CHECK(a.prefix_cache == b.prefix_cache);
  CHECK(a.completed == b.completed);
  CHECK(a.failed == b.failed);
  CHECK(a.total_input_tokens == b.total_input_tokens);
  CHECK(a.total_output_tokens == b.total_output_tokens);
  CHECK(a.duration_s == b.duration_s);
  CHECK(a.request_throughput == b.request_throughput);
  CHECK(a.output_throughput == b.output_throughput);
  CHECK(a.total_token_throughput == b.total_token_throughput);
  CHECK(a.goodput == b.goodput);
  check_distribution(a.ttft_ms, b.ttft_ms);
  check_distribution(a.tpot_ms, b.tpot_ms);
  check_distribution(a.itl_ms, b.itl_ms);
  check_distribution(a.e2el_ms, b.e2el_ms);
  check_distribution(a.queue_ms, b.queue_ms);
  CHECK(a.cache.lookups == b.cache.lookups);
  CHECK(a.cache.queried_tokens == b.cache.queried_tokens);
  CHECK(a.cache.hit_tokens == b.cache.hit_tokens);
  CHECK(a.cache.evictions == b.cache.evictions);
  CHECK(a.kv.block_size == b.kv.block_size);
  CHECK(a.kv.total_blocks == b.kv.total_blocks);
  CHECK(a.kv.peak_used_blocks == b.kv.peak_used_blocks);
  CHECK(a.kv.preemptions == b.kv.preemptions);
  CHECK(a.steps.steps == b.steps.steps);
  CHECK(a.steps.prefill_tokens == b.steps.prefill_tokens);
  CHECK(a.steps.decode_tokens == b.steps.decode_tokens);
  CHECK(a.steps.decode_steps == b.steps.decode_steps);
  CHECK(a.steps.decode_time_s == b.steps.decode_time_s);
  CHECK(a.steps.execute_time_s == b.steps.execute_time_s);
  CHECK(a.steps.schedule_time_s == b.steps.schedule_time_s);
  CHECK(a.steps.decode_bytes == b.steps.decode_bytes);
  CHECK(a.decode_gbps == b.decode_gbps);
  CHECK(a.bandwidth_floor_fraction == b.bandwidth_floor_fraction);
}

fs::path temp_folder() {
  const fs::path folder =
      fs::temp_directory_path() / ("roseinfer_test_results_json_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  return folder;
}

}  // namespace

TEST_CASE("percentile keys are spelled as vLLM spells them") {
  CHECK(rose::percentile_key(99) == "p99");
  CHECK(rose::percentile_key(50) == "p50");
  CHECK(rose::percentile_key(99.9) == "p99.9");
  CHECK(rose::percentile_key(99.99) == "p99.99");
  CHECK(rose::percentile_key(0) == "p0");
  CHECK(rose::percentile_key(100) == "p100");
}

TEST_CASE("results JSON: a round trip keeps every field") {
  const rose::BenchResults written = sample_results();
  const std::string text = rose::results_to_json(written, /*save_detailed=*/true);
  const rose::BenchResults read = rose::parse_results_json(text, "mem.json");

  CHECK(read.roseinfer_version == written.roseinfer_version);
  CHECK(read.git_commit == written.git_commit);
  CHECK(read.date == written.date);
  CHECK(read.command == written.command);
  CHECK(read.model == written.model);
  CHECK(read.device == written.device);
  CHECK(read.config == written.config);
  CHECK(read.workload.name == written.workload.name);
  CHECK(read.workload.num_requests == 3);
  CHECK(read.workload.fingerprint == written.workload.fingerprint);
  CHECK(read.workload.total_input_tokens == 12);
  REQUIRE(read.runs.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    check_report(read.runs[i], written.runs[i]);
    const rose::RequestDetail& a = read.runs[i].detail;
    const rose::RequestDetail& b = written.runs[i].detail;
    CHECK(a.input_lens == b.input_lens);
    CHECK(a.output_lens == b.output_lens);
    CHECK(a.cached_tokens == b.cached_tokens);
    CHECK(a.ttfts == b.ttfts);
    CHECK(a.e2els == b.e2els);
    CHECK(a.itls == b.itls);
  }
  // The reference values survived, not just "whatever was written": goodput is 1 of 2 completed
  // requests (TTFT 100 and 200 ms against a 150 ms bound) over 0.3 s.
  REQUIRE(read.runs[0].goodput.has_value());
  CHECK(*read.runs[0].goodput == doctest::Approx(1.0 / 0.3));
  CHECK(read.runs[0].detail.output_lens == std::vector<int64_t>{4, 2, 0});
  CHECK_FALSE(read.runs[1].goodput.has_value());
  CHECK_FALSE(read.runs[1].bandwidth_floor_fraction.has_value());
  // Every numeric key is kept for compare.
  REQUIRE(read.run_values.size() == 2);
  CHECK(read.run_values[0].at("p99.9_ttft_ms") == written.runs[0].ttft_ms.percentiles[3].second);
  CHECK(read.run_values[0].at("kv_peak_usage") == doctest::Approx(37.0 / 512.0));
  CHECK(read.run_values[0].at("prefix_cache_hit_rate") == doctest::Approx(4.0 / 9.0));
}

TEST_CASE("results JSON: vLLM-style flat keys and the schema header") {
  const std::string text = rose::results_to_json(sample_results(), false);
  simdjson::dom::parser parser;
  simdjson::dom::element root = parser.parse(simdjson::padded_string(text));
  CHECK(std::string_view(root["schema"]) == "roseinfer-bench");
  CHECK(int64_t(root["schema_version"]) == 1);
  simdjson::dom::element run = root["runs"].at(0);
  for (const char* key : {"completed",
                          "failed",
                          "total_input_tokens",
                          "total_output_tokens",
                          "duration",
                          "request_throughput",
                          "output_throughput",
                          "total_token_throughput",
                          "request_goodput",
                          "mean_ttft_ms",
                          "median_ttft_ms",
                          "std_ttft_ms",
                          "min_ttft_ms",
                          "max_ttft_ms",
                          "p99_ttft_ms",
                          "p99.9_tpot_ms",
                          "p95_itl_ms",
                          "p50_e2el_ms",
                          "mean_queue_ms",
                          "prefix_cache_lookups",
                          "prefix_cache_queried_tokens",
                          "prefix_cache_hit_tokens",
                          "prefix_cache_hit_rate",
                          "prefix_cache_evictions",
                          "kv_total_blocks",
                          "kv_peak_used_blocks",
                          "kv_peak_usage",
                          "preemptions",
                          "steps",
                          "prefill_tokens_computed",
                          "decode_tokens",
                          "decode_gbps",
                          "bandwidth_floor_fraction"}) {
    CAPTURE(key);
    CHECK(run[key].error() == simdjson::SUCCESS);
  }
  CHECK(int64_t(run["completed"]) == 2);
  CHECK(double(run["decode_gbps"]) == doctest::Approx(1.5e9 / 0.07 / 1e9));
  CHECK(double(run["kv_peak_usage"]) == doctest::Approx(37.0 / 512.0));
  // Without --save-detailed there are no per-request arrays.
  CHECK(run["ttfts"].error() == simdjson::NO_SUCH_FIELD);
  CHECK(text.back() == '\n');
}

TEST_CASE("results JSON: strings are escaped and invalid UTF-8 is replaced") {
  rose::BenchResults results = sample_results();
  results.model = std::string("bad\xFF\xC0 byte \x7F end");
  const std::string text = rose::results_to_json(results, false);
  CHECK(text.find("\\n\\t\\u0001") != std::string::npos);
  CHECK(text.find("\\\"a\\\\b\\\"") != std::string::npos);
  const rose::BenchResults read = rose::parse_results_json(text, "mem.json");
  CHECK(read.model == "bad\xEF\xBF\xBD\xEF\xBF\xBD byte \x7F end");
}

TEST_CASE("results JSON: written through a temporary file and read back from disk") {
  const fs::path folder = temp_folder();
  const fs::path path = folder / "results.json";
  rose::write_results_json(path, sample_results(), true);
  const rose::BenchResults read = rose::read_results_json(path);
  CHECK(read.runs.size() == 2);
  CHECK(read.workload.fingerprint.size() == 32);
  // Only the target file is left in the folder.
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(folder)) {
    (void)entry;
    ++entries;
  }
  CHECK(entries == 1);
  CHECK_THROWS_AS(rose::read_results_json(folder / "missing.json"), rose::Error);
  CHECK_THROWS_AS(rose::read_results_json(folder), rose::Error);
  CHECK_THROWS_AS(
      rose::write_results_json(folder / "no_such_dir" / "r.json", sample_results(), false),
      rose::Error);
  fs::remove_all(folder);
}

TEST_CASE("results JSON: bad files are user errors that name the file and the field") {
  auto message_of = [](const std::string& text) {
    try {
      rose::parse_results_json(text, "base.json");
    } catch (const rose::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message_of("{not json").find("base.json: not valid JSON") == 0);
  CHECK(message_of("[1, 2]").find("base.json: expected a JSON object") == 0);
  CHECK(message_of(R"({"runs": []})").find("no 'schema' field") != std::string::npos);
  CHECK(message_of(R"({"schema": "vllm", "schema_version": 1})").find("schema is 'vllm'") !=
        std::string::npos);
  CHECK(message_of(R"({"schema": "roseinfer-bench", "schema_version": 2})")
            .find("'schema_version': 2 is newer") != std::string::npos);
  CHECK(message_of(R"({"schema": "roseinfer-bench", "schema_version": 1, "runs": []})")
            .find("missing field 'workload'") != std::string::npos);
  const std::string header =
      R"({"schema": "roseinfer-bench", "schema_version": 1, "workload": {"fingerprint": "ab"}, )";
  CHECK(message_of(header + R"("runs": [{"mode": 3, "prefix_cache": true}]})")
            .find("field 'runs[0].mode': expected a string") != std::string::npos);
  CHECK(message_of(header + R"("runs": [{"mode": "naive"}]})")
            .find("missing field 'runs[0].prefix_cache'") != std::string::npos);
  CHECK(message_of(header + R"("runs": [{"mode": "naive", "prefix_cache": true, "ttfts": 5}]})")
            .find("field 'runs[0].ttfts': expected an array") != std::string::npos);
  // A minimal valid file: unknown keys are ignored, missing numbers read as 0.
  const rose::BenchResults ok = rose::parse_results_json(
      header + R"("runs": [{"mode": "naive", "prefix_cache": false, "future_key": "x",
                            "output_throughput": 12.5}]})",
      "base.json");
  REQUIRE(ok.runs.size() == 1);
  CHECK(ok.runs[0].output_throughput == 12.5);
  CHECK(ok.runs[0].completed == 0);
  CHECK(ok.run_values[0].size() == 1);

  // Counts far outside any integer type are clamped, not undefined behaviour.
  const rose::BenchResults huge = rose::parse_results_json(
      header + R"("runs": [{"mode": "naive", "prefix_cache": false, "completed": 1e300,
                            "steps": -1e300, "input_lens": [1e300, -1e300, 7]}]})",
      "base.json");
  CHECK(huge.runs[0].completed == std::numeric_limits<int>::max());
  CHECK(huge.runs[0].steps.steps == std::numeric_limits<int64_t>::min());
  CHECK(huge.runs[0].detail.input_lens == std::vector<int64_t>{std::numeric_limits<int64_t>::max(),
                                                               std::numeric_limits<int64_t>::min(),
                                                               7});
}

TEST_CASE("workload fingerprint changes with anything that changes the results") {
  const std::vector<rose::EngineRequest> base = sample_requests();
  const std::string fp = rose::workload_fingerprint(base, "gpt2");
  CHECK(fp.size() == 32);
  CHECK(fp.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(rose::workload_fingerprint(sample_requests(), "gpt2") == fp);
  CHECK(rose::workload_fingerprint(base, "llama-1b") != fp);

  auto changed = [&](auto mutate) {
    std::vector<rose::EngineRequest> requests = sample_requests();
    mutate(requests);
    return rose::workload_fingerprint(requests, "gpt2");
  };
  CHECK(changed([](auto& r) { r[1].prompt[0] = 99; }) != fp);
  CHECK(changed([](auto& r) { r[2].prompt.push_back(5); }) != fp);
  CHECK(changed([](auto& r) { r[0].max_tokens = 5; }) != fp);
  CHECK(changed([](auto& r) { r[0].sampling.temperature = 0.7f; }) != fp);
  CHECK(changed([](auto& r) { r[0].sampling.top_k = 40; }) != fp);
  CHECK(changed([](auto& r) { r[0].sampling.top_p = 0.9f; }) != fp);
  CHECK(changed([](auto& r) { r[0].sampling.seed = 1; }) != fp);
  CHECK(changed([](auto& r) { r[0].ignore_eos = true; }) != fp);
  CHECK(changed([](auto& r) { r[2].arrival_s = 0.5; }) != fp);
  CHECK(changed([](auto& r) { r.pop_back(); }) != fp);
  // Moving a token from one prompt to the next is a different workload too.
  CHECK(changed([](auto& r) {
          r[1].prompt.push_back(r[0].prompt.back());
          r[0].prompt.pop_back();
        }) != fp);
}

TEST_CASE("command line and date") {
  const char* argv[] = {"roseinfer", "bench", "--json", "out dir/r.json", "--tag", "it's"};
  CHECK(rose::join_command(6, argv) == "roseinfer bench --json 'out dir/r.json' --tag 'it'\\''s'");
  const std::string date = rose::utc_timestamp_now();
  REQUIRE(date.size() == 20);
  CHECK(date[4] == '-');
  CHECK(date[10] == 'T');
  CHECK(date[19] == 'Z');
}

TEST_CASE("results JSON: a sweep's parameter and values survive a round trip, inf as null") {
  rose::BenchResults written = sample_results();
  CHECK(rose::parse_results_json(rose::results_to_json(written, false), "a.json")
            .sweep_parameter.empty());
  written.sweep_parameter = "request_rate";
  written.sweep_values.assign(written.runs.size(), 2.0);
  written.sweep_values.back() = std::numeric_limits<double>::infinity();
  const std::string text = rose::results_to_json(written, /*save_detailed=*/false);
  CHECK(text.find("\"parameter\": \"request_rate\"") != std::string::npos);
  const rose::BenchResults read = rose::parse_results_json(text, "sweep.json");
  CHECK(read.sweep_parameter == "request_rate");
  REQUIRE(read.sweep_values.size() == written.runs.size());
  CHECK(read.sweep_values.front() == 2.0);
  CHECK(std::isinf(read.sweep_values.back()));
}

TEST_CASE("results JSON: a tensor-parallel run's collective figures survive a round trip") {
  rose::BenchResults written = sample_results();
  rose::CollectiveFigures f;
  f.rows = 8;
  f.all_reduces_per_step = 32;
  f.all_reduce_bytes = 65536;
  f.all_reduce_us = 12.5;
  f.all_reduce_bus_gbps = 5.24288;
  f.all_gathers_per_step = 1;
  f.all_gather_bytes = 1024000;
  f.all_gather_us = 40.25;
  f.ms_per_decode_step = 0.44025;
  f.decode_step_fraction = 0.25;
  f.fused_add_norm = true;
  written.runs[0].collectives = f;
  f.decode_step_fraction = std::nan("");  // a run without a pure-decode step: written as null
  f.fused_add_norm = false;
  written.runs[1].collectives = f;
  const std::string text = rose::results_to_json(written, false);
  CHECK(text.find("\"collective_decode_step_fraction\": null") != std::string::npos);
  const rose::BenchResults read = rose::parse_results_json(text, "mem.json");
  REQUIRE(read.runs.size() == 2);
  REQUIRE(read.runs[0].collectives.has_value());
  const rose::CollectiveFigures& g = *read.runs[0].collectives;
  CHECK(g.rows == 8);
  CHECK(g.all_reduces_per_step == 32);
  CHECK(g.all_reduce_bytes == 65536);
  CHECK(g.all_reduce_us == 12.5);
  CHECK(g.all_reduce_bus_gbps == 5.24288);
  CHECK(g.all_gathers_per_step == 1);
  CHECK(g.all_gather_bytes == 1024000);
  CHECK(g.all_gather_us == 40.25);
  CHECK(g.ms_per_decode_step == 0.44025);
  CHECK(g.decode_step_fraction == 0.25);
  CHECK(g.fused_add_norm);
  REQUIRE(read.runs[1].collectives.has_value());
  CHECK(std::isnan(read.runs[1].collectives->decode_step_fraction));
  CHECK_FALSE(read.runs[1].collectives->fused_add_norm);
  CHECK(read.run_values[0].at("collective_ms_per_decode_step") == 0.44025);
  CHECK(read.run_values[0].at("all_reduce_bus_gbps") == 5.24288);
  // A run without tensor parallel has none of the keys.
  CHECK_FALSE(rose::parse_results_json(rose::results_to_json(sample_results(), false), "m.json")
                  .runs[0]
                  .collectives.has_value());
  CHECK(rose::results_to_json(sample_results(), false).find("all_reduce") == std::string::npos);
}
