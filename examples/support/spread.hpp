// Five-number summary and mean of a sample (median, min, max, quartiles) for the examples' spreads over heads or seeds.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <vector>

namespace attnscope::examples {

/// Mean, median, min, max and quartiles of a sample (all 0 for an empty sample).
struct Spread {
  double mean = 0, median = 0, minimum = 0, maximum = 0, lower_quartile = 0, upper_quartile = 0;
};

inline Spread spread_of(std::vector<double> values) {
  Spread s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const auto at = [&](double fraction) {
    const double position = fraction * static_cast<double>(values.size() - 1);
    const auto low = static_cast<std::size_t>(std::floor(position));
    const auto high = static_cast<std::size_t>(std::ceil(position));
    return values[low] + (values[high] - values[low]) * (position - static_cast<double>(low));
  };
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  s.median = at(0.5);
  s.minimum = values.front();
  s.maximum = values.back();
  s.lower_quartile = at(0.25);
  s.upper_quartile = at(0.75);
  return s;
}

}  // namespace attnscope::examples
