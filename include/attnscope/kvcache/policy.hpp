// attnscope/kvcache/policy.hpp — the policies the simulator knows, as one variant, and their text specs: parse_policy
// ("streaming:sink=4,recent=60") and policy_spec (the canonical text back). A new policy is one header with its type
// (fields, spec parsing, scope, and a State with cache() and attended()) plus its name in the list below.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "attnscope/kvcache/h2o.hpp"
#include "attnscope/kvcache/oracle.hpp"
#include "attnscope/kvcache/policy_spec.hpp"
#include "attnscope/kvcache/snapkv.hpp"
#include "attnscope/kvcache/streaming.hpp"
#include "attnscope/kvcache/tova.hpp"

namespace attnscope::kvcache {

/// One KV-cache policy with its parameters.
using Policy = std::variant<Streaming, Oracle, H2O, Tova, SnapKV>;

namespace detail {

template <std::size_t I = 0>
void parse_alternative(const PolicySpec& spec, std::optional<Policy>& parsed, std::string& names) {
  if constexpr (I < std::variant_size_v<Policy>) {
    using Alternative = std::variant_alternative_t<I, Policy>;
    if (spec.name() == Alternative::name) parsed = Alternative::from_spec(spec);
    names += (I ? ", " : "") + std::string(Alternative::name);
    parse_alternative<I + 1>(spec, parsed, names);
  }
}

}  // namespace detail

/// Parses `name:field=value,...`. Throws attnscope::invalid_argument naming kvcache::parse_policy, the spec and the
/// offending part: an unknown policy name (the message lists the known ones), an unknown, missing, repeated or
/// non-integer field, or a value out of its range.
inline Policy parse_policy(const std::string& text) {
  const PolicySpec spec(text);
  std::optional<Policy> parsed;
  std::string names;
  detail::parse_alternative(spec, parsed, names);
  if (!parsed) spec.fail("unknown policy '", spec.name(), "' (known: ", names, ")");
  return *parsed;
}

/// The canonical spec of a policy (parse_policy(policy_spec(p)) gives p back).
inline std::string policy_spec(const Policy& policy) {
  return std::visit([](const auto& alternative) { return alternative.spec(); }, policy);
}

/// Which query heads share one cache of the policy.
inline CacheScope policy_scope(const Policy& policy) {
  return std::visit([](const auto& alternative) { return std::decay_t<decltype(alternative)>::scope; }, policy);
}

}  // namespace attnscope::kvcache
