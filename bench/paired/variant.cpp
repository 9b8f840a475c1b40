// One side of scripts/bench_paired.sh: compiled twice into one program, once against a baseline commit's headers and
// once against the working tree's, with the library's namespace renamed by -Dattnscope=attnscope_<side> so that both
// versions link side by side. Each side exports the whole-matrix operations the performance targets of
// docs/performance.md are stated on (one thread: this file is compiled without OpenMP).
#include <attnscope/normalize.hpp>

#define ATTNSCOPE_PAIRED_JOIN2(name, side) name##_##side
#define ATTNSCOPE_PAIRED_JOIN(name, side) ATTNSCOPE_PAIRED_JOIN2(name, side)
#define ATTNSCOPE_PAIRED_NAME(name) ATTNSCOPE_PAIRED_JOIN(name, ATTNSCOPE_PAIRED_SIDE)

/// softmax_into of rows × cols logits into `out`, the driver's one reused output matrix for both sides (so that both
/// write to the same addresses: with an output each, the side whose output sat worse against the logits ran 2–9%
/// slower on identical code); returns one output entry so the work cannot be optimized away.
using OutputMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
float ATTNSCOPE_PAIRED_NAME(paired_softmax_into)(const float* logits, long rows, long cols, OutputMatrix& out) {
  const Eigen::Map<const attnscope::RowMatrix<float>> z(logits, rows, cols);
  attnscope::softmax_into(z, out);
  return out(rows - 1, cols - 1);
}

/// The exact ‖J‖₂ of every softmax row from the logits; returns their sum.
float ATTNSCOPE_PAIRED_NAME(paired_norm_from_logits)(const float* logits, long rows, long cols) {
  const Eigen::Map<const attnscope::RowMatrix<float>> z(logits, rows, cols);
  return attnscope::jacobian_spectral_norm(z, attnscope::SoftmaxMap{1}).sum();
}
