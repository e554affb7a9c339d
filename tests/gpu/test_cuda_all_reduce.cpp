// The one-shot all-reduce through peer memory (engine/backend/cuda/peer_all_reduce,
// kernels/cuda/all_reduce_peer): every rank's buffer ends as the host's fp32 sum of all ranks'
// inputs in rank order, rounded once to the type, bit for bit, for each type and for sizes from
// one vector to the staging's limit; back to back with changing sizes (the epochs and the
// double-buffered staging) and replayed from CUDA graphs. Ranks sharing one GPU run everywhere
// (a GPU's own memory needs no peer access); the case over two GPUs says skipped with one.
// The all-reduce fused with the add-norm after it (all_reduce_add_norm) is checked against the
// two kernels it replaces (all_reduce_sum, itself checked against the host above, then
// launch_add_norm) on the same inputs: every rank's residual and normalized rows, bit for bit,
// with its flag exchange and with its low-latency one (the cases of up to 32 rows of 4,096).
// The logits' column gather (all_gather_columns) against the host's placement of every rank's
// vocab shard: every rank's logits rows, bit for bit.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/peer_all_reduce.h"
#include "engine/parallel/rank_threads.h"
#include "engine/parallel/shard_plan.h"
#include "kernels/cuda/check.cuh"
#include "kernels/cuda/gemv.cuh"
#include "kernels/cuda/norm.cuh"
#include "tests/gpu/gpu_test_util.h"

using namespace rose;

namespace {

constexpr int64_t kMaxBytes = int64_t(256) << 10;
constexpr int64_t kHostBytes = 3 * kMaxBytes;  // the graph case's 3 inputs, or its 3 results

int64_t element_bytes(CollectiveType type) { return type == CollectiveType::kF32 ? 4 : 2; }

// Element i of a rank's input as stored (a value the type holds exactly) and as fp32.
struct Input {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

Input random_input(int64_t count, CollectiveType type, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  Input in;
  in.bytes.resize(size_t(count * element_bytes(type)));
  for (int64_t i = 0; i < count; ++i) {
    float v = dist(rng);
    if (type == CollectiveType::kF32) {
      std::memcpy(&in.bytes[size_t(i) * 4], &v, 4);
    } else if (type == CollectiveType::kBF16) {
      const uint16_t bits = gputest::f32_to_bf16_bits(v);
      v = gputest::bf16_bits_to_f32(bits);
      std::memcpy(&in.bytes[size_t(i) * 2], &bits, 2);
    } else {
      const __half h = __float2half_rn(v);
      v = __half2float(h);
      std::memcpy(&in.bytes[size_t(i) * 2], &h, 2);
    }
    in.values.push_back(v);
  }
  return in;
}

// The stored bytes of sum over ranks (fp32, rank order), rounded once to the type.
std::vector<uint8_t> expected_sum(const std::vector<Input>& inputs, CollectiveType type) {
  const size_t count = inputs[0].values.size();
  std::vector<uint8_t> out(count * size_t(element_bytes(type)));
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (const Input& in : inputs) sum += in.values[i];
    if (type == CollectiveType::kF32) {
      std::memcpy(&out[i * 4], &sum, 4);
    } else if (type == CollectiveType::kBF16) {
      const uint16_t bits = gputest::f32_to_bf16_bits(sum);
      std::memcpy(&out[i * 2], &bits, 2);
    } else {
      const __half h = __float2half_rn(sum);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

// Ranks on `devices`, each with its own stream, a kMaxBytes device buffer and pinned host staging
// (copies from pageable memory can block inside the driver while the other rank, on the same GPU,
// still has to launch its half of the exchange).
struct Ranks {
  explicit Ranks(std::vector<int> devices_in)
      : devices(std::move(devices_in)),
        peers(PeerAllReduce::make_group(devices, kMaxBytes)),
        threads(int(devices.size())),
        buffers(devices.size(), nullptr),
        host(devices.size(), nullptr),
        streams(devices.size(), nullptr) {
    REQUIRE(peers.size() == devices.size());
    threads.run([&](int r) {
      ROSE_CUDA_CHECK(cudaSetDevice(devices[size_t(r)]));
      ROSE_CUDA_CHECK(cudaMalloc(&buffers[size_t(r)], size_t(kMaxBytes)));
      ROSE_CUDA_CHECK(cudaMallocHost(&host[size_t(r)], size_t(kHostBytes)));
      ROSE_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[size_t(r)], cudaStreamNonBlocking));
    });
  }
  ~Ranks() {  // errors ignored: a destructor must not throw (a failed case has reported already)
    threads.run([&](int r) {
      cudaSetDevice(devices[size_t(r)]);
      cudaFree(buffers[size_t(r)]);
      cudaFreeHost(host[size_t(r)]);
      cudaStreamDestroy(streams[size_t(r)]);
    });
  }
  int size() const { return int(devices.size()); }

  // Uploads each rank's input, all-reduces `count` elements on every rank at once, and checks every
  // rank's result against the host's sum. Returns the number of ranks whose bytes differ.
  int check_once(int64_t count, CollectiveType type, std::mt19937& rng) {
    std::vector<Input> inputs;
    for (int r = 0; r < size(); ++r) inputs.push_back(random_input(count, type, rng));
    const std::vector<uint8_t> want = expected_sum(inputs, type);
    std::vector<std::vector<uint8_t>> got(size_t(size()), std::vector<uint8_t>(want.size()));
    threads.run([&](int r) {
      const size_t i = size_t(r);
      ROSE_CUDA_CHECK(cudaSetDevice(devices[i]));
      std::memcpy(host[i], inputs[i].bytes.data(), want.size());
      ROSE_CUDA_CHECK(
          cudaMemcpyAsync(buffers[i], host[i], want.size(), cudaMemcpyHostToDevice, streams[i]));
      peers[i]->all_reduce_sum(buffers[i], count, type, streams[i]);
      ROSE_CUDA_CHECK(
          cudaMemcpyAsync(host[i], buffers[i], want.size(), cudaMemcpyDeviceToHost, streams[i]));
      ROSE_CUDA_CHECK(cudaStreamSynchronize(streams[i]));
      std::memcpy(got[i].data(), host[i], want.size());
    });
    int wrong = 0;
    for (const std::vector<uint8_t>& rank_bytes : got) wrong += rank_bytes != want;
    return wrong;
  }

  std::vector<int> devices;
  std::vector<std::unique_ptr<PeerAllReduce>> peers;
  RankThreads threads;
  std::vector<void*> buffers;
  std::vector<void*> host;  // (kHostBytes,) pinned, per rank
  std::vector<cudaStream_t> streams;
};

// Every type, sizes from one 16-byte vector to the staging's limit, back to back.
void check_types_and_sizes(Ranks& ranks) {
  std::mt19937 rng(11);
  for (CollectiveType type : {CollectiveType::kBF16, CollectiveType::kF16, CollectiveType::kF32}) {
    const int64_t per_vector = 16 / element_bytes(type);
    const int64_t most = kMaxBytes / element_bytes(type);
    for (int64_t count :
         {per_vector, int64_t(4096), per_vector * 777, int64_t(2048) * 8 + 8, most, per_vector}) {
      CAPTURE(int(type));
      CAPTURE(count);
      CHECK(ranks.check_once(count, type, rng) == 0);
    }
  }
}

// Each rank captures [copy its input into the buffer; all-reduce; copy the result out] x 3 sizes
// in one graph and replays it; the inputs change between replays through the source buffers.
void check_graph_replays(Ranks& ranks) {
  const CollectiveType type = CollectiveType::kBF16;
  const std::vector<int64_t> counts = {4096, 8, 65536};
  const int n = ranks.size();
  std::vector<void*> sources(size_t(n), nullptr), results(size_t(n), nullptr);
  std::vector<cudaGraphExec_t> execs(size_t(n), nullptr);
  const size_t bytes = size_t(kMaxBytes);
  ranks.threads.run([&](int r) {
    const size_t i = size_t(r);
    ROSE_CUDA_CHECK(cudaSetDevice(ranks.devices[i]));
    ROSE_CUDA_CHECK(cudaMalloc(&sources[i], bytes * counts.size()));
    ROSE_CUDA_CHECK(cudaMalloc(&results[i], bytes * counts.size()));
    cudaStream_t s = ranks.streams[i];
    cudaGraph_t graph = nullptr;
    ROSE_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (size_t k = 0; k < counts.size(); ++k) {
      const size_t size = size_t(counts[k]) * 2;
      ROSE_CUDA_CHECK(cudaMemcpyAsync(ranks.buffers[i], static_cast<char*>(sources[i]) + k * bytes,
                                      size, cudaMemcpyDeviceToDevice, s));
      ranks.peers[i]->all_reduce_sum(ranks.buffers[i], counts[k], type, s);
      ROSE_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(results[i]) + k * bytes, ranks.buffers[i],
                                      size, cudaMemcpyDeviceToDevice, s));
    }
    ROSE_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    ROSE_CUDA_CHECK(cudaGraphInstantiate(&execs[i], graph, 0));
    ROSE_CUDA_CHECK(cudaGraphDestroy(graph));
  });
  std::mt19937 rng(5);
  for (int replay = 0; replay < 12; ++replay) {
    CAPTURE(replay);
    std::vector<std::vector<Input>> inputs(counts.size());  // [size][rank]
    for (size_t k = 0; k < counts.size(); ++k) {
      for (int r = 0; r < n; ++r) inputs[k].push_back(random_input(counts[k], type, rng));
    }
    std::vector<int> wrong(size_t(n), 0);
    ranks.threads.run([&](int r) {
      const size_t i = size_t(r);
      cudaStream_t s = ranks.streams[i];
      ROSE_CUDA_CHECK(cudaSetDevice(ranks.devices[i]));
      char* staging = static_cast<char*>(ranks.host[i]);
      for (size_t k = 0; k < counts.size(); ++k) {
        std::memcpy(staging + k * bytes, inputs[k][i].bytes.data(), inputs[k][i].bytes.size());
      }
      ROSE_CUDA_CHECK(
          cudaMemcpyAsync(sources[i], staging, bytes * counts.size(), cudaMemcpyHostToDevice, s));
      ROSE_CUDA_CHECK(cudaGraphLaunch(execs[i], s));
      ROSE_CUDA_CHECK(
          cudaMemcpyAsync(staging, results[i], bytes * counts.size(), cudaMemcpyDeviceToHost, s));
      ROSE_CUDA_CHECK(cudaStreamSynchronize(s));
      for (size_t k = 0; k < counts.size(); ++k) {
        const std::vector<uint8_t> got(staging + k * bytes,
                                       staging + k * bytes + inputs[k][i].bytes.size());
        wrong[i] += got != expected_sum(inputs[k], type);
      }
    });
    for (int w : wrong) CHECK(w == 0);
  }
  ranks.threads.run([&](int r) {
    const size_t i = size_t(r);
    ROSE_CUDA_CHECK(cudaSetDevice(ranks.devices[i]));
    ROSE_CUDA_CHECK(cudaGraphExecDestroy(execs[i]));
    ROSE_CUDA_CHECK(cudaFree(sources[i]));
    ROSE_CUDA_CHECK(cudaFree(results[i]));
  });
}

// One add-norm shape: rows of hidden, the dtype, the norm, whether the norm has a bias and the
// summed sub-layer output one (AddNormArgs::bias, delta_bias), and whether it gathers rows as the
// final norm does (rows rows - 1, rows - 3, ..., residual not written back).
struct AddNormCase {
  int rows = 1;
  int hidden = 0;
  DType dtype = DType::kBF16;
  NormKind kind = NormKind::kRmsNorm;
  bool biases = false;
  bool gathered = false;
};

// A gathered case's source rows: every other row from the last.
std::vector<int32_t> gathered_rows(int rows) {
  std::vector<int32_t> index;
  for (int r = rows - 1; r >= 0; r -= 2) index.push_back(r);
  return index;
}

// One way's buffers on a rank (gputest::DeviceArray: the output starts poisoned, so a row the
// kernel fails to write shows in the comparison).
struct AddNormWay {
  AddNormWay(const std::vector<uint16_t>& partial, const std::vector<float>& residual)
      : delta(partial), res(residual), out(partial.size()) {}
  gputest::DeviceArray<uint16_t> delta;  // (rows, hidden) this rank's partial in dtype
  gputest::DeviceArray<float> res;       // (rows, hidden) the residual stream, alike on every rank
  gputest::DeviceArray<uint16_t> out;    // (rows, hidden) normalized rows in dtype
};

// The (hidden, hidden) identity in dtype: the GEMV's x I^T gives x's bits back (each output one
// exact product, the other terms +0).
std::vector<uint16_t> identity_bits(int hidden, DType dtype) {
  std::vector<uint16_t> bits(size_t(hidden) * size_t(hidden), 0);
  const uint16_t one = dtype == DType::kBF16 ? 0x3F80 : 0x3C00;
  for (int i = 0; i < hidden; ++i) bits[size_t(i) * size_t(hidden) + size_t(i)] = one;
  return bits;
}

// A rank's buffers for one case, made and freed on the rank's device and thread.
struct AddNormBuffers {
  AddNormBuffers(const std::vector<uint16_t>& partial, const std::vector<float>& residual,
                 const std::vector<uint16_t>& params, const std::vector<int32_t>& rows,
                 const std::vector<uint16_t>& identity)
      : ways{AddNormWay(partial, residual), AddNormWay(partial, residual),
             AddNormWay(std::vector<uint16_t>(partial.size(), 0x7FFF), residual)},
        weights(params),
        row_index(rows),
        input(partial),
        identity(identity) {}
  // [0]: the two kernels' run, [1]: the fused one's, [2]: the fused one's after a GEMV wrote
  // delta (starting as NaNs) and pushed it into the peers (the pushed cases)
  AddNormWay ways[3];
  gputest::DeviceArray<uint16_t> weights;   // (3, hidden): norm weight, norm bias, delta bias
  gputest::DeviceArray<int32_t> row_index;  // a gathered case's source rows
  gputest::DeviceArray<uint16_t> input;     // (rows, hidden) the partial, the GEMV's x
  gputest::DeviceArray<uint16_t> identity;  // (hidden, hidden) a pushed case's GEMV weights
};

// The fused group's staging per rank: the production default (peer_all_reduce_max_bytes), whose
// low-latency parts take a pushed row of up to 4,096 elements.
constexpr int64_t kFusedMaxBytes = int64_t(512) << 10;

// Runs every case back to back on every rank, each way, the fused group sending up to
// low_latency_rows rows by its low-latency exchange (and, where that takes a GEMV's push, once
// more after a GEMV pushed the partial); returns the number of (case, rank) pairs whose residual or
// normalized rows differ from the two kernels'.
int check_add_norm_cases(const std::vector<int>& devices, const std::vector<AddNormCase>& cases,
                         int low_latency_rows) {
  const int n = int(devices.size());
  const auto sums = PeerAllReduce::make_group(devices, kMaxBytes);
  const auto fused = PeerAllReduce::make_group(devices, kFusedMaxBytes,
                                               PeerAllReduce::Use::kAddNorm, low_latency_rows);
  REQUIRE(int(sums.size()) == n);
  REQUIRE(int(fused.size()) == n);
  RankThreads threads(n);
  std::vector<cudaStream_t> streams(size_t(n), nullptr);
  threads.run([&](int r) {
    ROSE_CUDA_CHECK(cudaSetDevice(devices[size_t(r)]));
    ROSE_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[size_t(r)], cudaStreamNonBlocking));
  });
  std::mt19937 rng(23);
  int wrong = 0;
  for (const AddNormCase& c : cases) {
    CAPTURE(c.rows);
    CAPTURE(c.hidden);
    const size_t elements = size_t(c.rows) * size_t(c.hidden);
    std::vector<std::vector<uint16_t>> partials;
    for (int r = 0; r < n; ++r) {
      partials.push_back(gputest::random_operand(elements, 2.0f, c.dtype, rng).bits);
    }
    std::vector<float> residual = gputest::random_operand(elements, 3.0f, c.dtype, rng).f32;
    std::vector<uint16_t> params =
        gputest::random_operand(3 * size_t(c.hidden), 1.0f, c.dtype, rng).bits;
    // Rounds over the ranks, each ending with every rank's stream idle. No rank copies from or to
    // the host while another's kernels wait for it (such a copy can block in the driver; see
    // Ranks). And each round launches one kernel that waits for the other ranks: with CUDA's lazy
    // loading, a rank's first launch of a kernel can wait for its GPU to go idle while the rank's
    // own all-reduce, launched before it, spins until the other ranks launch theirs, which the
    // loading can hold back: with ranks sharing one GPU, a deadlock (seen on a one-GPU H200, where
    // no earlier case had loaded these kernels, as the two-GPU case does).
    std::vector<std::unique_ptr<AddNormBuffers>> buffers;
    buffers.resize(size_t(n));
    const std::vector<int32_t> rows = gathered_rows(c.rows);
    // The low-latency exchange keeps a thread's partial in registers: up to 16 elements of 256.
    const bool low_latency =
        (c.gathered ? int(rows.size()) : c.rows) <= low_latency_rows && c.hidden <= 4096;
    // Two ranks, a GEMV's rows, not gathered, of words that fit a block's part (8 bytes an
    // element).
    const bool push = n == 2 && low_latency && !c.gathered && c.rows <= kGemvMaxRows &&
                      gemv_supported(c.rows, c.hidden) &&
                      int64_t(c.hidden) * 8 * kPeerAllReduceBlocks <= 2 * kFusedMaxBytes;
    const std::vector<uint16_t> identity =
        push ? identity_bits(c.hidden, c.dtype) : std::vector<uint16_t>{};
    threads.run([&](int r) {
      const size_t i = size_t(r);
      ROSE_CUDA_CHECK(cudaSetDevice(devices[i]));
      buffers[i] = std::make_unique<AddNormBuffers>(partials[i], residual, params, rows, identity);
    });
    AddNormArgs norm;
    norm.num_rows = c.gathered ? int(rows.size()) : c.rows;
    norm.write_residual = !c.gathered;
    norm.hidden = c.hidden;
    norm.kind = c.kind;
    norm.dtype = c.dtype;
    // [0]: the two kernels' run, [1]: the fused one's, on rank r's buffers.
    const auto args = [&](int r, int k) {
      const AddNormBuffers& b = *buffers[size_t(r)];
      AddNormArgs a = norm;
      a.weight = b.weights.get();
      a.bias = c.biases ? b.weights.get() + c.hidden : nullptr;
      a.delta_bias = c.biases ? b.weights.get() + 2 * c.hidden : nullptr;
      a.residual = b.ways[k].res.get();
      a.delta = b.ways[k].delta.get();
      a.out = b.ways[k].out.get();
      if (c.gathered) a.row_index = b.row_index.get();
      return a;
    };
    const CollectiveType type =
        c.dtype == DType::kBF16 ? CollectiveType::kBF16 : CollectiveType::kF16;
    const auto round = [&](const std::function<void(int)>& launch) {
      threads.run([&](int r) {
        ROSE_CUDA_CHECK(cudaSetDevice(devices[size_t(r)]));
        launch(r);
        ROSE_CUDA_CHECK(cudaStreamSynchronize(streams[size_t(r)]));
      });
    };
    round([&](int r) {
      sums[size_t(r)]->all_reduce_sum(buffers[size_t(r)]->ways[0].delta.get(), int64_t(elements),
                                      type, streams[size_t(r)]);
    });
    round([&](int r) { launch_add_norm(args(r, 0), streams[size_t(r)]); });
    round([&](int r) {
      REQUIRE(fused[size_t(r)]->fuses_add_norm(args(r, 1)));
      REQUIRE(fused[size_t(r)]->is_low_latency(args(r, 1)) == low_latency);
      REQUIRE(fused[size_t(r)]->takes_push(args(r, 1)) == push);
      fused[size_t(r)]->all_reduce_add_norm(args(r, 1), false, streams[size_t(r)]);
    });
    if (push) {
      round([&](int r) {
        AddNormBuffers& b = *buffers[size_t(r)];
        GemvFusion fusion;
        fusion.push = fused[size_t(r)]->push_target();
        launch_gemv(b.input.get(), b.identity.get(), b.ways[2].delta.get(), c.rows, c.hidden,
                    c.hidden, false, c.dtype, streams[size_t(r)], fusion);
      });
      round([&](int r) {
        fused[size_t(r)]->all_reduce_add_norm(args(r, 2), true, streams[size_t(r)]);
      });
    }
    std::vector<int> rank_wrong(size_t(n), 0);
    threads.run([&](int r) {
      const size_t i = size_t(r);
      ROSE_CUDA_CHECK(cudaSetDevice(devices[i]));
      const AddNormWay* ways = buffers[i]->ways;
      const std::vector<float> res0 = ways[0].res.download();
      const auto same_as_two_kernels = [&](const AddNormWay& way) {
        const std::vector<float> res = way.res.download();
        return std::memcmp(res0.data(), res.data(), res0.size() * 4) == 0 &&
               ways[0].out.download() == way.out.download();
      };
      rank_wrong[i] = !same_as_two_kernels(ways[1]) || (push && !same_as_two_kernels(ways[2]));
      buffers[i].reset();
    });
    for (int w : rank_wrong) wrong += w;
  }
  threads.run([&](int r) {
    ROSE_CUDA_CHECK(cudaSetDevice(devices[size_t(r)]));
    ROSE_CUDA_CHECK(cudaStreamDestroy(streams[size_t(r)]));
  });
  return wrong;
}

// llama-8b's rows, SmolLM2's, rows past the 32 blocks (a block takes two), the staging's limit,
// the widest row, fp16 LayerNorm with both biases (gpt2's kind), and the final norm's gathered
// rows (one of one, 30 of 60, 3 of 5), back to back.
const std::vector<AddNormCase> kAddNormCases = {
    {1, 4096, DType::kBF16, NormKind::kRmsNorm, false},
    {3, 576, DType::kBF16, NormKind::kRmsNorm, true},
    {1, 4096, DType::kBF16, NormKind::kRmsNorm, false, true},
    {33, 2048, DType::kFP16, NormKind::kLayerNorm, true},
    {64, 2048, DType::kBF16, NormKind::kRmsNorm, false},
    {2, 8192, DType::kBF16, NormKind::kRmsNorm, false},
    {1, 4096, DType::kBF16, NormKind::kRmsNorm, false},
    {60, 2048, DType::kBF16, NormKind::kRmsNorm, false, true},
    {5, 768, DType::kFP16, NormKind::kLayerNorm, true, true},
    {2, 2048, DType::kFP16, NormKind::kRmsNorm, true},
};

constexpr int64_t kGatherBytes = int64_t(2) << 20;  // 8 rows of llama-3's vocab shard

// A column gather of `vocab` logits split as tensor parallel splits them (vocab_shard) over the
// ranks on `devices`, for each row count in turn (back to back: the epochs alternate the staging's
// slots); returns the number of (rows, rank) pairs whose logits differ from the host's placement.
int check_column_gathers(const std::vector<int>& devices, int vocab,
                         const std::vector<int>& row_counts) {
  const int n = int(devices.size());
  const auto group = PeerAllReduce::make_group(devices, kGatherBytes, PeerAllReduce::Use::kGather);
  REQUIRE(int(group.size()) == n);
  RankThreads threads(n);
  std::vector<cudaStream_t> streams(size_t(n), nullptr);
  threads.run([&](int r) {
    ROSE_CUDA_CHECK(cudaSetDevice(devices[size_t(r)]));
    ROSE_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[size_t(r)], cudaStreamNonBlocking));
  });
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  int wrong = 0;
  for (int rows : row_counts) {
    CAPTURE(rows);
    const int64_t stride = vocab_shard_stride(vocab, n);
    PeerColumnGather layout;
    layout.rows = rows;
    layout.chunk = (rows * stride + 3) / 4 * 4;
    layout.recv_stride = vocab;
    for (int r = 0; r < n; ++r) {
      const RowRun shard = vocab_shard(vocab, n, r);
      layout.begin[r] = int(shard.begin);
      layout.count[r] = int(shard.count);
    }
    REQUIRE(group[0]->gathers_columns(layout));
    // Rank r's chunk: its (rows, count) logits row-major, then padding; the expected rows.
    std::vector<std::vector<float>> sends(static_cast<size_t>(n));
    std::vector<float> expected(size_t(rows) * size_t(vocab));
    for (int r = 0; r < n; ++r) {
      sends[size_t(r)].resize(size_t(layout.chunk));
      for (float& v : sends[size_t(r)]) v = dist(rng);
      for (int row = 0; row < rows; ++row) {
        for (int col = 0; col < layout.count[r]; ++col) {
          expected[size_t(row) * size_t(vocab) + size_t(layout.begin[r] + col)] =
              sends[size_t(r)][size_t(row) * size_t(layout.count[r]) + size_t(col)];
        }
      }
    }
    // Three rounds, as in check_add_norm_cases: no rank copies while another's gather waits.
    std::vector<std::unique_ptr<gputest::DeviceArray<float>>> send(static_cast<size_t>(n));
    std::vector<std::unique_ptr<gputest::DeviceArray<float>>> recv(static_cast<size_t>(n));
    threads.run([&](int r) {
      const size_t i = size_t(r);
      ROSE_CUDA_CHECK(cudaSetDevice(devices[i]));
      send[i] = std::make_unique<gputest::DeviceArray<float>>(sends[i]);
      // Poisoned: a column left out shows.
      recv[i] = std::make_unique<gputest::DeviceArray<float>>(expected.size());
    });
    threads.run([&](int r) {
      const size_t i = size_t(r);
      ROSE_CUDA_CHECK(cudaSetDevice(devices[i]));
      group[i]->all_gather_columns(send[i]->get(), recv[i]->get(), layout, streams[i]);
      ROSE_CUDA_CHECK(cudaStreamSynchronize(streams[i]));
    });
    std::vector<int> rank_wrong(size_t(n), 0);
    threads.run([&](int r) {
      const size_t i = size_t(r);
      ROSE_CUDA_CHECK(cudaSetDevice(devices[i]));
      const std::vector<float> got = recv[i]->download();
      rank_wrong[i] = std::memcmp(got.data(), expected.data(), expected.size() * 4) != 0;
      send[i].reset();
      recv[i].reset();
    });
    for (int w : rank_wrong) wrong += w;
  }
  threads.run([&](int r) {
    ROSE_CUDA_CHECK(cudaSetDevice(devices[size_t(r)]));
    ROSE_CUDA_CHECK(cudaStreamDestroy(streams[size_t(r)]));
  });
  return wrong;
}

// An odd vocab (shards of unequal width, chunks not whole rows of vectors) and llama-3's.
const std::vector<int> kGatherRows = {1, 3, 8, 1, 2};

}  // namespace

TEST_CASE("the logits gather takes chunks of whole vectors that fit, and only its own groups") {
  REQUIRE(cuda_device_count() >= 1);
  const auto gather = PeerAllReduce::make_group({0, 0}, kGatherBytes, PeerAllReduce::Use::kGather);
  const auto sums = PeerAllReduce::make_group({0, 0}, kGatherBytes);
  REQUIRE(gather.size() == 2);
  PeerColumnGather layout;
  layout.rows = 2;
  layout.chunk = 2 * 100;
  layout.recv_stride = 199;
  layout.begin[1] = 100;
  layout.count[0] = 100;
  layout.count[1] = 99;
  CHECK(gather[0]->gathers_columns(layout));
  CHECK_FALSE(sums[0]->gathers_columns(layout));
  layout.chunk = 202;  // not whole vectors
  CHECK_FALSE(gather[0]->gathers_columns(layout));
  layout.chunk = 196;  // rank 0's rows do not fit its chunk
  CHECK_FALSE(gather[0]->gathers_columns(layout));
  layout.chunk = 200;
  layout.recv_stride = 198;  // rank 1's columns past the row
  CHECK_FALSE(gather[0]->gathers_columns(layout));
  layout.recv_stride = 199;
  layout.chunk = kGatherBytes / 4 + 4;  // past the staging
  CHECK_FALSE(gather[0]->gathers_columns(layout));
}

TEST_CASE("the logits gather over 2 GPUs: every rank's columns in place" *
          doctest::skip(cuda_device_count() < 2)) {
  for (int vocab : {50257, 128256}) {
    CAPTURE(vocab);
    CHECK(check_column_gathers({0, 1}, vocab, kGatherRows) == 0);
  }
}

TEST_CASE("the logits gather, 2 and 4 ranks on one GPU: every rank's columns in place") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    CHECK(check_column_gathers(std::vector<int>(size_t(n), 0), 50257, kGatherRows) == 0);
  }
}

TEST_CASE("the fused all-reduce add-norm takes what fits its regions, and only its own groups") {
  REQUIRE(cuda_device_count() >= 1);
  const auto fused = PeerAllReduce::make_group({0, 0}, kMaxBytes, PeerAllReduce::Use::kAddNorm);
  const auto sums = PeerAllReduce::make_group({0, 0}, kMaxBytes);
  REQUIRE(fused.size() == 2);
  int dummy = 0;
  AddNormArgs norm;
  norm.delta = &dummy;  // never dereferenced: only the shapes are asked
  norm.hidden = 2048;
  norm.num_rows = 64;  // 256 KiB of bf16: the limit
  CHECK(fused[0]->fuses_add_norm(norm));
  CHECK_FALSE(sums[0]->fuses_add_norm(norm));  // a kSum group's epochs serve all_reduce_sum
  CHECK_FALSE(fused[0]->handles(8, CollectiveType::kBF16));
  norm.num_rows = 65;
  CHECK_FALSE(fused[0]->fuses_add_norm(norm));
  norm.num_rows = 1;
  norm.hidden = 100;  // 200 bytes: not whole vectors
  CHECK_FALSE(fused[0]->fuses_add_norm(norm));
  norm.hidden = 2 * kAddNormMaxHidden;
  CHECK_FALSE(fused[0]->fuses_add_norm(norm));
  norm.hidden = 2048;
  int32_t rows[1] = {0};
  norm.row_index = rows;  // gathered rows: only where the residual is not written back
  CHECK_FALSE(fused[0]->fuses_add_norm(norm));
  norm.write_residual = false;  // the final norm
  CHECK(fused[0]->fuses_add_norm(norm));
  norm.row_index = nullptr;
  norm.write_residual = true;
  // The low-latency exchange: up to 32 rows (one a block) of at most 4,096 elements.
  norm.num_rows = 32;
  CHECK(fused[0]->is_low_latency(norm));
  norm.num_rows = 33;
  CHECK_FALSE(fused[0]->is_low_latency(norm));
  norm.num_rows = 1;
  norm.hidden = 8192;
  CHECK(fused[0]->fuses_add_norm(norm));
  CHECK_FALSE(fused[0]->is_low_latency(norm));
  norm.hidden = 2048;
  const auto flags_only =
      PeerAllReduce::make_group({0, 0}, kMaxBytes, PeerAllReduce::Use::kAddNorm, 0);
  CHECK(flags_only[0]->fuses_add_norm(norm));
  CHECK_FALSE(flags_only[0]->is_low_latency(norm));
  // A GEMV's push: 8 bytes an element in a block's part of 2 * 256 KiB / 32.
  CHECK(fused[0]->takes_push(norm));
  CHECK_FALSE(flags_only[0]->takes_push(norm));
  CHECK(fused[0]->push_target().size == 2);
  CHECK(flags_only[0]->push_target().size == 0);
  CHECK(sums[0]->push_target().size == 0);
  norm.hidden = 4096;
  CHECK(fused[0]->is_low_latency(norm));
  CHECK_FALSE(fused[0]->takes_push(norm));
  norm.hidden = 2048;
  norm.row_index = rows;
  norm.write_residual = false;
  CHECK(fused[0]->is_low_latency(norm));
  CHECK_FALSE(fused[0]->takes_push(norm));  // gathered rows
  norm.row_index = nullptr;
  norm.write_residual = true;
  norm.delta = nullptr;
  CHECK_FALSE(fused[0]->fuses_add_norm(norm));
  CHECK_FALSE(fused[0]->is_low_latency(norm));
}

TEST_CASE("the fused all-reduce add-norm over 2 GPUs: the two kernels' bits" *
          doctest::skip(cuda_device_count() < 2)) {
  for (int low_latency_rows : {0, kPeerAllReduceBlocks}) {
    CAPTURE(low_latency_rows);
    CHECK(check_add_norm_cases({0, 1}, kAddNormCases, low_latency_rows) == 0);
  }
}

TEST_CASE("the fused all-reduce add-norm, 2 and 4 ranks on one GPU: the two kernels' bits") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    for (int low_latency_rows : {0, kPeerAllReduceBlocks}) {
      CAPTURE(low_latency_rows);
      CHECK(check_add_norm_cases(std::vector<int>(size_t(n), 0), kAddNormCases, low_latency_rows) ==
            0);
    }
  }
}

TEST_CASE("peer all-reduce takes whole 16-byte vectors up to its staging, and only groups of 2+") {
  REQUIRE(cuda_device_count() >= 1);
  const auto peers = PeerAllReduce::make_group({0, 0}, kMaxBytes);
  REQUIRE(peers.size() == 2);
  CHECK(peers[0]->handles(8, CollectiveType::kBF16));
  CHECK(peers[0]->handles(4, CollectiveType::kF32));
  CHECK_FALSE(peers[0]->handles(4, CollectiveType::kBF16));    // 8 bytes: half a vector
  CHECK_FALSE(peers[0]->handles(4100, CollectiveType::kF16));  // not whole vectors
  CHECK(peers[0]->handles(kMaxBytes / 2, CollectiveType::kBF16));
  CHECK_FALSE(peers[0]->handles(kMaxBytes / 2 + 8, CollectiveType::kBF16));
  CHECK_FALSE(peers[0]->handles(0, CollectiveType::kBF16));
  CHECK(PeerAllReduce::make_group({0}, kMaxBytes).empty());
}

// First: a hang on one GPU (below) would trap and end the process.
TEST_CASE("peer all-reduce over 2 GPUs: the host's rank-order sum, bit for bit" *
          doctest::skip(cuda_device_count() < 2)) {
  Ranks ranks({0, 1});
  check_types_and_sizes(ranks);
  check_graph_replays(ranks);
}

TEST_CASE("peer all-reduce, 2 and 4 ranks on one GPU: the host's rank-order sum, bit for bit") {
  for (int n : {2, 4}) {
    CAPTURE(n);
    Ranks ranks(std::vector<int>(size_t(n), 0));
    check_types_and_sizes(ranks);
    check_graph_replays(ranks);
  }
}
