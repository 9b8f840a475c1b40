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
  std::cout << "downstream ok\n";
  return 0;
}
