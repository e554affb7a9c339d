#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>

#include "kernels/common/error.h"

namespace rose::cpu {

// ---------------------------------------------------------------------------------------------
// Thread pool

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  num_threads = std::max(num_threads, 1);
  range_begin_.assign(num_threads + 1, 0);
  workers_.reserve(num_threads - 1);
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* task = nullptr;
    int64_t begin = 0, end = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      task = task_;
      begin = range_begin_[index];
      end = range_begin_[index + 1];
    }
    if (begin < end) (*task)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t count, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (count <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = (count + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), units));
  if (threads <= 1) {
    fn(0, count);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Ranges of whole grains, the first ones one grain larger when they do not divide evenly.
    const int nt = num_threads();
    int64_t unit = 0;
    for (int i = 0; i <= nt; ++i) {
      range_begin_[i] = std::min(unit * grain, count);
      if (i < threads) unit += units / threads + (i < units % threads ? 1 : 0);
    }
    task_ = &fn;
    pending_ = nt - 1;
    ++generation_;
  }
  wake_.notify_all();
  fn(range_begin_[0], range_begin_[1]);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  task_ = nullptr;
}

void parallel_for(ThreadPool* pool, int64_t count, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (pool != nullptr) {
    pool->parallel_for(count, grain, fn);
  } else if (count > 0) {
    fn(0, count);
  }
}

// ---------------------------------------------------------------------------------------------
// Embedding and norms

void embedding(const int32_t* token_ids, const int32_t* positions, const float* tok_emb,
               const float* pos_emb, int n, int hidden, float* out) {
  for (int i = 0; i < n; ++i) {
    const float* tok = tok_emb + int64_t(token_ids[i]) * hidden;
    float* row = out + int64_t(i) * hidden;
    if (pos_emb != nullptr) {
      const float* pos = pos_emb + int64_t(positions[i]) * hidden;
      for (int j = 0; j < hidden; ++j) row[j] = tok[j] + pos[j];
    } else {
      std::memcpy(row, tok, sizeof(float) * hidden);
    }
  }
}

namespace {

// residual += x for one row; returns the row.
float* add_residual_row(float* residual, const float* x, int i, int hidden) {
  float* row = residual + int64_t(i) * hidden;
  if (x != nullptr) {
    const float* xr = x + int64_t(i) * hidden;
    for (int j = 0; j < hidden; ++j) row[j] += xr[j];
  }
  return row;
}

}  // namespace

void add_layernorm(float* residual, const float* x, const float* weight, const float* bias,
                   float eps, int n, int hidden, float* out) {
  for (int i = 0; i < n; ++i) {
    const float* row = add_residual_row(residual, x, i, hidden);
    double sum = 0.0;
    for (int j = 0; j < hidden; ++j) sum += row[j];
    const double mean = sum / hidden;
    double sq = 0.0;
    for (int j = 0; j < hidden; ++j) sq += (row[j] - mean) * (row[j] - mean);
    const double inv_std = 1.0 / std::sqrt(sq / hidden + eps);
    float* o = out + int64_t(i) * hidden;
    for (int j = 0; j < hidden; ++j) {
      o[j] = static_cast<float>((row[j] - mean) * inv_std) * weight[j] + bias[j];
    }
  }
}

void add_rmsnorm(float* residual, const float* x, const float* weight, float eps, int n, int hidden,
                 float* out) {
  for (int i = 0; i < n; ++i) {
    const float* row = add_residual_row(residual, x, i, hidden);
    double sq = 0.0;
    for (int j = 0; j < hidden; ++j) sq += double(row[j]) * row[j];
    const double inv_rms = 1.0 / std::sqrt(sq / hidden + eps);
    float* o = out + int64_t(i) * hidden;
    for (int j = 0; j < hidden; ++j) o[j] = weight[j] * static_cast<float>(row[j] * inv_rms);
  }
}

// ---------------------------------------------------------------------------------------------
// Linear

namespace {

constexpr int kLanes = 8;        // independent partial sums per dot product (vectorizable)
constexpr int kRowBlock = 4;     // weight rows sharing one pass over an x row
constexpr int kTokenBlock = 32;  // x rows per pass over a weight block (keeps it in cache)

// y[r] = dot(x, w[r]) for R weight rows. The reduction order per output is fixed: lane j sums
// elements j, j+8, j+16, ...; the tail is added to lane 0..; lanes are summed 0..7. It does not
// depend on R, so the blocked and the remainder paths agree bit for bit.
template <int R>
inline void dot_rows(const float* x, const float* const* w, int in, float* y) {
  float acc[R][kLanes] = {};
  const int vec_end = in - in % kLanes;
  for (int k = 0; k < vec_end; k += kLanes) {
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < kLanes; ++j) acc[r][j] += x[k + j] * w[r][k + j];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int k = vec_end; k < in; ++k) acc[r][k - vec_end] += x[k] * w[r][k];
    float sum = 0.0f;
    for (int j = 0; j < kLanes; ++j) sum += acc[r][j];
    y[r] = sum;
  }
}

void linear_range(const float* x, const float* weight, const float* bias, int n, int in, int out,
                  float* y, int64_t row_begin, int64_t row_end) {
  for (int t0 = 0; t0 < n; t0 += kTokenBlock) {
    const int t1 = std::min(n, t0 + kTokenBlock);
    int64_t o = row_begin;
    for (; o + kRowBlock <= row_end; o += kRowBlock) {
      const float* w[kRowBlock];
      for (int r = 0; r < kRowBlock; ++r) w[r] = weight + (o + r) * in;
      for (int t = t0; t < t1; ++t) {
        float result[kRowBlock];
        dot_rows<kRowBlock>(x + int64_t(t) * in, w, in, result);
        float* yr = y + int64_t(t) * out + o;
        for (int r = 0; r < kRowBlock; ++r) yr[r] = result[r] + (bias ? bias[o + r] : 0.0f);
      }
    }
    for (; o < row_end; ++o) {
      const float* w[1] = {weight + o * in};
      for (int t = t0; t < t1; ++t) {
        float result[1];
        dot_rows<1>(x + int64_t(t) * in, w, in, result);
        y[int64_t(t) * out + o] = result[0] + (bias ? bias[o] : 0.0f);
      }
    }
  }
}

}  // namespace

void linear(const float* x, const float* weight, const float* bias, int n, int in, int out,
            float* y, ThreadPool* pool) {
  const int64_t flops = int64_t(n) * in * out;
  // Below ~0.25 MFLOP a thread hand-off costs more than it saves.
  if (pool == nullptr || flops < (int64_t(1) << 18)) {
    linear_range(x, weight, bias, n, in, out, y, 0, out);
    return;
  }
  pool->parallel_for(out, 4 * kRowBlock, [&](int64_t begin, int64_t end) {
    linear_range(x, weight, bias, n, in, out, y, begin, end);
  });
}

// ---------------------------------------------------------------------------------------------
// RoPE and the KV write

namespace {

// Rotate-half RoPE on one head: x[j] pairs with x[j + half].
void rotate_head(float* x, const float* cos_v, const float* sin_v, int half) {
  for (int j = 0; j < half; ++j) {
    const float a = x[j];
    const float b = x[j + half];
    x[j] = a * cos_v[j] - b * sin_v[j];
    x[j + half] = b * cos_v[j] + a * sin_v[j];
  }
}

}  // namespace

void rope_and_write_kv(float* qkv, const int32_t* positions, const int32_t* slot_mapping,
                       const float* inv_freq, int n, int num_heads, int num_kv_heads, int head_dim,
                       int block_size, float* k_cache, float* v_cache) {
  const int half = head_dim / 2;
  const int64_t q_dim = int64_t(num_heads) * head_dim;
  const int64_t kv_dim = int64_t(num_kv_heads) * head_dim;
  const int64_t row_stride = q_dim + 2 * kv_dim;
  ROSE_ASSERT(half <= 512);
  float cos_v[512];
  float sin_v[512];
  for (int i = 0; i < n; ++i) {
    float* q = qkv + i * row_stride;
    float* k = q + q_dim;
    const float* v = k + kv_dim;
    if (inv_freq != nullptr) {
      // fp32 angle as transformers forms it (position * inv_freq), then cos/sin of that angle.
      for (int j = 0; j < half; ++j) {
        const float angle = static_cast<float>(positions[i]) * inv_freq[j];
        cos_v[j] = std::cos(angle);
        sin_v[j] = std::sin(angle);
      }
      for (int h = 0; h < num_heads; ++h) rotate_head(q + h * head_dim, cos_v, sin_v, half);
      for (int h = 0; h < num_kv_heads; ++h) rotate_head(k + h * head_dim, cos_v, sin_v, half);
    }
    const int32_t slot = slot_mapping[i];
    if (slot < 0) continue;
    const int64_t block = slot / block_size;
    const int64_t offset = slot % block_size;
    const int64_t base = (block * block_size + offset) * kv_dim;
    std::memcpy(k_cache + base, k, sizeof(float) * kv_dim);
    std::memcpy(v_cache + base, v, sizeof(float) * kv_dim);
  }
}

// ---------------------------------------------------------------------------------------------
// Attention

void paged_attention(const float* q, int64_t q_row_stride, const float* k_cache,
                     const float* v_cache, const int32_t* query_start, const int32_t* context_lens,
                     const int32_t* block_tables, int block_table_stride, int num_seqs,
                     int num_heads, int num_kv_heads, int head_dim, int block_size, float scale,
                     float* out, ThreadPool* pool) {
  ROSE_ASSERT(head_dim <= 1024);
  const int num_tokens = query_start[num_seqs];
  const int group = num_heads / num_kv_heads;
  const int64_t kv_dim = int64_t(num_kv_heads) * head_dim;
  const int64_t out_stride = int64_t(num_heads) * head_dim;
  // One work unit per (token, query head).
  parallel_for(pool, int64_t(num_tokens) * num_heads, 8, [&](int64_t begin, int64_t end) {
    float acc[1024];
    for (int64_t unit = begin; unit < end; ++unit) {
      const int token = static_cast<int>(unit / num_heads);
      const int head = static_cast<int>(unit % num_heads);
      const int seq = static_cast<int>(
          std::upper_bound(query_start, query_start + num_seqs + 1, token) - query_start - 1);
      const int n_query = query_start[seq + 1] - query_start[seq];
      const int position = context_lens[seq] - n_query + (token - query_start[seq]);
      const int32_t* table = block_tables + int64_t(seq) * block_table_stride;
      const float* qh = q + token * q_row_stride + int64_t(head) * head_dim;
      const int64_t kv_offset = int64_t(head / group) * head_dim;

      float running_max = -std::numeric_limits<float>::infinity();
      float denom = 0.0f;
      std::fill(acc, acc + head_dim, 0.0f);
      for (int p = 0; p <= position; ++p) {
        const int64_t slot = int64_t(table[p / block_size]) * block_size + p % block_size;
        const float* k = k_cache + slot * kv_dim + kv_offset;
        const float* v = v_cache + slot * kv_dim + kv_offset;
        float score = 0.0f;
        for (int d = 0; d < head_dim; ++d) score += qh[d] * k[d];
        score *= scale;
        if (score > running_max) {
          // New maximum: rescale what was accumulated against the old one.
          const float correction = std::exp(running_max - score);
          denom *= correction;
          for (int d = 0; d < head_dim; ++d) acc[d] *= correction;
          running_max = score;
        }
        const float weight = std::exp(score - running_max);
        denom += weight;
        for (int d = 0; d < head_dim; ++d) acc[d] += weight * v[d];
      }
      float* o = out + token * out_stride + int64_t(head) * head_dim;
      const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
      for (int d = 0; d < head_dim; ++d) o[d] = acc[d] * inv;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Activations

void gelu_tanh(float* x, int64_t count) {
  const float k = std::sqrt(2.0f / std::numbers::pi_v<float>);
  for (int64_t i = 0; i < count; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
  }
}

void silu_and_mul(const float* gate_up, int n, int inner, float* out) {
  for (int i = 0; i < n; ++i) {
    const float* gate = gate_up + int64_t(i) * 2 * inner;
    const float* up = gate + inner;
    float* o = out + int64_t(i) * inner;
    for (int j = 0; j < inner; ++j) {
      const float g = gate[j];
      o[j] = g / (1.0f + std::exp(-g)) * up[j];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sampling

int32_t argmax(const float* logits, int vocab) {
  int32_t best = 0;
  for (int i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;  // strict: the lowest id wins ties
  }
  return best;
}

int32_t sample_token(const float* logits, int vocab, const SamplingParams& params,
                     uint64_t token_index, float* scratch) {
  if (params.temperature <= 0.0f) return argmax(logits, vocab);
  float* prob = scratch;            // (vocab,) scaled logits, then p; -1 marks a dropped token
  float* sorted = scratch + vocab;  // (vocab,)
  for (int i = 0; i < vocab; ++i) prob[i] = logits[i] / params.temperature;

  float kth = -std::numeric_limits<float>::infinity();
  if (params.top_k > 0 && params.top_k < vocab) {
    std::copy(prob, prob + vocab, sorted);
    std::nth_element(sorted, sorted + (params.top_k - 1), sorted + vocab, std::greater<float>());
    kth = sorted[params.top_k - 1];
  }
  float max_kept = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < vocab; ++i) {
    if (prob[i] >= kth) max_kept = std::max(max_kept, prob[i]);
  }
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) {
    if (prob[i] >= kth) {
      prob[i] = std::exp(prob[i] - max_kept);
      sum += prob[i];
    } else {
      prob[i] = -1.0f;
    }
  }
  int kept = 0;
  for (int i = 0; i < vocab; ++i) {
    if (prob[i] >= 0.0f) {
      prob[i] = static_cast<float>(prob[i] / sum);
      sorted[kept++] = prob[i];
    }
  }
  if (kept == 0) return argmax(logits, vocab);  // only NaN logits: nothing to sample from

  float threshold = 0.0f;
  if (params.top_p < 1.0f) {
    // The largest t whose set {p >= t} reaches top_p is one of the p values: walk them descending.
    std::sort(sorted, sorted + kept, std::greater<float>());
    double cumulative = 0.0;
    threshold = sorted[kept - 1];
    for (int j = 0; j < kept; ++j) {
      cumulative += sorted[j];
      if (cumulative >= params.top_p) {
        threshold = sorted[j];
        break;
      }
    }
  }
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) {
    if (prob[i] >= 0.0f && prob[i] >= threshold) total += prob[i];
  }
  const double target = double(sampling_uniform(params.seed, token_index)) * total;
  double running = 0.0;
  int32_t last = -1;
  for (int i = 0; i < vocab; ++i) {
    if (prob[i] < 0.0f || prob[i] < threshold) continue;
    running += prob[i];
    last = i;
    if (running > target) return i;
  }
  return last;
}

}  // namespace rose::cpu
