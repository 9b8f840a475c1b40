// attnscope/model/detail/mixture_of_experts.hpp — the sparse feed-forward of a Mixture-of-Experts layer (Shazeer et
// al. 2017, "Outrageously Large Neural Networks", eq. 1; Fedus et al. 2022): the router's choice of k experts per
// token and their weights (route_tokens), and the routing-weighted sum of the chosen experts' gated feed-forwards
// (mixture_forward), with the tokens grouped by expert so each expert's rows run as one product.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/model/config.hpp"
#include "attnscope/model/detail/linear.hpp"
#include "attnscope/model/forward_options.hpp"
#include "attnscope/model/weights.hpp"

namespace attnscope::model {

namespace detail {

/// The k experts and weights of every token from its router logits r (config moe): softmax_then_top_k takes
/// w = softmax(r) over all E experts and keeps the k largest (renormalised to sum 1 when `renormalize`; Mixtral,
/// Qwen3-MoE norm_topk_prob, OLMoE); top_k_then_softmax keeps the k largest logits and takes the softmax over those k
/// (gpt-oss). The softmaxes are computed in double. Softmax is monotone, so both pick the k largest logits.
inline Routing route_tokens(RowMatrix<float> router_logits, const MixtureOfExperts& moe) {
  const Index tokens = router_logits.rows(), experts = router_logits.cols(), k = moe.experts_per_token;
  Routing routing;
  routing.experts.resize(tokens, k);
  routing.weights.resize(tokens, k);
  std::vector<int> order(static_cast<std::size_t>(experts));
  for (Index t = 0; t < tokens; ++t) {
    const float* r = router_logits.data() + t * experts;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return r[a] > r[b] || (r[a] == r[b] && a < b); });
    const double top = r[order[0]];
    // top_k_then_softmax: e^{r_j}/Σ_{kept} e^{r}; softmax_then_top_k: e^{r_j}/Σ_{all} e^{r}, renormalised: /Σ_{kept}
    const bool over_kept = moe.routing == RoutingKind::top_k_then_softmax || moe.renormalize;
    double denominator = 0;
    for (Index j = 0; j < (over_kept ? k : experts); ++j)
      denominator += std::exp(double(r[over_kept ? order[std::size_t(j)] : int(j)]) - top);
    for (Index j = 0; j < k; ++j) {
      routing.experts(t, j) = order[std::size_t(j)];
      routing.weights(t, j) = std::exp(double(r[order[std::size_t(j)]]) - top) / denominator;
    }
  }
  routing.router_logits = std::move(router_logits);
  return routing;
}

/// The gated activation of one expert on its (tokens × h) gate and up products, in place into `gate`:
/// silu(g) ⊙ u (SwiGLU, Shazeer 2020), or gpt-oss's clamped form g' = min(g, limit), u' = clamp(u, −limit, limit),
/// (u' + 1) ⊙ g' ⊙ σ(α·g').
template <class Gate, class Up>
void expert_activation(Gate&& gate, const Up& up, const MixtureOfExperts& moe) {
  using Scalar = typename std::decay_t<Gate>::Scalar;
  const bool clamped = moe.activation == ExpertActivation::clamped_swiglu;
  const Scalar limit = static_cast<Scalar>(moe.swiglu_limit), alpha = static_cast<Scalar>(moe.swiglu_alpha);
  for (Index i = 0; i < gate.rows(); ++i)
    for (Index j = 0; j < gate.cols(); ++j) {
      Scalar g = gate(i, j), u = up(i, j);
      if (clamped) {
        g = std::min(g, limit);
        u = std::min(std::max(u, -limit), limit);
        gate(i, j) = (u + Scalar(1)) * (g / (Scalar(1) + std::exp(-alpha * g)));
      } else {
        gate(i, j) = (g / (Scalar(1) + std::exp(-g))) * u;
      }
    }
}

/// One expert's output on `rows` (n × dim): down·act(gate·x + b_g, up·x + b_u) + b_down (n × dim), the products in
/// `matmul` mode (model/detail/linear.hpp).
template <class Scalar>
RowMatrix<Scalar> expert_forward(const RowMatrix<Scalar>& rows, const ExpertWeights& expert,
                                 const MixtureOfExperts& moe, MatmulMode matmul = MatmulMode::exact) {
  const Index h = moe.expert_hidden_dim;
  RowMatrix<Scalar> gate, up;
  if (expert.gate_up.size() > 0) {
    RowMatrix<Scalar> fused = linear<Scalar>(rows, expert.gate_up, matmul);
    add_bias(fused, expert.gate_up_bias);
    gate.resize(rows.rows(), h);
    up.resize(rows.rows(), h);
    for (Index j = 0; j < h; ++j) {  // interleaved: output 2j is gate j, 2j + 1 is up j; else gate rows, then up
      gate.col(j) = fused.col(moe.interleaved_gate_up ? 2 * j : j);
      up.col(j) = fused.col(moe.interleaved_gate_up ? 2 * j + 1 : h + j);
    }
  } else {
    gate = linear<Scalar>(rows, expert.gate, matmul);
    add_bias(gate, expert.gate_bias);
    up = linear<Scalar>(rows, expert.up, matmul);
    add_bias(up, expert.up_bias);
  }
  expert_activation(gate, up, moe);
  RowMatrix<Scalar> out = linear<Scalar>(gate, expert.down, matmul);
  add_bias(out, expert.down_bias);
  return out;
}

/// The sparse feed-forward of `input` (n × dim): Σ_{e ∈ chosen(t)} w_{t,e} · expert_e(x_t) per token t. The tokens of
/// each expert are gathered into one matrix (one product per expert); each token's sum runs over its experts in
/// increasing expert index. `routing` (optional) receives the router logits, choices and weights. The products run in
/// `matmul` mode (model/detail/linear.hpp).
template <class Scalar, class Rows>
RowMatrix<Scalar> mixture_forward(const Eigen::MatrixBase<Rows>& input, const MixtureWeights& weights,
                                  const MixtureOfExperts& moe, Routing* routing_out = nullptr,
                                  MatmulMode matmul = MatmulMode::exact) {
  const Index tokens = input.rows(), k = moe.experts_per_token;
  RowMatrix<float> logits = linear<float>(input, weights.router, matmul);
  if (weights.router_bias.size() > 0) logits.rowwise() += weights.router_bias.transpose();
  Routing routing = route_tokens(std::move(logits), moe);
  RowMatrix<Scalar> out = RowMatrix<Scalar>::Zero(tokens, input.cols());
  // each expert's tokens and their weights, in token order (one pass over the choices)
  std::vector<std::vector<std::pair<Index, double>>> members(static_cast<std::size_t>(moe.experts));
  for (Index t = 0; t < tokens; ++t)
    for (Index j = 0; j < k; ++j)
      members[std::size_t(routing.experts(t, j))].emplace_back(t, routing.weights(t, j));
  for (int e = 0; e < moe.experts; ++e) {
    const auto& chosen = members[std::size_t(e)];
    if (chosen.empty()) continue;
    RowMatrix<Scalar> rows(static_cast<Index>(chosen.size()), input.cols());
    for (std::size_t m = 0; m < chosen.size(); ++m) rows.row(Index(m)) = input.row(chosen[m].first).template cast<Scalar>();
    const RowMatrix<Scalar> y = expert_forward(rows, weights.experts[std::size_t(e)], moe, matmul);
    for (std::size_t m = 0; m < chosen.size(); ++m)
      out.row(chosen[m].first) += static_cast<Scalar>(chosen[m].second) * y.row(Index(m));
  }
  if (routing_out != nullptr) *routing_out = std::move(routing);
  return out;
}

}  // namespace detail
}  // namespace attnscope::model
