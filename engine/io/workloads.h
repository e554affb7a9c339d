#pragma once
// Synthetic request sets and arrival processes for `roseinfer bench` (reference/benchmarks.md).
// Everything is drawn from std::mt19937_64 seeded with --seed (default 0) through roseinfer's own
// integer, real and gamma draws (the standard library's distributions differ between
// implementations), so a seed names the same workload on every machine.
//
// Workloads (token ids uniform in [0, min(vocab, 10000)); every request ignores EOS so lengths are
// exact):
//   random          --num-prompts requests; input length uniform in [L(1-r), L(1+r)] for
//                   L = --random-input-len, r = --random-range-ratio, output likewise from
//                   --random-output-len; --random-prefix-len tokens of one shared random prefix are
//                   prepended to every prompt (vLLM's random dataset).
//   shared-prefix   --num-prompts requests of --random-input-len tokens in --num-prefix-groups
//   groups
//                   (request i joins group i % groups); the first --random-prefix-len tokens
//                   (default 60% of the input) are shared within a group; --random-output-len
//                   output tokens.
//   sharegpt        --dataset-path: a ShareGPT JSON array of {"conversations": [{"from",
//   "value"}]}:
//                   the first human turn is the prompt, the reply's token count the output length
//                   (capped at --random-output-len when it is given, else 1024); entries are
//                   shuffled with the seed, and those with fewer than 4 prompt tokens, no reply or
//                   more than max_model_len tokens in all are left out.
//   seed000         64 requests sharing one 856-token prompt, 16 output tokens each.
//   nano256         256 requests, input and output lengths uniform in [100, 1024].
//   serve           500 requests of 550 tokens whose first 330 are shared, 150 output tokens.
//   grid:B:PP:TG    B requests of PP random tokens and TG output tokens.
//   prefix-groups:G:P:L[:Q[:ALPHA]]
//                   routing (reference/routing.md W2/W4): G groups x P prompts, each an L-token
//                   group prefix then Q (128) tokens of its own, shuffled; L = xK sizes the G
//                   prefixes to K x one replica's KV capacity (replica_kv_tokens); ALPHA > 0 draws
//                   each prompt's group from Zipf(ALPHA) instead; --random-output-len (128) output.
//   chat:C:T[:U[:A[:GAP]]]
//                   multi-turn replay (W5): C conversations x T turns; turn k = turn k-1's prompt +
//                   an A-token (64) stand-in reply + U (128) new tokens, A output tokens; a
//                   conversation starts uniformly in [0, GAP) (2 s), its turns GAP apart, and every
//                   request carries its arrival_time.
// --num-prompts, when given, overrides the request count of the named workloads too.
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/io/prompts.h"

namespace rose {

class Tokenizer;

struct WorkloadOptions {
  std::string name = "random";  // one of the workloads above
  std::string dataset_path;     // sharegpt
  std::optional<int> num_prompts;
  int random_input_len = 1024;
  std::optional<int> random_output_len;  // random and shared-prefix: 128 when not given
  double random_range_ratio = 0.0;
  std::optional<int> random_prefix_len;
  int num_prefix_groups = 1;
  uint64_t seed = 0;
  int vocab_size = 0;     // the model's; token ids stay below min(vocab_size, 10000)
  int max_model_len = 0;  // 0: no limit; else requests must fit (prompt + output <= this)
  int64_t replica_kv_tokens =
      0;  // one replica's KV pool in tokens, for prefix-groups' xK; 0: unknown
};

// Throws rose::Error for an unknown name, a malformed grid spec, bad lengths, or a bad ShareGPT
// file. `tokenizer` is needed for sharegpt only.
std::vector<RequestSpec> make_workload(const WorkloadOptions& options, const Tokenizer* tokenizer);

// Throws rose::Error (the message make_workload would give) when `name` is not a workload or a
// malformed grid spec; for flag validation before anything is loaded.
void check_workload_name(const std::string& name);

// Online arrivals: request i arrives at the sum of i intervals, each drawn from a gamma
// distribution with shape = burstiness and mean 1/rate (burstiness 1 is a Poisson process; below 1
// is burstier, above 1 more regular), as vLLM's bench does. rate = inf: everything arrives at t=0.
// The draws come from their own generator (seed ^ 0xA22171A15EED), so the rate never changes
// the tokens.
std::vector<double> make_arrival_times(int num_requests, double request_rate, double burstiness,
                                       uint64_t seed);

// Deterministic draws behind the workloads (exposed for tests).
class WorkloadRng {
 public:
  explicit WorkloadRng(uint64_t seed);
  uint64_t next();
  int64_t uniform_int(int64_t lo, int64_t hi);  // inclusive, unbiased (rejection sampling)
  double uniform01();                           // [0, 1) with 53 bits
  double standard_normal();                     // Box-Muller
  double gamma(double shape);                   // Marsaglia-Tsang, scale 1

 private:
  std::mt19937_64 engine_;
  std::optional<double> spare_normal_;
};

}  // namespace rose
