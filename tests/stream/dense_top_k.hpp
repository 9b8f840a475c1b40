// The dense reference of the streaming top-k masses, shared by the stream tests.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "attnscope/core/types.hpp"

namespace attnscope::testing {

/// For each k of `top_k`, the sum of the k largest of `weights` (all of them when k exceeds their number).
inline std::vector<double> dense_top_k_masses(std::vector<double> weights, const std::vector<attnscope::Index>& top_k) {
  std::sort(weights.begin(), weights.end(), std::greater<double>());
  std::vector<double> masses;
  for (const attnscope::Index top : top_k) {
    double mass = 0;
    for (attnscope::Index t = 0; t < std::min<attnscope::Index>(top, static_cast<attnscope::Index>(weights.size())); ++t)
      mass += weights[static_cast<std::size_t>(t)];
    masses.push_back(mass);
  }
  return masses;
}

}  // namespace attnscope::testing
