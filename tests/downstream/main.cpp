// A downstream user's program: includes the installed umbrella header and checks one result.
#include <cmath>
#include <iostream>

#include <attnscope/attnscope.hpp>

int main() {
  Eigen::MatrixXd logits(1, 3);
  logits << -2.0, 0.0, 0.5;
  const attnscope::RowMatrix<double> p = attnscope::softmax(logits);
  // deep-spin/entmax README golden vector: softmax([-2, 0, 0.5]) = [0.0486, 0.3592, 0.5922].
  if (std::abs(p(0, 2) - 0.5922) > 1e-4 || std::abs(p.sum() - 1.0) > 1e-12) return 1;
  // The Eigen decompositions work header-only, without the optional compiled part: ‖diag(3, −4)‖₂ = 4.
  const Eigen::MatrixXd diagonal = Eigen::Vector2d(3.0, -4.0).asDiagonal();
  if (std::abs(attnscope::logits::spectral_norm(diagonal) - 4.0) > 1e-12) return 1;
  std::cout << "downstream ok\n";
  return 0;
}
