// Random heads for the analysis tests: causal softmax attention of seeded random scores.
#pragma once

#include <cstdint>
#include <limits>

#include "attnscope/analysis/head_report.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/normalize/softmax.hpp"

namespace attnscope::testing {

/// Causal softmax attention of random scores 2·N(0, 1) (seeded), with the scores' future entries set to −inf.
inline attnscope::analysis::HeadInput random_causal_head(int layer, int head, long length, std::uint64_t seed) {
  attnscope::Random random(seed);
  attnscope::analysis::HeadInput input;
  input.layer = layer;
  input.head = head;
  input.scores.resize(length, length);
  for (long i = 0; i < input.scores.size(); ++i) input.scores.data()[i] = 2 * random.normal();
  for (long i = 0; i < length; ++i)
    for (long j = i + 1; j < length; ++j) input.scores(i, j) = -std::numeric_limits<double>::infinity();
  input.attention = attnscope::softmax(input.scores, 1.0, attnscope::causal);
  return input;
}

}  // namespace attnscope::testing
