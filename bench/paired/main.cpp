// The driver of scripts/bench_paired.sh: times the baseline and the working tree (variant.cpp compiled twice) on the
// same seeded N(0, 9) float logits, alternating which side runs first in each round, and prints per shape the median
// and quartiles of the per-round time ratios baseline ÷ working tree, plus each side's norm ÷ softmax_into. On a
// shared machine whose memory bandwidth changes from minute to minute, only such paired ratios compare two versions
// (docs/performance.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <Eigen/Core>

using OutputMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
float paired_softmax_into_base(const float*, long, long, OutputMatrix&);
float paired_softmax_into_tree(const float*, long, long, OutputMatrix&);
float paired_norm_from_logits_base(const float*, long, long);
float paired_norm_from_logits_tree(const float*, long, long);

namespace {

template <class Function>
double milliseconds(Function&& function) {
  const auto start = std::chrono::steady_clock::now();
  volatile float sink = function();
  static_cast<void>(sink);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct Quartiles {
  double low, median, high;
};

Quartiles quartiles(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return {values[n / 4], values[n / 2], values[(3 * n) / 4]};
}

}  // namespace

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? std::atol(argv[1]) : 21;
  if (rounds < 3) {
    std::fprintf(stderr, "bench_paired: rounds must be at least 3 (got %ld)\n", rounds);
    return 2;
  }
  struct Shape {
    long rows, cols;
  };
  std::printf("| shape | softmax_into base ÷ tree | norm base ÷ tree | norm ÷ softmax_into, base | tree | "
              "median ms: softmax_into base, tree; norm base, tree |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Shape shape : {Shape{16384, 512}, Shape{4096, 4096}}) {
    std::mt19937 generator(2024);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(static_cast<std::size_t>(shape.rows * shape.cols));
    for (float& value : logits) value = normal(generator);
    const float* z = logits.data();
    OutputMatrix out = OutputMatrix::Zero(shape.rows, shape.cols);  // touched before timing, shared by both sides
    // one untimed call each: warm caches and page tables
    paired_softmax_into_base(z, shape.rows, shape.cols, out);
    paired_softmax_into_tree(z, shape.rows, shape.cols, out);
    std::vector<double> softmax_ratio, norm_ratio, base_norm_over_softmax, tree_norm_over_softmax;
    std::vector<double> softmax_base_ms, softmax_tree_ms, norm_base_ms, norm_tree_ms;
    for (long round = 0; round < rounds; ++round) {
      double softmax_base, softmax_tree, norm_base, norm_tree;
      if (round % 2 == 0) {
        softmax_base = milliseconds([&] { return paired_softmax_into_base(z, shape.rows, shape.cols, out); });
        softmax_tree = milliseconds([&] { return paired_softmax_into_tree(z, shape.rows, shape.cols, out); });
        norm_base = milliseconds([&] { return paired_norm_from_logits_base(z, shape.rows, shape.cols); });
        norm_tree = milliseconds([&] { return paired_norm_from_logits_tree(z, shape.rows, shape.cols); });
      } else {
        softmax_tree = milliseconds([&] { return paired_softmax_into_tree(z, shape.rows, shape.cols, out); });
        softmax_base = milliseconds([&] { return paired_softmax_into_base(z, shape.rows, shape.cols, out); });
        norm_tree = milliseconds([&] { return paired_norm_from_logits_tree(z, shape.rows, shape.cols); });
        norm_base = milliseconds([&] { return paired_norm_from_logits_base(z, shape.rows, shape.cols); });
      }
      softmax_ratio.push_back(softmax_base / softmax_tree);
      norm_ratio.push_back(norm_base / norm_tree);
      base_norm_over_softmax.push_back(norm_base / softmax_base);
      tree_norm_over_softmax.push_back(norm_tree / softmax_tree);
      softmax_base_ms.push_back(softmax_base);
      softmax_tree_ms.push_back(softmax_tree);
      norm_base_ms.push_back(norm_base);
      norm_tree_ms.push_back(norm_tree);
    }
    const Quartiles s = quartiles(softmax_ratio), r = quartiles(norm_ratio), b = quartiles(base_norm_over_softmax),
                    t = quartiles(tree_norm_over_softmax);
    std::printf("| %ld×%ld | %.3f [%.3f, %.3f] | %.3f [%.3f, %.3f] | %.2f× | %.2f× | %.2f, %.2f; %.2f, %.2f |\n",
                shape.rows, shape.cols, s.median, s.low, s.high, r.median, r.low, r.high, b.median, t.median,
                quartiles(softmax_base_ms).median, quartiles(softmax_tree_ms).median, quartiles(norm_base_ms).median,
                quartiles(norm_tree_ms).median);
    const float sum_base = paired_norm_from_logits_base(z, shape.rows, shape.cols);
    const float sum_tree = paired_norm_from_logits_tree(z, shape.rows, shape.cols);
    if (sum_base != sum_tree)
      std::fprintf(stderr, "note: %ld×%ld sums of norms differ: base %.9g, tree %.9g\n", shape.rows, shape.cols,
                   static_cast<double>(sum_base), static_cast<double>(sum_tree));
  }
  return 0;
}
