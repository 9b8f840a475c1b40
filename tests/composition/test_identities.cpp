// Exact decompositions verified to 1e−12 in double on thousands of seeded random rows (Dirichlet content, Beta(4,1)
// sink), with full, causal and mask visibility and with a two-column sink set; clr/ilr identities and round trips.
#include <Eigen/Core>

#include "attnscope/composition.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "random_rows.hpp"
#include "support/catch.hpp"
#include "support/random_matrices.hpp"

using attnscope::Index;
using attnscope::Mask;
using attnscope::Random;
using attnscope::RowMatrix;
using attnscope::Visibility;
using attnscope::testing::random_attention;
using attnscope::testing::random_logits;

namespace {
// A random mask that keeps columns 0 and 1 visible (sinks) and at least one further column per row.
Mask random_mask(Random& random, Index rows, Index cols) {
  Mask mask(rows, cols);
  for (Index i = 0; i < rows; ++i) {
    for (Index j = 0; j < cols; ++j) mask(i, j) = j < 2 || random.uniform() < 0.6;
    mask(i, 2 + static_cast<Index>(random.below(static_cast<std::uint64_t>(cols - 2)))) = true;
  }
  return mask;
}
std::vector<Visibility> visibilities(Random& random, Index rows, Index cols) {
  return {Visibility{}, Visibility{attnscope::Causal{2}}, Visibility{random_mask(random, rows, cols)}};
}
}  // namespace

TEST_CASE("entropy, Aitchison and JS identities hold to 1e-12 on thousands of random rows", "[composition][identity]") {
  Random random(20260401);
  const Index rows = 1500, cols = 40;
  double worst_entropy = 0, worst_aitchison = 0, worst_js = 0;
  Index checked = 0;
  for (const Visibility& visibility : visibilities(random, rows, cols)) {
    for (const attnscope::composition::SinkSet& sinks : {attnscope::composition::SinkSet{}, attnscope::composition::SinkSet({0, 1})}) {
      const auto a = random_attention(random, rows, cols, visibility);
      const auto b = random_attention(random, rows, cols, visibility);
      const auto h = attnscope::composition::entropy_split(a, visibility, sinks);
      worst_entropy = std::max(worst_entropy, (h.entropy - h.sink_term() - h.content_term).cwiseAbs().maxCoeff());
      const auto d = attnscope::composition::aitchison_split(a, b, visibility, sinks);
      worst_aitchison = std::max(
          worst_aitchison, (d.distance_squared - d.sink_term - d.within_sink_term - d.content_term).cwiseAbs().maxCoeff());
      const auto js = attnscope::composition::js_split(a, b, visibility, sinks);
      worst_js = std::max(worst_js, (js.divergence - js.sink_term - js.within_sink_term - js.content_term).cwiseAbs().maxCoeff());
      checked += rows;
      if (sinks.size() == 1) CHECK(h.within_sink.cwiseAbs().maxCoeff() == 0.0);
    }
  }
  CHECK(checked == 9000);
  CHECK(worst_entropy < 1e-12);
  CHECK(worst_aitchison < 1e-12);
  CHECK(worst_js < 1e-12);
}

TEST_CASE("the content channel is the drop convention: identical to metrics on renormalised rows", "[composition][identity]") {
  Random random(7);
  const Index rows = 500, cols = 24;
  const Visibility causal{attnscope::Causal{1}};
  const auto a = random_attention(random, rows, cols, causal), b = random_attention(random, rows, cols, causal);
  const auto ca = attnscope::composition::split_sink(a, causal).content, cb = attnscope::composition::split_sink(b, causal).content;
  // the content rows as their own distributions over keys 1..: a mask hiding the sink column
  Mask content_mask = causal.to_mask(rows, cols);
  content_mask.col(0).setConstant(false);
  const Visibility content_keys{content_mask};
  CHECK((attnscope::row_entropy(ca, content_keys) - attnscope::composition::entropy_split(a, causal).content_entropy).cwiseAbs().maxCoeff() < 1e-13);
  CHECK((attnscope::composition::jensen_shannon(ca, cb, content_keys) - attnscope::composition::js_split(a, b, causal).content_divergence).cwiseAbs().maxCoeff() < 1e-13);
  CHECK((attnscope::composition::aitchison_distance(ca, cb, content_keys).array().square().matrix() -
         attnscope::composition::aitchison_split(a, b, causal).content_term).cwiseAbs().maxCoeff() < 1e-11);
  CHECK((attnscope::composition::cosine(ca, cb, content_keys) - attnscope::composition::cosine_conventions(a, b, causal).drop).cwiseAbs().maxCoeff() < 1e-13);
  // a = (s, (1−s)·c)
  const auto split = attnscope::composition::split_sink(a, causal);
  RowMatrix<double> rebuilt = split.content.array().colwise() * (1 - split.sink_mass.array());
  rebuilt.col(0) = split.sink_mass;
  CHECK((rebuilt - a).cwiseAbs().maxCoeff() < 1e-15);
}

TEST_CASE("clr of softmax equals centred logits, also where softmax underflows", "[composition][identity]") {
  Random random(11);
  const auto z = random_logits(random, 300, 50, 3.0);
  const Visibility causal{attnscope::causal};
  const auto p = attnscope::softmax(z, 1.0, causal);
  CHECK((attnscope::composition::clr(p, causal) - attnscope::composition::clr_from_logits(z, causal)).cwiseAbs().maxCoeff() < 1e-12);
  CHECK((attnscope::composition::ilr(p, causal) - attnscope::composition::ilr_from_logits(z, causal)).cwiseAbs().maxCoeff() < 1e-12);
  // underflow: a logit gap of 1000 makes the probability exactly 0; the logit route stays exact
  RowMatrix<double> big(1, 3);
  big << 0.0, -1000.0, 2.0;
  const auto underflowed = attnscope::softmax(big);
  CHECK(underflowed(0, 1) == 0.0);
  CHECK_THROWS_AS(attnscope::composition::clr(underflowed), attnscope::invalid_argument);
  const auto centred = attnscope::composition::clr_from_logits(big);
  CHECK(centred(0, 1) == Approx(-1000.0 - (2.0 - 1000.0) / 3).epsilon(1e-15));
}

TEST_CASE("temperature is powering and Aitchison distances from logits equal those from probabilities", "[composition][identity]") {
  Random random(12);
  const auto z = random_logits(random, 200, 30), w = random_logits(random, 200, 30);
  const double tau = 2.5;
  const auto p = attnscope::softmax(z), q = attnscope::softmax(w);
  CHECK((attnscope::softmax(z, tau) - attnscope::composition::power(p, 1 / tau)).cwiseAbs().maxCoeff() < 1e-14);
  CHECK((attnscope::composition::aitchison_distance(p, q) - attnscope::composition::aitchison_distance_from_logits(z, w)).cwiseAbs().maxCoeff() < 1e-12);
  // the Aitchison norm scales by 1/τ: d(softmax(z/τ), uniform) = d(softmax(z), uniform)/τ
  const RowMatrix<double> uniform = RowMatrix<double>::Constant(200, 30, 1.0 / 30);
  CHECK((attnscope::composition::aitchison_distance(attnscope::softmax(z, tau), uniform) * tau -
         attnscope::composition::aitchison_distance(p, uniform)).cwiseAbs().maxCoeff() < 1e-12);
  const auto split = attnscope::composition::aitchison_split_from_logits(z, w);
  const auto split_p = attnscope::composition::aitchison_split(p, q);
  CHECK((split.sink_term - split_p.sink_term).cwiseAbs().maxCoeff() < 1e-11);
  CHECK((split.content_term - split_p.content_term).cwiseAbs().maxCoeff() < 1e-11);
  CHECK((attnscope::composition::sink_balance_from_logits(z) - attnscope::composition::sink_balance(p)).cwiseAbs().maxCoeff() < 1e-12);
}

TEST_CASE("O(D) ilr equals the explicit O(D^2) Gram-Schmidt basis product; the basis is orthonormal", "[composition][ilr]") {
  Random random(13);
  for (Index parts : {2, 3, 17, 256}) {
    const auto basis = attnscope::composition::ilr_basis(parts);
    CHECK((basis * basis.transpose() - RowMatrix<double>::Identity(parts - 1, parts - 1)).cwiseAbs().maxCoeff() < 1e-13);
    CHECK(basis.rowwise().sum().cwiseAbs().maxCoeff() < 1e-13);
    const auto x = random_attention(random, 64, parts);
    CHECK((attnscope::composition::ilr(x) - attnscope::composition::ilr_by_basis(x, basis)).cwiseAbs().maxCoeff() < 1e-11);
    // the ilr is an isometry: Euclidean distance of coordinates = Aitchison distance
    const auto y = random_attention(random, 64, parts);
    CHECK(((attnscope::composition::ilr(x) - attnscope::composition::ilr(y)).rowwise().norm() - attnscope::composition::aitchison_distance(x, y)).cwiseAbs().maxCoeff() < 1e-11);
  }
  // an SBP basis whose first balance is {sink} vs {content} gives b_S as its first coordinate (§4)
  RowMatrix<double> sbp(3, 4);
  sbp << 1, -1, -1, -1,  //
      0, 1, -1, -1,      //
      0, 0, 1, -1;
  const auto x = random_attention(random, 20, 4);
  CHECK((attnscope::composition::ilr_by_basis(x, attnscope::composition::sbp_basis(sbp)).col(0) - attnscope::composition::sink_balance(x)).cwiseAbs().maxCoeff() < 1e-13);
}

TEST_CASE("inverse transforms round-trip, with and without masks", "[composition][ilr]") {
  Random random(14);
  const Index rows = 300, cols = 33;
  for (const Visibility& visibility : visibilities(random, rows, cols)) {
    const auto x = random_attention(random, rows, cols, visibility);
    CHECK((attnscope::composition::clr_inv(attnscope::composition::clr(x, visibility), visibility) - x).cwiseAbs().maxCoeff() < 1e-13);
    CHECK((attnscope::composition::ilr_inv(attnscope::composition::ilr(x, visibility), visibility) - x).cwiseAbs().maxCoeff() < 1e-13);
    CHECK((attnscope::composition::alr_inv(attnscope::composition::alr(x, 0, visibility), 0, visibility) - x).cwiseAbs().maxCoeff() < 1e-13);
    const auto y = random_attention(random, rows, cols, visibility);
    CHECK((attnscope::composition::perturb_inv(attnscope::composition::perturb(x, y, visibility), y, visibility) - x).cwiseAbs().maxCoeff() < 1e-13);
    // masked entries stay exactly 0 and the clr sums to 0 over the visible parts
    const auto c = attnscope::composition::clr(x, visibility);
    CHECK(c.rowwise().sum().cwiseAbs().maxCoeff() < 1e-12);
    for (Index i = 0; i < rows; ++i)
      for (Index j = 0; j < cols; ++j)
        if (!visibility.visible(i, j, cols)) REQUIRE(c(i, j) == 0.0);
  }
  // ilr of masked rows equals ilr of the gathered visible parts
  Mask mask(1, 5);
  mask << true, false, true, true, false;
  RowMatrix<double> x(1, 5), gathered(1, 3);
  x << .2, 9.0, .5, .3, 7.0;
  gathered << .2, .5, .3;
  const auto masked = attnscope::composition::ilr(x, Visibility{mask});
  CHECK((masked.leftCols(2) - attnscope::composition::ilr(gathered)).cwiseAbs().maxCoeff() < 1e-15);
  CHECK(masked(0, 2) == 0.0);
  CHECK(masked(0, 3) == 0.0);
}

TEST_CASE("closure, perturbation and distances are the invariances of docs/theory/composition.md §8", "[composition][invariance]") {
  Random random(15);
  const Index rows = 200, cols = 20;
  const auto z = random_logits(random, rows, cols), w = random_logits(random, rows, cols);
  const auto a = attnscope::softmax(z), b = attnscope::softmax(w);
  const auto reference = attnscope::composition::aitchison_split(a, b);
  // scale invariance: a per-row logit constant changes nothing
  RowMatrix<double> shifted = z;
  for (Index i = 0; i < rows; ++i) shifted.row(i).array() += 10 * random.normal();
  CHECK((attnscope::softmax(shifted) - a).cwiseAbs().maxCoeff() < 1e-14);
  CHECK((attnscope::composition::closure(RowMatrix<double>(a * 7.0)) - a).cwiseAbs().maxCoeff() < 1e-15);
  // perturbation invariance: a per-key logit offset shared by both rows cancels in every term
  Eigen::RowVectorXd offset(cols);
  for (Index j = 0; j < cols; ++j) offset(j) = 2 * random.normal();
  const auto split = attnscope::composition::aitchison_split(attnscope::softmax(z.rowwise() + offset), attnscope::softmax(w.rowwise() + offset));
  CHECK((split.distance_squared - reference.distance_squared).cwiseAbs().maxCoeff() < 1e-11);
  CHECK((split.content_term - reference.content_term).cwiseAbs().maxCoeff() < 1e-11);
  CHECK((split.sink_term - reference.sink_term).cwiseAbs().maxCoeff() < 1e-11);
  // permutation invariance of the content term: relabel content positions (same permutation in both rows)
  std::vector<Index> order(cols);
  for (Index j = 0; j < cols; ++j) order[static_cast<std::size_t>(j)] = j;
  for (Index j = cols - 1; j > 1; --j) std::swap(order[static_cast<std::size_t>(j)], order[1 + random.below(static_cast<std::uint64_t>(j))]);
  RowMatrix<double> pa(rows, cols), pb(rows, cols);
  for (Index j = 0; j < cols; ++j) pa.col(j) = a.col(order[static_cast<std::size_t>(j)]), pb.col(j) = b.col(order[static_cast<std::size_t>(j)]);
  const auto permuted = attnscope::composition::aitchison_split(pa, pb);
  CHECK((permuted.content_term - reference.content_term).cwiseAbs().maxCoeff() < 1e-11);
  CHECK((permuted.sink_term - reference.sink_term).cwiseAbs().maxCoeff() < 1e-11);
  // subcompositional dominance/coherence: the drop distance ignores the sink entirely
  RowMatrix<double> resunk = a;
  resunk.col(0).setConstant(0.999);
  resunk = attnscope::composition::closure(resunk);
  RowMatrix<double> resunk_b = b;
  resunk_b.col(0).setConstant(1e-3);
  resunk_b = attnscope::composition::closure(resunk_b);
  CHECK((attnscope::composition::aitchison_split(resunk, resunk_b).content_term - reference.content_term).cwiseAbs().maxCoeff() < 1e-11);
  CHECK((attnscope::composition::js_split(resunk, resunk_b).content_divergence - attnscope::composition::js_split(a, b).content_divergence).cwiseAbs().maxCoeff() < 1e-13);
}

TEST_CASE("equal sinks: keep-convention JS is (1 - s) times the content JS (docs/theory/composition.md §5)", "[composition][identity]") {
  Random random(16);
  auto a = random_attention(random, 400, 12), b = random_attention(random, 400, 12);
  for (Index i = 0; i < a.rows(); ++i) {  // give b the sink mass of a
    const double s = a(i, 0);
    b.row(i).tail(11) *= (1 - s) / b.row(i).tail(11).sum();
    b(i, 0) = s;
  }
  const auto js = attnscope::composition::js_split(a, b);
  CHECK(js.sink_term.cwiseAbs().maxCoeff() < 1e-15);
  CHECK((js.divergence.array() - (1 - a.col(0).array()) * js.content_divergence.array()).abs().maxCoeff() < 1e-13);
}

TEST_CASE("entropy-collapse attribution: exact per row, pure sink change 100%, pure content change 0%", "[composition][attribution]") {
  Random random(17);
  const Index rows = 800, cols = 30;
  const Visibility causal{attnscope::Causal{1}};
  const auto before = random_attention(random, rows, cols, causal), after = random_attention(random, rows, cols, causal);
  const auto per_row = attnscope::composition::entropy_attribution_rows(before, causal, after, causal);
  CHECK((per_row.delta_entropy - per_row.sink_part - per_row.content_part).cwiseAbs().maxCoeff() < 1e-12);
  const auto exact = attnscope::composition::entropy_attribution(before, causal, after, causal);
  CHECK(std::abs(exact.residual) < 1e-13);
  CHECK(exact.delta_entropy == Approx(per_row.delta_entropy.mean()).epsilon(1e-15));
  // swapping the conditions negates every part (the midpoint rule is symmetric)
  const auto reversed = attnscope::composition::entropy_attribution(after, causal, before, causal);
  CHECK(reversed.sink_part == Approx(-exact.sink_part).epsilon(1e-12));
  CHECK(reversed.content_part == Approx(-exact.content_part).epsilon(1e-12));
  // mean-then-split is a different (inexact) estimator
  const auto averaged = attnscope::composition::entropy_attribution(before, causal, after, causal, attnscope::composition::AttributionOrder::mean_then_split);
  CHECK(averaged.delta_entropy == Approx(exact.delta_entropy).margin(1e-15));
  CHECK(std::abs(averaged.residual) > 1e-6);
  // pure sink growth: same content composition, larger sink
  RowMatrix<double> grown = before;
  for (Index i = 0; i < rows; ++i) {
    const double s = before(i, 0), s_new = s + (1 - s) * 0.5;
    grown.row(i) *= (1 - s_new) / (1 - s);
    grown(i, 0) = s_new;
  }
  const auto sink_only = attnscope::composition::entropy_attribution(before, causal, grown, causal);
  CHECK(sink_only.sink_share == Approx(1.0).epsilon(1e-12));
  CHECK(std::abs(sink_only.content_part) < 1e-14);
  // pure content change: same sink mass, different content
  RowMatrix<double> recontent = after;
  for (Index i = 0; i < rows; ++i) {
    const Index content_keys = std::min<Index>(i + 1, cols - 1);
    recontent.row(i).segment(1, content_keys) *= (1 - before(i, 0)) / recontent.row(i).segment(1, content_keys).sum();
    recontent(i, 0) = before(i, 0);
  }
  const auto content_only = attnscope::composition::entropy_attribution(before, causal, recontent, causal);
  CHECK(std::abs(content_only.sink_part) < 1e-13);
  CHECK(std::abs(content_only.sink_share) < 1e-10);
  // matched rows across different key sets (short vs long context) are allowed
  const auto short_context = random_attention(random, rows, 8, Visibility{});
  const auto mixed = attnscope::composition::entropy_attribution(short_context, Visibility{}, after, causal);
  CHECK(std::abs(mixed.residual) < 1e-13);
}
