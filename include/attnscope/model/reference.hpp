// attnscope/model/reference.hpp — compares a model (Transformer) with a reference dump of another engine (a JSON
// object written from llama2.c's run.c: input_tokens, next_tokens, logits, scores, attention): logits,
// per-layer/per-head scores and attention at listed positions, and greedy decoding. Needs nlohmann-json (link
// attnscope::io). Not included by attnscope/model.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/model/transformer.hpp"

namespace attnscope::model {

/// Agreement of one quantity (logits, scores or attention) over all compared rows.
struct ReferenceAgreement {
  Index rows = 0;                      // compared vectors (a logit row, or one layer/head/position row)
  Index entries = 0;                   // compared numbers
  double max_abs_error = 0;            // max |ours − reference|
  double max_row_relative_error = 0;   // max over rows of max_j |ours_j − ref_j| / max_j |ref_j|
  Index strict_failures = 0;           // entries with |err| > 1e-4·|ref| and |err| > 1e-6 (element-wise criterion)
};

/// Result of compare_with_reference().
struct ReferenceComparison {
  ReferenceAgreement logits, scores, attention;
  Index greedy_tokens = 0;             // reference next_tokens compared
  Index greedy_mismatches = 0;         // positions where our greedy token differs
  Index first_greedy_mismatch = -1;    // first such position, −1 if none
};

namespace detail {

inline void accumulate_agreement(ReferenceAgreement& agreement, const std::vector<double>& reference,
                                 const std::vector<double>& ours) {
  double max_error = 0, max_reference = 0;
  for (std::size_t j = 0; j < reference.size(); ++j) {
    const double error = std::abs(ours[j] - reference[j]);
    max_error = std::max(max_error, error);
    max_reference = std::max(max_reference, std::abs(reference[j]));
    if (error > 1e-4 * std::abs(reference[j]) && error > 1e-6) ++agreement.strict_failures;
  }
  agreement.rows += 1;
  agreement.entries += static_cast<Index>(reference.size());
  agreement.max_abs_error = std::max(agreement.max_abs_error, max_error);
  if (max_reference > 0) agreement.max_row_relative_error = std::max(agreement.max_row_relative_error, max_error / max_reference);
  else agreement.max_row_relative_error = std::max(agreement.max_row_relative_error, max_error);
}

template <class JsonValue>
const JsonValue& require_field(const JsonValue& json, const char* name) {
  if (!json.contains(name)) attnscope::detail::throw_invalid_argument("compare_with_reference", "reference has no field '", name, "'");
  return json.at(name);
}

}  // namespace detail

/// Runs `model` on the reference's `input_tokens` (softmax attention) and compares with the reference:
/// `logits` {"pos": [vocab values]}, `scores` and `attention` [{layer, head, pos, values[pos+1]}], and greedy
/// decoding of `next_tokens.size()` tokens from input_tokens[0] against `next_tokens`.
/// Throws attnscope::invalid_argument when a field is missing or a layer/head/position/length is out of range.
/// Cost: one forward pass with score/attention capture plus one greedy decode.
/// Model is a Transformer (or a class derived from it, such as LlamaModel) and Json a nlohmann::json; both are
/// template parameters so that including this header compiles neither the forward pass nor the JSON accessors.
template <class Model, class Json>
ReferenceComparison compare_with_reference(const Model& model, const Json& reference) {
  const char* fn = "compare_with_reference";
  const auto tokens = detail::require_field(reference, "input_tokens").template get<std::vector<int>>();
  const auto next_tokens = detail::require_field(reference, "next_tokens").template get<std::vector<int>>();
  ForwardOptions options;
  options.capture = CaptureOptions::attention_only();
  const auto result = model.forward(tokens, options);
  const Index length = result.logits.rows();
  ReferenceComparison comparison;

  for (const auto& [position_text, values] : detail::require_field(reference, "logits").items()) {
    const long position = std::stol(position_text);
    const auto expected = values.template get<std::vector<double>>();
    if (position < 0 || position >= length || expected.size() != static_cast<std::size_t>(result.logits.cols()))
      attnscope::detail::throw_invalid_argument(fn, "logits at position ", position_text, " with ", expected.size(),
                                                " values do not fit ", length, " x ", result.logits.cols());
    std::vector<double> ours(expected.size());
    for (std::size_t j = 0; j < ours.size(); ++j) ours[j] = result.logits(position, static_cast<Index>(j));
    detail::accumulate_agreement(comparison.logits, expected, ours);
  }
  for (const char* field : {"scores", "attention"}) {
    const bool scores = std::string(field) == "scores";
    for (const auto& entry : detail::require_field(reference, field)) {
      const int layer = entry.at("layer"), head = entry.at("head"), position = entry.at("pos");
      const auto expected = entry.at("values").template get<std::vector<double>>();
      if (layer < 0 || layer >= model.config().n_layers || head < 0 || head >= model.config().n_heads ||
          position < 0 || position >= length || expected.size() != static_cast<std::size_t>(position) + 1)
        attnscope::detail::throw_invalid_argument(fn, field, " entry layer ", layer, " head ", head, " pos ", position,
                                                  " with ", expected.size(), " values is out of range");
      const auto& matrix = scores ? result.layers[std::size_t(layer)].scores[std::size_t(head)]
                                  : result.layers[std::size_t(layer)].attention[std::size_t(head)];
      std::vector<double> ours(expected.size());
      for (std::size_t key = 0; key < ours.size(); ++key) ours[key] = matrix(position, static_cast<Index>(key));
      detail::accumulate_agreement(scores ? comparison.scores : comparison.attention, expected, ours);
    }
  }
  if (!next_tokens.empty()) {
    const auto generated = model.generate_greedy({tokens.at(0)}, static_cast<int>(next_tokens.size()));
    comparison.greedy_tokens = static_cast<Index>(next_tokens.size());
    for (std::size_t p = 0; p < next_tokens.size(); ++p)
      if (generated[p + 1] != next_tokens[p]) {
        if (comparison.first_greedy_mismatch < 0) comparison.first_greedy_mismatch = static_cast<Index>(p);
        ++comparison.greedy_mismatches;
      }
  }
  return comparison;
}

}  // namespace attnscope::model
