// Seeded random attention-like rows for the composition tests: a = (s, (1 − s)·c) with s ~ Beta(4, 1) (mean 0.8,
// a dominant sink) and c ~ Dirichlet(1), over each row's visible keys (docs/theory/composition.md, synthetic rows).
#pragma once

#include <cmath>
#include <initializer_list>

#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::testing {

/// Dirichlet(1) parts via normalised Exp(1) variables (−ln U).
inline double exponential(Random& random) {
  double u;
  do u = random.uniform(); while (u <= 0.0);
  return -std::log(u);
}

/// Fills the visible entries of each row with (s, (1−s)·c) with the sink at column `sink` (visible in every row);
/// s ~ Beta(sink_alpha, 1) via U^(1/alpha). Masked entries are 0.
inline RowMatrix<double> random_attention(Random& random, Index rows, Index cols, const Visibility& visibility = {},
                                          Index sink = 0, double sink_alpha = 4.0) {
  RowMatrix<double> a = RowMatrix<double>::Zero(rows, cols);
  for (Index i = 0; i < rows; ++i) {
    const double s = std::pow(random.uniform(1e-12, 1.0), 1.0 / sink_alpha);
    double total = 0;
    for (Index j = 0; j < cols; ++j)
      if (j != sink && visibility.visible(i, j, cols)) total += (a(i, j) = exponential(random));
    for (Index j = 0; j < cols; ++j)
      if (j != sink && visibility.visible(i, j, cols)) a(i, j) *= (1 - s) / total;
    a(i, sink) = s;
  }
  return a;
}

/// A one-row matrix from a list of values.
inline RowMatrix<double> row(std::initializer_list<double> values) {
  RowMatrix<double> m(1, static_cast<Index>(values.size()));
  Index k = 0;
  for (double v : values) m(0, k++) = v;
  return m;
}

}  // namespace attnscope::testing
