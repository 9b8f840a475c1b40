// Reproduction 3 (docs/theory/logits.md, reproduction target #3): a sliding-window head fits the band exactly without
// logit growth (S ≡ 0 is optimal), and mixing window heads with a full head lowers the full head's logits.
#include <iostream>

#include "lab.hpp"

using namespace attnscope;
using namespace attnscope::examples;

namespace {

std::vector<Visibility> layout(Index heads, Index full_heads, Index n, Index span) {
  std::vector<Visibility> visibilities;
  for (const Mask& mask : logits::head_layout(heads, full_heads, n, span)) visibilities.emplace_back(mask);
  return visibilities;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  Report report(options, "logits", "logits_local_heads", "Local (sliding-window) heads remove the need for large logits");
  const Index w = 4, d = 8, steps = 400;
  const double global_share = 0.2;  // [derived] P = 0.8·band + 0.2·uniform over the causal prefix
  const std::vector<Index> lengths = options.quick ? std::vector<Index>{64} : std::vector<Index>{64, 128, 256};
  const Index main_n = options.quick ? 64 : 128;
  logits::FitOptions fit_options;
  fit_options.head_dim = d;
  fit_options.steps = steps;

  // (a) one window head (span w − 1: keys i−3..i) on the dense band target; (b) per n: a lone full head and
  // 1 full + 3 window heads on the local-plus-global target, and the same two on the pure band.
  struct Job {
    Index n;
    int kind;  // 0 window head, 1 full alone (mixed target), 2 mixture (mixed target), 3 full alone (band), 4 mixture (band)
  };
  std::vector<Job> jobs{{main_n, 0}};
  for (const Index n : lengths)
    for (int kind = 1; kind <= 4; ++kind) jobs.push_back({n, kind});
  const auto fits = lab::run_jobs<logits::FitResult<double>>(jobs.size(), [&](std::size_t k) {
    const Job& job = jobs[k];
    const RowMatrix<double> band = logits::causal_band_target(job.n, w);
    const RowMatrix<double> mixed = logits::causal_band_target(job.n, w, global_share);
    switch (job.kind) {
      case 0: return logits::fit_qk(band, logits::sliding_window_mask(job.n, w - 1), fit_options);
      case 1: return logits::fit_qk(mixed, causal, fit_options);
      case 2: return logits::fit_heads(mixed, layout(4, 1, job.n, w - 1), fit_options);
      case 3: return logits::fit_qk(band, causal, fit_options);
      default: return logits::fit_heads(band, layout(4, 1, job.n, w - 1), fit_options);
    }
  });
  auto find = [&](Index n, int kind) -> const logits::FitResult<double>& {
    for (std::size_t k = 0; k < jobs.size(); ++k)
      if (jobs[k].n == n && jobs[k].kind == kind) return fits[k];
    throw std::runtime_error("missing job");
  };
  const auto& window = fits[0];
  const double window_init = window.log.front().max_visible_logit, window_final = window.final_step().max_visible_logit;
  const double window_kl_100 = window.log[100].kl, window_kl = window.final_step().kl;

  Csv per_n(report.path("local_heads_vs_n.csv"), {"n", "full_alone_max_logit", "full_with_local_max_logit",
                                                   "local_heads_max_logit", "full_alone_kl", "mixture_kl",
                                                   "full_head_weight", "band_full_alone_max_logit",
                                                   "band_full_with_local_max_logit", "band_full_head_weight"});
  std::vector<double> alone_by_n, mixed_by_n;
  for (const Index n : lengths) {
    const auto& alone = find(n, 1).final_step();
    const auto& mixture = find(n, 2).final_step();
    const auto& band_alone = find(n, 3).final_step();
    const auto& band_mixture = find(n, 4).final_step();
    double local_max = 0;
    for (std::size_t h = 1; h < mixture.head_max_visible_logit.size(); ++h)
      local_max = std::max(local_max, mixture.head_max_visible_logit[h]);
    per_n.row(n, alone.max_visible_logit, mixture.head_max_visible_logit[0], local_max, alone.kl, mixture.kl,
              mixture.head_weight[0], band_alone.max_visible_logit, band_mixture.head_max_visible_logit[0],
              band_mixture.head_weight[0]);
    alone_by_n.push_back(alone.max_visible_logit);
    mixed_by_n.push_back(mixture.head_max_visible_logit[0]);
  }
  Csv trace(report.path("local_heads_trace.csv"), {"step", "window_head", "full_alone", "full_in_mixture",
                                                    "band_full_alone", "band_full_in_mixture"});
  const auto& alone_fit = find(main_n, 1);
  const auto& mixture_fit = find(main_n, 2);
  const auto& band_alone_fit = find(main_n, 3);
  const auto& band_mixture_fit = find(main_n, 4);
  for (std::size_t t = 0; t < window.log.size(); ++t)
    trace.row(t, window.log[t].max_visible_logit, alone_fit.log[t].max_visible_logit,
              mixture_fit.log[t].head_max_visible_logit[0], band_alone_fit.log[t].max_visible_logit,
              band_mixture_fit.log[t].head_max_visible_logit[0]);

  const auto& alone = alone_fit.final_step();
  const auto& mixture = mixture_fit.final_step();
  const auto& band_alone = band_alone_fit.final_step();
  const auto& band_mixture = band_mixture_fit.final_step();
  nlohmann::json json;
  json["n"] = main_n;
  json["w"] = w;
  json["d"] = d;
  json["steps"] = steps;
  json["window_head_max_logit"] = window_final;
  json["window_head_initial_max_logit"] = window_init;
  json["window_head_kl"] = window_kl;
  json["window_head_kl_step100"] = window_kl_100;
  json["mixed_target"] = "0.8 * causal band (w=4) + 0.2 * uniform over keys 0..i";
  json["full_head_alone_max_logit"] = alone.max_visible_logit;
  json["full_head_with_local_max_logit"] = mixture.head_max_visible_logit[0];
  json["full_head_alone_kl"] = alone.kl;
  json["mixture_kl"] = mixture.kl;
  json["mixture_head_weights"] = mixture.head_weight;
  json["band_target_full_head_alone_max_logit"] = band_alone.max_visible_logit;
  json["band_target_full_head_with_local_max_logit"] = band_mixture.head_max_visible_logit[0];
  json["band_target_mixture_head_weights"] = band_mixture.head_weight;
  json["n_sweep"] = lengths;
  json["n_sweep_full_head_alone_max_logit"] = alone_by_n;
  json["n_sweep_full_head_with_local_max_logit"] = mixed_by_n;
  lab::write_result_json(options, "local_heads.json", json);
  report.json("local_heads.json", json);

  report.claim({"a window head (mask = band) fits the dense band: KL → 0 by step 100, logits stay at init scale",
                "docs/theory/logits.md §5.3 reference (n=128, d=8): KL .0000 at step 100, max |logit| 1.09 = its initial value; "
                "S ≡ 0 is an exact optimum (F2)",
                "KL " + format(window_kl_100, 3) + " at step 100, " + format(window_kl, 3) + " at step 400; max |logit| " +
                    format(window_init, 3) + " at init → " + format(window_final, 3) + " at step 400",
                window_kl_100 < 1e-3 && window_final <= window_init
                    ? std::string("agrees (our N(0,1) init gives a larger initial max logit than the reference's 1.09; "
                                  "the logits shrink rather than grow)")
                    : std::string("disagrees")});
  report.claim({"mixing window heads with a full head lowers the full head's logits (local + global target)",
                "local heads cut logit growth, also in the remaining full heads [secondary; 1 full + 11 local in the "
                "paper's LMs]",
                "n=" + std::to_string(main_n) + ": full head alone " + format(alone.max_visible_logit, 3) + " (KL " +
                    format(alone.kl, 2) + ") vs full head among 1 full + 3 window heads " +
                    format(mixture.head_max_visible_logit[0], 3) + " (mixture KL " + format(mixture.kl, 2) +
                    ", full-head weight " + format(mixture.head_weight[0], 3) + ")",
                mixture.head_max_visible_logit[0] < alone.max_visible_logit ? "agrees" : "disagrees"});
  report.claim({"the same on the pure band target (nothing left for the full head to do)",
                "(not covered by the paper)",
                "full head alone " + format(band_alone.max_visible_logit, 3) + " vs in the mixture " +
                    format(band_mixture.head_max_visible_logit[0], 3) + " (its weight falls to " +
                    format(band_mixture.head_weight[0], 3) + ")",
                band_mixture.head_max_visible_logit[0] < band_alone.max_visible_logit
                    ? "the full head's logits are lower"
                    : "differs: the down-weighted full head keeps growing its logits — Adam normalises its shrinking "
                      "gradient, so only the mixture weight, not the logit scale, protects the model here"});
  report.figure("local_heads_trace.png",
                "set datafile separator ','\nset key top left\nset xlabel 'Adam step'\nset ylabel 'max |visible logit|'\n"
                "set grid\nplot 'local_heads_trace.csv' using 1:2 with lines lw 2 title 'window head, band target', \\\n"
                "     '' using 1:3 with lines lw 2 title 'full head alone, local+global target', \\\n"
                "     '' using 1:4 with lines lw 2 title 'full head among 1 full + 3 window heads, local+global', \\\n"
                "     '' using 1:5 with lines dt 2 title 'full head alone, band target', \\\n"
                "     '' using 1:6 with lines dt 2 title 'full head in mixture, band target'",
                "Max |logit| during the fit (n = " + std::to_string(main_n) + ", d = 8, w = 4): window head, lone "
                "full head, and the full head of a 1 full + 3 window-head mixture.");
  report.text("Setting ([derived]): window heads use flash-attention semantics with span w − 1 = 3 (keys i−3..i, "
              "exactly the band). The mixture is A = Σ_h π_h A_h with learned π = softmax(γ), our stand-in for "
              "LS-attention's output projection; the local+global target is P = 0.8·band + 0.2·uniform(0..i) — "
              "language has both kinds of dependency; the window heads can take the band and the full head the "
              "flat global part. d = 8 per head, CE, Adam lr 0.05, " + std::to_string(steps) + " steps, seed 0.");
  report.finish();
  return 0;
}
