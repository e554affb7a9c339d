// Where replicas run (engine/cluster/placement.h) and the byte format of the messages between MPI
// ranks (engine/cluster/wire.h): both plain host code, tested without MPI or a GPU.
#include <doctest/doctest.h>

#include <cstdlib>

#include "engine/cluster/placement.h"
#include "engine/cluster/wire.h"
#include "engine/common/error.h"

using namespace rose;

TEST_CASE("replica i on rank i % ranks, as its local replica i / ranks") {
  CHECK(rank_replicas(0, 3, 6) == std::vector<int>{0, 3});
  CHECK(rank_replicas(2, 3, 6) == std::vector<int>{2, 5});
  CHECK(rank_replicas(0, 1, 3) == std::vector<int>{0, 1, 2});
  for (int i = 0; i < 6; ++i) {
    const int rank = replica_rank(i, 3), local = replica_local_index(i, 3);
    CHECK(rank_replicas(rank, 3, 6)[size_t(local)] == i);
  }
  CHECK_NOTHROW(check_rank_count(6, 3));
  CHECK_NOTHROW(check_rank_count(3, 3));
  CHECK_THROWS_WITH_AS(check_rank_count(3, 2),
                       doctest::Contains("--data-parallel 3 over 2 MPI ranks"), UsageError);
  CHECK_THROWS_AS(check_rank_count(2, 3), UsageError);
}

TEST_CASE("the launcher's world size and local rank come from its environment") {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}) {
    unsetenv(name);
  }
  CHECK(launcher_world_size() == 0);
  CHECK(launcher_local_rank() == 0);
  setenv("PMI_SIZE", "4", 1);
  CHECK(launcher_world_size() == 4);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  CHECK(launcher_world_size() == 3);
  CHECK(launcher_local_rank() == 1);
  setenv("OMPI_COMM_WORLD_SIZE", "x", 1);  // not a number: the next variable
  CHECK(launcher_world_size() == 4);
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
    unsetenv(name);
  }
}

TEST_CASE("replica GPUs: default 0..N-1, --gpus lists, local ranks take their share") {
  CHECK(replica_devices("", 2, 0, 2) == std::vector<int>{0, 1});
  CHECK(replica_devices("1,0", 2, 0, 2) == std::vector<int>{1, 0});
  CHECK(replica_devices("3", 1, 0, 4) == std::vector<int>{3});
  CHECK(replica_devices("", 1, 1, 2) == std::vector<int>{1});  // local rank 1 of 2 on a node
  CHECK(replica_devices("2,3,0,1", 2, 1, 4) == std::vector<int>{0, 1});
  // --tensor-parallel 2: each replica takes two entries.
  CHECK(replica_devices("", 2, 0, 4, 2) == std::vector<int>{0, 1, 2, 3});
  CHECK(replica_devices("3,2,1,0", 1, 1, 4, 2) == std::vector<int>{1, 0});  // local rank 1
  CHECK_THROWS_WITH_AS(
      replica_devices("", 1, 0, 1, 2),
      doctest::Contains("1 replica(s) per process of --tensor-parallel 2 need 2 GPU(s)"),
      UsageError);
  CHECK_THROWS_WITH_AS(replica_devices("", 3, 0, 2),
                       doctest::Contains("3 replica(s) per process need 3 GPU(s)"), UsageError);
  CHECK_THROWS_WITH_AS(replica_devices("0,2", 2, 0, 2), doctest::Contains("GPU 2 does not exist"),
                       UsageError);
  CHECK_THROWS_WITH_AS(replica_devices("0,0", 2, 0, 2), doctest::Contains("listed twice"),
                       UsageError);
  for (const char* bad : {"a", "0,", ",1", "-1", "1.5", "0;1"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(replica_devices(bad, 1, 0, 2), doctest::Contains("--gpus"), UsageError);
  }
  CHECK_THROWS_AS(replica_devices("0", 1, 0, 0), UsageError);  // no GPU at all
}

TEST_CASE("wire: requests, configs and results survive the round trip") {
  EngineRequest q;
  q.prompt = {1, 2, 3, 70000};
  q.max_tokens = 9;
  q.sampling.temperature = 0.5f;
  q.sampling.top_k = 7;
  q.sampling.seed = 42;
  q.ignore_eos = true;
  q.arrival_s = 1.25;
  q.stop = {"</s>", ""};
  EngineConfig c;
  c.mode = SchedulerMode::kOnline;
  c.max_concurrency = 3;
  c.cache_salt = "salt";
  c.keep_results = false;
  RunResult run;
  RequestResult result;
  result.output_ids = {5, 6};
  result.finish_reason = FinishReason::kError;
  result.timeline = {0.5, 0.75, {0.8, 0.9}, 1.0};
  result.cached_prompt_tokens = 16;
  result.preemptions = 1;
  result.error = "non-finite logits";
  run.requests = {result, RequestResult{}};
  run.duration_s = 2;
  run.cache.hit_tokens = 16;
  run.kv.total_blocks = 8;
  run.steps.decode_steps = 4;
  run.step_series.time = {0.1, 0.2};
  run.step_series.waiting = {1, 0};

  WireWriter w;
  put_request(w, q);
  put_engine_config(w, c);
  put_run_result(w, run);
  WireReader r(w.bytes());
  const EngineRequest q2 = get_request(r);
  CHECK(q2.prompt == q.prompt);
  CHECK(q2.max_tokens == 9);
  CHECK(q2.sampling.top_k == 7);
  CHECK(q2.sampling.seed == 42);
  CHECK(q2.ignore_eos);
  CHECK(q2.arrival_s == 1.25);
  CHECK(q2.stop == q.stop);
  const EngineConfig c2 = get_engine_config(r);
  CHECK(c2.mode == SchedulerMode::kOnline);
  CHECK(c2.max_concurrency == 3);
  CHECK(c2.cache_salt == "salt");
  CHECK(!c2.keep_results);
  const RunResult run2 = get_run_result(r);
  CHECK(r.at_end());
  REQUIRE(run2.requests.size() == 2);
  const RequestResult& r0 = run2.requests[0];
  CHECK(r0.output_ids == result.output_ids);
  CHECK(r0.finish_reason == FinishReason::kError);
  CHECK(r0.timeline.token_times == result.timeline.token_times);
  CHECK(r0.timeline.finish == 1.0);
  CHECK(r0.cached_prompt_tokens == 16);
  CHECK(r0.error == result.error);
  CHECK(run2.cache.hit_tokens == 16);
  CHECK(run2.kv.total_blocks == 8);
  CHECK(run2.steps.decode_steps == 4);
  CHECK(run2.step_series.time == run.step_series.time);
  CHECK(run2.step_series.waiting == run.step_series.waiting);
}

TEST_CASE("wire: a short or corrupt message is an error, not an out-of-bounds read") {
  WireWriter w;
  put_request(w, EngineRequest{{1, 2, 3}});
  std::vector<uint8_t> bytes = w.bytes();
  bytes.resize(bytes.size() - 1);
  WireReader short_reader(bytes);
  CHECK_THROWS_WITH_AS(get_request(short_reader), doctest::Contains("MPI message"), Error);
  WireWriter huge;
  huge.put(uint64_t(1) << 60);  // a count far beyond the buffer
  WireReader huge_reader(huge.bytes());
  CHECK_THROWS_WITH_AS(huge_reader.get_vector<int32_t>(), doctest::Contains("overruns"), Error);
}
