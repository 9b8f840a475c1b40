// Shared helpers of the logit-explosion reproductions (examples/logits/*.cpp): the JSON folder required by the reproductions
// §4 (results/logit_explosion/), the first step reaching an accuracy, and per-step CSV logs.
#pragma once

#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/logits.hpp"
#include "support/example.hpp"

namespace attnscope::examples::lab {

/// Writes <out>/logit_explosion/<file> (machine-readable results checked by scripts).
inline void write_result_json(const Options& options, const std::string& file, const nlohmann::json& value) {
  const std::filesystem::path dir = options.out_dir / "logit_explosion";
  std::filesystem::create_directories(dir);
  std::ofstream out(dir / file);
  out << value.dump(2) << "\n";
}

/// Index into the log of the first step whose in-band mass reaches `accuracy`, or −1.
inline long first_step_reaching(const std::vector<logits::FitStep>& log, double accuracy) {
  for (std::size_t t = 0; t < log.size(); ++t)
    if (log[t].in_band_mass >= accuracy) return static_cast<long>(t);
  return -1;
}

/// One fit's summary: max |visible logit| when the accuracy is first reached and at a fixed step.
struct FitSummary {
  long step_reached = -1;          // −1: accuracy not reached within the budget
  double max_logit_at_accuracy = std::nan("");
  double max_logit_at_step = 0;    // at `fixed_step` (or the last step)
  double kl_at_step = 0;
  double mass_at_step = 0;
  double final_max_logit = 0;      // at the last step of the budget
  double final_mass = 0;
  /// Max logit at the accuracy, or — not reached — the last one (a lower bound on what the accuracy needs).
  double required_max_logit() const { return step_reached >= 0 ? max_logit_at_accuracy : final_max_logit; }
};

inline FitSummary summarise(const std::vector<logits::FitStep>& log, double accuracy, std::size_t fixed_step) {
  FitSummary summary;
  summary.step_reached = first_step_reaching(log, accuracy);
  if (summary.step_reached >= 0)
    summary.max_logit_at_accuracy = log[static_cast<std::size_t>(summary.step_reached)].max_visible_logit;
  const logits::FitStep& at = log[std::min(fixed_step, log.size() - 1)];
  summary.max_logit_at_step = at.max_visible_logit;
  summary.kl_at_step = at.kl;
  summary.mass_at_step = at.in_band_mass;
  summary.final_max_logit = log.back().max_visible_logit;
  summary.final_mass = log.back().in_band_mass;
  return summary;
}

/// Writes a per-step log (step, loss, kl, in-band mass, top-band accuracy, max visible/masked logit, norm bound).
inline void write_log_csv(const std::filesystem::path& file, const std::vector<logits::FitStep>& log) {
  Csv csv(file, {"step", "loss", "kl", "in_band_mass", "top_band_accuracy", "max_visible_logit", "max_masked_logit",
                 "logit_norm_bound", "gradient_norm", "logit_rounding_error"});
  for (const auto& s : log)
    csv.row(s.step, s.loss, s.kl, s.in_band_mass, s.top_band_accuracy, s.max_visible_logit, s.max_masked_logit,
            s.logit_norm_bound, s.gradient_norm, s.logit_rounding_error);
}

inline double mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return values.empty() ? std::nan("") : sum / static_cast<double>(values.size());
}

}  // namespace attnscope::examples::lab

namespace attnscope::examples::lab {

/// The §5.3 reference setting: causal band target (w = 4), free Q, K, CE, Adam lr 0.05, N(0, 1) init, full batch.
inline logits::FitOptions reference_options(Index d, Index steps, std::uint64_t seed) {
  logits::FitOptions options;
  options.head_dim = d;
  options.steps = steps;
  options.seed = seed;
  return options;
}

/// Runs `count` independent jobs, in parallel over jobs when built with OpenMP (coarse-grained: inside a job Eigen's
/// GEMMs then stay single-threaded, which avoids per-GEMM thread hand-offs on a busy machine). Results by index,
/// so the output does not depend on the number of threads. The first exception thrown by a job is rethrown.
template <class Result, class Job>
std::vector<Result> run_jobs(std::size_t count, Job job) {
  std::vector<Result> results(count);
  std::exception_ptr failure;
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 1)
#endif
  for (long k = 0; k < static_cast<long>(count); ++k) {
    try {
      results[static_cast<std::size_t>(k)] = job(static_cast<std::size_t>(k));
    } catch (...) {
#if defined(_OPENMP)
#pragma omp critical
#endif
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return results;
}

/// One fit of the causal band (w = 4) in the reference setting; keep < 1: the column-sparse band under the
/// column-drop mask with sparsity 1 − keep (columns drawn with the same seed as the initialisation).
struct BandFitJob {
  Index n = 0, d = 0, steps = 0;
  std::uint64_t seed = 0;
  double keep = 1.0;
};

/// Runs the band fits (in parallel) and summarises each at `accuracy` and at `fixed_step`.
inline std::vector<FitSummary> band_fits(const std::vector<BandFitJob>& jobs, double accuracy, std::size_t fixed_step) {
  return run_jobs<FitSummary>(jobs.size(), [&](std::size_t k) {
    const BandFitJob& job = jobs[k];
    const logits::FitOptions options = reference_options(job.d, job.steps, job.seed);
    if (job.keep < 1.0)
      return summarise(logits::fit_qk(logits::column_sparse_target(job.n, 4, job.keep, job.seed),
                              logits::column_drop_mask(job.n, 1.0 - job.keep, job.seed), options).log,
                       accuracy, fixed_step);
    return summarise(logits::fit_qk(logits::causal_band_target(job.n, 4), causal, options).log, accuracy, fixed_step);
  });
}

/// Mean over seeds of a summary field (NaN entries — accuracy not reached — make the mean NaN).
template <class Field>
double mean_of(const std::vector<FitSummary>& summaries, Field field) {
  std::vector<double> values;
  for (const auto& s : summaries) values.push_back(field(s));
  return mean(values);
}

/// True when every fit reached the accuracy.
inline bool all_reached(const std::vector<FitSummary>& summaries) {
  for (const auto& s : summaries)
    if (s.step_reached < 0) return false;
  return true;
}

/// The summaries of the jobs with the given n and d (in job order).
inline std::vector<FitSummary> select(const std::vector<BandFitJob>& jobs, const std::vector<FitSummary>& summaries,
                                      Index n, Index d, double keep = 1.0) {
  std::vector<FitSummary> chosen;
  for (std::size_t k = 0; k < jobs.size(); ++k)
    if (jobs[k].n == n && jobs[k].d == d && jobs[k].keep == keep) chosen.push_back(summaries[k]);
  return chosen;
}

/// "agrees" / "differs" with a relative tolerance, for the verdict column.
inline std::string compare_to_reference(double measured, double reference, double tolerance) {
  const double relative = std::abs(measured - reference) / std::abs(reference);
  return (relative <= tolerance ? "agrees (within " : "differs (by ") + format(100 * relative, 2) + "%)";
}

}  // namespace attnscope::examples::lab
