// tests/browser/page/causal_attention.hpp — seeded causal softmax attention for the browser tests' pages: row i over
// keys 0..i with logits 1.5·N(0, 1), key 0 raised by `sink_logit`.
#pragma once

#include <cmath>

#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::testing {

inline RowMatrix<double> causal_attention(Random& random, Index length, double sink_logit) {
  RowMatrix<double> a = RowMatrix<double>::Zero(length, length);
  for (Index i = 0; i < length; ++i) {
    for (Index j = 0; j <= i; ++j) a(i, j) = std::exp(1.5 * random.normal() + (j == 0 ? sink_logit : 0.0));
    a.row(i) /= a.row(i).sum();
  }
  return a;
}

}  // namespace attnscope::testing
