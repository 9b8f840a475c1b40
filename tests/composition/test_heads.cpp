// Verdict flip rates on constructed cases with known answers, classical MDS on a known configuration, average-linkage
// clustering on hand-built distance matrices, head distance matrices and channel scores.
#include <cmath>

#include <Eigen/Core>

#include "attnscope/composition.hpp"
#include "random_rows.hpp"
#include "support/catch.hpp"

using attnscope::composition::Convention;
using attnscope::Index;
using attnscope::composition::Metric;
using attnscope::Random;
using attnscope::RowMatrix;

using attnscope::testing::row;

namespace {
RowMatrix<double> random_symmetric(Random& random, Index n) {
  RowMatrix<double> m = RowMatrix<double>::Zero(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = i + 1; j < n; ++j) m(i, j) = m(j, i) = random.uniform(0.1, 1.0);
  return m;
}
}  // namespace

TEST_CASE("flip rate on the toy A/B/C heads: one flip, one tie, one agreement", "[composition][flips]") {
  // reference A: keep says B, drop says C (flip); reference B: c(A) = c(C), a drop tie (excluded);
  // reference C: both say A (JS keep 0.1017 vs 0.1076; cosine keep 0.8851 vs 0.8797).
  const std::vector<RowMatrix<double>> heads{row({.90, .05, .03, .02}), row({.88, .02, .03, .07}),
                                             row({.50, .25, .15, .10})};
  for (Metric metric : {Metric::cosine, Metric::jensen_shannon, Metric::aitchison}) {
    const auto result = attnscope::composition::flip_rate(heads, metric);
    CHECK(result.units == 3);
    CHECK(result.ties == 1);
    CHECK(result.flips == 1);
    CHECK(result.rate() == 0.5);
  }
}

TEST_CASE("entropy verdict flips when a high sink hides a diffuse content", "[composition][flips]") {
  // X: s = 0.9, uniform content over 4 keys; Y: s = 0.5, peaked content. Keep: X more focused; drop: Y.
  const std::vector<RowMatrix<double>> heads{row({.9, .025, .025, .025, .025}), row({.5, .47, .01, .01, .01}),
                                             row({.05, .9, .03, .01, .01})};
  // H keep / drop: X 0.464 / 1.386, Y 0.839 / 0.292, Z 0.442 / 0.256: only the (X, Y) order differs
  const auto result = attnscope::composition::flip_rate(heads, Metric::entropy);
  CHECK(result.units == 3);  // head pairs
  CHECK(result.ties == 0);
  CHECK(result.flips == 1);
}

TEST_CASE("flip rate from matrices: counts, agreement 0, reversal 1, ties, sampling", "[composition][flips]") {
  Random random(21);
  const Index heads = 9;
  const auto keep = random_symmetric(random, heads);
  const RowMatrix<double> reversed = (2.0 - keep.array()).matrix();
  attnscope::composition::FlipOptions options;
  auto all = attnscope::composition::flip_rate_from_matrices(keep, keep, options);
  CHECK(all.units == heads * (heads - 1) * (heads - 2) / 2);
  CHECK(all.flips == 0);
  CHECK(all.rate() == 0.0);
  CHECK(attnscope::composition::flip_rate_from_matrices(keep, reversed, options).rate() == 1.0);
  options.sampler = attnscope::composition::Sampler::pairs_of_pairs;
  const Index pairs = heads * (heads - 1) / 2;
  CHECK(attnscope::composition::flip_rate_from_matrices(keep, reversed, options).units == pairs * (pairs - 1) / 2);
  CHECK(attnscope::composition::flip_rate_from_matrices(keep, reversed, options).rate() == 1.0);
  // a constant matrix under drop: every unit a tie
  const RowMatrix<double> constant = RowMatrix<double>::Constant(heads, heads, 0.3);
  const auto ties = attnscope::composition::flip_rate_from_matrices(keep, constant);
  CHECK(ties.ties == ties.units);
  CHECK(ties.rate() == 0.0);
  // an independent random drop matrix: sampled estimate close to the exhaustive rate, deterministic per seed
  const auto other = random_symmetric(random, heads);
  const double exact = attnscope::composition::flip_rate_from_matrices(keep, other).rate();
  attnscope::composition::FlipOptions sampled;
  sampled.samples = 20000;
  sampled.seed = 5;
  const auto first = attnscope::composition::flip_rate_from_matrices(keep, other, sampled);
  CHECK(first.units == 20000);
  CHECK(first.rate() == Approx(exact).margin(0.02));
  CHECK(attnscope::composition::flip_rate_from_matrices(keep, other, sampled).flips == first.flips);
  // control: the draws do depend on the seed (another seed: another estimate, as close to the exact rate)
  attnscope::composition::FlipOptions reseeded = sampled;
  reseeded.seed = 6;
  const auto second = attnscope::composition::flip_rate_from_matrices(keep, other, reseeded);
  CHECK(second.flips != first.flips);
  CHECK(second.rate() == Approx(exact).margin(0.02));
  CHECK(exact > 0.2);
  CHECK(exact < 0.8);
}

TEST_CASE("equal sink masses never flip the entropy verdict (docs/theory/composition.md §11 safe condition)", "[composition][flips]") {
  // With s the same in every row and head, mean H(a) = H_b(s) + (1 − s)·mean H(c): keep and drop orders agree.
  Random random(22);
  std::vector<RowMatrix<double>> heads;
  for (int h = 0; h < 8; ++h) {
    auto head = attnscope::testing::random_attention(random, 50, 16);
    for (Index i = 0; i < head.rows(); ++i) {
      head.row(i).tail(15) *= (1 - 0.8) / head.row(i).tail(15).sum();
      head(i, 0) = 0.8;
    }
    heads.push_back(head);
  }
  const auto result = attnscope::composition::flip_rate(heads, Metric::entropy);
  CHECK(result.units == 28);
  CHECK(result.flips == 0);
  // per-row equal but varying sink masses are not enough: the keep mean weights rows by 1 − s_i
  std::vector<RowMatrix<double>> varying;
  const auto template_rows = attnscope::testing::random_attention(random, 50, 16);
  for (int h = 0; h < 8; ++h) {
    auto head = attnscope::testing::random_attention(random, 50, 16);
    for (Index i = 0; i < head.rows(); ++i) {
      head.row(i).tail(15) *= (1 - template_rows(i, 0)) / head.row(i).tail(15).sum();
      head(i, 0) = template_rows(i, 0);
    }
    varying.push_back(head);
  }
  // keep orders heads by mean H(a_i) = mean H_b(s_i) + mean (1 − s_i)·H(c_i), the first term shared by every head;
  // drop orders them by mean H(c_i): the flips are the pairs ordered differently by these two content means
  Eigen::VectorXd weighted(8), plain(8);
  for (int h = 0; h < 8; ++h) {
    weighted(h) = plain(h) = 0;
    for (Index i = 0; i < 50; ++i) {
      const double sink = varying[std::size_t(h)](i, 0);
      double entropy = 0;
      for (Index j = 1; j < 16; ++j) {
        const double c = varying[std::size_t(h)](i, j) / (1 - sink);
        entropy -= c * std::log(c);
      }
      weighted(h) += (1 - sink) * entropy;
      plain(h) += entropy;
    }
  }
  Index expected_flips = 0;
  for (int a = 0; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b) expected_flips += (weighted(a) < weighted(b)) != (plain(a) < plain(b));
  const auto varying_result = attnscope::composition::flip_rate(varying, Metric::entropy);
  CHECK(varying_result.units == 28);
  CHECK(varying_result.ties == 0);
  CHECK(varying_result.flips == expected_flips);
  CHECK(varying_result.flips > 0);  // not enough: some verdicts do flip
}

TEST_CASE("classical MDS recovers the distances of a known planar configuration", "[composition][mds]") {
  Random random(23);
  const Index n = 12;
  RowMatrix<double> points(n, 2);
  for (Index i = 0; i < n; ++i) points(i, 0) = 3 * random.normal(), points(i, 1) = random.normal();
  RowMatrix<double> distances(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j) distances(i, j) = (points.row(i) - points.row(j)).norm();
  const auto embedding = attnscope::composition::classical_mds(distances, 2);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j)
      CHECK((embedding.coordinates.row(i) - embedding.coordinates.row(j)).norm() == Approx(distances(i, j)).margin(1e-10));
  CHECK(embedding.eigenvalues(1) > 0);
  CHECK(std::abs(embedding.eigenvalues(2)) < 1e-9);
  // points on a line: the first axis is the line (up to sign and shift)
  RowMatrix<double> line(5, 5);
  const double x[5] = {0, 1, 3, 7, 8};
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) line(i, j) = std::abs(x[i] - x[j]);
  const auto axis = attnscope::composition::classical_mds(line, 1).coordinates;
  CHECK(std::abs(attnscope::composition::pearson_correlation(axis.col(0), Eigen::Map<const Eigen::VectorXd>(x, 5))) == Approx(1.0).epsilon(1e-12));
}

TEST_CASE("average linkage matches the UPGMA merges of a hand-built example", "[composition][clustering]") {
  // points 0, 1, 5, 7 on a line: scipy linkage(method="average") = [[0,1,1,2],[2,3,2,2],[4,5,5.5,4]]
  RowMatrix<double> d(4, 4);
  const double x[4] = {0, 1, 5, 7};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) d(i, j) = std::abs(x[i] - x[j]);
  const auto tree = attnscope::composition::average_linkage(d);
  REQUIRE(tree.merges.size() == 3);
  CHECK(tree.merges[0].first == 0);
  CHECK(tree.merges[0].second == 1);
  CHECK(tree.merges[0].height == 1.0);
  CHECK(tree.merges[1].first == 2);
  CHECK(tree.merges[1].second == 3);
  CHECK(tree.merges[1].height == 2.0);
  CHECK(tree.merges[2].first == 4);
  CHECK(tree.merges[2].second == 5);
  CHECK(tree.merges[2].height == 5.5);
  CHECK(tree.merges[2].size == 4);
  CHECK(attnscope::composition::cut_dendrogram(tree, 2) == std::vector<int>{0, 0, 1, 1});
  CHECK(attnscope::composition::cut_dendrogram(tree, 1) == std::vector<int>{0, 0, 0, 0});
  CHECK(attnscope::composition::cut_dendrogram(tree, 4) == std::vector<int>{0, 1, 2, 3});
  // two well-separated groups, interleaved indices
  RowMatrix<double> groups(6, 6);
  const int group[6] = {0, 1, 0, 1, 1, 0};
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) groups(i, j) = i == j ? 0.0 : (group[i] == group[j] ? 1.0 + 0.1 * (i + j) : 10.0);
  CHECK(attnscope::composition::cut_dendrogram(attnscope::composition::average_linkage(groups), 2) == std::vector<int>{0, 1, 0, 1, 1, 0});
}

TEST_CASE("head distance matrices: the keep structure follows the sink, the drop structure the content", "[composition][clustering]") {
  // Synthetic truth: 8 heads, content pattern A or B (head % 2), sink mass high or low (head / 4).
  Random random(24);
  const Index rows = 60, cols = 20;
  const attnscope::Visibility causal{attnscope::Causal{1}};
  std::vector<RowMatrix<double>> pattern;
  for (int p = 0; p < 2; ++p) pattern.push_back(attnscope::testing::random_attention(random, rows, cols, causal));
  std::vector<RowMatrix<double>> heads;
  Eigen::VectorXd sink_mass(8), content_label(8);
  for (int h = 0; h < 8; ++h) {
    RowMatrix<double> head = pattern[static_cast<std::size_t>(h % 2)];
    const double s = h < 4 ? 0.95 : 0.3;
    for (Index i = 0; i < rows; ++i) {
      head.row(i).tail(cols - 1) *= (1 - s) / head.row(i).tail(cols - 1).sum();
      head(i, 0) = s;
    }
    heads.push_back(head);
    sink_mass(h) = s;
    content_label(h) = h % 2;
  }
  const auto keep = attnscope::composition::head_distance_matrix(heads, attnscope::composition::HeadDistance::clark_js, Convention::keep, causal);
  const auto drop = attnscope::composition::head_distance_matrix(heads, attnscope::composition::HeadDistance::clark_js, Convention::drop, causal);
  const Eigen::VectorXd keep_axis = attnscope::composition::classical_mds(keep, 1).coordinates.col(0);
  const Eigen::VectorXd drop_axis = attnscope::composition::classical_mds(drop, 1).coordinates.col(0);
  CHECK(std::abs(attnscope::composition::pearson_correlation(keep_axis, sink_mass)) > 0.99);
  CHECK(std::abs(attnscope::composition::pearson_correlation(drop_axis, content_label)) > 0.99);
  CHECK(attnscope::composition::cut_dendrogram(attnscope::composition::average_linkage(drop), 2) == std::vector<int>{0, 1, 0, 1, 0, 1, 0, 1});
  CHECK(attnscope::composition::cut_dendrogram(attnscope::composition::average_linkage(keep), 2) == std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1});
  // Aitchison content term is 0 between heads with the same content whatever their sinks; the sink term is a
  // balance against the content's geometric mean, so it is 0 only for equal sinks AND equal content
  const auto content = attnscope::composition::head_distance_matrix(heads, attnscope::composition::HeadDistance::aitchison_content, Convention::keep, causal);
  const auto sink = attnscope::composition::head_distance_matrix(heads, attnscope::composition::HeadDistance::sink_term, Convention::keep, causal);
  CHECK(content(0, 2) < 1e-12);
  CHECK(content(0, 4) < 1e-12);
  CHECK(content(0, 1) > 0.1);
  CHECK(sink(0, 2) < 1e-12);
  CHECK(sink(0, 1) > 0.1);
  CHECK(sink(0, 4) > 0.1);
  const auto cosine = attnscope::composition::head_distance_matrix(heads, attnscope::composition::HeadDistance::cosine, Convention::drop, causal);
  CHECK(cosine(0, 6) < 1e-12);
  CHECK(cosine(0, 1) > 1e-3);
}

TEST_CASE("channel scores and the channel summary", "[composition][scores]") {
  Random random(25);
  const attnscope::Visibility causal{attnscope::Causal{1}};
  std::vector<RowMatrix<double>> heads;
  for (int h = 0; h < 5; ++h) heads.push_back(attnscope::testing::random_attention(random, 40, 40, causal, 0, 1.0 + h));
  heads.push_back(heads[0]);  // an exact duplicate: fully redundant content
  const auto scores = attnscope::composition::head_scores(heads, causal);
  for (int h = 0; h < 6; ++h) {
    const auto split = attnscope::composition::entropy_split(heads[static_cast<std::size_t>(h)], causal);
    CHECK(scores.sink_mass(h) == Approx(split.sink_mass.mean()).epsilon(1e-14));
    CHECK(scores.content_entropy(h) == Approx(split.content_entropy.mean()).epsilon(1e-14));
    CHECK(scores.raw_entropy(h) == Approx(split.entropy.mean()).epsilon(1e-14));
    CHECK(scores.content_redundancy(h) <= 1.0);
    CHECK(scores.content_redundancy(h) >= 0.0);
  }
  CHECK(scores.content_redundancy(0) == Approx(1.0).epsilon(1e-15));
  CHECK(scores.content_redundancy(5) == Approx(1.0).epsilon(1e-15));
  CHECK(scores.content_redundancy(1) < 1.0);
  const auto summary = attnscope::composition::channel_summary(heads[2], causal);
  const auto split = attnscope::composition::entropy_split(heads[2], causal);
  CHECK(summary.sink_share_of_entropy == Approx(split.binary.sum() / split.entropy.sum()).epsilon(1e-14));
  const auto per_row = attnscope::composition::sink_share_of_entropy(heads[2], causal);
  CHECK((per_row.array() * split.entropy.array() - split.binary.array()).abs().maxCoeff() < 1e-14);
  CHECK(per_row.maxCoeff() <= 1.0);
  CHECK(per_row.minCoeff() >= 0.0);
  // the argmax-mass column: move the sink of a head to column 3
  RowMatrix<double> moved = heads[1].bottomRows(37);
  moved.col(0).swap(moved.col(3));
  CHECK(attnscope::composition::argmax_mass_sink(heads[1], causal).columns() == std::vector<Index>{0});
  const auto sink3 = attnscope::composition::argmax_mass_sink(moved);
  CHECK(sink3.columns() == std::vector<Index>{3});
  // only columns visible in every row qualify: under causal visibility that is column 0 (offset 1: columns 0, 1)
  RowMatrix<double> late_sink = heads[1];
  late_sink.col(0).swap(late_sink.col(5));  // column 5 gets the large mass but is masked in early rows
  late_sink = attnscope::composition::closure(late_sink, causal);
  CHECK(attnscope::composition::argmax_mass_sink(late_sink, causal).columns().front() < 2);
  CHECK((attnscope::composition::entropy_split(moved, {}, sink3).sink_mass - heads[1].bottomRows(37).col(0)).cwiseAbs().maxCoeff() < 1e-15);
}

TEST_CASE("pair_metric_matrices equals row-by-row pair_metric averages under both conventions", "[composition][flips]") {
  Random random(26);
  const Index rows = 30, cols = 12;
  attnscope::Mask mask(rows, cols);
  for (Index i = 0; i < rows; ++i)
    for (Index j = 0; j < cols; ++j) mask(i, j) = j < 2 || j == 2 + i % (cols - 2) || random.uniform() < 0.5;
  for (const attnscope::Visibility& visibility :
       {attnscope::Visibility{attnscope::Causal{2}}, attnscope::Visibility{mask}}) {
    for (const attnscope::composition::SinkSet& sinks : {attnscope::composition::SinkSet{}, attnscope::composition::SinkSet({0, 1})}) {
      std::vector<RowMatrix<double>> heads;
      for (int h = 0; h < 4; ++h) heads.push_back(attnscope::testing::random_attention(random, rows, cols, visibility));
      for (Metric metric : {Metric::cosine, Metric::jensen_shannon, Metric::aitchison}) {
        const auto both = attnscope::composition::pair_metric_matrices(heads, metric, visibility, sinks);
        for (int h = 0; h < 4; ++h)
          for (int g = 0; g < 4; ++g)
            for (Convention convention : {Convention::keep, Convention::drop}) {
              const double expected = attnscope::composition::pair_metric(metric, heads[static_cast<std::size_t>(h)],
                                                             heads[static_cast<std::size_t>(g)], convention, visibility, sinks)
                                          .mean();
              const double actual = convention == Convention::keep ? both.keep(h, g) : both.drop(h, g);
              REQUIRE(actual == Approx(expected).margin(1e-13));
            }
      }
    }
  }
}

TEST_CASE("head distance matrices equal their definitions computed row by row", "[composition][clustering]") {
  Random random(27);
  const Index rows = 25, cols = 16;
  const attnscope::Visibility causal{attnscope::Causal{2}};
  std::vector<RowMatrix<double>> heads;
  for (int h = 0; h < 3; ++h) heads.push_back(attnscope::testing::random_attention(random, rows, cols, causal));
  const auto keep = attnscope::composition::head_distance_matrix(heads, attnscope::composition::HeadDistance::clark_js, Convention::keep, causal);
  const auto drop = attnscope::composition::head_distance_matrix(heads, attnscope::composition::HeadDistance::clark_js, Convention::drop, causal);
  const auto content = attnscope::composition::head_distance_matrix(heads, attnscope::composition::HeadDistance::aitchison_content, Convention::keep, causal);
  const auto sink = attnscope::composition::head_distance_matrix(heads, attnscope::composition::HeadDistance::sink_term, Convention::keep, causal);
  const auto cosine = attnscope::composition::head_distance_matrix(heads, attnscope::composition::HeadDistance::cosine, Convention::keep, causal);
  for (int h = 0; h < 3; ++h)
    for (int g = 0; g < 3; ++g) {
      const auto& a = heads[static_cast<std::size_t>(h)];
      const auto& b = heads[static_cast<std::size_t>(g)];
      // Clark smoothing 0.999·p + 0.001/T on the visible keys (keep) or on the content keys (drop)
      RowMatrix<double> sa = a, sb = b, ca = attnscope::composition::split_sink(a, causal).content, cb = attnscope::composition::split_sink(b, causal).content;
      for (Index i = 0; i < rows; ++i) {
        const Index n = causal.visible_count(i, cols);
        sa.row(i).head(n) = 0.999 * a.row(i).head(n).array() + 0.001 / static_cast<double>(n);
        sb.row(i).head(n) = 0.999 * b.row(i).head(n).array() + 0.001 / static_cast<double>(n);
        ca.row(i).segment(1, n - 1) = 0.999 * ca.row(i).segment(1, n - 1).array() + 0.001 / static_cast<double>(n - 1);
        cb.row(i).segment(1, n - 1) = 0.999 * cb.row(i).segment(1, n - 1).array() + 0.001 / static_cast<double>(n - 1);
      }
      attnscope::Mask content_mask = causal.to_mask(rows, cols);
      content_mask.col(0).setConstant(false);
      CHECK(keep(h, g) == Approx(attnscope::composition::jensen_shannon(sa, sb, causal).mean()).margin(1e-14));
      CHECK(drop(h, g) == Approx(attnscope::composition::jensen_shannon(ca, cb, attnscope::Visibility{content_mask}).mean()).margin(1e-14));
      const auto split = attnscope::composition::aitchison_split(a, b, causal);
      CHECK(content(h, g) == Approx(split.content_term.cwiseSqrt().mean()).margin(1e-12));
      CHECK(sink(h, g) == Approx(split.sink_term.cwiseSqrt().mean()).margin(1e-12));
      CHECK(cosine(h, g) == Approx(1 - attnscope::composition::cosine(a, b, causal).mean()).margin(1e-14));
    }
}
