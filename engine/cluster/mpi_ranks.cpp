// ranks.h over MPI. Rank 0 sends one message per call on a remote replica (tag kCallTag) and gets
// one reply (kReplyTag); a serving rank answers calls in arrival order. Every call but kAdvance is
// a round trip. kAdvance is sent to every replica that advances (cluster.h) before any reply is
// awaited, so the ranks step at the same time; a serving rank starts each of its replicas' advances
// as its call comes (on the replica's thread where it has one) and replies once that advance and
// those called before it are over. Messages are flat byte buffers (wire.h): a call is [op, local
// replica index, arguments], a reply [ok, error text or (ReplicaState, results)].
// The C API only: Open MPI's and MPICH's mpi.h otherwise pull in the deprecated C++ bindings,
// which need a library we do not link.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <deque>
#include <thread>

#include "engine/cluster/mpi_check.h"
#include "engine/cluster/placement.h"
#include "engine/cluster/ranks.h"
#include "engine/cluster/wire.h"

namespace rose {
namespace {

enum class Op : uint8_t {
  kOpen,
  kClose,
  kStart,
  kAdd,
  kAdvance,
  kCached,
  kFinish,
  kReset,
  kShutdown
};
constexpr int kCallTag = 1, kReplyTag = 2;

RankWorld g_world;
bool g_initialized = false;
// Another rank may be blocked waiting for this one: a serving rank (rank 0 waits for its replies),
// or rank 0 between RankPeers' construction and destruction (the others wait for calls).
bool g_peers_waiting = false;

void send_bytes(const std::vector<uint8_t>& bytes, int to, int tag) {
  if (bytes.size() > size_t(INT_MAX)) fail("MPI message of {} bytes is too large", bytes.size());
  ROSE_MPI_CHECK(MPI_Send(bytes.data(), int(bytes.size()), MPI_BYTE, to, tag, MPI_COMM_WORLD));
}

std::vector<uint8_t> receive_bytes(int from, int tag) {
  MPI_Status status;
  ROSE_MPI_CHECK(MPI_Probe(from, tag, MPI_COMM_WORLD, &status));
  int count = 0;
  ROSE_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
  std::vector<uint8_t> bytes(static_cast<size_t>(count));
  ROSE_MPI_CHECK(
      MPI_Recv(bytes.data(), count, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  return bytes;
}

// A message with `tag` from `from` is there to receive.
bool message_waiting(int from, int tag) {
  int flag = 0;
  ROSE_MPI_CHECK(MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
  return flag != 0;
}

// Rank 0's view of a replica on another rank. Every call but an advance is one round trip.
class RankReplica final : public ReplicaHandle {
 public:
  RankReplica(int rank, int local_index, const EngineConfig& config, const std::string& model_id,
              int replica, int num_replicas)
      : rank_(rank), local_index_(local_index) {
    WireWriter w = call(Op::kOpen);
    put_engine_config(w, config);
    w.put_string(model_id);
    w.put(replica);
    w.put(num_replicas);
    WireReader r = round_trip(w);
    shape_ = r.get<ReplicaShape>();
  }
  ~RankReplica() override {
    try {
      round_trip(call(Op::kClose));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "roseinfer: closing replica on rank %d: %s\n", rank_, e.what());
    }
  }

  ReplicaShape shape() const override { return shape_; }
  const ReplicaState& state() const override { return state_; }

  void start(bool record_tokens) override {
    WireWriter w = call(Op::kStart);
    w.put(record_tokens);
    round_trip(w);
  }

  void add(const EngineRequest& request, int index, double now) override {
    WireWriter w = call(Op::kAdd);
    put_request(w, request);
    w.put(index);
    w.put(now);
    round_trip(w);
  }

  void begin_advance(double until) override {
    WireWriter w = call(Op::kAdvance);
    w.put(until);
    send_bytes(w.bytes(), rank_, kCallTag);
  }

  bool advance_ready() override { return message_waiting(rank_, kReplyTag); }

  // The advance's callbacks, as the engine raised them there.
  void end_advance(ReplicaEvents& events) override {
    WireReader r = receive_reply();
    get_events(r, events);
  }

  int cached_prefix_blocks(std::span<const int32_t> prompt) override {
    WireWriter w = call(Op::kCached);
    w.put_vector<int32_t>(prompt);
    return round_trip(w).get<int>();
  }

  RunResult finish(double* busy_s) override {
    WireReader r = round_trip(call(Op::kFinish));
    const double busy = r.get<double>();
    if (busy_s) *busy_s = busy;
    return get_run_result(r);
  }

  void reset_prefix_cache() override { round_trip(call(Op::kReset)); }

 private:
  WireWriter call(Op op) const {
    WireWriter w;
    w.put(op);
    w.put(local_index_);
    return w;
  }

  // Sends the call, waits for the reply; throws the replica's error; keeps its state. The reader
  // is positioned at the call's results (it reads the member reply_).
  WireReader round_trip(const WireWriter& w) {
    send_bytes(w.bytes(), rank_, kCallTag);
    return receive_reply();
  }
  WireReader receive_reply() {
    reply_ = receive_bytes(rank_, kReplyTag);
    WireReader r(reply_);
    if (!r.get<bool>()) throw Error(r.get_string());
    state_ = r.get<ReplicaState>();
    return r;
  }

  int rank_, local_index_;
  ReplicaShape shape_;
  ReplicaState state_;
  std::vector<uint8_t> reply_;
};

// A serving rank's replica.
struct Served {
  std::unique_ptr<ReplicaHandle> handle;
};

// Runs one call on a serving rank; returns false for kShutdown.
bool serve_call(std::span<const uint8_t> message, std::vector<Served>& served,
                const std::vector<ServedBackend>& backends, const Tokenizer* stop_tokenizer,
                bool threaded, WireWriter& results) {
  WireReader r(message);
  const Op op = r.get<Op>();
  const int local = r.get<int>();
  if (op == Op::kShutdown) return false;
  if (local < 0 || size_t(local) >= backends.size()) {
    fail("MPI call for local replica {}, but this rank serves {}", local, backends.size());
  }
  Served& s = served[size_t(local)];
  if (op != Op::kOpen && !s.handle) fail("MPI call {} on a replica not opened", int(op));
  switch (op) {
    case Op::kOpen: {
      const EngineConfig config = get_engine_config(r);
      const std::string model_id = r.get_string();
      const int replica = r.get<int>();
      const int num_replicas = r.get<int>();
      const ServedBackend& b = backends[size_t(local)];
      s.handle = make_local_replica(*b.backend, b.sim_clock, config, model_id, stop_tokenizer,
                                    replica, num_replicas, threaded);
      results.put(s.handle->shape());
      break;
    }
    case Op::kClose:
      s.handle.reset();
      break;
    case Op::kStart:
      s.handle->start(r.get<bool>());
      break;
    case Op::kAdd: {
      const EngineRequest request = get_request(r);
      const int index = r.get<int>();
      const double now = r.get<double>();
      s.handle->add(request, index, now);
      break;
    }
    case Op::kAdvance:  // serve_rank_replicas' own
      fail("MPI call kAdvance out of turn");
    case Op::kCached: {
      const std::vector<int32_t> prompt = r.get_vector<int32_t>();
      results.put(s.handle->cached_prefix_blocks(prompt));
      break;
    }
    case Op::kFinish: {
      double busy_s = 0;
      const RunResult result = s.handle->finish(&busy_s);
      results.put(busy_s);
      put_run_result(results, result);
      break;
    }
    case Op::kReset:
      s.handle->reset_prefix_cache();
      break;
    case Op::kShutdown:
      break;
  }
  return true;
}

}  // namespace

bool mpi_built() { return true; }

void init_ranks(int* argc, char*** argv) {
  if (launcher_world_size() <= 1) return;  // a plain process (or mpirun -np 1): no MPI at all
  ROSE_MPI_CHECK(MPI_Init(argc, argv));
  g_initialized = true;
  // Errors come back as codes (ROSE_MPI_CHECK), not as MPI's default abort.
  ROSE_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  ROSE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank));
  ROSE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_world.size));
  g_world.local_rank = launcher_local_rank();
}

const RankWorld& rank_world() { return g_world; }

int finish_ranks(int exit_code) {
  if (!g_initialized) return exit_code;
  if (exit_code != 0 && g_peers_waiting) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);  // ends every rank; nothing to check after it
  }
  if (MPI_Finalize() != MPI_SUCCESS) {
    std::fprintf(stderr, "roseinfer: error: MPI_Finalize failed\n");
    return exit_code != 0 ? exit_code : 1;
  }
  return exit_code;
}

RankPeers::RankPeers() { g_peers_waiting = g_world.size > 1; }

RankPeers::~RankPeers() {
  WireWriter w;
  w.put(Op::kShutdown);
  w.put(0);
  try {
    for (int rank = 1; rank < g_world.size; ++rank) send_bytes(w.bytes(), rank, kCallTag);
    g_peers_waiting = false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "roseinfer: releasing the MPI ranks: %s\n", e.what());
  }
}

std::unique_ptr<ReplicaHandle> make_rank_replica(int rank, int local_index,
                                                 const EngineConfig& config,
                                                 const std::string& model_id, int replica,
                                                 int num_replicas) {
  return std::make_unique<RankReplica>(rank, local_index, config, model_id, replica, num_replicas);
}

void serve_rank_replicas(const std::vector<ServedBackend>& backends,
                         const Tokenizer* stop_tokenizer, bool threaded) {
  g_peers_waiting = true;
  std::vector<Served> served(backends.size());
  std::deque<int> advancing;  // replicas whose kAdvance is not answered yet, in call order
  const auto send_failure = [](const std::exception& e) {
    WireWriter reply;
    reply.put(false);
    reply.put_string(e.what());
    send_bytes(reply.bytes(), 0, kReplyTag);
  };
  // Answers the first of them, once its advance is over.
  const auto answer_advance = [&] {
    ReplicaHandle& handle = *served[size_t(advancing.front())].handle;
    advancing.pop_front();
    ReplicaEvents events;
    try {
      handle.end_advance(events);
    } catch (const std::exception& e) {
      return send_failure(e);
    }
    WireWriter reply;
    reply.put(true);
    reply.put(handle.state());
    put_events(reply, events);
    send_bytes(reply.bytes(), 0, kReplyTag);
  };
  for (;;) {
    if (!advancing.empty() && !message_waiting(0, kCallTag)) {
      // The next call may be another replica's advance, to start at once; until it comes, the
      // first advance is answered when it is over.
      if (served[size_t(advancing.front())].handle->advance_ready()) {
        answer_advance();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      continue;
    }
    const std::vector<uint8_t> message = receive_bytes(0, kCallTag);
    WireReader peek(message);
    const Op op = peek.get<Op>();
    const int local = peek.get<int>();
    if (op == Op::kAdvance) {
      if (local < 0 || size_t(local) >= served.size() || !served[size_t(local)].handle ||
          std::find(advancing.begin(), advancing.end(), local) != advancing.end()) {
        fail("MPI call kAdvance for local replica {}, not open or already advancing", local);
      }
      served[size_t(local)].handle->begin_advance(peek.get<double>());
      advancing.push_back(local);
      continue;
    }
    while (!advancing.empty()) answer_advance();  // rank 0 has them all before it calls again
    WireWriter reply;
    reply.put(true);
    WireWriter results;
    bool more = true;
    try {
      more = serve_call(message, served, backends, stop_tokenizer, threaded, results);
    } catch (const std::exception& e) {  // the failure goes back to rank 0, which reports it
      send_failure(e);
      continue;
    }
    if (!more) break;
    // The state of the replica called (any replica's for calls that change none).
    const Served& s = served[size_t(local)];
    reply.put(s.handle ? s.handle->state() : ReplicaState{});
    reply.append(results.bytes().data(), results.bytes().size());
    send_bytes(reply.bytes(), 0, kReplyTag);
  }
  g_peers_waiting = false;
}

}  // namespace rose
