// Reproduction 6 (docs/theory/logits.md, reproduction targets #1/#6, real-model column): max scaled logit and stable
// rank of every head's causal logit matrix of stories260K against the sequence length L; rank(QKᵀ) ≤ head_dim.
#include <iostream>

#include "attnscope/model.hpp"
#include "lab.hpp"

using namespace attnscope;
using namespace attnscope::examples;

namespace {

/// Mean in-band attention mass (1/L) Σ_i Σ_{i−w<j≤i} A_ij of an L×L causal attention block.
double in_band_mass(const RowMatrix<float>& attention, Index length, Index w) {
  double mass = 0;
  for (Index i = 0; i < length; ++i)
    for (Index j = std::max<Index>(0, i - w + 1); j <= i; ++j) mass += attention(i, j);
  return mass / static_cast<double>(length);
}

struct HeadAtLength {
  double max_scaled_logit = 0, max_abs_scaled_logit = 0, stable_rank = 0, effective_rank = 0;
  double band_mass_w1 = 0, band_mass_w4 = 0;
  Index causal_rank = 0;  // numerical rank of the causal part (tolerance 1e-6·σ₁)
};

struct HeadResult {
  std::vector<HeadAtLength> by_length;
  Index unmasked_rank = 0;  // numerical rank of QKᵀ/√d at the longest L (tolerance 1e-6·σ₁)
};

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  Report report(options, "logits", "logits_real_model", "stories260K: max scaled logit and stable rank against L");
  const model::LlamaModel llama = model::LlamaModel::load((options.data_dir / "stories260K.bin").string());
  const auto& config = llama.config();
  const Index max_length = options.quick ? 128 : config.seq_len;
  std::vector<Index> lengths;
  for (Index length = 16; length <= max_length; length *= 2) lengths.push_back(length);
  const std::uint64_t seed = 0;
  const double temperature = 1.0;
  const std::vector<int> tokens = llama.generate_sampled({1}, static_cast<int>(max_length) - 1, temperature, seed);
  model::ForwardOptions forward_options;
  forward_options.capture = model::CaptureOptions::attention_only();
  forward_options.capture.q = forward_options.capture.k = true;
  const model::ForwardResult pass = llama.forward(tokens, forward_options);
  const Index layers = config.n_layers, heads = config.n_heads, head_dim = config.head_size();
  const Index all_heads = layers * heads;

  // The prefix of length L is the top-left L×L block of the full causal pass (causality: no token sees later ones).
  const auto per_head = lab::run_jobs<HeadResult>(static_cast<std::size_t>(all_heads), [&](std::size_t k) {
    const auto& capture = pass.layers[k / static_cast<std::size_t>(heads)];
    const std::size_t h = k % static_cast<std::size_t>(heads);
    HeadResult result;
    for (const Index length : lengths) {
      const RowMatrix<float> block = capture.scores[h].topLeftCorner(length, length);
      const logits::LogitExtremes extremes = logits::visible_logit_extremes(block, causal);
      const Vector<double> sigma = logits::singular_values(logits::causal_part(block));  // one SVD per block
      HeadAtLength v;
      v.max_scaled_logit = extremes.max_logit;
      v.max_abs_scaled_logit = extremes.max_abs_logit;
      v.stable_rank = logits::stable_rank_from_singular_values(sigma);
      v.effective_rank = logits::entropy_effective_rank_from_singular_values(sigma);
      v.causal_rank = static_cast<Index>((sigma.array() > 1e-6 * sigma(0)).count());
      v.band_mass_w1 = in_band_mass(capture.attention[h], length, 1);
      v.band_mass_w4 = in_band_mass(capture.attention[h], length, 4);
      result.by_length.push_back(v);
    }
    const RowMatrix<double> full = (capture.q[h].cast<double>() * capture.k[h].cast<double>().transpose()) /
                                   std::sqrt(static_cast<double>(head_dim));
    const Vector<double> sigma = logits::singular_values(full);
    result.unmasked_rank = static_cast<Index>((sigma.array() > 1e-6 * sigma(0)).count());
    return result;
  });
  std::vector<Index> full_rank, causal_rank;
  for (const auto& head : per_head) {
    full_rank.push_back(head.unmasked_rank);
    causal_rank.push_back(head.by_length.back().causal_rank);
  }

  Csv csv(report.path("real_model_heads.csv"), {"L", "layer", "head", "max_scaled_logit", "max_abs_scaled_logit",
                                                 "stable_rank", "entropy_effective_rank", "in_band_mass_w1",
                                                 "in_band_mass_w4"});
  Csv summary_csv(report.path("real_model_summary.csv"), {"L", "max_over_heads", "mean_max_scaled_logit",
                                                          "mean_stable_rank", "max_stable_rank", "band_bound_w4"});
  nlohmann::json json;
  json["model"] = "stories260K.bin";
  json["tokens"] = "BOS then " + std::to_string(max_length - 1) + " tokens sampled at temperature 1, seed 0";
  json["head_dim"] = head_dim;
  json["L"] = lengths;
  std::vector<std::string> labels;
  for (Index k = 0; k < all_heads; ++k) labels.push_back("layer" + std::to_string(k / heads) + ".head" + std::to_string(k % heads));
  json["heads"] = labels;
  json["max_scaled_logit_definition"] = "max over visible (j <= i < L) of q.k/sqrt(head_dim) (signed; MuonClip S_max)";
  json["stable_rank_definition"] = "causal_stable_rank: ||C||_F^2/||C||_2^2, C = scores with future entries set to 0";
  nlohmann::json max_logit = nlohmann::json::array(), stable = nlohmann::json::array();
  std::vector<double> mean_logit_by_length, mean_rank_by_length;
  for (std::size_t l = 0; l < lengths.size(); ++l) {
    std::vector<double> logits_row, rank_row;
    for (Index k = 0; k < all_heads; ++k) {
      const HeadAtLength& v = per_head[static_cast<std::size_t>(k)].by_length[l];
      logits_row.push_back(v.max_scaled_logit);
      rank_row.push_back(v.stable_rank);
      csv.row(lengths[l], k / heads, k % heads, v.max_scaled_logit, v.max_abs_scaled_logit, v.stable_rank,
              v.effective_rank, v.band_mass_w1, v.band_mass_w4);
    }
    max_logit.push_back(logits_row);
    stable.push_back(rank_row);
    mean_logit_by_length.push_back(lab::mean(logits_row));
    mean_rank_by_length.push_back(lab::mean(rank_row));
    summary_csv.row(lengths[l], *std::max_element(logits_row.begin(), logits_row.end()), mean_logit_by_length.back(),
                    mean_rank_by_length.back(), *std::max_element(rank_row.begin(), rank_row.end()),
                    logits::band_stable_rank_lower_bound(lengths[l], 4));
  }
  json["max_scaled_logit"] = max_logit;
  json["stable_rank"] = stable;
  json["unmasked_score_numerical_rank"] = full_rank;
  json["causal_score_numerical_rank"] = causal_rank;
  lab::write_result_json(options, "real_model.json", json);
  report.json("real_model.json", json);

  // local heads: in-band mass with w = 4 at the longest L
  std::vector<std::pair<double, Index>> locality;
  for (Index k = 0; k < all_heads; ++k) locality.push_back({per_head[static_cast<std::size_t>(k)].by_length.back().band_mass_w4, k});
  std::sort(locality.rbegin(), locality.rend());
  std::string most_local;
  for (int r = 0; r < 3; ++r)
    most_local += (r ? ", " : "") + labels[static_cast<std::size_t>(locality[static_cast<std::size_t>(r)].second)] + " (" +
                  format(locality[static_cast<std::size_t>(r)].first, 3) + ")";
  const Index max_full_rank = *std::max_element(full_rank.begin(), full_rank.end());
  const Index min_causal_rank = *std::min_element(causal_rank.begin(), causal_rank.end());
  report.claim({"rank(QKᵀ) ≤ d_h: every head's unmasked score matrix has rank ≤ head_dim = " + std::to_string(head_dim),
                "[paper] rank(S) ≤ d_h", "max numerical rank over the " + std::to_string(all_heads) + " heads: " +
                    std::to_string(max_full_rank) + " (tolerance 1e-6·σ₁, L = " + std::to_string(max_length) + ")",
                max_full_rank <= head_dim ? "agrees" : "disagrees"});
  report.claim({"the causal part of the same scores is high rank",
                "dense local structure is 'effectively high rank' [secondary]; F3/F4 [derived]",
                "min numerical rank of the causal part over heads: " + std::to_string(min_causal_rank) + " (tolerance 1e-6·σ₁, L = " +
                    std::to_string(max_length) + "); mean stable rank " + format(mean_rank_by_length.front(), 3) +
                    " at L = " + std::to_string(lengths.front()) + " → " + format(mean_rank_by_length.back(), 3) +
                    " at L = " + std::to_string(lengths.back()),
                "the causal truncation alone makes the matrix full rank; the stable rank stays small (a few) — "
                "energy is concentrated in few directions, unlike a dense band (bound n/w)"});
  report.claim({"max scaled logit against L (inference on a fixed trained model)",
                "logit growth with sequence length during training [secondary; needs training at several n — out of "
                "reach here]",
                "mean over heads of max q·k/√d: " + format(mean_logit_by_length.front(), 3) + " (L = " +
                    std::to_string(lengths.front()) + ") → " + format(mean_logit_by_length.back(), 3) + " (L = " +
                    std::to_string(lengths.back()) + ")",
                "not comparable: prefixes are nested, so the max over a longer prefix can only grow; this measures "
                "the model's logit scale, not the training effect"});
  report.claim({"local heads identified by their in-band mass (w = 4)", "(reproduction target #3, real-model column)",
                "most local heads at L = " + std::to_string(max_length) + ": " + most_local, "measured"});
  report.figure("real_model_vs_L.png",
                "set datafile separator ','\nset key top left\nset logscale x 2\nset xlabel 'sequence length L'\n"
                "set ylabel 'max scaled logit / stable rank'\nset grid\n"
                "plot 'real_model_summary.csv' using 1:2 with linespoints lw 2 title 'max scaled logit (max over heads)', \\\n"
                "     '' using 1:3 with linespoints lw 2 title 'max scaled logit (mean over heads)', \\\n"
                "     '' using 1:4 with linespoints lw 2 title 'stable rank of causal scores (mean over heads)', \\\n"
                "     '' using 1:5 with linespoints title 'stable rank (max over heads)'",
                "stories260K, " + std::to_string(all_heads) + " heads, one sampled sequence: max scaled logit and "
                "stable rank of each head's causal score matrix for prefixes of length L.");
  report.text("Scores are the model's q·k/√d_head (d_head = " + std::to_string(head_dim) + ") from one forward pass "
              "over BOS + " + std::to_string(max_length - 1) + " tokens sampled at temperature 1 (seed 0); the prefix "
              "of length L is the top-left L×L block. Stable rank = `attnscope::causal_stable_rank` (future entries "
              "set to 0). Per-head values in `real_model_heads.csv` and `results/logit_explosion/real_model.json`.");
  report.finish();
  return 0;
}
