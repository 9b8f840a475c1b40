// attnscope/normalize/spectral_norm.hpp — exact ‖J‖₂ of the symmetric normalization-map Jacobians in O(n) per row
// by the secular-equation method of docs/theory/normalization-maps.md §5 [derived], the cheap two-sided bound (§4.1) and the
// reference curves of arXiv:2508.17821 Corollary 3 (§5.5).
//
// For J = scale·(diag p − ppᵀ) with Σp = 1 the nonzero eigenvalues solve g(λ) = Σ p_i/(p_i − λ) = 0 (§5.1) and ‖J‖₂/scale
// is the unique root in (p_(2), p_(1)). With sink mass r₀ = 1 − Σp > 0 they solve g(λ) = r₀/λ (§5.4). The root is found
// by a safeguarded fixed-weight iteration [derived]: the argmax term is kept exact, the others are modelled by
// a + b/(p_(2) − λ) matched in value and slope, the resulting quadratic is solved without cancellation, and every
// step is kept inside a shrinking bracket that starts at [max(p_(2), max d), min(p_(1), 2 max d)] (§5.2, d_i = p_i(1 − p_i),
// d_argmax = p_(1)·(r₀ + Σ_{i≠argmax} p_i), never p_(1)(1 − p_(1))); steps that leave the bracket go to its end or bisect.
// Ties p_(1) = p_(2) are deflated: λ = p_(1) exactly. Each iteration is one vectorized pass (kernels::secular_power_sums)
// that also gives g'', g''', g⁗ at the evaluated point; the iteration continues on that expansion without a pass and
// accepts its root when the bounded remainder cannot move it, so most float rows take one pass.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/kernels/exp_summary.hpp"
#include "attnscope/kernels/probability_summary.hpp"
#include "attnscope/kernels/row_extrema.hpp"
#include "attnscope/kernels/scale_row.hpp"
#include "attnscope/kernels/secular.hpp"
#include "attnscope/normalize/detail/gather_visible.hpp"

namespace attnscope {

/// Per-row two-sided bound lower ≤ ‖J‖₂ ≤ upper (docs/theory/normalization-maps.md §4.1), upper ≤ 2·lower.
template <class Scalar>
struct JacobianNormBounds {
  Vector<Scalar> lower, upper;
};

/// The bound min{1/(4T), √2} stated by arXiv:2508.17821 Corollary 3. It is the largest diagonal entry of J,
/// not a bound on ‖J‖₂ (docs/theory/normalization-maps.md §5.5); kept as the paper's curve. Throws unless T is finite and > 0.
template <class Scalar>
Scalar corollary3_bound(Scalar temperature) {
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::corollary3_bound: float or double");
  detail::require_positive("corollary3_bound", "temperature", temperature);
  return std::min(Scalar(1) / (4 * temperature), std::sqrt(Scalar(2)));  // arXiv:2508.17821 Cor. 3
}

/// The true supremum of ‖J‖₂ over all logit rows for softmax with temperature T: 1/(2T), attained at two tied top
/// logits (docs/theory/normalization-maps.md §4.1, Popoviciu). Throws unless T is finite and > 0.
template <class Scalar>
Scalar softmax_jacobian_norm_supremum(Scalar temperature) {
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::softmax_jacobian_norm_supremum: float or double");
  detail::require_positive("softmax_jacobian_norm_supremum", "temperature", temperature);
  return Scalar(1) / (2 * temperature);  // [derived] §4.1
}

namespace detail {

/// Largest-root data of one row: the top two values, r = Σ_{i≠argmax} p_i and the bracket of §5.2.
template <class Scalar>
struct SecularSetup {
  Scalar largest, second, rest, lower, upper;
};

/// The quantities of docs/theory/normalization-maps.md §5.2 step 1 from a one-pass summary; `sink_mass` is r₀ = 1 − Σp (0 for a
/// distribution). r and max_{i≠argmax} d_i come from the entries ≤ 1/2 when p_(1) > 1/2 ≥ p_(2) (exact, no 1 − p_(1)
/// cancellation), as Σp − p_(1) when that loses at most one bit, else from an exact pass that skips the argmax.
template <class Scalar>
SecularSetup<Scalar> secular_setup(const Scalar* p, Index n, const kernels::TopTwoAndSums<Scalar>& summary,
                                   Scalar sink_mass) {
  SecularSetup<Scalar> setup{summary.max, summary.second, 0, 0, 0};
  const Scalar half = Scalar(0.5);
  Scalar max_other_diagonal;
  if (setup.largest > half && setup.second <= half) {
    setup.rest = summary.sum_at_most_half;
    max_other_diagonal = setup.second * (1 - setup.second);  // p(1 − p) increases on [0, 1/2]: at p_(2) [derived]
  } else if (setup.largest <= half && summary.sum - setup.largest >= summary.sum / 2) {
    setup.rest = summary.sum - setup.largest;
    max_other_diagonal = setup.largest * (1 - setup.largest);  // every entry is ≤ 1/2: the largest p(1 − p) [derived]
  } else {
    const Index argmax = kernels::find_first(p, n, setup.largest);
    const auto before = kernels::sum_and_maxima(p, argmax);
    const auto after = kernels::sum_and_maxima(p + argmax + 1, n - argmax - 1);
    setup.rest = before.sum + after.sum;
    max_other_diagonal = std::max(before.max_bernoulli_variance, after.max_bernoulli_variance);
  }
  if (n == 1) setup.second = 0;
  const Scalar max_diagonal = std::max(max_other_diagonal, setup.largest * (sink_mass + setup.rest));  // d_argmax
  setup.lower = std::max(setup.second, max_diagonal);  // interlacing and diagonal ≤ λ_max (§4.1)
  setup.upper = std::min(setup.largest, 2 * max_diagonal);  // interlacing and Gershgorin (§4.1)
  return setup;
}

/// The iteration that finds the root of the secular equation from its setup (secular_setup), one pass over the row at
/// a time: construct it (the start needs Σp², n and the sink mass r₀), then while !finished() evaluate
/// kernels::secular_power_sums at point() and hand the sums to advance(); root() is then λ_max. Resumable so that the
/// caller chooses how each pass is made: the softmax norm from logits makes the first one with the next row's max
/// (kernels::secular_power_sums_and_row_max). Scale-invariant for r₀ = 0: for weights w = c·p it returns c·λ (every
/// test is relative and the model step is homogeneous), which the softmax norm from exponentials uses.
template <class Scalar>
class SecularIteration {
 public:
  SecularIteration(const SecularSetup<Scalar>& setup, Index n, Scalar sum_of_squares, Scalar sink_mass)
      : largest_(setup.largest), second_(setup.second), gap_(setup.largest - setup.second), sink_mass_(sink_mass),
        lower_(setup.lower), upper_(setup.upper) {
    const Scalar p1 = largest_, p2 = second_;
    finished_ = true;
    if (p2 == p1) {  // deflation of the tie: eigenvector e_a − e_b, eigenvalue p_(1) (§5.2 step 2)
      lambda_ = p1;
      return;
    }
    if (setup.rest == 0) {  // one nonzero entry: the 1×1 block p1 − p1² = p1·r₀, zeros elsewhere
      lambda_ = p1 * sink_mass;
      return;
    }
    lambda_ = lower_;
    if (!(lower_ < upper_)) return;  // an empty bracket: its end
    finished_ = false;
    lambda_ = lower_ + (upper_ - lower_) / 2;
    others_ = std::max(Scalar(0), setup.rest - p2);  // R: the mass of the keys other than the top two
    if (sink_mass == 0 && n > 2) {
      // A start closer to the root than the bracket's midpoint, without a pass over the row [derived]: the keys
      // other than the top two sum to R and their squares to Q; for λ above them Σ_{i≥3} p_i/(p_i − λ) ≈ −R/λ − Q/λ²
      // (the first terms of the expansion in p_i/λ), so one model step on g ≈ p1/(p1 − λ) + p2/(p2 − λ) − R/λ − Q/λ²
      // moves λ towards the root of this approximation (on N(0, 9) logits the iteration of one pass per step needed
      // 2.1–2.3 passes from here instead of 2.9 from the midpoint; a second step gains nothing; the expansion below
      // then ends most rows after the first pass). A step that leaves the bracket is not taken.
      const Scalar other_squares = std::max(Scalar(0), sum_of_squares - p1 * p1 - p2 * p2);
      const Scalar lambda = lambda_;
      const Scalar top = p1 / (p1 - lambda), runner_up = p2 / (p2 - lambda), inverse = Scalar(1) / lambda;
      const Scalar value = top + runner_up - inverse * (others_ + other_squares * inverse);
      const Scalar slope = top / (p1 - lambda) + runner_up / (p2 - lambda) +
                           inverse * inverse * (others_ + 2 * other_squares * inverse);
      const Scalar next = model_step(value, slope, lambda);
      if (next > lower_ && next < upper_) lambda_ = next;
    }
  }

  /// Whether the root is found (then root() is λ_max).
  bool finished() const { return finished_; }
  /// The point λ where the next pass evaluates the power sums (while !finished()).
  Scalar point() const { return lambda_; }
  /// λ_max, once finished().
  Scalar root() const { return lambda_; }

  /// One iteration from the power sums at point(): the model step, then the model iteration on the expansion about
  /// point() without a pass; either ends the iteration or moves point() inside the shrunken bracket.
  void advance(const kernels::SecularPowerSums<Scalar>& sums) {
    const Scalar bracket_tolerance = 4 * std::numeric_limits<Scalar>::epsilon();
    const Scalar lambda = lambda_;
    const Scalar secular = sums.c[0] - sink_mass_ / lambda;  // increasing on (p_(2), p_(1)); root = λ_max (§5.4)
    if (secular == 0) return finish(lambda);
    if (secular > 0) upper_ = lambda; else lower_ = lambda;
    Scalar next = model_step(secular, sums.c[1] + sink_mass_ / (lambda * lambda), lambda);
    if (std::abs(next - lambda) <= step_tolerance() * lambda) return finish(next);  // converged (may sit on an end)
    Scalar expansion_root = 0;
    if (solve_on_expansion(sums, lambda, next, expansion_root)) return finish(expansion_root);
    // not accepted: the expansion's root (when it converged inside the bracket) is the next point to evaluate
    if (expansion_root > lower_ && expansion_root < upper_) next = expansion_root;
    // safeguard: a step beyond a bracket end goes to that end (the root may sit there, e.g. n = 2 where it equals
    // 2·max d), unless that end was just evaluated or is a pole p_(1), p_(2); then bisect
    const Scalar middle = lower_ + (upper_ - lower_) / 2;
    if (!(next <= upper_)) next = (lambda == upper_ || upper_ >= largest_) ? middle : upper_;
    else if (!(next >= lower_)) next = (lambda == lower_ || lower_ <= second_) ? middle : lower_;
    lambda_ = next;
    if (upper_ - lower_ <= bracket_tolerance * upper_ || ++iterations_ == 100) finished_ = true;
  }

 private:
  void finish(Scalar root) {
    lambda_ = root;
    finished_ = true;
  }

  // the model step converges quadratically (error after a step ≈ C·step²): a relative step below 64·eps
  // (7.6e-6 in float, 1.4e-14 in double) leaves the returned value at rounding level even for near-uniform rows,
  // where C is largest (1024·eps measured 1.1e-6 relative error in float there)
  static Scalar step_tolerance() { return 64 * std::numeric_limits<Scalar>::epsilon(); }

  // The fixed-weight model step from g(λ) − r₀/λ and g'(λ) + r₀/λ² at λ [derived]: ψ(λ) = Σ_{i≠argmax} p_i/(p_i − λ)
  // − r₀/λ and ψ'(λ), the argmax term p1/(p1 − λ) removed (ψ' is at least its p_(2) term: guards the subtraction);
  // ψ(μ) ≈ a + b/(p_(2) − μ) matching ψ and ψ' at λ; with μ = p_(2) + τ: a τ² − (a δ + b + p1) τ + b δ = 0, one
  // root in (0, δ) (δ = p_(1) − p_(2) > 0).
  Scalar model_step(Scalar secular, Scalar slope, Scalar at) const {
    const Scalar p1 = largest_, p2 = second_;
    const Scalar argmax_inverse = Scalar(1) / (p1 - at);
    const Scalar offset = at - p2;
    const Scalar psi = secular - p1 * argmax_inverse;
    const Scalar psi_slope = std::max(slope - p1 * argmax_inverse * argmax_inverse, p2 / (offset * offset));
    const Scalar b = psi_slope * offset * offset;
    const Scalar a = psi + psi_slope * offset;
    const Scalar linear = a * gap_ + b + p1, constant = b * gap_;
    const Scalar discriminant = std::sqrt(std::max(Scalar(0), linear * linear - 4 * a * constant));
    if (linear >= 0) return p2 + 2 * constant / (linear + discriminant);
    return a != 0 ? p2 + (linear - discriminant) / (2 * a) : lower_ + (upper_ - lower_) / 2;
  }

  // The expansion of g about an evaluated point λ [derived]: for μ = λ + δ, p_i/(p_i − μ) = t_i/(1 − u_i) with
  // t_i = p_i/(p_i − λ), u_i = δ/(p_i − λ), and 1/(1 − u) = 1 + u + u² + u³ + u⁴ + u⁵/(1 − u) exactly, so
  //   g(μ) = Σ_k c_k δ^k (k = 0..4, c_k = Σ_i p_i/(p_i − λ)^(k+1), one pass: kernels::secular_power_sums)
  //          + Σ_i t_i u_i⁵/(1 − u_i).
  // The remainders of the top two keys are added exactly; every other key has p_i ≤ p_(2) < λ, so |u_i| ≤ ū =
  // |δ|/(λ − p_(2)) and |t_i| ≤ p_i/(λ − p_(2)): their remainders sum to at most E = R/(λ − p_(2))·ū⁵/(1 − ū), R the
  // mass of those keys. The model iteration then runs on this expansion without passes over the row; its root μ is
  // accepted when E moves the root by less than eps/4 relative (E/g'(μ), g' bounded below by the top two keys'
  // terms). On N(0, σ²) logits, σ = 1..6, n = 512 and 4096, 86–99% of rows end after one pass (docs/performance.md).
  //
  // The model iteration on the expansion from `start` (no pass over the row); true with its root when that root is
  // reached (a step below step_tolerance) inside the bracket with a negligible truncation; `root` is set whenever the
  // iteration converged, as the next point to evaluate otherwise.
  //
  // At μ = λ + δ the top two keys have u = δ/(p − λ) and 1/(1 − u) (one division each), and everything else of a
  // step follows from them without a division [derived]: ū = |δ|/(λ − p_(2)) is the runner-up's |u|, and
  // the keys' terms of g'(μ), p/(p − μ)², are p/(p − λ)² · (1/(1 − u))². The truncation test (the others' remainder
  // bound 2E at μ, ū < 1/2, moves the root by less than eps/4 relative: 2E ≤ (eps/4)·μ·g'(μ), with g'(μ) at least
  // the top two keys' terms, every term of g' being positive) is taken multiplied through by 1 − ū > 0. A step costs
  // three divisions (the two 1/(1 − u) and the Newton step) where it cost seven (the start and first advance of a
  // 512-key softmax row: 74–82 ns against 82–86 ns, AMD Zen 3).
  bool solve_on_expansion(const kernels::SecularPowerSums<Scalar>& sums, Scalar at, Scalar start, Scalar& root) const {
    const Scalar p1 = largest_, p2 = second_;
    const Scalar top_inverse = Scalar(1) / (p1 - at), runner_up_inverse = Scalar(1) / (p2 - at);
    const Scalar top_term = p1 * top_inverse, runner_up_term = p2 * runner_up_inverse;
    const Scalar top_slope = top_term * top_inverse, runner_up_slope = runner_up_term * runner_up_inverse;  // p/(p − λ)²
    const Scalar truncation_tolerance = std::numeric_limits<Scalar>::epsilon() / 4;
    // at μ: δ, the top two keys' u = δ/(p − λ) and 1/(1 − u)
    struct Point {
      Scalar delta, top_u, runner_up_u, top_rest, runner_up_rest;
    };
    // whether the expansion holds at μ: both |u| < 1/2, and the others' remainder bound 2E = 2R/(λ − p_(2))·ū⁵/(1 − ū)
    // within (eps/4)·μ·g'(μ), taken times 1 − ū; fills `point`
    const auto expansion_holds = [&](Scalar mu, Point& point) {
      point.delta = mu - at;
      point.top_u = point.delta * top_inverse;
      point.runner_up_u = point.delta * runner_up_inverse;
      if (!(std::abs(point.top_u) < Scalar(0.5)) || !(std::abs(point.runner_up_u) < Scalar(0.5))) return false;
      point.top_rest = Scalar(1) / (1 - point.top_u);
      point.runner_up_rest = Scalar(1) / (1 - point.runner_up_u);
      const Scalar reach = std::abs(point.runner_up_u), reach2 = reach * reach;
      const Scalar slope_floor = top_slope * point.top_rest * point.top_rest +
                                 runner_up_slope * point.runner_up_rest * point.runner_up_rest;
      return 2 * others_ * -runner_up_inverse * (reach2 * reach2 * reach) <=
             truncation_tolerance * mu * slope_floor * (1 - reach);
    };
    Scalar mu = start;
    for (int step = 0; step < 8; ++step) {
      Point point;
      if (!expansion_holds(mu, point)) return false;
      const Scalar delta = point.delta, top_u = point.top_u, runner_up_u = point.runner_up_u;
      const Scalar top_rest = point.top_rest, runner_up_rest = point.runner_up_rest;
      // the top two keys' remainders t·u⁵/(1 − u) and their derivatives in δ, t·w·u⁴(5 − 4u)/(1 − u)² (w = 1/(p − λ))
      const Scalar top_u4 = (top_u * top_u) * (top_u * top_u);
      const Scalar runner_up_u4 = (runner_up_u * runner_up_u) * (runner_up_u * runner_up_u);
      const Scalar value =
          sums.c[0] + delta * (sums.c[1] + delta * (sums.c[2] + delta * (sums.c[3] + delta * sums.c[4]))) +
          top_term * top_u4 * top_u * top_rest + runner_up_term * runner_up_u4 * runner_up_u * runner_up_rest -
          sink_mass_ / mu;
      const Scalar slope = sums.c[1] + delta * (2 * sums.c[2] + delta * (3 * sums.c[3] + delta * 4 * sums.c[4])) +
                           top_slope * top_u4 * (5 - 4 * top_u) * top_rest * top_rest +
                           runner_up_slope * runner_up_u4 * (5 - 4 * runner_up_u) * runner_up_rest * runner_up_rest +
                           sink_mass_ / (mu * mu);
      // away from both poles (every p_i at least μ/64 from μ) a Newton step, one division instead of the model
      // step's square root and three: |g''| ≤ 2g'/dist, so a converged step (≤ 64·eps·μ) leaves an error of at most
      // (64·eps)²·μ²/dist ≤ 64³·eps²·μ, below eps/4 relative [derived]; near a pole the model step, which is exact
      // in the argmax pole
      const Scalar pole_distance = std::min(p1 - mu, mu - p2);
      const Scalar next = pole_distance > mu / 64 ? mu - value / slope : model_step(value, slope, mu);
      if (!(next > lower_ && next < upper_)) return false;
      if (std::abs(next - mu) <= step_tolerance() * mu) {
        root = next;
        Point at_root;
        return expansion_holds(next, at_root);
      }
      mu = next;
    }
    return false;
  }

  Scalar largest_ = 0, second_ = 0, gap_ = 0, others_ = 0, sink_mass_ = 0;  // p_(1), p_(2), δ, R, r₀
  Scalar lower_ = 0, upper_ = 0, lambda_ = 0;  // the bracket and the current point (the root once finished)
  int iterations_ = 0;
  bool finished_ = true;
};

/// The root of the secular equation from its setup (secular_setup) and Σp² (the start uses it): SecularIteration
/// with one kernels::secular_power_sums pass per iteration. Never inlined: one compiled copy per Scalar serves every
/// caller, so that the compiler's choice of fused multiply-adds is the same for all of them and the fused norms from
/// logits of the other maps are bitwise those from their probabilities (tests/normalize/test_fused_spectral_norm.cpp).
template <class Scalar>
EIGEN_DONT_INLINE Scalar solve_secular_equation(const Scalar* p, Index n, const SecularSetup<Scalar>& setup,
                                                Scalar sum_of_squares, Scalar sink_mass, Index* passes) {
  if (passes) *passes = 0;
  SecularIteration<Scalar> iteration(setup, n, sum_of_squares, sink_mass);
  while (!iteration.finished()) {
    iteration.advance(kernels::secular_power_sums(p, n, iteration.point()));  // g(λ), g'(λ), … over the whole row
    if (passes) ++*passes;
  }
  return iteration.root();
}

/// λ_max of diag(p) − ppᵀ for one row of n ≥ 1 non-negative finite entries with sink mass r₀ = 1 − Σp ≥ 0
/// (r₀ = 0: softmax, the g-form of §5.1; r₀ > 0: the sink form of §5.4), given its summary. Each iteration is one
/// vectorized pass (kernels::secular_power_sums); most float rows need one pass, the others two (see the expansion
/// in solve_secular_equation); double rows one to three. `passes`, when given, receives the number of passes.
template <class Scalar>
Scalar secular_largest_eigenvalue(const Scalar* p, Index n, const kernels::TopTwoAndSums<Scalar>& summary,
                                  Scalar sink_mass, Index* passes = nullptr) {
  return solve_secular_equation(p, n, secular_setup(p, n, summary, sink_mass), summary.sum_of_squares, sink_mass,
                                passes);
}

/// The secular setup of the softmax row p = e/S from its exponentials e_i = exp(scale·(z_i − max z)) (the largest is 1,
/// S = Σe) and their summary, in the units of e [derived]: the eigenvalues of diag e − eeᵀ/S are S times those of
/// diag p − ppᵀ, so the root is found on e (SecularIteration is scale-invariant) and divided by S. The quantities of
/// secular_setup times S: p_(1) = 1, the mass of the other keys R = sum_below_one (no cancellation),
/// max_{i≠argmax} d_i = e_(2)(S − e_(2))/S (p(1 − p) increases on [0, 1/2] and p_(2) ≤ 1/2 always), d_argmax = R/S.
template <class Scalar>
SecularSetup<Scalar> softmax_setup_from_exponentials(const kernels::ExponentialSummary<Scalar>& summary) {
  const Scalar total = summary.sum();  // S ≥ 1
  SecularSetup<Scalar> setup;
  setup.largest = 1;
  // two or more ones: a tie at the top, so p_(2) = p_(1) and λ = p_(1) (§5.2 step 2)
  setup.second = summary.count_of_ones >= 2 ? Scalar(1) : summary.largest_below_one;
  setup.rest = summary.sum_below_one;
  const Scalar max_diagonal = std::max(setup.second * (total - setup.second) / total, setup.rest / total);
  setup.lower = std::max(setup.second, max_diagonal);  // interlacing and diagonal ≤ λ_max (§4.1), times S
  setup.upper = std::min(setup.largest, 2 * max_diagonal);  // interlacing and Gershgorin (§4.1), times S
  return setup;
}

/// ‖diag p − ppᵀ‖₂ of the softmax row p = e/S from its exponentials and their summary, without forming p: the root
/// on e from softmax_setup_from_exponentials, divided by S [derived].
template <class Scalar>
Scalar softmax_norm_from_exponentials(const Scalar* e, Index n, const kernels::ExponentialSummary<Scalar>& summary,
                                      Index* passes = nullptr) {
  const Scalar total = summary.sum();  // S ≥ 1
  return solve_secular_equation(e, n, softmax_setup_from_exponentials(summary), summary.sum_of_squares, Scalar(0),
                                passes) / total;
}

/// Tolerance on row sums of probabilities (|Σp − 1| for distributions, Σp − 1 for sink rows): a sanity check that
/// catches logits passed by mistake while accepting float round-off and float rows stored as double.
inline constexpr double probability_sum_tolerance = 1e-3;

/// Validates one row of probabilities (finite, non-negative, sum rule) and returns its one-pass summary.
template <class Scalar>
kernels::ProbabilityRowSummary<Scalar> validate_probability_row(const char* function, const Scalar* p, Index n,
                                                                Index row, bool allow_sink_mass) {
  const auto summary = kernels::probability_row_summary(p, n);
  if (!summary.finite || summary.min < 0) {
    for (Index j = 0; j < n; ++j)
      if (!std::isfinite(p[j]) || p[j] < 0)
        throw_invalid_argument(function, "probability ", p[j], " at row ", row, ", visible key ", j,
                               " is not finite and >= 0");
  }
  const double excess = static_cast<double>(summary.sum) - 1.0;
  if (excess > probability_sum_tolerance || (!allow_sink_mass && excess < -probability_sum_tolerance))
    throw_invalid_argument(function, "row ", row, " sums to ", summary.sum, allow_sink_mass ? ", more than 1" :
                           ", not 1 (tolerance ", probability_sum_tolerance, ")");
  return summary;
}

/// Calls row_function(row, const Scalar* visible_p, Index n) for every row with the visible entries made contiguous;
/// collects the results in a vector. Rows run in parallel; an exception thrown by a row is rethrown after the loop
/// (the one of the lowest row), so bad input never escapes an OpenMP region.
template <class Derived, class RowFunction>
Vector<typename Derived::Scalar> map_probability_rows(const char* function, const Eigen::MatrixBase<Derived>& input,
                                                      const Visibility& visibility, RowFunction&& row_function) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope: probabilities must be float or double");
  const Eigen::Ref<const RowMatrix<Scalar>, 0, Eigen::OuterStride<>> probabilities(input.derived());
  require_nonempty(function, probabilities);
  const Index rows = probabilities.rows(), cols = probabilities.cols();
  visibility.validate(function, rows, cols);
  Vector<Scalar> norms(rows);
  for_each_row_rethrowing(rows, 8 * cols, [&](Index i) {
    const Scalar* row = probabilities.data() + i * probabilities.outerStride();
    if (visibility.is_prefix()) {
      norms(i) = row_function(i, row, visibility.prefix_length(i, cols));
    } else {
      std::vector<Scalar> gathered;
      gather_visible(row, i, cols, visibility, gathered);
      norms(i) = row_function(i, gathered.data(), static_cast<Index>(gathered.size()));
    }
  });
  return norms;
}

/// Exact ‖scale·(diag p − ppᵀ)‖₂ for one row of a distribution (no validation; n ≥ 1, p ≥ 0 finite).
template <class Scalar>
Scalar softmax_jacobian_norm_row(const Scalar* p, Index n, Scalar scale) {
  return scale *
         secular_largest_eigenvalue(p, n, kernels::probability_row_summary(p, n).top_two_and_sums(), Scalar(0));
}

/// Exact ‖diag p − ppᵀ‖₂ for one row with Σp ≤ 1, sink mass r₀ = 1 − Σp (§5.4; no validation).
template <class Scalar>
Scalar sink_softmax_jacobian_norm_row(const Scalar* p, Index n) {
  const auto summary = kernels::probability_row_summary(p, n);
  return secular_largest_eigenvalue(p, n, summary.top_two_and_sums(), std::max(Scalar(0), Scalar(1) - summary.sum));
}

/// Exact ‖diag p − ppᵀ‖₂ for one row whose sink mass r₀ is known exactly (a learned sink's share σ, with Σp = 1 − r₀
/// up to the rounding of p) (§5.4; no validation).
template <class Scalar>
Scalar sink_softmax_jacobian_norm_row(const Scalar* p, Index n, Scalar sink_mass) {
  return secular_largest_eigenvalue(p, n, kernels::probability_row_summary(p, n).top_two_and_sums(), sink_mass);
}

/// Exact ‖diag g − ggᵀ/Σg‖₂, g = p^{2−α} on the support (entmax, §1.2 and §5.4), for one row; `weights` is scratch.
/// Uses diag g − ggᵀ/G = G·(diag q − qqᵀ) with q = g/G, G = Σg [derived].
template <class Scalar>
Scalar entmax_jacobian_norm_row(const Scalar* p, Index n, Scalar alpha, std::vector<Scalar>& weights) {
  weights.resize(static_cast<std::size_t>(n));
  const Scalar exponent = 2 - alpha;
  Scalar total = 0;
  for (Index i = 0; i < n; ++i) {
    weights[static_cast<std::size_t>(i)] = p[i] > 0 ? std::pow(p[i], exponent) : Scalar(0);  // g_i = p_i^{2−α}
    total += weights[static_cast<std::size_t>(i)];
  }
  if (!(total > 0)) return 0;
  kernels::scale_row(weights.data(), n, Scalar(1) / total);
  return total * softmax_jacobian_norm_row(weights.data(), n, Scalar(1));
}

/// ‖J‖₂ of sparsemax for one row: 1 if the support has at least two keys, else 0 (§1.1; J is a projector).
template <class Scalar>
Scalar sparsemax_jacobian_norm_row(const Scalar* p, Index n) {
  Index support = 0;
  for (Index i = 0; i < n && support < 2; ++i) support += p[i] > 0 ? 1 : 0;
  return support >= 2 ? Scalar(1) : Scalar(0);
}

/// Cheap two-sided bound of one row of a distribution, times scale (§4.1).
template <class Scalar>
void softmax_jacobian_norm_bounds_row(const Scalar* p, Index n, Scalar scale, Scalar& lower, Scalar& upper) {
  const SecularSetup<Scalar> setup =
      secular_setup(p, n, kernels::probability_row_summary(p, n).top_two_and_sums(), Scalar(0));
  lower = scale * setup.lower;
  upper = scale * setup.upper;
}

}  // namespace detail

/// Exact ‖J‖₂ of every row for J = scale·(diag p − ppᵀ), the Jacobian of p = softmax(scale·z) (softmax with
/// temperature T: scale = 1/T; SSMax: scale = s·log n), from the probabilities p (docs/theory/normalization-maps.md §5.1-§5.3).
/// The g-form solved here is exactly the norm of scale·(diag p − ppᵀ/Σp), so the rounding of Σp (≈1e-7 in float) is
/// not read as sink mass; use sink_softmax_jacobian_spectral_norm for rows that intentionally sum to less than 1.
/// Masked entries are ignored. O(n) per row. Throws attnscope::invalid_argument on empty input, mask mismatch, a fully
/// masked row, non-finite or negative probabilities, a row not summing to 1 (±1e-3), scale not finite and > 0.
template <class Derived>
Vector<typename Derived::Scalar> softmax_jacobian_spectral_norm(const Eigen::MatrixBase<Derived>& probabilities,
                                                                typename Derived::Scalar scale = 1,
                                                                const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  const char* function = "softmax_jacobian_spectral_norm";
  detail::require_positive(function, "scale", scale);
  return detail::map_probability_rows(function, probabilities, visibility, [&](Index row, const Scalar* p, Index n) {
    const auto summary = detail::validate_probability_row(function, p, n, row, false);
    return scale * detail::secular_largest_eigenvalue(p, n, summary.top_two_and_sums(), Scalar(0));
  });
}

/// Exact ‖diag p − ppᵀ‖₂ of every row of softmax with a sink (off-by-one softmax, learned sink logit): rows sum to
/// Σp = 1 − r₀ ≤ 1, r₀ the sink's weight (docs/theory/normalization-maps.md §4.9, §5.4). O(n) per row. Throws as
/// softmax_jacobian_spectral_norm, for rows summing to more than 1 + 1e-3.
template <class Derived>
Vector<typename Derived::Scalar> sink_softmax_jacobian_spectral_norm(const Eigen::MatrixBase<Derived>& probabilities,
                                                                     const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  const char* function = "sink_softmax_jacobian_spectral_norm";
  return detail::map_probability_rows(function, probabilities, visibility, [&](Index row, const Scalar* p, Index n) {
    const auto summary = detail::validate_probability_row(function, p, n, row, true);
    return detail::secular_largest_eigenvalue(p, n, summary.top_two_and_sums(),
                                              std::max(Scalar(0), Scalar(1) - summary.sum));
  });
}

/// Exact ‖J‖₂ of every row of α-entmax, J = diag(g) − ggᵀ/Σg with g = p^{2−α} on the support (docs/theory/normalization-maps.md
/// §1.2, §5.4), from the entmax probabilities p. O(n) per row. Throws as softmax_jacobian_spectral_norm and for α not
/// finite and > 1.
template <class Derived>
Vector<typename Derived::Scalar> entmax_jacobian_spectral_norm(const Eigen::MatrixBase<Derived>& probabilities,
                                                               typename Derived::Scalar alpha,
                                                               const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  const char* function = "entmax_jacobian_spectral_norm";
  if (!(alpha > 1) || !std::isfinite(static_cast<double>(alpha)))
    detail::throw_invalid_argument(function, "alpha must be finite and > 1, got ", alpha);
  return detail::map_probability_rows(function, probabilities, visibility, [&](Index row, const Scalar* p, Index n) {
    detail::validate_probability_row(function, p, n, row, false);
    std::vector<Scalar> weights;
    return detail::entmax_jacobian_norm_row(p, n, alpha, weights);
  });
}

/// ‖J‖₂ of every row of sparsemax from its probabilities: 1 if at least two keys have p > 0, else 0
/// (docs/theory/normalization-maps.md §1.1: J is the orthogonal projector diag(s) − ssᵀ/|S|). O(n) per row. Throws as
/// softmax_jacobian_spectral_norm.
template <class Derived>
Vector<typename Derived::Scalar> sparsemax_jacobian_spectral_norm(const Eigen::MatrixBase<Derived>& probabilities,
                                                                  const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  const char* function = "sparsemax_jacobian_spectral_norm";
  return detail::map_probability_rows(function, probabilities, visibility, [&](Index row, const Scalar* p, Index n) {
    detail::validate_probability_row(function, p, n, row, false);
    return detail::sparsemax_jacobian_norm_row(p, n);
  });
}

/// Cheap two-sided bound of ‖scale·(diag p − ppᵀ)‖₂ per row (docs/theory/normalization-maps.md §4.1 [derived]):
/// scale·max(p_(2), max_i d_i) ≤ ‖J‖₂ ≤ scale·min(p_(1), 2·max_i d_i), d_i = p_i(1 − p_i) (d_argmax = p_(1)·Σ_{j≠argmax} p_j);
/// upper ≤ 2·lower. One pass per row. Throws as softmax_jacobian_spectral_norm.
template <class Derived>
JacobianNormBounds<typename Derived::Scalar> softmax_jacobian_norm_bounds(
    const Eigen::MatrixBase<Derived>& probabilities, typename Derived::Scalar scale = 1,
    const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  const char* function = "softmax_jacobian_norm_bounds";
  detail::require_positive(function, "scale", scale);
  JacobianNormBounds<Scalar> bounds;
  bounds.upper.resize(probabilities.rows());
  bounds.lower = detail::map_probability_rows(function, probabilities, visibility,
                                              [&](Index row, const Scalar* p, Index n) {
    const auto summary = detail::validate_probability_row(function, p, n, row, false);
    const auto setup = detail::secular_setup(p, n, summary.top_two_and_sums(), Scalar(0));
    bounds.upper(row) = scale * setup.upper;
    return scale * setup.lower;
  });
  return bounds;
}

}  // namespace attnscope
