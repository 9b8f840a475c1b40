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
  // The Eigen decompositions work header-only, without the optional compiled part: classical MDS runs the symmetric
  // eigensolver that the compiled part would otherwise provide (core/decompositions.hpp). Three points at 0, 3 and 4
  // on a line [derived]: centred at 7/3 they are −7/3, 2/3, 5/3, so B = −½·J·D∘D·J has the one nonzero eigenvalue
  // 49/9 + 4/9 + 25/9 = 26/3, and the first axis (sign: largest magnitude positive) is 7/3, −2/3, −5/3.
  Eigen::MatrixXd distances(3, 3);
  distances << 0.0, 3.0, 4.0,
               3.0, 0.0, 1.0,
               4.0, 1.0, 0.0;
  const attnscope::composition::MdsEmbedding mds = attnscope::composition::classical_mds(distances, 1);
  if (std::abs(mds.eigenvalues(0) - 26.0 / 3.0) > 1e-12 || std::abs(mds.eigenvalues(1)) > 1e-12) return 1;
  if (std::abs(mds.coordinates(0, 0) - 7.0 / 3.0) > 1e-12 || std::abs(mds.coordinates(2, 0) + 5.0 / 3.0) > 1e-12)
    return 1;
  std::cout << "downstream ok\n";
  return 0;
}
