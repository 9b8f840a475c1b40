// Helpers shared by the model tests: matrix differences, seeded token sequences, the NLL from its definition.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/model/transformer.hpp"
#include "support/catch.hpp"

namespace attnscope::testing {

/// max |a − b| over all entries (shapes must agree).
inline double max_abs_difference(const RowMatrix<float>& a, const RowMatrix<float>& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  return (a - b).cwiseAbs().maxCoeff();
}

/// `length` tokens drawn uniformly from [0, vocab) with attnscope::Random(seed), after the given start tokens.
inline std::vector<int> random_token_sequence(std::size_t length, int vocab, std::uint64_t seed,
                                              std::vector<int> start = {}) {
  Random random(seed);
  std::vector<int> tokens = std::move(start);
  while (tokens.size() < length) tokens.push_back(static_cast<int>(random.below(std::uint64_t(vocab))));
  return tokens;
}

/// Forward options capturing everything.
inline model::ForwardOptions capture_everything() {
  model::ForwardOptions options;
  options.capture = model::CaptureOptions::everything();
  return options;
}

/// Mean over positions p < L − 1 of −log softmax(logits_p)[tokens_{p+1}], in double (the definition of the NLL).
inline double mean_nll_from_logits(const RowMatrix<float>& logits, const std::vector<int>& tokens) {
  double total = 0;
  for (std::size_t p = 0; p + 1 < tokens.size(); ++p) {
    const auto row = logits.row(long(p)).cast<double>();
    const double max_value = row.maxCoeff();
    total -= row(tokens[p + 1]) - max_value - std::log((row.array() - max_value).exp().sum());
  }
  return total / double(tokens.size() - 1);
}

}  // namespace attnscope::testing
