// Reproduction 4 (issue #4 §3.4): pruning stories260K heads by channel. Heads are ranked by a channel score computed
// on the analysis sequences (greedy + seeded sampled): sink channel (mean sink mass, Sok et al. 2026), content
// channel (mean content entropy; content redundancy) and the raw score (mean entropy of the full row, which mixes
// both); the top-k heads are removed (outputs zeroed inside the forward pass) and the teacher-forced next-token NLL
// on held-out sampled text is compared with the unpruned model. Paper (arXiv:2608.14712): pruning by the wrong
// channel can inflate perplexity more than a hundredfold.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>

#include "composition_data.hpp"
#include "support/example.hpp"

using namespace attnscope;
using namespace attnscope::examples;
using namespace attnscope::examples::composition_data;

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  Report report(options, "composition", "composition_pruning", "Pruning heads by channel");
  const auto out_dir = options.out_dir / "compositional";
  std::filesystem::create_directories(out_dir);
  const Visibility rows = analysed_rows();

  const auto llama = model::LlamaModel::load((options.data_dir / "stories260K.bin").string());
  const int heads_per_layer = llama.config().n_heads;
  const Index head_count = llama.config().n_layers * heads_per_layer;

  // Channel scores averaged over the analysis sequences.
  Vector<double> sink = Vector<double>::Zero(head_count), content_entropy = sink, raw_entropy = sink, redundancy = sink;
  const auto analysis = model_sequences(llama, options.quick);
  for (const auto& sequence : analysis) {
    const composition::HeadScores scores = composition::head_scores(head_attention(llama, sequence.tokens), rows);
    const double w = 1.0 / static_cast<double>(analysis.size());
    sink += w * scores.sink_mass, content_entropy += w * scores.content_entropy;
    raw_entropy += w * scores.raw_entropy, redundancy += w * scores.content_redundancy;
  }

  // Held-out text: sampled from the unpruned model with other seeds (documented in kHeldOutSeeds).
  std::vector<Sequence> held_out = model_sequences(llama, options.quick, {std::begin(kHeldOutSeeds), std::end(kHeldOutSeeds)});
  held_out.erase(held_out.begin());  // keep only the sampled sequences
  auto mean_nll = [&](const std::set<std::pair<int, int>>& pruned) {
    model::ForwardOptions forward;
    forward.ablated_heads = pruned;
    double total = 0;
    for (const auto& sequence : held_out) total += llama.mean_negative_log_likelihood(sequence.tokens, forward);
    return total / static_cast<double>(held_out.size());
  };
  const double baseline = mean_nll({});

  const std::vector<int> ks = {4, 8, 16};
  auto top_heads = [&](const Vector<double>& score, int k) {
    std::vector<Index> order(static_cast<std::size_t>(head_count));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) { return score(a) > score(b); });
    std::set<std::pair<int, int>> pruned;
    for (int r = 0; r < k; ++r) {
      const Index h = order[static_cast<std::size_t>(r)];
      pruned.insert({static_cast<int>(h / heads_per_layer), static_cast<int>(h % heads_per_layer)});
    }
    return pruned;
  };
  Random random(404);
  Vector<double> random_score(head_count);
  for (Index h = 0; h < head_count; ++h) random_score(h) = random.uniform();
  const std::vector<std::pair<std::string, Vector<double>>> scores = {{"sink_mass", sink},
                                                                      {"content_entropy", content_entropy},
                                                                      {"raw_entropy", raw_entropy},
                                                                      {"content_redundancy", redundancy},
                                                                      {"random", random_score}};
  nlohmann::json summary = {{"k", ks},
                            {"baseline_nll", baseline},
                            {"held_out_sequences", nlohmann::json::array()},
                            {"rule", "prune the k heads with the highest score; head outputs zeroed inside the forward "
                                     "pass; NLL = teacher-forced mean next-token negative log-likelihood (nats) over the "
                                     "held-out sequences; ratio = pruned / unpruned"}};
  for (const auto& s : held_out) summary["held_out_sequences"].push_back(s.name);
  Csv csv(report.path("pruning.csv"), {"score", "k", "nll", "nll_ratio", "perplexity_ratio", "pruned_heads"});
  double worst_perplexity = 1, best_perplexity = 1e300;
  std::string worst_name, best_name;
  for (const auto& [name, score] : scores) {
    std::vector<double> ratios, perplexity;
    for (int k : ks) {
      const auto pruned = top_heads(score, k);
      const double nll = mean_nll(pruned);
      ratios.push_back(nll / baseline);
      perplexity.push_back(std::exp(nll - baseline));
      std::string list;
      for (const auto& [layer, head] : pruned) list += "L" + std::to_string(layer) + "H" + std::to_string(head) + " ";
      csv.row(name, k, nll, nll / baseline, perplexity.back(), list);
      if (k == ks.back() && name != "random") {
        if (perplexity.back() > worst_perplexity) worst_perplexity = perplexity.back(), worst_name = name;
        if (perplexity.back() < best_perplexity) best_perplexity = perplexity.back(), best_name = name;
      }
    }
    summary[name] = ratios;
    summary["perplexity_ratio"][name] = perplexity;
    summary["scores"][name] = std::vector<double>(score.data(), score.data() + score.size());
  }
  std::ofstream(out_dir / "pruning.json") << summary.dump(2) << "\n";
  report.json("pruning.json", summary);

  report.claim({"perplexity inflation from pruning 16 of 40 heads by the wrong channel",
                "more than 100× (wrong-channel pruning)",
                "worst score " + worst_name + ": perplexity ×" + format(worst_perplexity, 3) + "; best " + best_name +
                    ": ×" + format(best_perplexity, 3) + " (baseline NLL " + format(baseline, 4) + " nats)",
                worst_perplexity > 100 ? "agrees: > 100×"
                                       : "partly: the channel choice matters, but the inflation stays below 100× on "
                                         "this 260K-parameter model without a sink"});
  report.figure("pruning.png",
                "set datafile separator ','\nset logscale y\nset xlabel 'heads pruned (k)'\n"
                "set ylabel 'perplexity ratio pruned / unpruned'\nset key top left\nset xtics (4, 8, 16)\n"
                "plot for [s in 'sink_mass content_entropy raw_entropy content_redundancy random'] 'pruning.csv' "
                "using 2:(stringcolumn(1) eq s ? $5 : 1/0) with linespoints title s",
                "Held-out perplexity ratio after pruning the top-k heads by each channel score (stories260K).");
  report.text("Scores from the greedy and three sampled (seeds 1–3) sequences; held-out text: sampled sequences with "
              "seeds 101–103 (T = 1, 256 tokens). Content redundancy = 1 − min over other heads of the mean "
              "drop-convention JS / ln 2. `random`: a seeded random ranking.");
  report.finish();
  return 0;
}
