// Seeded random instances for the capacity tests: spherical embeddings and softmax weights as in the synthetic
// protocol (docs/theory/capacity.md "Reproduction targets": x_i = M g_i/‖g_i‖, l_i = qᵀx_i, α = softmax(l/√d)).
#pragma once

#include <cmath>
#include <string>

#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "support/catch.hpp"
#include "support/random_matrices.hpp"

namespace attnscope::testing {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::Vector;

/// L × d matrix of standard normal entries.
inline RowMatrix<double> gaussian_matrix(attnscope::Random& random, Index rows, Index cols) {
  return attnscope::testing::random_logits(random, rows, cols);
}

/// L points uniform on the sphere of radius M in R^d.
inline RowMatrix<double> sphere_points(attnscope::Random& random, Index rows, Index cols, double radius = 1) {
  RowMatrix<double> out = gaussian_matrix(random, rows, cols);
  for (Index i = 0; i < rows; ++i) out.row(i) *= radius / out.row(i).norm();
  return out;
}

/// Softmax weights of logits qᵀx_i/√d with ‖q‖ = scale.
inline Vector<double> softmax_weights(attnscope::Random& random, const RowMatrix<double>& embeddings, double scale) {
  Vector<double> query(embeddings.cols());
  for (Index j = 0; j < query.size(); ++j) query(j) = random.normal();
  query *= scale / query.norm();
  const RowMatrix<double> logits = (embeddings * query).transpose() / std::sqrt(double(embeddings.cols()));
  return attnscope::softmax(logits).row(0).transpose();
}

/// Random non-negative weights that need not sum to one (uniform, some exact zeros, some ties).
inline Vector<double> loose_weights(attnscope::Random& random, Index size) {
  Vector<double> out(size);
  for (Index i = 0; i < size; ++i) {
    const double u = random.uniform();
    out(i) = u < 0.1 ? 0.0 : (u < 0.2 ? 0.25 : random.uniform());
  }
  return out;
}

/// CHECK_THROWS_AS for attnscope::invalid_argument plus a check that the message names the function.
#define CAPACITY_CHECK_INVALID(expression, function_name)                                   \
  do {                                                                                       \
    try {                                                                                    \
      (void)(expression);                                                                    \
      FAIL("no exception from " #expression);                                               \
    } catch (const attnscope::invalid_argument& error) {                                     \
      CHECK(std::string(error.what()).find("attnscope::" function_name) != std::string::npos); \
    }                                                                                        \
  } while (false)

}  // namespace attnscope::testing
