// attnscope/analysis/head_input.hpp — one head as the analyses see it (HeadInput: attention, scores and values in
// double) and the per-head visitor over a forward pass: for_each_head(result, selection, visit) hands every selected
// (layer, head) of a model::ForwardResult to `visit`, one at a time. The visitor over a capture file is
// analysis/capture.hpp. Templates on the result type, so that this header does not include the model.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::analysis {

/// One head's data as the report columns see it (double precision; an empty matrix = not available).
struct HeadInput {
  int layer = 0, head = 0;
  RowMatrix<double> attention;  // L_q × L_k, row = query (causal captures: entries above the diagonal are 0)
  RowMatrix<double> scores;     // L_q × L_k scaled scores q·k/√d, masked entries −inf; empty when unknown
  RowMatrix<double> values;     // L_k × d values of the head; empty when unknown
  Vector<double> learned_sink;  // L_q shares σ of a learned sink logit (gpt-oss; rows then sum to 1 − σ); empty if none
};

namespace detail {
/// True when two matrices have the same shape and entries, compared in storage order (Eigen's operator== walks a
/// row-major matrix column by column, about ten times slower on an L × L attention matrix at L = 1024). The report's
/// per-head caches use it to recognise the head they computed last.
inline bool same_entries(const RowMatrix<double>& a, const RowMatrix<double>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && std::equal(a.data(), a.data() + a.size(), b.data());
}

/// True when `head` has the attention and learned-sink shares given (same_entries on both): the head a per-head cache
/// computed last.
inline bool same_rows(const RowMatrix<double>& attention, const Vector<double>& learned_sink, const HeadInput& head) {
  return same_entries(attention, head.attention) && learned_sink.size() == head.learned_sink.size() &&
         std::equal(learned_sink.data(), learned_sink.data() + learned_sink.size(), head.learned_sink.data());
}
}  // namespace detail

/// Called as progress(done, total) after each head (the same type as model::ProgressCallback).
using ProgressCallback = std::function<void(int, int)>;
/// Receives each head in turn; the head is dropped after the call.
using HeadVisitor = std::function<void(const HeadInput&)>;

/// The heads a visitor visits: the listed layers and heads (each list empty = all), in the source's order.
struct HeadSelection {
  std::vector<Index> layers;
  std::vector<Index> heads;

  bool has_layer(Index layer) const { return layers.empty() || contains(layers, layer); }
  bool has_head(Index head) const { return heads.empty() || contains(heads, head); }

  /// Throws invalid_argument (named `function`) for a listed layer or head outside [0, layer_count) or
  /// [0, head_count).
  void check(const char* function, Index layer_count, Index head_count) const {
    for (const Index layer : layers)
      if (layer < 0 || layer >= layer_count)
        attnscope::detail::throw_invalid_argument(function, "layer ", layer, " is outside [0, ", layer_count, ")");
    for (const Index head : heads)
      if (head < 0 || head >= head_count)
        attnscope::detail::throw_invalid_argument(function, "head ", head, " is outside [0, ", head_count, ")");
  }

 private:
  static bool contains(const std::vector<Index>& list, Index value) {
    for (const Index item : list)
      if (item == value) return true;
    return false;
  }
};

namespace detail {
template <class Result>
using forward_result_layers = decltype(std::declval<const Result&>().layers[0].attention);
}  // namespace detail

/// Calls visit(head) for every selected (layer, head) of a forward pass (a model::ForwardResult) in layer, head
/// order: attention (required: capture.attention), and scores and values when they were captured, converted to
/// double. Throws invalid_argument when a selected layer has no attention capture, when the result has no layers,
/// or for a selected layer or head that does not exist. O(L²) per head for the conversion.
template <class Result, class = detail::forward_result_layers<Result>>
void for_each_head(const Result& result, const HeadSelection& selection, const HeadVisitor& visit,
                   const ProgressCallback& progress = {}) {
  const char* fn = "for_each_head";
  if (result.layers.empty()) attnscope::detail::throw_invalid_argument(fn, "the result has no captured layers");
  Index head_count = 0;
  for (const auto& layer : result.layers) head_count = std::max<Index>(head_count, layer.attention.size());
  selection.check(fn, static_cast<Index>(result.layers.size()), head_count);
  int total = 0, done = 0;
  for (std::size_t l = 0; l < result.layers.size(); ++l) {
    if (!selection.has_layer(static_cast<Index>(l))) continue;
    if (result.layers[l].attention.empty())
      attnscope::detail::throw_invalid_argument(fn, "layer ", l, " has no attention capture");
    for (std::size_t h = 0; h < result.layers[l].attention.size(); ++h) total += selection.has_head(static_cast<Index>(h));
  }
  for (std::size_t l = 0; l < result.layers.size(); ++l) {
    if (!selection.has_layer(static_cast<Index>(l))) continue;
    const auto& layer = result.layers[l];
    for (std::size_t h = 0; h < layer.attention.size(); ++h) {
      if (!selection.has_head(static_cast<Index>(h))) continue;
      HeadInput input;
      input.layer = static_cast<int>(l);
      input.head = static_cast<int>(h);
      if (layer.attention[h].size() == 0)  // a head left out by the forward's capture.heads
        attnscope::detail::throw_invalid_argument(fn, "head ", h, " of layer ", l, " was not captured");
      input.attention = layer.attention[h].template cast<double>();
      if (h < layer.scores.size()) input.scores = layer.scores[h].template cast<double>();
      if (h < layer.v.size()) input.values = layer.v[h].template cast<double>();
      if (h < layer.learned_sink.size()) input.learned_sink = layer.learned_sink[h];
      visit(input);
      if (progress) progress(++done, total);
    }
  }
}

/// The report inputs of a forward pass, every layer and head (for_each_head collected into a vector). Throws
/// invalid_argument when attention was not captured.
template <class Result, class = detail::forward_result_layers<Result>>
std::vector<HeadInput> head_inputs(const Result& result) {
  std::vector<HeadInput> heads;
  for_each_head(result, HeadSelection{}, [&](const HeadInput& head) { heads.push_back(head); });
  return heads;
}

}  // namespace attnscope::analysis
