// Reproduction 5 of arXiv:2508.17821, Fig. 4 (Alg. 5, Lemma 2 / Corollary 3): the
// finite-difference Jacobian norm g(T, ε) = max over heads of the mean over query rows of
// ‖softmax((l + εv)/T) − softmax(l/T)‖₂/ε (v a random unit vector per row) for ε ∈ {1e−3, 1e−1, 10}, T = logspace(−3, 1),
// beside the exact ‖J‖₂ (same aggregation, and the max over rows) and the curves min{1/(4T), √2} (Cor. 3) and 1/(2T)
// (the true supremum); the top-2 gap distribution, the share of rows with gap < T and the two-logit closed form.
// Synthetic: 12 causal heads of 128 sphere tokens in R^64, logits qᵀx/8 with ‖q‖ ∈ {1, 4, 16}. Real: the 40 heads'
// scaled scores on stories260K's greedy 256-token sequence (FdLogits::Scaled: T = 1 is the model), or a capture.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <vector>

#include "attnscope/capacity.hpp"
#include "attnscope/normalize/spectral_norm.hpp"
#include "capacity/capacity_data.hpp"
#include "support/example.hpp"

using namespace attnscope;
using namespace attnscope::examples;

namespace {

const std::vector<double> steps{1e-3, 1e-1, 10};
const std::vector<std::string> step_names{"0.001", "0.1", "10"};

struct Curves {
  std::vector<double> temperatures;
  std::vector<std::vector<double>> finite_difference;  // per step, per T
  std::vector<double> exact_max, exact_max_over_rows, quarter, half;
};

template <class Matrix>
Curves measure(const std::vector<Matrix>& heads, const std::vector<double>& temperatures, Csv& csv,
               const std::string& label) {
  Curves curves;
  curves.temperatures = temperatures;
  curves.finite_difference.assign(steps.size(), {});
  for (const double temperature : temperatures) {
    for (std::size_t s = 0; s < steps.size(); ++s)
      curves.finite_difference[s].push_back(capacity::gradient_sensitivity(heads, temperature, steps[s], 2508, causal).value);
    const capacity::ExactJacobianNorm exact = capacity::exact_jacobian_norm(heads, temperature, causal);
    curves.exact_max.push_back(exact.max_of_head_means);
    curves.exact_max_over_rows.push_back(exact.max_over_rows);
    curves.quarter.push_back(corollary3_bound(temperature));
    curves.half.push_back(softmax_jacobian_norm_supremum(temperature));
    const std::size_t t = curves.exact_max.size() - 1;
    csv.row(label, temperature, curves.finite_difference[0][t], curves.finite_difference[1][t],
            curves.finite_difference[2][t], curves.exact_max[t], curves.exact_max_over_rows[t], curves.quarter[t],
            curves.half[t]);
  }
  return curves;
}

nlohmann::json to_json(const Curves& curves) {
  nlohmann::json out;
  out["T"] = curves.temperatures;
  for (std::size_t s = 0; s < steps.size(); ++s) out["finite_difference"][step_names[s]] = curves.finite_difference[s];
  out["exact_max"] = curves.exact_max;
  out["exact_max_over_rows"] = curves.exact_max_over_rows;
  out["bound_quarter"] = curves.quarter;
  out["bound_half"] = curves.half;
  return out;
}

/// Least-squares slope of log y against log T over T <= limit (capacity::fit_power_law).
double log_slope(const Curves& curves, const std::vector<double>& values, double limit) {
  std::vector<double> x, y;
  for (std::size_t t = 0; t < curves.temperatures.size(); ++t)
    if (curves.temperatures[t] <= limit * (1 + 1e-9)) {
      x.push_back(curves.temperatures[t]);
      y.push_back(values[t]);
    }
  return capacity::fit_power_law(x, y).exponent;
}

/// The top-2 gap view of a model's heads (docs/theory/capacity.md §3.3): every row's gap, and per T the share of rows
/// with gap < T and the two-logit closed form aggregated like g (max over heads of the row mean).
struct GapView {
  std::vector<double> gaps;                    // all rows of all heads (+∞ for single-key rows)
  std::vector<double> share_below, two_logit;  // per T
};

template <class Matrix>
GapView gap_view(const std::vector<Matrix>& heads, const std::vector<double>& temperatures) {
  GapView view;
  std::vector<std::vector<double>> per_head;
  for (const auto& head : heads) {
    per_head.push_back(capacity::top_two_gaps(head, causal));
    view.gaps.insert(view.gaps.end(), per_head.back().begin(), per_head.back().end());
  }
  for (const double temperature : temperatures) {
    double below = 0, largest_mean = 0;
    for (const double gap : view.gaps) below += gap < temperature ? 1 : 0;
    for (const auto& gaps : per_head) {
      double total = 0;
      for (const double gap : gaps) total += capacity::two_logit_jacobian_norm(gap, temperature);
      largest_mean = std::max(largest_mean, total / double(gaps.size()));
    }
    view.share_below.push_back(below / double(view.gaps.size()));
    view.two_logit.push_back(largest_mean);
  }
  return view;
}

std::size_t index_of(const Curves& curves, double temperature) {
  std::size_t best = 0;
  for (std::size_t t = 0; t < curves.temperatures.size(); ++t)
    if (std::abs(std::log(curves.temperatures[t] / temperature)) < std::abs(std::log(curves.temperatures[best] / temperature)))
      best = t;
  return best;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options options = parse_options(argc, argv);
  configure_threads(options);
  Report report(options, "capacity", "jacobian_temperature", "Gradient sensitivity against temperature (Fig. 4, Alg. 5)");
  const std::vector<double> temperatures = logspace(-3, 1, options.quick ? 9 : 25);
  Csv csv(report.path("jacobian_temperature.csv"),
          {"source", "T", "fd_0.001", "fd_0.1", "fd_10", "exact_max", "exact_max_over_rows", "bound_quarter",
           "bound_half"});

  Random random(2508);
  std::vector<RowMatrix<double>> synthetic_heads;
  const Index tokens = 128, dim = 64;
  for (int h = 0; h < 12; ++h) {
    RowMatrix<double> x(tokens, dim), q(tokens, dim);
    for (Index i = 0; i < tokens; ++i)
      for (Index j = 0; j < dim; ++j) x(i, j) = random.normal(), q(i, j) = random.normal();
    const double norm = std::vector<double>{1, 4, 16}[std::size_t(h % 3)];
    for (Index i = 0; i < tokens; ++i) x.row(i).normalize(), q.row(i) *= norm / q.row(i).norm();
    synthetic_heads.push_back(q * x.transpose() / std::sqrt(double(dim)));
  }
  const Curves synthetic = measure(synthetic_heads, temperatures, csv, "synthetic");
  const RealSource source = real_source(options, 0);  // greedy sequence only (or the capture)
  const Curves real = measure(source.sequences.front().scores, temperatures, csv, source.label);
  // The exact ‖J‖₂ at the three temperatures, on top of the grid (the grid's points need not hit them).
  const std::vector<double> check_temperatures{1e-3, 1e-2, 1e-1};
  const GapView gaps = gap_view(source.sequences.front().scores, temperatures);
  const GapView gaps_at_checks = gap_view(source.sequences.front().scores, check_temperatures);
  std::vector<double> exact_at_checks;
  for (const double temperature : check_temperatures)
    exact_at_checks.push_back(capacity::exact_jacobian_norm(source.sequences.front().scores, temperature, causal)
                                  .max_of_head_means);
  std::vector<double> finite_gaps;
  for (const double gap : gaps.gaps)
    if (std::isfinite(gap)) finite_gaps.push_back(gap);
  const Spread gap_spread = spread_of(finite_gaps);
  const auto share_of_gaps_below = [&](double limit) {
    double below = 0;
    for (const double gap : finite_gaps) below += gap < limit ? 1 : 0;
    return below / double(finite_gaps.size());
  };
  {
    Csv gap_csv(report.path("jacobian_gaps.csv"), {"source", "quantile", "top2_gap"});
    std::vector<double> sorted = finite_gaps;
    std::sort(sorted.begin(), sorted.end());
    for (int k = 0; k <= 100; ++k) {
      const std::size_t at = std::min(sorted.size() - 1, std::size_t(double(k) / 100 * double(sorted.size() - 1) + 0.5));
      gap_csv.row(source.label, double(k) / 100, sorted[at]);
    }
    Csv share_csv(report.path("jacobian_gap_share.csv"), {"source", "T", "share_gap_below_T", "two_logit_max_mean",
                                                           "exact_max_mean", "exact_max_over_rows"});
    for (std::size_t t = 0; t < temperatures.size(); ++t)
      share_csv.row(source.label, temperatures[t], gaps.share_below[t], gaps.two_logit[t], real.exact_max[t],
                    real.exact_max_over_rows[t]);
  }

  nlohmann::json out;
  out["synthetic"] = to_json(synthetic);
  out[source.label] = to_json(real);
  out[source.label]["source"] = source.description + "; logits = the model's scaled scores q.k/sqrt(d_head) "
                                                     "(FdLogits::Scaled), greedy sequence";
  out[source.label]["two_logit_max_mean"] = gaps.two_logit;
  out[source.label]["share_gap_below_T"] = gaps.share_below;
  out[source.label]["top2_gap"] = {{"rows", finite_gaps.size()}, {"median", gap_spread.median},
                                   {"q1", gap_spread.lower_quartile}, {"q3", gap_spread.upper_quartile},
                                   {"min", gap_spread.minimum}, {"max", gap_spread.maximum},
                                   {"share_below_0.01", share_of_gaps_below(0.01)},
                                   {"share_below_0.1", share_of_gaps_below(0.1)}};
  out["aggregation"] = "finite_difference and exact_max: max over heads of the mean over query rows (Alg. 5); "
                       "exact_max_over_rows: max over heads and rows of the exact ||J||_2";
  std::filesystem::create_directories(options.out_dir / "normalization_limits");
  std::ofstream(options.out_dir / "normalization_limits" / "jacobian_temperature.json") << out.dump(2) << "\n";

  // Claims, on the real model.
  const double slope = log_slope(real, real.finite_difference[0], 0.1);
  const std::size_t t_small = index_of(real, 0.01), t_one = index_of(real, 1.0), t_tenth = index_of(real, 0.1);
  bool ordered = true;
  for (std::size_t t = 0; t <= t_tenth; ++t)
    ordered &= real.finite_difference[0][t] >= real.finite_difference[1][t] * (1 - 1e-9) &&
               real.finite_difference[1][t] >= real.finite_difference[2][t] * (1 - 1e-9);
  const double exact_mean_slope = log_slope(real, real.exact_max, 0.1);
  const double exact_max_slope = log_slope(real, real.exact_max_over_rows, 0.1);
  const double near_tied = share_of_gaps_below(0.01);
  const std::string mean_law = std::abs(slope + 1) < 0.3 ? "follows 1/T" : "is much flatter than 1/T";
  report.claim({"Fig. 4: g ∝ 1/T for T < 0.1, smaller ε larger", "1/T trend below T = 0.1; smaller ε gives larger values",
                source.label + ": log–log slope over T <= 0.1 of the row mean (max over heads, Alg. 5): g(ε=1e−3) " +
                    format(slope, 3) + ", exact ‖J‖₂ " + format(exact_mean_slope, 3) + "; of the max over rows: " +
                    format(exact_max_slope, 3) + ". Top-2 gap: median " + format(gap_spread.median, 3) + ", " +
                    format(100 * near_tied, 3) + "% of rows below 0.01. Ordering ε = 1e−3 ≥ 1e−1 ≥ 10 " +
                    (ordered ? "holds" : "does not hold") + " at every T <= 0.1",
                std::abs(slope + 1) < 0.3 && ordered
                    ? "agrees"
                    : std::abs(exact_max_slope + 1) < 0.3
                          ? "partly: the 1/T law holds for the most near-tied row (max over rows, slope " +
                                format(exact_max_slope, 3) + ") but the paper's row mean " + mean_law +
                                ": a row sits near 1/(2T) only when its top-2 gap is below ≈ T, and only " +
                                format(100 * near_tied, 3) + "% of this model's rows have a gap below 0.01"
                          : "disagrees: neither the row mean nor the max over rows follows 1/T"});
  const auto at_checks = [&](const std::vector<double>& values) {
    return format(values[0], 4) + " / " + format(values[1], 4) + " / " + format(values[2], 4);
  };
  double closed_form_error = 0;
  for (std::size_t k = 0; k < check_temperatures.size(); ++k)
    closed_form_error = std::max(closed_form_error, std::abs(gaps_at_checks.two_logit[k] / exact_at_checks[k] - 1));
  report.claim({"Two-logit closed form 1/(2T·cosh²(g/(2T))) from the top-2 gap g explains the row-mean curve",
                "[derived] (not in the paper); an independent check: 4.635 / 1.927 / 1.127 against the exact "
                "4.635 / 1.904 / 1.109 at T = 1e−3 / 1e−2 / 1e−1 (stories260K)",
                source.label + " at T = 1e−3 / 1e−2 / 1e−1 (max over heads of the row mean): closed form " +
                    at_checks(gaps_at_checks.two_logit) + ", exact " + at_checks(exact_at_checks) +
                    "; largest relative difference " + format(100 * closed_form_error, 3) + "%",
                closed_form_error < 0.05
                    ? "agrees: the mean curve is the closed form averaged over the measured gap distribution, so its "
                      "slope is set by how many rows are near-tied, not by the softmax"
                    : "partly: the closed form misses the exact mean by more than 5% (rows whose third logit "
                      "matters)"});
  double spread_at_one = 0;
  for (std::size_t s = 1; s < steps.size(); ++s)
    spread_at_one = std::max(spread_at_one, std::abs(real.finite_difference[s][t_one] / real.finite_difference[0][t_one] - 1));
  const double drop = real.finite_difference[0][t_small] / real.finite_difference[0][t_one];
  report.claim({"Fig. 4: at T >= 1 the curves collapse and drop by two orders of magnitude",
                "collapse of the three ε curves; ~100× lower than at small T",
                "g(0.01)/g(1) = " + format(drop, 3) + " (ε = 1e−3); at T = 1 the ε curves differ by " +
                    format(100 * spread_at_one, 3) + "%",
                drop > 30 && spread_at_one < 0.5 ? "agrees (the drop is ≈ the 1/T factor of 100 between T = 0.01 and 1)"
                : spread_at_one < 0.5            ? "partly: the ε curves collapse at T >= 1, but the drop is ×" +
                                                       format(drop, 3) + ", not ×100"
                                                 : "disagrees: see the numbers"});
  double fd_over_quarter = 0, fd_over_half = 0;
  for (std::size_t t = 0; t < real.temperatures.size(); ++t)
    for (std::size_t s = 0; s < steps.size(); ++s) {
      fd_over_quarter = std::max(fd_over_quarter, real.finite_difference[s][t] / real.quarter[t]);
      fd_over_half = std::max(fd_over_half, real.finite_difference[s][t] / real.half[t]);
    }
  report.claim({"Fig. 4: GPT-2 operates close to min{1/(4T), √2} below T = 0.1",
                "close to the dashed bound when T < 0.1",
                source.label + ": g/min{1/(4T),√2} at T = 0.01: " +
                    format(real.finite_difference[0][t_small] / real.quarter[t_small], 3) + ", at T = 0.1: " +
                    format(real.finite_difference[0][t_tenth] / real.quarter[t_tenth], 3) + "; max over all T, ε: " +
                    format(fd_over_quarter, 3),
                fd_over_quarter > 0.5 ? "agrees: within a factor 2 of the curve"
                                      : "disagrees: g stays an order of magnitude below the curve at T < 0.1 "
                                        "(the curve is √2 there); it approaches 1/(4T) only near T ≈ 0.5–1"});
  double exact_over_quarter = 0, exact_over_half = 0, exact_over_four_t = 0;
  for (std::size_t t = 0; t < real.temperatures.size(); ++t) {
    exact_over_quarter = std::max(exact_over_quarter, real.exact_max_over_rows[t] / real.quarter[t]);
    exact_over_half = std::max(exact_over_half, real.exact_max_over_rows[t] / real.half[t]);
    exact_over_four_t = std::max(exact_over_four_t, real.exact_max_over_rows[t] * 4 * real.temperatures[t]);
  }
  report.claim({"Cor. 3 vs the exact norm: ‖J‖₂ <= min{1/(4T), √2}?",
                "Cor. 3 states ‖∇α‖₂ <= min{1/(4T), √2}; the spec's [derived] caveat: the supremum is 1/(2T)",
                "max over T and rows of exact ‖J‖₂ / min{1/(4T),√2} = " + format(exact_over_quarter, 4) +
                    " (the √2 cap is passed at small T), / (1/(4T)) = " + format(exact_over_four_t, 4) +
                    ", / (1/(2T)) = " + format(exact_over_half, 4) + "; g / (1/(2T)) <= " + format(fd_over_half, 4),
                exact_over_quarter > 1
                    ? "disagrees with Cor. 3: the supremum of ‖J‖₂ is 1/(2T), reached by two tied logits (eigenvalues "
                      "{0, 1/(2T)}), so 1/(4T) is not a bound on ‖J‖₂ (it is the largest diagonal entry "
                      "α_i(1 − α_i)/T); this model's most near-tied rows reach " + format(exact_over_four_t, 4) +
                          " × 1/(4T), and every row stays below 1/(2T)"
                    : "agrees on these rows only: the supremum of ‖J‖₂ is 1/(2T) (two tied logits), so 1/(4T) is not "
                      "a bound in general (see the next row)"});
  Eigen::VectorXd tied(5), direction(5);
  tied << 1, 1, 0, 0, 0;
  direction << 1, -1, 0, 0, 0;
  const double along = capacity::finite_difference_jacobian_norm(tied, direction, 0.01, 1e-4);
  double random_largest = 0;
  Random directions(7);
  for (int trial = 0; trial < 1000; ++trial) {
    Eigen::VectorXd v(5);
    for (Index i = 0; i < 5; ++i) v(i) = directions.normal();
    random_largest = std::max(random_largest, capacity::finite_difference_jacobian_norm(tied, v, 0.01, 1e-4));
  }
  report.claim({"Spec target: logits (1,1,0,0,0), T = 0.01, ε = 1e−4", "ratio up to 1/(2T) = 50, above 1/(4T) = 25 for some v",
                "v = (e1 − e2)/√2: " + format(along, 6) + "; max over 1000 random unit v: " + format(random_largest, 4),
                along > 25 && random_largest > 25 ? "agrees: Cor. 3's 1/(4T) is not a spectral-norm bound" : "disagrees"});
  report.text("Top-2 gaps of the real model (" + source.label + ", greedy sequence, " +
              std::to_string(finite_gaps.size()) + " rows with at least two visible keys over all heads): median " +
              format(gap_spread.median, 3) + ", quartiles " + format(gap_spread.lower_quartile, 3) + " … " +
              format(gap_spread.upper_quartile, 3) + ", minimum " + format(gap_spread.minimum, 3) + "; " +
              format(100 * share_of_gaps_below(0.01), 3) + "% of rows below 0.01 and " +
              format(100 * share_of_gaps_below(0.1), 3) + "% below 0.1 (quantiles in jacobian_gaps.csv, the share "
              "below each T in jacobian_gap_share.csv). For two logits ‖J‖₂ = 1/(2T·cosh²(g/(2T))) exactly "
              "([derived]): ≈ 1/(2T) when g ≪ T, exponentially small when g ≫ T. So a 1/T law needs near-tied top "
              "logits; the max over rows follows it, the row mean follows it only as far as the share of rows with "
              "g < T allows. The supremum over all logit vectors is 1/(2T) (two tied logits), twice Corollary 3's "
              "1/(4T).");
  report.text("Real model: " + source.description + ". T rescales the model's own scaled scores (T = 1 is the model). "
              "Synthetic: 12 causal heads, 128 tokens on the unit sphere of R^64, logits q.x/8 with ||q|| in {1, 4, 16}.");
  report.figure("jacobian_temperature.png",
                "set datafile separator ','\nset logscale xy\nset key bottom left\nset xlabel 'T'\n"
                "set ylabel 'Jacobian norm'\n"
                "model_only(c) = strcol(1) ne 'synthetic' ? column(c) : 1/0\n"
                "plot 'jacobian_temperature.csv' every ::1 using 2:(model_only(3)) with linespoints title 'g, eps=1e-3', "
                "'' every ::1 using 2:(model_only(4)) with linespoints title 'g, eps=1e-1', "
                "'' every ::1 using 2:(model_only(5)) with linespoints title 'g, eps=10', "
                "'' every ::1 using 2:(model_only(6)) with lines lw 2 title 'exact ||J||, max over heads of row mean', "
                "'' every ::1 using 2:(model_only(7)) with lines lw 2 lc 'dark-red' title 'exact ||J||, max over rows', "
                "'jacobian_gap_share.csv' every ::1 using 2:4 with lines dashtype 4 lc 'dark-green' title 'two-logit "
                "closed form from the top-2 gap (row mean)', "
                "'' every ::1 using 2:(model_only(8)) with lines dashtype 2 lc 'black' title 'min{1/(4T), sqrt 2}', "
                "'' every ::1 using 2:(model_only(9)) with lines dashtype 3 lc 'red' title '1/(2T)'",
                "g(T, ε) on the real model's heads (max over heads of the row mean) for three ε, the exact ‖J‖₂ with the "
                "same aggregation and as the max over rows, the two-logit closed form from the measured top-2 gaps (row mean), "
                "Corollary 3's min{1/(4T), √2} (dashed) and the true supremum 1/(2T) (dotted).");
  report.figure("jacobian_gap_share.png",
                "set datafile separator ','\nset logscale x\nset key top left\nset xlabel 'T'\n"
                "set ylabel 'share of rows'\nset yrange [0:1]\n"
                "plot 'jacobian_gap_share.csv' every ::1 using 2:3 with linespoints lc 'blue' title 'share of rows with "
                "top-2 gap < T'",
                "Share of the real model's query rows whose top-2 gap is below T: the rows that can sit near 1/(2T).");
  report.finish();
  return 0;
} catch (const std::exception& error) {
  std::cerr << "jacobian_temperature: " << error.what() << "\n";
  return 1;
}
