// The reference ops against hand-computed values and naive double-precision loops written here
// independently of kernels/cpu/ops.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/model/rope.h"
#include "kernels/cpu/ops.h"

namespace {

std::vector<float> random_vector(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// Checks every element: |got - want| <= atol + rtol * |want|.
void check_close(const float* got, const std::vector<double>& want, double atol, double rtol) {
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::isfinite(got[i]));
    CHECK(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]));
  }
}

}  // namespace

TEST_CASE("embedding: token rows, plus learned positions when given") {
  const int vocab = 5, hidden = 3, positions_max = 4;
  std::vector<float> tok(vocab * hidden), pos(positions_max * hidden);
  for (int i = 0; i < vocab * hidden; ++i) tok[i] = float(i);
  for (int i = 0; i < positions_max * hidden; ++i) pos[i] = 100.0f * float(i);
  const int32_t ids[2] = {4, 1};
  const int32_t positions[2] = {2, 0};
  std::vector<float> out(2 * hidden, -7.0f);

  rose::cpu::embedding(ids, positions, tok.data(), nullptr, 2, hidden, out.data());
  CHECK(out == std::vector<float>{12, 13, 14, 3, 4, 5});

  rose::cpu::embedding(ids, positions, tok.data(), pos.data(), 2, hidden, out.data());
  CHECK(out == std::vector<float>{12 + 600, 13 + 700, 14 + 800, 3, 4 + 100, 5 + 200});
}

TEST_CASE("add_layernorm and add_rmsnorm add the residual, then normalise") {
  const int n = 3, hidden = 37;
  const float eps = 1e-5f;
  auto residual0 = random_vector(n * hidden, 1, 2.0f);
  auto x = random_vector(n * hidden, 2);
  auto weight = random_vector(hidden, 3);
  auto bias = random_vector(hidden, 4);

  // Naive double references.
  std::vector<double> sum(n * hidden), layer(n * hidden), rms(n * hidden);
  for (int i = 0; i < n; ++i) {
    double mean = 0, sq = 0, ms = 0;
    for (int j = 0; j < hidden; ++j) {
      sum[i * hidden + j] = double(residual0[i * hidden + j]) + x[i * hidden + j];
      mean += sum[i * hidden + j] / hidden;
    }
    for (int j = 0; j < hidden; ++j) {
      const double d = sum[i * hidden + j] - mean;
      sq += d * d / hidden;
      ms += sum[i * hidden + j] * sum[i * hidden + j] / hidden;
    }
    for (int j = 0; j < hidden; ++j) {
      const double s = sum[i * hidden + j];
      layer[i * hidden + j] = (s - mean) / std::sqrt(sq + eps) * weight[j] + bias[j];
      rms[i * hidden + j] = s / std::sqrt(ms + eps) * weight[j];
    }
  }

  std::vector<float> residual = residual0, out(n * hidden, NAN);
  rose::cpu::add_layernorm(residual.data(), x.data(), weight.data(), bias.data(), eps, n, hidden,
                           out.data());
  check_close(residual.data(), sum, 1e-6, 1e-6);
  check_close(out.data(), layer, 1e-5, 1e-5);

  residual = residual0;
  std::fill(out.begin(), out.end(), NAN);
  rose::cpu::add_rmsnorm(residual.data(), x.data(), weight.data(), eps, n, hidden, out.data());
  check_close(residual.data(), sum, 1e-6, 1e-6);
  check_close(out.data(), rms, 1e-5, 1e-5);

  SUBCASE("x == nullptr leaves the residual alone") {
    residual = residual0;
    rose::cpu::add_rmsnorm(residual.data(), nullptr, weight.data(), eps, n, hidden, out.data());
    CHECK(residual == residual0);
    double ms = 0;
    for (int j = 0; j < hidden; ++j) ms += double(residual0[j]) * residual0[j] / hidden;
    CHECK(out[5] == doctest::Approx(residual0[5] / std::sqrt(ms + eps) * weight[5]).epsilon(1e-5));
  }
}

TEST_CASE("linear matches a naive double loop for awkward shapes, threaded or not") {
  rose::cpu::ThreadPool pool(3);
  struct Shape {
    int n, in, out;
  };
  for (Shape s : {Shape{1, 5, 3}, Shape{7, 64, 37}, Shape{33, 129, 70}, Shape{5, 256, 515}}) {
    CAPTURE(s.n);
    CAPTURE(s.in);
    CAPTURE(s.out);
    auto x = random_vector(size_t(s.n) * s.in, 10 + s.n);
    auto w = random_vector(size_t(s.out) * s.in, 20 + s.out);
    auto b = random_vector(s.out, 30);
    std::vector<double> want(size_t(s.n) * s.out);
    for (int i = 0; i < s.n; ++i) {
      for (int o = 0; o < s.out; ++o) {
        double acc = b[o];
        for (int k = 0; k < s.in; ++k) acc += double(x[i * s.in + k]) * w[size_t(o) * s.in + k];
        want[size_t(i) * s.out + o] = acc;
      }
    }
    const double atol = 1e-5 * std::sqrt(double(s.in));
    std::vector<float> y(want.size(), NAN);
    rose::cpu::linear(x.data(), w.data(), b.data(), s.n, s.in, s.out, y.data(), nullptr);
    check_close(y.data(), want, atol, 1e-5);

    std::vector<float> y_pool(want.size(), NAN);
    rose::cpu::linear(x.data(), w.data(), b.data(), s.n, s.in, s.out, y_pool.data(), &pool);
    CHECK(y_pool == y);  // the reduction order does not depend on the threads

    // Without bias, one row alone gives the same bits as inside the batch.
    std::vector<float> y_batch(want.size()), y_row(s.out);
    rose::cpu::linear(x.data(), w.data(), nullptr, s.n, s.in, s.out, y_batch.data(), &pool);
    const int row = s.n - 1;
    rose::cpu::linear(x.data() + size_t(row) * s.in, w.data(), nullptr, 1, s.in, s.out,
                      y_row.data(), nullptr);
    CHECK(std::equal(y_row.begin(), y_row.end(), y_batch.begin() + size_t(row) * s.out));
  }
}

TEST_CASE("thread pool covers every index exactly once in grain-aligned ranges") {
  rose::cpu::ThreadPool pool(4);
  for (int64_t count : {1, 5, 16, 17, 1000}) {
    std::vector<int> hits(count, 0);
    bool aligned = true;
    pool.parallel_for(count, 4, [&](int64_t begin, int64_t end) {
      if (begin % 4 != 0) aligned = false;
      for (int64_t i = begin; i < end; ++i) ++hits[i];
    });
    CHECK(aligned);
    CHECK(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
  }
}

TEST_CASE("rope_inv_freq: plain theta powers, and llama3 scaling in all three bands") {
  const int head_dim = 16;
  std::vector<float> plain(head_dim / 2), scaled(head_dim / 2);
  rose::RopeScaling none;
  rose::rope_inv_freq(head_dim, 10000.0f, none, plain.data());
  for (int i = 0; i < head_dim / 2; ++i) {
    CHECK(plain[i] == doctest::Approx(std::pow(10000.0, -2.0 * i / head_dim)).epsilon(1e-6));
  }

  // factor 8, low 1, high 4, original 64: wavelengths below 16 are kept, above 64 divided by 8,
  // in between blended with s = (64 / wavelength - 1) / (4 - 1).
  rose::RopeScaling llama3{"llama3", 8.0f, 1.0f, 4.0f, 64};
  rose::rope_inv_freq(head_dim, 10000.0f, llama3, scaled.data());
  int kept = 0, divided = 0, blended = 0;
  for (int i = 0; i < head_dim / 2; ++i) {
    const double f = std::pow(10000.0, -2.0 * i / head_dim);
    const double wavelength = 2.0 * M_PI / f;
    double want;
    if (wavelength < 16.0) {
      want = f;
      ++kept;
    } else if (wavelength > 64.0) {
      want = f / 8.0;
      ++divided;
    } else {
      const double s = (64.0 / wavelength - 1.0) / 3.0;
      want = (1.0 - s) * f / 8.0 + s * f;
      ++blended;
    }
    CAPTURE(i);
    CHECK(scaled[i] == doctest::Approx(want).epsilon(1e-5));
  }
  CHECK(kept == 1);
  CHECK(blended == 2);
  CHECK(divided == 5);
}

TEST_CASE("rope_and_write_kv rotates q and k by rotate-half and writes k and v at their slots") {
  const int n = 3, num_heads = 4, num_kv_heads = 2, head_dim = 8, block_size = 4, blocks = 3;
  const int q_dim = num_heads * head_dim, kv_dim = num_kv_heads * head_dim;
  const int row = q_dim + 2 * kv_dim;
  const int half = head_dim / 2;
  const auto qkv0 = random_vector(size_t(n) * row, 7);
  const int32_t positions[n] = {0, 5, 37};
  const int32_t slots[n] = {9, -1, 2};
  std::vector<float> inv_freq(half);
  rose::rope_inv_freq(head_dim, 100.0f, rose::RopeScaling{}, inv_freq.data());

  for (bool with_rope : {true, false}) {
    CAPTURE(with_rope);
    const float sentinel = -12345.0f;
    std::vector<float> qkv = qkv0;
    std::vector<float> k_cache(size_t(blocks) * block_size * kv_dim, sentinel);
    std::vector<float> v_cache = k_cache;
    rose::cpu::rope_and_write_kv(qkv.data(), positions, slots,
                                 with_rope ? inv_freq.data() : nullptr, n, num_heads, num_kv_heads,
                                 head_dim, block_size, k_cache.data(), v_cache.data());
    std::vector<double> want(qkv0.begin(), qkv0.end());
    if (with_rope) {
      for (int i = 0; i < n; ++i) {
        for (int h = 0; h < num_heads + num_kv_heads; ++h) {  // q heads then k heads
          const int base = i * row + h * head_dim;
          for (int j = 0; j < half; ++j) {
            const double angle = positions[i] * std::pow(100.0, -2.0 * j / head_dim);
            const double a = qkv0[base + j], b = qkv0[base + j + half];
            want[base + j] = a * std::cos(angle) - b * std::sin(angle);
            want[base + j + half] = b * std::cos(angle) + a * std::sin(angle);
          }
        }
      }
    }
    check_close(qkv.data(), want, 1e-5, 1e-5);
    // Slot 9 = block 2 offset 1; slot 2 = block 0 offset 2; everything else untouched.
    int written = 0;
    for (int slot = 0; slot < blocks * block_size; ++slot) {
      const int token = slot == 9 ? 0 : slot == 2 ? 2 : -1;
      for (int d = 0; d < kv_dim; ++d) {
        const float k = k_cache[size_t(slot) * kv_dim + d];
        const float v = v_cache[size_t(slot) * kv_dim + d];
        if (token < 0) {
          CHECK(k == sentinel);
          CHECK(v == sentinel);
        } else {
          CHECK(k == qkv[token * row + q_dim + d]);
          CHECK(v == qkv0[token * row + q_dim + kv_dim + d]);
          ++written;
        }
      }
    }
    CHECK(written == 2 * kv_dim);
  }
}

TEST_CASE("paged_attention equals dense causal attention over unpaged K/V (GQA, mixed batch)") {
  const int num_heads = 4, num_kv_heads = 2, head_dim = 16, block_size = 4, num_blocks = 40;
  const int kv_dim = num_kv_heads * head_dim, q_dim = num_heads * head_dim;
  const int group = num_heads / num_kv_heads;
  // (new query tokens, context length): a decode, a whole prompt, a chunk over a cached prefix.
  const std::vector<std::pair<int, int>> seqs = {{1, 37}, {20, 20}, {5, 33}};
  const int num_seqs = int(seqs.size());
  const int stride = 12;

  // Scatter each sequence's blocks over the pool in a shuffled order.
  std::vector<int32_t> free_blocks(num_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), std::mt19937(5));
  std::vector<int32_t> tables(size_t(num_seqs) * stride, -1);
  std::vector<int32_t> query_start{0}, context_lens;
  std::vector<std::vector<float>> dense_k, dense_v;  // per seq (context, kv_dim)
  std::vector<float> k_cache(size_t(num_blocks) * block_size * kv_dim, NAN);
  std::vector<float> v_cache = k_cache;
  int next_block = 0;
  for (int s = 0; s < num_seqs; ++s) {
    const auto [n_query, context] = seqs[s];
    query_start.push_back(query_start.back() + n_query);
    context_lens.push_back(context);
    dense_k.push_back(random_vector(size_t(context) * kv_dim, 100 + s));
    dense_v.push_back(random_vector(size_t(context) * kv_dim, 200 + s));
    for (int b = 0; b * block_size < context; ++b)
      tables[s * stride + b] = free_blocks[next_block++];
    for (int p = 0; p < context; ++p) {
      const size_t slot = size_t(tables[s * stride + p / block_size]) * block_size + p % block_size;
      std::copy_n(&dense_k[s][size_t(p) * kv_dim], kv_dim, &k_cache[slot * kv_dim]);
      std::copy_n(&dense_v[s][size_t(p) * kv_dim], kv_dim, &v_cache[slot * kv_dim]);
    }
  }
  const int num_tokens = query_start.back();
  const int64_t q_stride = q_dim + 2 * kv_dim;  // q as the first columns of qkv rows
  const auto q = random_vector(size_t(num_tokens) * q_stride, 300, 2.0f);
  const float scale = 1.0f / std::sqrt(float(head_dim));

  std::vector<double> want(size_t(num_tokens) * q_dim);
  for (int s = 0; s < num_seqs; ++s) {
    const auto [n_query, context] = seqs[s];
    for (int j = 0; j < n_query; ++j) {
      const int token = query_start[s] + j;
      const int position = context - n_query + j;
      for (int h = 0; h < num_heads; ++h) {
        const int kvh = h / group;
        std::vector<double> scores(position + 1);
        double max_score = -1e300, denom = 0;
        for (int p = 0; p <= position; ++p) {
          double dot = 0;
          for (int d = 0; d < head_dim; ++d) {
            dot += double(q[token * q_stride + h * head_dim + d]) *
                   dense_k[s][size_t(p) * kv_dim + kvh * head_dim + d];
          }
          scores[p] = dot / std::sqrt(double(head_dim));
          max_score = std::max(max_score, scores[p]);
        }
        for (double& sc : scores) denom += (sc = std::exp(sc - max_score));
        for (int d = 0; d < head_dim; ++d) {
          double acc = 0;
          for (int p = 0; p <= position; ++p) {
            acc += scores[p] * dense_v[s][size_t(p) * kv_dim + kvh * head_dim + d];
          }
          want[size_t(token) * q_dim + h * head_dim + d] = acc / denom;
        }
      }
    }
  }

  rose::cpu::ThreadPool pool(2);
  for (rose::cpu::ThreadPool* p : {static_cast<rose::cpu::ThreadPool*>(nullptr), &pool}) {
    std::vector<float> out(size_t(num_tokens) * q_dim, NAN);
    rose::cpu::paged_attention(q.data(), q_stride, k_cache.data(), v_cache.data(),
                               query_start.data(), context_lens.data(), tables.data(), stride,
                               num_seqs, num_heads, num_kv_heads, head_dim, block_size, scale,
                               out.data(), p);
    check_close(out.data(), want, 1e-5, 1e-5);
  }
  CHECK(max_abs(want) > 0.1);  // the check above compares non-trivial values
}

TEST_CASE("gelu_tanh and silu_and_mul against hand-computed values") {
  std::vector<float> x{1.0f, -1.0f, 2.0f, -3.0f, 0.5f, 0.0f};
  rose::cpu::gelu_tanh(x.data(), int64_t(x.size()));
  // 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) evaluated in double.
  const double gelu[] = {0.8411919906082768,     -0.1588080093917233, 1.954597694087775,
                         -0.0036373920817729943, 0.34571400982514394, 0.0};
  for (int i = 0; i < 6; ++i) CHECK(x[i] == doctest::Approx(gelu[i]).epsilon(1e-6));

  // Two rows of gate | up with inner 2.
  const std::vector<float> gate_up{1.0f, -1.0f, 2.0f,  3.0f,  // row 0: gate (1, -1), up (2, 3)
                                   2.0f, 0.5f,  -1.0f, 4.0f};
  std::vector<float> out(4, NAN);
  rose::cpu::silu_and_mul(gate_up.data(), 2, 2, out.data());
  // silu(1) = 0.7310585786, silu(-1) = -0.2689414214, silu(2) = 1.7615941560, silu(0.5) =
  // 0.3112296656
  CHECK(out[0] == doctest::Approx(0.7310585786300049 * 2).epsilon(1e-6));
  CHECK(out[1] == doctest::Approx(-0.2689414213699951 * 3).epsilon(1e-6));
  CHECK(out[2] == doctest::Approx(1.7615941559557646 * -1).epsilon(1e-6));
  CHECK(out[3] == doctest::Approx(0.3112296656009273 * 4).epsilon(1e-6));
}
