#include "engine/model/rope.h"

#include <cmath>
#include <numbers>

namespace rose {

void rope_inv_freq(int head_dim, float theta, const RopeScaling& scaling, float* inv_freq) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[i] = 1.0f / std::pow(theta, exponent);
  }
  if (scaling.type != "llama3") return;
  const float factor = scaling.factor;
  const float low = scaling.low_freq_factor;
  const float high = scaling.high_freq_factor;
  const float old_len = static_cast<float>(scaling.original_max_position_embeddings);
  const float low_freq_wavelen = old_len / low;
  const float high_freq_wavelen = old_len / high;
  for (int i = 0; i < half; ++i) {
    const float freq = inv_freq[i];
    const float wavelen = 2.0f * std::numbers::pi_v<float> / freq;
    if (wavelen < high_freq_wavelen) continue;  // high frequencies are kept
    if (wavelen > low_freq_wavelen) {
      inv_freq[i] = freq / factor;  // low frequencies are stretched
      continue;
    }
    const float smooth = (old_len / wavelen - low) / (high - low);
    inv_freq[i] = (1.0f - smooth) * freq / factor + smooth * freq;
  }
}

}  // namespace rose
