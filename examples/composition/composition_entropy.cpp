// Reproduction 3: entropy decomposition per layer and head on a real model (stories260K, or
// `--model DIR` on War and Peace), H = H_b(s) + (1 − s)·H(c)
// (exact), and entropy-change attribution between conditions the library can produce for real: the model run with
// attention temperature T vs 1 (NormalizationMap "temperature:T"), short vs long context, early vs late positions;
// plus synthetic checks with known answers. Paper (arXiv:2608.14712): sink growth explains 30% / 95% / 79% of the
// entropy collapse during training at 70M / 1B / 1.4B parameters (checkpoints we do not have).
#include <iostream>

#include "attnscope/normalize/maps.hpp"
#include "composition_data.hpp"
#include "support/example.hpp"

using namespace attnscope;
using namespace attnscope::examples;
using namespace attnscope::examples::composition_data;

namespace {

struct Pooled {
  composition::EntropyAttribution exact, averaged;  // per_row_then_mean, mean_then_split (pooled over heads and sequences)
  Index rows = 0;
};

/// Attribution pooled over matched (head, sequence) blocks with equal row counts: the mean of the blocks' parts.
struct Pool {
  std::vector<composition::EntropyAttribution> exact, averaged;
  Index rows = 0;
  template <class A, class B>
  void add(const A& before, const Visibility& vb, const B& after, const Visibility& va) {
    exact.push_back(composition::entropy_attribution(before, vb, after, va, composition::AttributionOrder::per_row_then_mean));
    averaged.push_back(composition::entropy_attribution(before, vb, after, va, composition::AttributionOrder::mean_then_split));
    rows += before.rows();
  }
  static composition::EntropyAttribution mean(const std::vector<composition::EntropyAttribution>& parts) {
    composition::EntropyAttribution out;
    for (const auto& p : parts) {
      out.delta_entropy += p.delta_entropy / static_cast<double>(parts.size());
      out.sink_part += p.sink_part / static_cast<double>(parts.size());
      out.content_part += p.content_part / static_cast<double>(parts.size());
    }
    const double total = out.sink_part + out.content_part;
    out.sink_share = total != 0 ? out.sink_part / total : 0.0;
    out.residual = out.delta_entropy - total;
    return out;
  }
  Pooled result() const { return {mean(exact), mean(averaged), rows}; }
};

nlohmann::json entry(const std::string& a, const std::string& b, const Pooled& pooled) {
  auto fields = [](const composition::EntropyAttribution& r) {
    return nlohmann::json{{"delta_entropy", r.delta_entropy}, {"sink_part", r.sink_part},
                          {"content_part", r.content_part}, {"sink_share", r.sink_share}, {"residual", r.residual}};
  };
  nlohmann::json out = fields(pooled.exact);
  out["condition_a"] = a;
  out["condition_b"] = b;
  out["order"] = "per_row_then_mean";
  out["rows"] = pooled.rows;
  out["mean_then_split"] = fields(pooled.averaged);
  return out;
}

std::string describe(const Pooled& p) {
  return "ΔH " + format(p.exact.delta_entropy, 3) + " nats, sink share " + format(100 * p.exact.sink_share, 3) +
         "% (mean-then-split " + format(100 * p.averaged.sink_share, 3) + "%)";
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  Report report(options, "composition", "composition_entropy", "Entropy decomposition and entropy-change attribution");
  const auto out_dir = options.out_dir / "compositional";
  std::filesystem::create_directories(out_dir);
  const Visibility rows = analysed_rows();

  const ModelInputs inputs = model_inputs(options);
  const model::Transformer& llama = inputs.transformer;
  const int heads_per_layer = inputs.heads_per_layer();
  const auto& sequences = inputs.analysis;
  const Index length = static_cast<Index>(sequences.front().tokens.size());

  // Per-head decomposition (keep: H; drop: H(c); sink channel H_b(s)), pooled over sequences.
  const Index head_count = inputs.head_count();
  Vector<double> sink = Vector<double>::Zero(head_count), entropy_mean = sink, binary = sink, content_term = sink,
                 content_entropy = sink, argmax_mass = sink;
  std::vector<Index> argmax_column(static_cast<std::size_t>(head_count), 0);
  double worst_identity = 0;
  Pool temperature_sharp, temperature_flat, short_context, late_positions;
  const double sequences_count = static_cast<double>(sequences.size());
  model::ForwardOptions sharp, flat;
  sharp.map = parse_normalization_map("temperature:0.5");
  flat.map = parse_normalization_map("temperature:2");
  const Index window = std::min<Index>(64, length / 2), queries = std::min<Index>(32, window - kFirstRow);
  for (const auto& sequence : sequences) {
    const auto heads = head_attention(llama, sequence.tokens);
    const auto heads_sharp = head_attention(llama, sequence.tokens, sharp);
    const auto heads_flat = head_attention(llama, sequence.tokens, flat);
    const std::vector<int> suffix(sequence.tokens.end() - window, sequence.tokens.end());
    const auto heads_short = head_attention(llama, suffix);
    for (Index h = 0; h < head_count; ++h) {
      const auto& a = heads[static_cast<std::size_t>(h)];
      const auto split = composition::entropy_split(a, rows);
      worst_identity = std::max(worst_identity, (split.entropy - split.binary - split.content_term).cwiseAbs().maxCoeff());
      sink(h) += split.sink_mass.mean() / sequences_count;
      entropy_mean(h) += split.entropy.mean() / sequences_count;
      binary(h) += split.binary.mean() / sequences_count;
      content_term(h) += split.content_term.mean() / sequences_count;
      content_entropy(h) += split.content_entropy.mean() / sequences_count;
      const composition::SinkSet top = composition::argmax_mass_sink(a, rows);
      argmax_column[static_cast<std::size_t>(h)] = top.columns().front();
      argmax_mass(h) += composition::entropy_split(a, rows, top).sink_mass.mean() / sequences_count;
      temperature_sharp.add(a, rows, heads_sharp[static_cast<std::size_t>(h)], rows);
      temperature_flat.add(a, rows, heads_flat[static_cast<std::size_t>(h)], rows);
      // matched queries: the last `queries` positions, with the full context vs only the last `window` tokens
      const Visibility long_rows{Causal{length - queries}}, short_rows{Causal{window - queries}};
      short_context.add(a.bottomRows(queries), long_rows, heads_short[static_cast<std::size_t>(h)].bottomRows(queries),
                        short_rows);
      // matched by order: early query positions 2+16.. vs late positions (last `queries`)
      const Index early_first = 16;
      late_positions.add(a.middleRows(early_first - kFirstRow, queries), Visibility{Causal{early_first}},
                         a.bottomRows(queries), long_rows);
    }
  }

  Csv csv(report.path("entropy_heads.csv"), {"head", "layer", "sink_mass", "entropy", "binary_term", "content_term",
                                             "content_entropy", "sink_share", "argmax_column", "argmax_column_mass"});
  for (Index h = 0; h < head_count; ++h)
    csv.row(head_label(h, heads_per_layer), h / heads_per_layer, sink(h), entropy_mean(h), binary(h), content_term(h),
            content_entropy(h), binary(h) / entropy_mean(h), argmax_column[static_cast<std::size_t>(h)], argmax_mass(h));
  Csv layers(report.path("entropy_layers.csv"), {"layer", "sink_mass", "entropy", "binary_term", "content_term"});
  for (int l = 0; l < llama.config().n_layers; ++l)
    layers.row(l, sink.segment(l * heads_per_layer, heads_per_layer).mean(),
               entropy_mean.segment(l * heads_per_layer, heads_per_layer).mean(),
               binary.segment(l * heads_per_layer, heads_per_layer).mean(),
               content_term.segment(l * heads_per_layer, heads_per_layer).mean());

  // Synthetic checks (docs/theory/composition.md §2): a′ → a, a pure sink change, a pure content change.
  RowMatrix<double> a(1, 5), a_prime(1, 5), grown(1, 5), recontent(1, 5);
  a << 0.85, 0.06, 0.05, 0.03, 0.01;
  a_prime << 0.60, 0.10, 0.12, 0.08, 0.10;
  grown(0, 0) = 0.92;  // the sink grows from 0.60 to 0.92; the content keeps its composition
  grown.rightCols(4) = a_prime.rightCols(4) * (0.08 / 0.40);
  recontent << 0.60, 0.25, 0.05, 0.05, 0.05;
  const auto spec_example = composition::entropy_attribution(a_prime, {}, a, {});
  const auto sink_only = composition::entropy_attribution(a_prime, {}, grown, {});
  const auto content_only = composition::entropy_attribution(a_prime, {}, recontent, {});

  const auto sharp_result = temperature_sharp.result(), flat_result = temperature_flat.result();
  const auto short_result = short_context.result(), late_result = late_positions.result();
  auto single = [](const composition::EntropyAttribution& r) { return Pooled{r, r, 1}; };
  nlohmann::json list = nlohmann::json::array();
  list.push_back(entry(inputs.label + " softmax (T=1)", inputs.label + " temperature:0.5", sharp_result));
  list.push_back(entry(inputs.label + " softmax (T=1)", inputs.label + " temperature:2", flat_result));
  list.push_back(entry("long context (" + std::to_string(length) + " tokens), last " + std::to_string(queries) + " queries",
                       "short context (last " + std::to_string(window) + " tokens), same queries", short_result));
  list.push_back(entry("early positions 16.." + std::to_string(16 + queries - 1),
                       "late positions " + std::to_string(length - queries) + ".." + std::to_string(length - 1),
                       late_result));
  list.push_back(entry("synthetic a' (spec section 2)", "synthetic a", single(spec_example)));
  list.push_back(entry("synthetic a'", "a' with a grown sink, same content", single(sink_only)));
  list.push_back(entry("synthetic a'", "a' with the same sink, new content", single(content_only)));
  std::ofstream(out_dir / "entropy_attribution.json") << list.dump(2) << "\n";
  report.json("entropy_attribution.json", list);

  report.claim({"entropy identity H = H_b(s) + (1−s)·H(c) on every analysed row of the model", "exact (§2)",
                "max |residual| " + format(worst_identity, 3), worst_identity < 1e-12 ? "agrees" : "disagrees"});
  report.claim({"sink mass of the model's heads (mean a_{i,0})", "most mass on a sink, usually the first token",
                "mean over heads " + format(sink.mean(), 3) + ", max " + format(sink.maxCoeff(), 3),
                sink.mean() > 0.5 ? "agrees" : "disagrees for this model: it has no first-token sink"});
  report.claim({"sink share of an entropy collapse", "30% (70M), 95% (1B), 79% (1.4B) during training",
                "temperature 1 → 0.5: " + describe(sharp_result) + "; long → short context: " + describe(short_result) +
                    "; early → late positions: " + describe(late_result),
                std::string("not comparable: training checkpoints unavailable") +
                    (sink.mean() < 0.2 ? "; with almost no sink mass, sink growth explains little of these changes" : "")});
  report.claim({"spec example a′ → a", "ΔH = −0.61552, sink part −0.57672 (93.7%)",
                "ΔH = " + format(spec_example.delta_entropy, 6) + ", sink part " + format(spec_example.sink_part, 6) +
                    " (" + format(100 * spec_example.sink_share, 4) + "%)",
                std::abs(spec_example.sink_share - 0.937) < 5e-4 ? "agrees" : "disagrees"});
  report.claim({"pure sink change / pure content change", "sink share 100% / 0%",
                format(100 * sink_only.sink_share, 6) + "% / " + format(100 * content_only.sink_share, 6) + "%",
                std::abs(sink_only.sink_share - 1) < 1e-9 && std::abs(content_only.sink_share) < 1e-9 ? "agrees"
                                                                                                         : "disagrees"});
  report.figure("entropy_heads.png",
                "set datafile separator ','\nset style data histograms\nset style histogram rowstacked\n"
                "set style fill solid 0.8 border -1\nset boxwidth 0.8\nset ylabel 'mean entropy (nats)'\n"
                "set xtics rotate by 90 font ',7'\nset key top left\n"
                "plot 'entropy_heads.csv' skip 1 using 5:xtic(1) title 'sink channel H_b(s)', '' skip 1 using 6 title 'content (1-s)H(c)'",
                "Mean attention entropy per " + inputs.label +
                    " head split exactly into the sink channel and the content channel.");
  report.text("Model: " + inputs.description + ". Attribution: midpoint (Shapley) split per matched row, then "
              "averaged over rows, heads (" + std::to_string(head_count) + ") and the analysed sequences; `mean_then_split` applies the split to row-averaged s and H(c) per "
              "head and sequence (not exact: see `residual`). Temperature conditions rerun the whole model with the "
              "normalization map \"temperature:T\" in every head. Short context: the model run on the last 64 tokens "
              "(its sink column is the window's first token).");
  report.finish();
  return 0;
}
