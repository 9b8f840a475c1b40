// attnscope/normalize/maps.hpp — descriptions of the normalization maps as values: one small struct per map,
// the variant NormalizationMap of them, parsing from and printing to strings ("softmax", "entmax:1.25", ...), and
// apply_map(map, logits, visibility), which runs any of them.
#pragma once

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>

#include <Eigen/Core>

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
#include "attnscope/normalize/entmax.hpp"
#include "attnscope/normalize/generalized.hpp"
#include "attnscope/normalize/sa_softmax.hpp"
#include "attnscope/normalize/sink_softmax.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "attnscope/normalize/sparsemax.hpp"
#include "attnscope/normalize/ssmax.hpp"

namespace attnscope {

/// softmax(z/T), T > 0.
struct SoftmaxMap {
  double temperature = 1;
};
/// sparsemax (α = 2 entmax).
struct SparsemaxMap {};
/// exact 1.5-entmax.
struct Entmax15Map {};
/// α-entmax by bisection, α > 1.
struct EntmaxBisectMap {
  double alpha = 1.5;
};
/// Scalable-Softmax: softmax((s·log n)·z), s > 0.
struct ScalableSoftmaxMap {
  double s = 1;
};
/// Self-Adjust Softmax (basic or normalized); rows are not distributions.
struct SelfAdjustSoftmaxMap {
  SelfAdjustVariant variant = SelfAdjustVariant::basic;
};
/// Softmax with an extra sink logit (0 = off-by-one softmax).
struct SinkSoftmaxMap {
  double sink_logit = 0;
};

/// Any of the built-in maps (GeneralizedMap is a template and is used directly instead).
using NormalizationMap = std::variant<SoftmaxMap, SparsemaxMap, Entmax15Map, EntmaxBisectMap, ScalableSoftmaxMap,
                                      SelfAdjustSoftmaxMap, SinkSoftmaxMap>;

namespace detail {

/// Parameter checks of each map description; `function` names the caller in the message.
inline void validate_map(const char* function, const SoftmaxMap& map) {
  require_positive(function, "temperature", map.temperature);
}
inline void validate_map(const char*, const SparsemaxMap&) {}
inline void validate_map(const char*, const Entmax15Map&) {}
inline void validate_map(const char* function, const EntmaxBisectMap& map) { require_entmax_alpha(function, map.alpha); }
inline void validate_map(const char* function, const ScalableSoftmaxMap& map) { require_positive(function, "s", map.s); }
inline void validate_map(const char*, const SelfAdjustSoftmaxMap&) {}
inline void validate_map(const char* function, const SinkSoftmaxMap& map) {
  require_finite_sink(function, map.sink_logit);
}
inline void validate_map(const char* function, const NormalizationMap& map) {
  std::visit([function](const auto& alternative) { validate_map(function, alternative); }, map);
}

/// Shortest decimal text that reads back to the same double.
inline std::string shortest_decimal(double value) {
  for (int digits = 1; digits <= 17; ++digits) {
    std::ostringstream stream;
    stream.precision(digits);
    stream << value;
    if (std::strtod(stream.str().c_str(), nullptr) == value) return stream.str();
  }
  std::ostringstream stream;
  stream.precision(17);
  stream << value;
  return stream.str();
}

/// Parses the whole of `text` as a finite number or throws naming the map string.
inline double parse_map_parameter(const std::string& text, const std::string& map_text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  if (text.empty() || end != begin + text.size() || !std::isfinite(value))
    throw_invalid_argument("parse_normalization_map", "bad number '", text, "' in '", map_text, "'");
  return value;
}

}  // namespace detail

/// Parses "softmax", "temperature:T", "ssmax:S", "sparsemax", "entmax15", "entmax:ALPHA", "sa_softmax",
/// "sa_softmax_normalized", "sink" or "sink:LOGIT". Throws attnscope::invalid_argument for anything else and for
/// out-of-range parameters (T ≤ 0, S ≤ 0, ALPHA ≤ 1, non-finite numbers).
inline NormalizationMap parse_normalization_map(const std::string& text) {
  const char* function = "parse_normalization_map";
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  const bool has_parameter = colon != std::string::npos;
  const std::string parameter_text = has_parameter ? text.substr(colon + 1) : std::string();
  NormalizationMap map;
  if (!has_parameter && name == "softmax") map = SoftmaxMap{};
  else if (!has_parameter && name == "sparsemax") map = SparsemaxMap{};
  else if (!has_parameter && name == "entmax15") map = Entmax15Map{};
  else if (!has_parameter && name == "sa_softmax") map = SelfAdjustSoftmaxMap{SelfAdjustVariant::basic};
  else if (!has_parameter && name == "sa_softmax_normalized") map = SelfAdjustSoftmaxMap{SelfAdjustVariant::normalized};
  else if (!has_parameter && name == "sink") map = SinkSoftmaxMap{};
  else if (has_parameter && name == "temperature") map = SoftmaxMap{detail::parse_map_parameter(parameter_text, text)};
  else if (has_parameter && name == "ssmax") map = ScalableSoftmaxMap{detail::parse_map_parameter(parameter_text, text)};
  else if (has_parameter && name == "entmax") map = EntmaxBisectMap{detail::parse_map_parameter(parameter_text, text)};
  else if (has_parameter && name == "sink") map = SinkSoftmaxMap{detail::parse_map_parameter(parameter_text, text)};
  else
    detail::throw_invalid_argument(function, "unknown normalization map '", text,
                                   "' (expected softmax, temperature:T, ssmax:S, sparsemax, entmax15, entmax:ALPHA, "
                                   "sa_softmax, sa_softmax_normalized, sink or sink:LOGIT)");
  detail::validate_map(function, map);
  return map;
}

/// The canonical string of a map; parse_normalization_map(to_string(map)) gives the map back.
inline std::string to_string(const NormalizationMap& map) {
  struct Printer {
    std::string operator()(const SoftmaxMap& m) const {
      return m.temperature == 1 ? "softmax" : "temperature:" + detail::shortest_decimal(m.temperature);
    }
    std::string operator()(const SparsemaxMap&) const { return "sparsemax"; }
    std::string operator()(const Entmax15Map&) const { return "entmax15"; }
    std::string operator()(const EntmaxBisectMap& m) const { return "entmax:" + detail::shortest_decimal(m.alpha); }
    std::string operator()(const ScalableSoftmaxMap& m) const { return "ssmax:" + detail::shortest_decimal(m.s); }
    std::string operator()(const SelfAdjustSoftmaxMap& m) const {
      return m.variant == SelfAdjustVariant::basic ? "sa_softmax" : "sa_softmax_normalized";
    }
    std::string operator()(const SinkSoftmaxMap& m) const { return "sink:" + detail::shortest_decimal(m.sink_logit); }
  };
  return std::visit(Printer{}, map);
}

/// Applies any built-in map to each row of `logits` over its visible keys (see the individual functions for
/// formulas, complexity and errors). Returns a row-major matrix of the same shape, masked entries exactly 0.
template <class Derived>
RowMatrix<typename Derived::Scalar> apply_map(const NormalizationMap& map, const Eigen::MatrixBase<Derived>& logits,
                                              const Visibility& visibility = {}) {
  using Scalar = typename Derived::Scalar;
  struct Apply {
    const Eigen::MatrixBase<Derived>& logits;
    const Visibility& visibility;
    RowMatrix<Scalar> operator()(const SoftmaxMap& m) const {
      return softmax(logits, static_cast<Scalar>(m.temperature), visibility);
    }
    RowMatrix<Scalar> operator()(const SparsemaxMap&) const { return sparsemax(logits, visibility); }
    RowMatrix<Scalar> operator()(const Entmax15Map&) const { return entmax15(logits, visibility); }
    RowMatrix<Scalar> operator()(const EntmaxBisectMap& m) const {
      detail::require_entmax_alpha("entmax_bisect", m.alpha);
      return entmax_bisect(logits, static_cast<Scalar>(m.alpha), visibility);
    }
    RowMatrix<Scalar> operator()(const ScalableSoftmaxMap& m) const {
      return ssmax(logits, static_cast<Scalar>(m.s), visibility);
    }
    RowMatrix<Scalar> operator()(const SelfAdjustSoftmaxMap& m) const {
      return sa_softmax(logits, m.variant, visibility);
    }
    RowMatrix<Scalar> operator()(const SinkSoftmaxMap& m) const {
      detail::require_finite_sink("softmax_with_sink", m.sink_logit);
      return softmax_with_sink(logits, static_cast<Scalar>(m.sink_logit), visibility);
    }
  };
  return std::visit(Apply{logits, visibility}, map);
}

}  // namespace attnscope
