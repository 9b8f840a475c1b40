// attnscope/logits/fit.hpp — rank-d attention fitting with Adam (docs/theory/logits.md §2 reproduction formulation,
// [derived]): fit S = QKᵀ/√d (free Q, K ∈ ℝ^{n×d}, or Q = XW_q, K = XW_k with fixed random X) so that
// A = softmax_row(S) under a mask matches a target, with a per-step log of the quantities the paper is about.
// Several heads (e.g. one full head plus sliding-window heads) can be fitted jointly as a learned mixture.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/logits/attention.hpp"
#include "attnscope/logits/precision.hpp"
#include "attnscope/normalize/entropy.hpp"
#include "attnscope/normalize/softmax.hpp"

namespace attnscope::logits {

/// Loss of the fit, row-averaged over the n query rows (docs/theory/logits.md §2).
enum class FitLoss {
  cross_entropy,      // L = −(1/n) Σ_i Σ_j P'_ij log A_ij
  kl_divergence,      // L = (1/n) Σ_i KL(P'_i ‖ A_i) = cross entropy − H(P') (same gradient)
  mse_probabilities,  // L = (1/n) Σ_i Σ_j (A_ij − P'_ij)²  (secondary loss of §2)
};

/// How queries and keys are parametrised.
enum class Parametrization {
  free,       // Q, K ∈ ℝ^{n×d} are the parameters
  projected,  // Q = X W_q, K = X W_k, X ∈ ℝ^{n×d_model} fixed N(0, 1), W ∈ ℝ^{d_model×d} the parameters
};

/// Where reduced-precision rounding is applied during the forward pass.
enum class RoundingTarget { logits, probabilities, both };

/// Adam (Kingma & Ba 2015) with bias correction; defaults as in docs/theory/logits.md §2/§5.3.
struct AdamOptions {
  double learning_rate = 0.05;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

/// Reduced-precision emulation of the forward pass: S and/or A rounded to bf16/fp16 (straight-through backward).
struct PrecisionOptions {
  RoundingFormat format = RoundingFormat::none;
  RoundingTarget applies_to = RoundingTarget::logits;
};

/// Options of fit_qk / fit_heads.
struct FitOptions {
  Index head_dim = 8;                           // d: S = QKᵀ/√d
  FitLoss loss = FitLoss::cross_entropy;
  double target_floor = 0;                      // ε: fit P' = (1 − ε)P + ε/|visible(i)| (floored_target)
  Parametrization parametrization = Parametrization::free;
  Index model_dim = 64;                         // d_model of X (projected only), ≥ head_dim
  AdamOptions adam{};
  Index steps = 400;                            // Adam updates
  double init_std = 1.0;                        // Q, K ~ N(0, init_std²); W ~ N(0, init_std²/d_model)
  double gradient_clip = 0;                     // clip the global gradient L2 norm to this (0 = off)
  std::uint64_t seed = 0;
  double stop_at_in_band_mass = 0;              // stop at the first step whose in-band mass reaches this (0 = never)
  PrecisionOptions precision{};
  bool learn_head_weights = true;               // fit_heads: learn the mixture weights π = softmax(γ)
};

/// The state at one step (before the update of that step; step 0 = initialisation).
struct FitStep {
  Index step = 0;
  double loss = 0;
  double kl = 0;                    // (1/n) Σ_i KL(P'_i ‖ A_i), P' the (floored) target fitted
  double in_band_mass = 0;          // (1/n) Σ_i Σ_{j: P_ij > 0} A_ij, P the unfloored target (§2 accuracy)
  double top_band_accuracy = 0;     // fraction of rows whose in-band keys all outweigh every other visible key
  double max_visible_logit = 0;     // max over heads and visible (i, j) of |S_ij| (§2 "max logit")
  double max_masked_logit = 0;      // max over heads and masked (i, j) of |S_ij| (0 when nothing is masked)
  double max_query_norm = 0;        // max_h max_i ‖q_i‖
  double max_key_norm = 0;          // max_h max_j ‖k_j‖
  double logit_norm_bound = 0;      // max_h max_i‖q_i‖·max_j‖k_j‖/√d ≥ every |S_ij|
  double gradient_norm = 0;         // global L2 norm of the gradient (before clipping)
  Index fp16_overflow_count = 0;    // visible logits with |S| > 65504
  double logit_rounding_error = 0;  // max |round(S) − S| over visible logits (0 without logit rounding)
  std::vector<double> head_max_visible_logit;  // per head
  std::vector<double> head_weight;             // mixture weights π_h
};

/// Result of a fit.
template <class Scalar>
struct FitResult {
  std::vector<RowMatrix<Scalar>> queries, keys;                 // per head, at the last logged step
  std::vector<RowMatrix<Scalar>> query_weights, key_weights;    // projected parametrisation only
  RowMatrix<Scalar> inputs;                                     // X (projected only)
  std::vector<RowMatrix<Scalar>> logits, attention;             // per head S_h, A_h at the last logged step
  RowMatrix<Scalar> model_attention;                            // Σ_h π_h A_h (= A_0 for one head)
  std::vector<FitStep> log;                                     // steps 0 .. last
  std::vector<RowMatrix<Scalar>> parameters;                    // final parameters, layout of fit_objective
  bool reached_target = false;                                  // stop_at_in_band_mass reached
  bool diverged = false;                                        // a non-finite loss or gradient occurred
  const FitStep& final_step() const { return log.back(); }
};

/// Loss state and analytic gradient at given parameters (see fit_objective).
template <class Scalar>
struct FitObjective {
  FitStep state;                               // loss, KL, ... at these parameters
  std::vector<RowMatrix<Scalar>> gradient;     // dL/d(parameter), same layout as the parameters
};

namespace detail {

inline void validate_fit_options(const char* function, const FitOptions& o) {
  if (o.head_dim < 1) attnscope::detail::throw_invalid_argument(function, "head_dim must be >= 1, got ", o.head_dim);
  if (!(o.target_floor >= 0 && o.target_floor < 1))
    attnscope::detail::throw_invalid_argument(function, "target_floor must lie in [0, 1), got ", o.target_floor);
  if (o.parametrization == Parametrization::projected && o.model_dim < o.head_dim)
    attnscope::detail::throw_invalid_argument(function, "model_dim must be >= head_dim (", o.head_dim, "), got ",
                                              o.model_dim);
  attnscope::detail::require_positive(function, "adam.learning_rate", o.adam.learning_rate);
  if (!(o.adam.beta1 >= 0 && o.adam.beta1 < 1))
    attnscope::detail::throw_invalid_argument(function, "adam.beta1 must lie in [0, 1), got ", o.adam.beta1);
  if (!(o.adam.beta2 >= 0 && o.adam.beta2 < 1))
    attnscope::detail::throw_invalid_argument(function, "adam.beta2 must lie in [0, 1), got ", o.adam.beta2);
  attnscope::detail::require_positive(function, "adam.epsilon", o.adam.epsilon);
  if (o.steps < 0) attnscope::detail::throw_invalid_argument(function, "steps must be >= 0, got ", o.steps);
  attnscope::detail::require_positive(function, "init_std", o.init_std);
  if (!(o.gradient_clip >= 0) || !std::isfinite(o.gradient_clip))
    attnscope::detail::throw_invalid_argument(function, "gradient_clip must be finite and >= 0, got ", o.gradient_clip);
  if (!(o.stop_at_in_band_mass >= 0 && o.stop_at_in_band_mass <= 1))
    attnscope::detail::throw_invalid_argument(function, "stop_at_in_band_mass must lie in [0, 1], got ",
                                              o.stop_at_in_band_mass);
}

/// A head's visibility as a prefix kind (all keys, or causal) when its mask is one, so that its softmax rows run
/// in place on contiguous memory; other masks are returned as they are.
inline Visibility prefix_form(const Visibility& visibility, const Mask& mask) {
  if (visibility.is_prefix()) return visibility;
  if (mask.all()) return Visibility{};
  const Visibility causal_rows(causal);
  if ((mask == causal_rows.to_mask(mask.rows(), mask.cols())).all()) return causal_rows;
  return visibility;
}

/// The fitting engine: H heads with their own visible keys, a learned mixture, Adam on all parameters.
template <class Scalar>
class AttentionFitter {
 public:
  AttentionFitter(const char* function, const RowMatrixView<Scalar>& target, const std::vector<Visibility>& heads,
                  const FitOptions& options)
      : options_(options), n_(target.rows()), head_count_(static_cast<Index>(heads.size())) {
    validate_fit_options(function, options);
    attnscope::detail::require_nonempty(function, target);
    if (target.rows() != target.cols())
      attnscope::detail::throw_invalid_argument(function, "target must be square (queries = keys), got ", target.rows(),
                                                "x", target.cols());
    if (heads.empty()) attnscope::detail::throw_invalid_argument(function, "at least one head is needed");
    attnscope::detail::require_finite(function, target);
    Mask union_mask = Mask::Constant(n_, n_, false);
    for (Index h = 0; h < head_count_; ++h) {
      heads[static_cast<std::size_t>(h)].validate(function, n_, n_);
      head_masks_.push_back(heads[static_cast<std::size_t>(h)].to_mask(n_, n_));
      head_visibility_.push_back(prefix_form(heads[static_cast<std::size_t>(h)], head_masks_.back()));
      union_mask = union_mask || head_masks_.back();
    }
    validate_target(function, target, union_mask);
    band_ = target.array() > Scalar(0);
    support_ = options.target_floor > 0 ? union_mask : band_;
    fitted_target_ = target;
    for (Index i = 0; i < n_; ++i) fitted_target_.row(i) /= fitted_target_.row(i).sum();  // rows sum to 1 exactly
    if (options.target_floor > 0)
      for (Index i = 0; i < n_; ++i) {
        const Scalar floor = Scalar(options.target_floor / static_cast<double>(union_mask.row(i).count()));
        for (Index j = 0; j < n_; ++j)
          if (union_mask(i, j)) fitted_target_(i, j) = Scalar(1 - options.target_floor) * target(i, j) + floor;
      }
    // H(P') averaged over rows (P' is 0 off the union of the heads' keys, and 0 ln 0 = 0).
    target_entropy_ = row_entropy(fitted_target_.template cast<double>()).mean();
    initialise();
  }

  FitResult<Scalar> run() {
    FitResult<Scalar> result;
    for (Index step = 0;; ++step) {
      FitStep record = forward_and_backward(step);
      const bool finite = std::isfinite(record.loss) && std::isfinite(record.gradient_norm);
      result.log.push_back(record);
      if (!finite) {
        result.diverged = true;
        break;
      }
      if (options_.stop_at_in_band_mass > 0 && record.in_band_mass >= options_.stop_at_in_band_mass) {
        result.reached_target = true;
        break;
      }
      if (step >= options_.steps) break;
      update(record.gradient_norm);
    }
    for (Index h = 0; h < head_count_; ++h) {
      result.queries.push_back(queries_[static_cast<std::size_t>(h)]);
      result.keys.push_back(keys_[static_cast<std::size_t>(h)]);
      if (projected()) {
        result.query_weights.push_back(parameters_[static_cast<std::size_t>(2 * h)]);
        result.key_weights.push_back(parameters_[static_cast<std::size_t>(2 * h + 1)]);
      }
    }
    result.inputs = inputs_;
    result.parameters = parameters_;
    result.logits = logits_;
    result.attention = attention_;
    result.model_attention = head_count_ == 1 ? attention_[0] : mixture_;
    return result;
  }

 /// Replaces the parameters (layout of fit_objective); throws on a count or shape mismatch.
  void set_parameters(const char* function, const std::vector<RowMatrix<Scalar>>& parameters) {
    if (parameters.size() != parameters_.size())
      attnscope::detail::throw_invalid_argument(function, "expected ", parameters_.size(), " parameter matrices, got ",
                                                parameters.size());
    for (std::size_t p = 0; p < parameters.size(); ++p) {
      attnscope::detail::require_same_shape(function, "parameter", parameters[p].rows(), parameters[p].cols(),
                                            parameters_[p].rows(), parameters_[p].cols());
      attnscope::detail::require_finite(function, parameters[p]);
    }
    parameters_ = parameters;
  }

  FitObjective<Scalar> objective() {
    FitObjective<Scalar> result;
    result.state = forward_and_backward(0);
    result.gradient = gradients_;
    return result;
  }

 private:
  bool projected() const { return options_.parametrization == Parametrization::projected; }
  bool mixture_learned() const { return head_count_ > 1 && options_.learn_head_weights; }
  bool rounds(RoundingTarget where) const {
    return options_.precision.format != RoundingFormat::none &&
           (options_.precision.applies_to == where || options_.precision.applies_to == RoundingTarget::both);
  }

  void validate_target(const char* function, const RowMatrixView<Scalar>& target, const Mask& union_mask) const {
    for (Index i = 0; i < n_; ++i) {
      double sum = 0;
      for (Index j = 0; j < n_; ++j) {
        const double p = static_cast<double>(target(i, j));
        if (p < 0)
          attnscope::detail::throw_invalid_argument(function, "negative target ", p, " at row ", i, ", column ", j);
        if (p > 0 && !union_mask(i, j))
          attnscope::detail::throw_invalid_argument(function, "target puts mass ", p, " on masked key at row ", i,
                                                    ", column ", j);
        sum += p;
      }
      if (std::abs(sum - 1.0) > 1e-4)
        attnscope::detail::throw_invalid_argument(function, "target row ", i, " sums to ", sum, " instead of 1");
    }
  }

  void initialise() {
    Random random(options_.seed);
    const Index d = options_.head_dim;
    auto normal_matrix = [&random](Index rows, Index cols, double std) {
      RowMatrix<Scalar> m(rows, cols);
      for (Index i = 0; i < rows; ++i)
        for (Index j = 0; j < cols; ++j) m(i, j) = static_cast<Scalar>(std * random.normal());
      return m;
    };
    if (projected()) inputs_ = normal_matrix(n_, options_.model_dim, 1.0);
    const Index rows = projected() ? options_.model_dim : n_;
    const double std = projected() ? options_.init_std / std::sqrt(static_cast<double>(options_.model_dim))
                                   : options_.init_std;
    for (Index h = 0; h < head_count_; ++h) {
      parameters_.push_back(normal_matrix(rows, d, std));  // W_q or Q of head h
      parameters_.push_back(normal_matrix(rows, d, std));  // W_k or K of head h
    }
    if (mixture_learned()) parameters_.push_back(RowMatrix<Scalar>::Zero(head_count_, 1));  // γ, π = softmax(γ)
    for (const auto& p : parameters_) {
      gradients_.push_back(RowMatrix<Scalar>::Zero(p.rows(), p.cols()));
      first_moment_.push_back(RowMatrix<Scalar>::Zero(p.rows(), p.cols()));
      second_moment_.push_back(RowMatrix<Scalar>::Zero(p.rows(), p.cols()));
    }
    for (Index h = 0; h < head_count_; ++h) {
      queries_.emplace_back(n_, d);
      keys_.emplace_back(n_, d);
      logits_.push_back(RowMatrix<Scalar>::Zero(n_, n_));
      attention_.push_back(RowMatrix<Scalar>::Zero(n_, n_));
      logit_gradients_.push_back(RowMatrix<Scalar>::Zero(n_, n_));
    }
    head_weights_ = Vector<double>::Constant(head_count_, 1.0 / static_cast<double>(head_count_));
    if (head_count_ > 1) {
      mixture_ = RowMatrix<Scalar>::Zero(n_, n_);
      mixture_gradient_ = RowMatrix<Scalar>::Zero(n_, n_);
    }
  }

  /// Forward pass of head h: Q, K, S (with rounding), A (with rounding); fills the head's log entries.
  void forward_head(Index h, FitStep& record) {
    const auto hs = static_cast<std::size_t>(h);
    const Scalar scale = Scalar(1) / std::sqrt(Scalar(options_.head_dim));
    RowMatrix<Scalar>& q = queries_[hs];
    RowMatrix<Scalar>& k = keys_[hs];
    if (projected()) {
      q.noalias() = inputs_ * parameters_[2 * hs];
      k.noalias() = inputs_ * parameters_[2 * hs + 1];
    } else {
      q = parameters_[2 * hs];
      k = parameters_[2 * hs + 1];
    }
    RowMatrix<Scalar>& s = logits_[hs];
    s.noalias() = q * k.transpose();
    s *= scale;
    const Mask& mask = head_masks_[hs];
    const auto magnitude = s.array().abs();
    const double head_max = static_cast<double>(mask.select(magnitude, Scalar(0)).maxCoeff());
    const double masked_max = static_cast<double>(mask.select(Scalar(0), magnitude).maxCoeff());
    const Index overflow = head_max > float16_max ? (mask && (magnitude > Scalar(float16_max))).count() : 0;
    double rounding_error = 0;
    if (rounds(RoundingTarget::logits))
      for (Index i = 0; i < n_; ++i)
        for (Index j = 0; j < n_; ++j) {
          if (!mask(i, j)) continue;
          Scalar& value = s(i, j);
          const Scalar rounded = round_to_format(value, options_.precision.format);
          rounding_error = std::max(rounding_error, std::abs(static_cast<double>(rounded - value)));
          value = rounded;
        }
    softmax_rows<Scalar>(s, head_visibility_[hs], attention_[hs], false);
    if (rounds(RoundingTarget::probabilities))
      for (Index i = 0; i < n_; ++i)
        for (Index j = 0; j < n_; ++j)
          if (mask(i, j)) attention_[hs](i, j) = round_to_format(attention_[hs](i, j), options_.precision.format);
    const double max_q = q.rowwise().norm().maxCoeff(), max_k = k.rowwise().norm().maxCoeff();
    record.head_max_visible_logit.push_back(head_max);
    record.max_visible_logit = std::max(record.max_visible_logit, head_max);
    record.max_masked_logit = std::max(record.max_masked_logit, masked_max);
    record.max_query_norm = std::max(record.max_query_norm, max_q);
    record.max_key_norm = std::max(record.max_key_norm, max_k);
    record.logit_norm_bound = std::max(record.logit_norm_bound, max_q * max_k * static_cast<double>(scale));
    record.fp16_overflow_count += overflow;
    record.logit_rounding_error = std::max(record.logit_rounding_error, rounding_error);
  }

  /// Loss, KL, in-band mass and top-band accuracy of the model attention M; fills `gradient` with dL/dM
  /// (or, for one head with a cross-entropy/KL loss, directly with dL/dS = (M − P')/n). Dense expressions are
  /// exact on masked entries because M and P' are 0 there.
  void evaluate(const RowMatrix<Scalar>& model, FitStep& record, RowMatrix<Scalar>& gradient, bool logit_shortcut) {
    const Scalar inverse_n = Scalar(1) / Scalar(n_);
    const auto a = model.array();
    const auto p = fitted_target_.array();
    double cross = 0;
    for (Index i = 0; i < n_; ++i)
      for (Index j = 0; j < n_; ++j)
        if (support_(i, j)) cross -= static_cast<double>(p(i, j)) * std::log(static_cast<double>(a(i, j)));
    const double n = static_cast<double>(n_);
    record.kl = cross / n - target_entropy_;
    if (options_.loss == FitLoss::mse_probabilities)
      record.loss = static_cast<double>((a - p).square().sum()) / n;
    else
      record.loss = options_.loss == FitLoss::cross_entropy ? cross / n : record.kl;
    record.in_band_mass = static_cast<double>(band_.select(a, Scalar(0)).sum()) / n;
    const auto band_min = band_.select(a, Scalar(HUGE_VAL)).rowwise().minCoeff();
    const auto other_max = band_.select(Scalar(-HUGE_VAL), a).rowwise().maxCoeff();
    record.top_band_accuracy = static_cast<double>((band_min > other_max).count()) / n;
    if (logit_shortcut) gradient.array() = (a - p) * inverse_n;
    else if (options_.loss == FitLoss::mse_probabilities) gradient.array() = Scalar(2) * inverse_n * (a - p);
    else gradient.array() = (p > Scalar(0)).select(-p / (a * Scalar(n_)), Scalar(0));
  }

  FitStep forward_and_backward(Index step) {
    FitStep record;
    record.step = step;
    if (mixture_learned()) {
      const Vector<double> gamma = parameters_.back().col(0).template cast<double>();
      attnscope::detail::softmax_row(gamma.data(), head_count_, 1.0, head_weights_.data());  // mixture weights softmax(γ)
    }
    for (Index h = 0; h < head_count_; ++h) forward_head(h, record);
    record.head_weight.assign(head_weights_.data(), head_weights_.data() + head_count_);
    const Scalar scale = Scalar(1) / std::sqrt(Scalar(options_.head_dim));
    if (head_count_ == 1) {
      const bool shortcut = options_.loss != FitLoss::mse_probabilities;
      evaluate(attention_[0], record, shortcut ? logit_gradients_[0] : mixture_gradient_of_one_head(), shortcut);
      if (!shortcut)
        softmax_backward_rows<Scalar>(attention_[0], mixture_gradient_, head_visibility_[0], Scalar(1),
                                      logit_gradients_[0], false);
    } else {
      mixture_.setZero();
      for (Index h = 0; h < head_count_; ++h) mixture_.noalias() += Scalar(head_weights_(h)) * attention_[static_cast<std::size_t>(h)];
      evaluate(mixture_, record, mixture_gradient_, false);
      Vector<double> weight_gradient(head_count_);
      for (Index h = 0; h < head_count_; ++h) {
        const auto hs = static_cast<std::size_t>(h);
        weight_gradient(h) = static_cast<double>((mixture_gradient_.array() * attention_[hs].array()).sum());
        softmax_backward_rows<Scalar>(attention_[hs], mixture_gradient_, head_visibility_[hs],
                                      Scalar(head_weights_(h)), logit_gradients_[hs], false);
      }
      if (mixture_learned()) {  // dγ = π∘(dπ − ⟨π, dπ⟩)
        const double mean = head_weights_.dot(weight_gradient);
        for (Index h = 0; h < head_count_; ++h)
          gradients_.back()(h, 0) = static_cast<Scalar>(head_weights_(h) * (weight_gradient(h) - mean));
      }
    }
    for (Index h = 0; h < head_count_; ++h) {  // dQ = s·dS K, dK = s·dSᵀ Q (and dW = Xᵀ dQ, Xᵀ dK)
      const auto hs = static_cast<std::size_t>(h);
      const RowMatrix<Scalar>& ds = logit_gradients_[hs];
      RowMatrix<Scalar>& dq = gradients_[2 * hs];
      RowMatrix<Scalar>& dk = gradients_[2 * hs + 1];
      if (projected()) {
        query_gradient_.noalias() = scale * (ds * keys_[hs]);
        key_gradient_.noalias() = scale * (ds.transpose() * queries_[hs]);
        dq.noalias() = inputs_.transpose() * query_gradient_;
        dk.noalias() = inputs_.transpose() * key_gradient_;
      } else {
        dq.noalias() = scale * (ds * keys_[hs]);
        dk.noalias() = scale * (ds.transpose() * queries_[hs]);
      }
    }
    double squared = 0;
    for (const auto& g : gradients_) squared += static_cast<double>(g.squaredNorm());
    record.gradient_norm = std::sqrt(squared);
    return record;
  }

  RowMatrix<Scalar>& mixture_gradient_of_one_head() {
    if (mixture_gradient_.rows() != n_) mixture_gradient_ = RowMatrix<Scalar>::Zero(n_, n_);
    return mixture_gradient_;
  }

  void update(double gradient_norm) {
    ++updates_;
    const AdamOptions& adam = options_.adam;
    const double clip = options_.gradient_clip > 0 && gradient_norm > options_.gradient_clip
                            ? options_.gradient_clip / gradient_norm
                            : 1.0;
    const double step_size = adam.learning_rate * std::sqrt(1 - std::pow(adam.beta2, static_cast<double>(updates_))) /
                             (1 - std::pow(adam.beta1, static_cast<double>(updates_)));
    const double epsilon_hat = adam.epsilon * std::sqrt(1 - std::pow(adam.beta2, static_cast<double>(updates_)));
    for (std::size_t p = 0; p < parameters_.size(); ++p) {  // Adam, Kingma & Ba 2015 Alg. 1 (efficient form)
      const auto g = (Scalar(clip) * gradients_[p].array()).eval();
      first_moment_[p].array() = Scalar(adam.beta1) * first_moment_[p].array() + Scalar(1 - adam.beta1) * g;
      second_moment_[p].array() = Scalar(adam.beta2) * second_moment_[p].array() + Scalar(1 - adam.beta2) * g * g;
      parameters_[p].array() -= Scalar(step_size) * first_moment_[p].array() /
                                (second_moment_[p].array().sqrt() + Scalar(epsilon_hat));
    }
  }

  FitOptions options_;
  Index n_, head_count_;
  std::vector<Mask> head_masks_;
  std::vector<Visibility> head_visibility_;  // the heads' visibilities, in prefix form where possible
  Mask band_, support_;                      // P > 0; support of the fitted target P' (floored: keys of some head)
  RowMatrix<Scalar> fitted_target_;
  double target_entropy_ = 0;
  RowMatrix<Scalar> inputs_;
  std::vector<RowMatrix<Scalar>> parameters_, gradients_, first_moment_, second_moment_;
  std::vector<RowMatrix<Scalar>> queries_, keys_, logits_, attention_, logit_gradients_;
  RowMatrix<Scalar> mixture_, mixture_gradient_, query_gradient_, key_gradient_;
  Vector<double> head_weights_;
  Index updates_ = 0;
};

/// The fit of `target` by the heads (fit_qk, fit_heads). A function template around AttentionFitter, so that with
/// the optional compiled part (ATTNSCOPE_EXTERN_TEMPLATES) only src/extern_templates/fit.cpp instantiates the engine.
template <class Scalar>
FitResult<Scalar> run_fit(const char* function, const RowMatrixView<Scalar>& target,
                          const std::vector<Visibility>& heads, const FitOptions& options) {
  return AttentionFitter<Scalar>(function, target, heads, options).run();
}

/// The objective and its gradient at `parameters` (fit_objective).
template <class Scalar>
FitObjective<Scalar> objective_at(const char* function, const RowMatrixView<Scalar>& target,
                                  const std::vector<Visibility>& heads, const FitOptions& options,
                                  const std::vector<RowMatrix<Scalar>>& parameters) {
  AttentionFitter<Scalar> fitter(function, target, heads, options);
  fitter.set_parameters(function, parameters);
  return fitter.objective();
}

#ifdef ATTNSCOPE_EXTERN_TEMPLATES
// Compiled once in the optional compiled part (src/extern_templates/fit.cpp).
extern template FitResult<float> run_fit<float>(const char*, const RowMatrixView<float>&,
                                                const std::vector<Visibility>&, const FitOptions&);
extern template FitResult<double> run_fit<double>(const char*, const RowMatrixView<double>&,
                                                  const std::vector<Visibility>&, const FitOptions&);
extern template FitObjective<float> objective_at<float>(const char*, const RowMatrixView<float>&,
                                                        const std::vector<Visibility>&, const FitOptions&,
                                                        const std::vector<RowMatrix<float>>&);
extern template FitObjective<double> objective_at<double>(const char*, const RowMatrixView<double>&,
                                                          const std::vector<Visibility>&, const FitOptions&,
                                                          const std::vector<RowMatrix<double>>&);
#endif

}  // namespace detail

/// Fits one head S = QKᵀ/√d (free or projected Q, K) so that softmax over the visible keys matches `target`
/// (rows: distributions over visible keys, zero on masked keys), with Adam for options.steps updates (or until
/// options.stop_at_in_band_mass). Deterministic for options.seed. Cost per step ≈ 3 GEMMs of n×n×d
/// (docs/theory/logits.md §5.3: 3·(n²/2)·d·2 flop for causal) plus O(visible) softmax work.
template <class Derived>
FitResult<typename Derived::Scalar> fit_qk(const Eigen::MatrixBase<Derived>& target, const Visibility& visibility,
                                           const FitOptions& options = {}) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::fit_qk: target must be float or double");
  return detail::run_fit<Scalar>("fit_qk", RowMatrixView<Scalar>(target.derived()), {visibility}, options);
}

/// Fits H heads jointly (each with its own visibility, e.g. head_layout: full and sliding-window heads); the model
/// attention is the mixture Σ_h π_h A_h with π = softmax(γ), γ learned when options.learn_head_weights
/// ([derived] stand-in for LS-attention's output projection mixing full and local heads, docs/theory/logits.md §1).
template <class Derived>
FitResult<typename Derived::Scalar> fit_heads(const Eigen::MatrixBase<Derived>& target,
                                              const std::vector<Visibility>& heads, const FitOptions& options = {}) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::fit_heads: target must be float or double");
  return detail::run_fit<Scalar>("fit_heads", RowMatrixView<Scalar>(target.derived()), heads, options);
}

/// The fit's objective at given parameters: the state (loss, KL, in-band mass, ...) and the analytic gradient of
/// the loss (with straight-through rounding when options.precision rounds). Parameter layout: for each head h,
/// [2h] = Q_h (free, n×d) or W_q,h (projected, d_model×d), [2h + 1] = K_h or W_k,h; then, for several heads with
/// learned weights, the mixture logits γ (H×1). X (projected) is drawn from options.seed as in fit_heads, so
/// FitResult::parameters of a run with the same options fit here. Used to check gradients by finite differences.
template <class Derived>
FitObjective<typename Derived::Scalar> fit_objective(const Eigen::MatrixBase<Derived>& target,
                                                     const std::vector<Visibility>& heads, const FitOptions& options,
                                                     const std::vector<RowMatrix<typename Derived::Scalar>>& parameters) {
  using Scalar = typename Derived::Scalar;
  static_assert(std::is_floating_point<Scalar>::value, "attnscope::fit_objective: target must be float or double");
  return detail::objective_at<Scalar>("fit_objective", RowMatrixView<Scalar>(target.derived()), heads, options,
                                      parameters);
}

}  // namespace attnscope::logits
