// Reproduction 4: pruning a real model's heads by channel (stories260K, or `--model DIR`
// on War and Peace). Heads are ranked by a channel score computed on the analysis sequences: sink channel (mean sink
// mass, Sok et al. 2026), content channel (mean content entropy; content redundancy) and the raw score (mean entropy of
// the full row, which mixes both); the top-k heads are removed (outputs zeroed inside the forward pass) and the
// teacher-forced next-token NLL on held-out text is compared with the unpruned model. Baselines:
// random rankings (seeded composition::random_ranking, mean and spread over seeds) and "most focused heads first"
// (lowest raw entropy first). How much the channel rankings overlap: Jaccard index of the removed sets at each k
// (composition::top_k_jaccard, against its chance value composition::expected_random_jaccard) and Kendall's τ_b of
// the scores. Paper (arXiv:2608.14712): pruning by the wrong channel can inflate perplexity more than a hundredfold.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "composition_data.hpp"
#include "support/example.hpp"
#include "support/spread.hpp"

using namespace attnscope;
using namespace attnscope::examples;
using namespace attnscope::examples::composition_data;

namespace {

/// A pruning order: name, ranking (first = pruned first) and the score it came from.
struct Ranked {
  std::string name;
  std::vector<Index> ranking;
  Vector<double> score;
};

/// Pruned-head counts: 10%, 20% and 40% of the heads (4, 8, 16 of stories260K's 40), at least 1, distinct.
std::vector<Index> pruned_counts(Index head_count) {
  std::vector<Index> ks;
  for (double fraction : {0.1, 0.2, 0.4}) {
    const Index k = std::max<Index>(1, static_cast<Index>(std::lround(fraction * static_cast<double>(head_count))));
    if (ks.empty() || k > ks.back()) ks.push_back(k);
  }
  return ks;
}

std::string ratio_text(double value) { return "×" + format(value, 3); }

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  Report report(options, "composition", "composition_pruning", "Pruning heads by channel");
  const auto out_dir = options.out_dir / "compositional";
  std::filesystem::create_directories(out_dir);
  const Visibility rows = analysed_rows();

  const ModelInputs inputs = model_inputs(options);
  const int heads_per_layer = inputs.heads_per_layer();
  const Index head_count = inputs.head_count();

  // Channel scores averaged over the analysis sequences.
  Vector<double> sink = Vector<double>::Zero(head_count), content_entropy = sink, raw_entropy = sink, redundancy = sink;
  for (const auto& sequence : inputs.analysis) {
    const composition::HeadScores scores =
        composition::head_scores(head_attention(inputs.transformer, sequence.tokens), rows);
    const double w = 1.0 / static_cast<double>(inputs.analysis.size());
    sink += w * scores.sink_mass, content_entropy += w * scores.content_entropy;
    raw_entropy += w * scores.raw_entropy, redundancy += w * scores.content_redundancy;
  }

  auto mean_nll = [&](const std::vector<Index>& ranking, Index k) {
    model::ForwardOptions forward;
    for (Index r = 0; r < k; ++r) {
      const Index h = ranking[static_cast<std::size_t>(r)];
      forward.ablated_heads.insert({static_cast<int>(h / heads_per_layer), static_cast<int>(h % heads_per_layer)});
    }
    double total = 0;
    for (const auto& sequence : inputs.held_out)
      total += inputs.transformer.mean_negative_log_likelihood(sequence.tokens, forward);
    return total / static_cast<double>(inputs.held_out.size());
  };
  const double baseline = mean_nll({}, 0);
  const std::vector<Index> ks = pruned_counts(head_count);

  using composition::RankOrder;
  const std::vector<Ranked> channels = {
      {"sink_mass", composition::ranking_by_score(sink), sink},
      {"content_entropy", composition::ranking_by_score(content_entropy), content_entropy},
      {"raw_entropy", composition::ranking_by_score(raw_entropy), raw_entropy},
      {"content_redundancy", composition::ranking_by_score(redundancy), redundancy},
  };
  const Ranked most_focused{"most_focused_first", composition::ranking_by_score(raw_entropy, RankOrder::lowest_first),
                            -raw_entropy};

  nlohmann::json summary = {{"model", inputs.label},
                            {"source", inputs.description},
                            {"k", ks},
                            {"baseline_nll", baseline},
                            {"held_out_sequences", nlohmann::json::array()},
                            {"rule", "prune the k heads ranked first (highest score; most_focused_first: lowest raw "
                                     "entropy); head outputs zeroed inside the forward pass; NLL = teacher-forced mean "
                                     "next-token negative log-likelihood (nats) over the held-out sequences; "
                                     "perplexity ratio = exp(NLL_pruned − NLL_unpruned)"}};
  for (const auto& s : inputs.held_out) summary["held_out_sequences"].push_back(s.name);
  Csv csv(report.path("pruning.csv"), {"score", "k", "nll", "nll_ratio", "perplexity_ratio", "pruned_heads"});
  std::map<std::string, std::vector<double>> perplexity;  // per ranking, per k
  std::vector<Ranked> named = channels;
  named.push_back(most_focused);
  for (const Ranked& ranked : named) {
    std::vector<double> ratios;
    for (Index k : ks) {
      const double nll = mean_nll(ranked.ranking, k);
      ratios.push_back(nll / baseline);
      perplexity[ranked.name].push_back(std::exp(nll - baseline));
      std::string list;
      for (Index r = 0; r < k; ++r) list += head_label(ranked.ranking[static_cast<std::size_t>(r)], heads_per_layer) + " ";
      csv.row(ranked.name, k, nll, nll / baseline, perplexity[ranked.name].back(), list);
    }
    summary[ranked.name] = ratios;
    summary["perplexity_ratio"][ranked.name] = perplexity[ranked.name];
    summary["scores"][ranked.name] = std::vector<double>(ranked.score.data(), ranked.score.data() + ranked.score.size());
  }

  // Random-ranking baseline: seeded random orders, the same k.
  // 20 seeds on stories260K (a forward pass costs milliseconds); 8 on a model folder, where each of the 3 held-out
  // forwards per pruned set multiplies by GPT-2's 50257-token output head (gpt2-wp-mini: 172 s CPU with 20 seeds).
  const int random_seeds = options.quick ? 5 : options.get("model").empty() ? 20 : 8;
  std::vector<std::vector<double>> random_perplexity(ks.size());
  for (int seed = 0; seed < random_seeds; ++seed) {
    Random random(500 + static_cast<std::uint64_t>(seed));
    const std::vector<Index> ranking = composition::random_ranking(head_count, random);
    for (std::size_t i = 0; i < ks.size(); ++i) {
      const double nll = mean_nll(ranking, ks[i]);
      random_perplexity[i].push_back(std::exp(nll - baseline));
      csv.row("random_seed_" + std::to_string(500 + seed), ks[i], nll, nll / baseline, random_perplexity[i].back(), "");
    }
  }
  std::vector<Spread> random_spread;
  Csv random_csv(report.path("pruning_random.csv"),
                 {"k", "mean", "median", "min", "max", "lower_quartile", "upper_quartile", "seeds"});
  for (std::size_t i = 0; i < ks.size(); ++i) {
    random_spread.push_back(spread_of(random_perplexity[i]));
    const Spread& s = random_spread.back();
    random_csv.row(ks[i], s.mean, s.median, s.minimum, s.maximum, s.lower_quartile, s.upper_quartile, random_seeds);
    summary["random"]["perplexity_ratio"].push_back({{"k", ks[i]}, {"mean", s.mean}, {"median", s.median},
                                                     {"min", s.minimum}, {"max", s.maximum}, {"values", random_perplexity[i]}});
  }
  summary["random"]["seeds"] = "attnscope::Random(500 + s), s = 0.." + std::to_string(random_seeds - 1);

  // Overlap of the channel rankings: Jaccard of the removed sets at each k, Kendall's τ_b of the scores.
  Csv overlap_csv(report.path("ranking_overlap.csv"), {"first", "second", "k", "jaccard", "chance_jaccard", "kendall_tau"});
  std::ostringstream overlap_table;
  overlap_table << "| rankings | Kendall τ_b of the scores |";
  for (Index k : ks) overlap_table << " Jaccard k = " << k << " |";
  overlap_table << "\n|---|---|";
  for (std::size_t i = 0; i < ks.size(); ++i) overlap_table << "---|";
  overlap_table << "\n";
  double content_raw_min_jaccard = 1;
  std::vector<Ranked> compared = channels;
  compared.push_back(most_focused);
  for (std::size_t a = 0; a < compared.size(); ++a)
    for (std::size_t b = a + 1; b < compared.size(); ++b) {
      if (compared[b].name == "most_focused_first" && compared[a].name != "raw_entropy") continue;
      const double tau = composition::kendall_tau(compared[a].score, compared[b].score);
      overlap_table << "| " << compared[a].name << " vs " << compared[b].name << " | " << format(tau, 3) << " |";
      for (Index k : ks) {
        const double jaccard = composition::top_k_jaccard(compared[a].ranking, compared[b].ranking, k);
        overlap_table << " " << format(jaccard, 3) << " |";
        overlap_csv.row(compared[a].name, compared[b].name, k, jaccard, composition::expected_random_jaccard(head_count, k), tau);
        summary["overlap"][compared[a].name + " vs " + compared[b].name]["jaccard"].push_back(jaccard);
        if (compared[a].name == "content_entropy" && compared[b].name == "raw_entropy")
          content_raw_min_jaccard = std::min(content_raw_min_jaccard, jaccard);
      }
      summary["overlap"][compared[a].name + " vs " + compared[b].name]["kendall_tau"] = tau;
      overlap_table << "\n";
    }
  overlap_table << "| two random rankings (expected) | 0 |";
  for (Index k : ks) {
    overlap_table << " " << format(composition::expected_random_jaccard(head_count, k), 3) << " |";
    summary["overlap"]["chance_jaccard"].push_back(composition::expected_random_jaccard(head_count, k));
  }
  overlap_table << "\n";
  std::ofstream(out_dir / "pruning.json") << summary.dump(2) << "\n";
  report.json("pruning.json", summary);

  // Verdicts at the largest k, against the baselines.
  const std::size_t last = ks.size() - 1;
  std::string best_name, worst_name;
  double best = 1e300, worst = 0;
  for (const Ranked& ranked : channels) {
    const double value = perplexity[ranked.name][last];
    if (value < best) best = value, best_name = ranked.name;
    if (value > worst) worst = value, worst_name = ranked.name;
  }
  const Spread& chance = random_spread[last];
  const double focused = perplexity["most_focused_first"][last];
  const std::string k_text = std::to_string(ks[last]) + " of " + std::to_string(head_count) + " heads";
  report.claim({"wrong-channel vs right-channel pruning (perplexity, largest k)",
                "more than 100× (wrong-channel pruning)",
                k_text + ": worst channel " + worst_name + " " + ratio_text(worst) + ", best " + best_name + " " +
                    ratio_text(best) + " → wrong/right ×" + format(worst / best, 3),
                worst / best > 100 ? "agrees: the wrong channel costs more than 100× the right one"
                                   : "disagrees on this model: the worst channel ranking costs ×" + format(worst / best, 3) +
                                         " over the best one, not > 100×"});
  const bool best_beats_chance = best < chance.minimum;
  const bool worst_above_chance = worst > chance.maximum;
  report.claim({"channel rankings vs a random ranking (perplexity, largest k)", "not stated (the baseline)",
                k_text + ": random " + ratio_text(chance.mean) + " mean, " + ratio_text(chance.minimum) + "–" +
                    ratio_text(chance.maximum) + " over " + std::to_string(random_seeds) + " seeds; best channel " +
                    ratio_text(best) + ", worst " + ratio_text(worst) + "; most focused heads first " + ratio_text(focused),
                worst < chance.minimum
                    ? "every channel ranking beats every random ranking; the channels differ from each other by ×" +
                          format(worst / best, 3)
                : best > chance.maximum
                    ? "every channel ranking is worse than every random ranking (" + std::to_string(random_seeds) +
                          " seeds): these scores pick harmful heads"
                : best_beats_chance && worst_above_chance
                    ? "the channel choice matters beyond chance: best below every random ranking, worst above"
                : best_beats_chance  ? "the best channel beats every random ranking; the worst is within the random spread"
                : worst_above_chance ? "no channel beats a random ranking; the worst one is worse than chance"
                                     : "no channel ranking differs from chance: all inside the random spread"});
  report.claim({"overlap of the content-entropy and raw-entropy rankings (removed sets)", "not stated",
                "Jaccard " + std::string(content_raw_min_jaccard == 1 ? "1 at every k" : "≥ " + format(content_raw_min_jaccard, 3)) +
                    " (chance " + format(composition::expected_random_jaccard(head_count, ks[last]), 3) + " at k = " +
                    std::to_string(ks[last]) + ")",
                content_raw_min_jaccard == 1 ? "same heads: without a sink the raw score is the content score"
                                             : "the rankings differ: the sink channel moves the raw ranking"});
  report.figure("pruning.png",
                "set datafile separator ','\nset logscale y\nset xlabel 'heads pruned (k)'\n"
                "set ylabel 'perplexity ratio pruned / unpruned'\nset key top left\nset offsets graph 0.04, graph 0.04\n"
                "plot for [s in 'sink_mass content_entropy raw_entropy content_redundancy most_focused_first'] "
                "'pruning.csv' using 2:(stringcolumn(1) eq s ? $5 : 1/0) with linespoints title s, "
                "'pruning_random.csv' skip 1 using 1:2:4:5 with yerrorlines lc rgb 'gray40' dt 2 "
                "title 'random ranking: mean, min–max over seeds'",
                "Held-out perplexity ratio after pruning the top-k heads by each channel score (" + inputs.label +
                    "), with the random-ranking baseline (mean and min–max over seeds) and the most-focused-first "
                    "baseline.");
  report.text("Model: " + inputs.description + ". Held-out text: " +
              (inputs.label == "stories260K" ? std::string("sampled sequences with seeds 101–103 (T = 1)")
                                             : std::string("3 other passages (at 1/6, 1/2, 5/6 of the book)")) +
              ". Content redundancy = 1 − min over other heads of the mean drop-convention JS / ln 2. Baselines: " +
              std::to_string(random_seeds) + " seeded random rankings (`composition::random_ranking`, "
              "`attnscope::Random(500 + s)`) and the most focused heads first (lowest mean raw entropy). "
              "How much the rankings overlap (Jaccard index of the removed sets, chance = two random rankings):");
  report.text(overlap_table.str());
  report.finish();
  return 0;
}
