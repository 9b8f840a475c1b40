// attnscope/model/rope.hpp — RoPE's inverse frequencies for a model configuration: the plain θ^(−2i/d), and the
// long-context rescalings of Hugging Face's `rope_scaling` (linear, dynamic NTK, YaRN, Llama 3, LongRoPE) with their
// attention factor (a multiplier of cos and sin), for a given total sequence length (dynamic NTK and LongRoPE depend
// on it) and layer kind (Gemma 3's sliding-window layers have their own unscaled base).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/model/config.hpp"

namespace attnscope::model {

/// The inverse frequency of each rotated pair (rotary_size/2 of them) and the factor multiplying cos and sin.
struct RopeFrequencies {
  std::vector<float> inverse_frequency;
  float attention_factor = 1;
};

/// The plain RoPE frequencies 1/θ^(2i/d), i < d/2, in float as Hugging Face and llama2.c compute them (RoFormer,
/// Su et al. 2021, eq. 34).
template <class Scalar = float>
std::vector<Scalar> plain_rope_frequencies(Index rotary_size, double theta) {
  std::vector<Scalar> frequency(std::size_t(rotary_size / 2));
  for (Index i = 0; i < rotary_size / 2; ++i)
    frequency[std::size_t(i)] =
        Scalar(1) / std::pow(static_cast<Scalar>(theta), static_cast<Scalar>(2 * i) / static_cast<Scalar>(rotary_size));
  return frequency;
}

/// The RoPE frequencies of `c` for a forward pass whose last position is total_length − 1: `local` selects the base
/// of sliding-window layers (c.rope_local_theta when set, unscaled). Formulas, each from the method's paper and
/// Hugging Face's modeling_rope_utils.py, with θ the base, d = rotary_size, f_i = θ^(−2i/d), s = factor, L₀ =
/// original_max_positions:
/// - linear: f_i / s;
/// - dynamic (NTK-aware): for total_length L > L₀ the base becomes θ·(s·L/L₀ − (s − 1))^(d/(d−2)); else plain;
/// - llama3: wavelength λ_i = 2π/f_i; λ_i > L₀/low → f_i/s; λ_i < L₀/high → f_i; otherwise (1 − a)·f_i/s + a·f_i
///   with a = (L₀/λ_i − low)/(high − low);
/// - yarn: with dims(r) = d·ln(L₀/(2πr))/(2 ln θ), the ramp from lo = dims(beta_fast) to hi = dims(beta_slow)
///   (floor / ceil when truncate, clamped to [0, d − 1]; hi += 0.001 when equal), γ_i = clamp((i − lo)/(hi − lo),
///   0, 1): f_i·(1 − γ_i) + (f_i/s)·γ_i (Peng et al. 2023, eq. 18–19); attention factor as configured;
/// - longrope: f_i / e_i with e = long_factor when L > L₀, else short_factor; attention factor as configured.
template <class Config = TransformerConfig>
RopeFrequencies rope_frequencies(const Config& c, Index total_length, bool local = false) {
  const Index d = c.rotary_size();
  RopeFrequencies result;
  if (local && c.rope_local_theta > 0) {
    result.inverse_frequency = plain_rope_frequencies(d, c.rope_local_theta);
    return result;
  }
  const RopeScaling& r = c.rope_scaling;
  if (r.kind == RopeScalingKind::none) {
    result.inverse_frequency = plain_rope_frequencies(d, c.rope_theta);
    return result;
  }
  const Index pairs = d / 2;
  const double theta = c.rope_theta, pi = 3.14159265358979323846;
  std::vector<double> plain(std::size_t(pairs), 0.0);
  for (Index i = 0; i < pairs; ++i) plain[std::size_t(i)] = 1.0 / std::pow(theta, double(2 * i) / double(d));
  std::vector<double> scaled = plain;
  switch (r.kind) {
    case RopeScalingKind::none:
      break;
    case RopeScalingKind::linear:
      for (double& f : scaled) f /= r.factor;
      break;
    case RopeScalingKind::dynamic:
      if (total_length > r.original_max_positions) {
        const double base = theta * std::pow(r.factor * double(total_length) / double(r.original_max_positions) -
                                                 (r.factor - 1.0),
                                             double(d) / double(d - 2));
        for (Index i = 0; i < pairs; ++i) scaled[std::size_t(i)] = 1.0 / std::pow(base, double(2 * i) / double(d));
      }
      break;
    case RopeScalingKind::llama3: {
      const double low_wavelength = r.original_max_positions / r.low_frequency_factor;
      const double high_wavelength = r.original_max_positions / r.high_frequency_factor;
      for (Index i = 0; i < pairs; ++i) {
        const double f = plain[std::size_t(i)], wavelength = 2 * pi / f;
        if (wavelength > low_wavelength) {
          scaled[std::size_t(i)] = f / r.factor;
        } else if (wavelength >= high_wavelength) {
          const double a = (r.original_max_positions / wavelength - r.low_frequency_factor) /
                           (r.high_frequency_factor - r.low_frequency_factor);
          scaled[std::size_t(i)] = (1 - a) * f / r.factor + a * f;
        }
      }
      break;
    }
    case RopeScalingKind::yarn: {
      const auto dims = [&](double rotations) {
        return double(d) * std::log(double(r.original_max_positions) / (rotations * 2 * pi)) / (2 * std::log(theta));
      };
      double low = dims(r.beta_fast), high = dims(r.beta_slow);
      if (r.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, double(d - 1));
      if (low == high) high += 0.001;
      for (Index i = 0; i < pairs; ++i) {
        const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
        scaled[std::size_t(i)] = plain[std::size_t(i)] * (1 - ramp) + plain[std::size_t(i)] / r.factor * ramp;
      }
      break;
    }
    case RopeScalingKind::longrope: {
      const std::vector<double>& factors = total_length > r.original_max_positions ? r.long_factor : r.short_factor;
      for (Index i = 0; i < pairs; ++i) scaled[std::size_t(i)] = plain[std::size_t(i)] / factors[std::size_t(i)];
      break;
    }
  }
  result.inverse_frequency.assign(scaled.begin(), scaled.end());
  result.attention_factor = static_cast<float>(r.attention_factor);
  return result;
}

}  // namespace attnscope::model
