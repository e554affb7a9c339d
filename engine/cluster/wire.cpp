#include "engine/cluster/wire.h"

#include "engine/common/error.h"

namespace rose {

void WireWriter::put_string(const std::string& s) {
  put_vector<char>(std::span<const char>(s.data(), s.size()));
}

const uint8_t* WireReader::take(size_t n) {
  if (n > bytes_.size() - pos_) {
    fail("MPI message: {} bytes needed at offset {} of {}", n, pos_, bytes_.size());
  }
  const uint8_t* p = bytes_.data() + pos_;
  pos_ += n;
  return p;
}

uint64_t WireReader::count(size_t element_size) {
  const uint64_t n = get<uint64_t>();
  if (n > (bytes_.size() - pos_) / element_size) {
    fail("MPI message: a count of {} at offset {} overruns the {} bytes", n, pos_, bytes_.size());
  }
  return n;
}

std::string WireReader::get_string() {
  const std::vector<char> chars = get_vector<char>();
  return std::string(chars.begin(), chars.end());
}

void put_engine_config(WireWriter& w, const EngineConfig& c) {
  w.put(c.mode);
  w.put(c.max_num_seqs);
  w.put(c.max_num_batched_tokens);
  w.put(c.max_concurrency);
  w.put(c.prefix_cache);
  w.put_string(c.cache_salt);
  w.put(c.keep_results);
}

EngineConfig get_engine_config(WireReader& r) {
  EngineConfig c;
  c.mode = r.get<SchedulerMode>();
  c.max_num_seqs = r.get<int>();
  c.max_num_batched_tokens = r.get<int>();
  c.max_concurrency = r.get<int>();
  c.prefix_cache = r.get<bool>();
  c.cache_salt = r.get_string();
  c.keep_results = r.get<bool>();
  return c;
}

void put_request(WireWriter& w, const EngineRequest& q) {
  w.put_vector<int32_t>(q.prompt);
  w.put(q.max_tokens);
  w.put(q.sampling);
  w.put(q.ignore_eos);
  w.put(q.arrival_s);
  w.put(uint64_t(q.stop.size()));
  for (const std::string& s : q.stop) w.put_string(s);
}

EngineRequest get_request(WireReader& r) {
  EngineRequest q;
  q.prompt = r.get_vector<int32_t>();
  q.max_tokens = r.get<int>();
  q.sampling = r.get<SamplingParams>();
  q.ignore_eos = r.get<bool>();
  q.arrival_s = r.get<double>();
  const uint64_t stops = r.get<uint64_t>();
  for (uint64_t i = 0; i < stops; ++i) q.stop.push_back(r.get_string());
  return q;
}

void put_result(WireWriter& w, const RequestResult& q) {
  w.put_vector<int32_t>(q.output_ids);
  w.put(q.finish_reason);
  w.put(q.timeline.arrival);
  w.put(q.timeline.first_scheduled);
  w.put_vector<double>(q.timeline.token_times);
  w.put(q.timeline.finish);
  w.put(q.cached_prompt_tokens);
  w.put(q.first_cached_prompt_tokens);
  w.put(q.preemptions);
  w.put_string(q.error);
}

RequestResult get_result(WireReader& r) {
  RequestResult q;
  q.output_ids = r.get_vector<int32_t>();
  q.finish_reason = r.get<FinishReason>();
  q.timeline.arrival = r.get<double>();
  q.timeline.first_scheduled = r.get<double>();
  q.timeline.token_times = r.get_vector<double>();
  q.timeline.finish = r.get<double>();
  q.cached_prompt_tokens = r.get<int>();
  q.first_cached_prompt_tokens = r.get<int>();
  q.preemptions = r.get<int>();
  q.error = r.get_string();
  return q;
}

void put_events(WireWriter& w, const ReplicaEvents& q) {
  w.put(uint64_t(q.events.size()));
  for (const ReplicaEvent& e : q.events) {
    w.put(e.step_start);
    w.put(e.index);
    w.put(e.token);
    w.put(e.result);
  }
  w.put(uint64_t(q.results.size()));
  for (const RequestResult& result : q.results) put_result(w, result);
}

void get_events(WireReader& r, ReplicaEvents& into) {
  const int base = int(into.results.size());
  const uint64_t events = r.get<uint64_t>();
  for (uint64_t i = 0; i < events; ++i) {
    ReplicaEvent e;
    e.step_start = r.get<double>();
    e.index = r.get<int>();
    e.token = r.get<int32_t>();
    e.result = r.get<int>();
    if (e.result >= 0) e.result += base;
    into.events.push_back(e);
  }
  const uint64_t results = r.get<uint64_t>();
  for (uint64_t i = 0; i < results; ++i) into.results.push_back(get_result(r));
  for (size_t i = into.events.size() - size_t(events); i < into.events.size(); ++i) {
    if (into.events[i].result >= int(into.results.size())) {
      fail("MPI message: event {} names result {} of {}", i, into.events[i].result,
           into.results.size());
    }
  }
}

void put_run_result(WireWriter& w, const RunResult& q) {
  w.put(uint64_t(q.requests.size()));
  for (const RequestResult& result : q.requests) put_result(w, result);
  w.put(q.duration_s);
  w.put(q.cache);
  w.put(q.kv);
  w.put(q.steps);
  w.put_vector<double>(q.step_series.time);
  w.put_vector<int>(q.step_series.kv_used_blocks);
  w.put_vector<int>(q.step_series.running);
  w.put_vector<int>(q.step_series.waiting);
}

RunResult get_run_result(WireReader& r) {
  RunResult q;
  const uint64_t n = r.get<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) q.requests.push_back(get_result(r));
  q.duration_s = r.get<double>();
  q.cache = r.get<PrefixCacheStats>();
  q.kv = r.get<KvStats>();
  q.steps = r.get<StepStats>();
  q.step_series.time = r.get_vector<double>();
  q.step_series.kv_used_blocks = r.get_vector<int>();
  q.step_series.running = r.get_vector<int>();
  q.step_series.waiting = r.get_vector<int>();
  return q;
}

}  // namespace rose
