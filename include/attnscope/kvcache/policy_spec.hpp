// attnscope/kvcache/policy_spec.hpp — the text form of a KV-cache policy, `name:field=value,field=value`
// (e.g. `streaming:sink=4,recent=60`): split into its name and integer fields, with errors that name the spec and the
// offending field. Each policy type reads its own fields (PolicySpec::integer) and prints itself back (spec()).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/core/types.hpp"

namespace attnscope::kvcache {

/// A parsed `name:field=value,...` spec: the policy name and its fields in the order given (each named once).
class PolicySpec {
 public:
  /// Splits `text`. Throws attnscope::invalid_argument naming `kvcache::parse_policy` and the text for an empty name,
  /// a field without `=`, an empty field name or value, or a field given twice.
  explicit PolicySpec(std::string text) : text_(std::move(text)) {
    const std::size_t colon = text_.find(':');
    name_ = text_.substr(0, colon);
    if (name_.empty()) fail("no policy name before ':'");
    if (colon == std::string::npos) return;
    std::size_t start = colon + 1;
    while (start <= text_.size()) {
      const std::size_t comma = std::min(text_.find(',', start), text_.size());
      const std::string item = text_.substr(start, comma - start);
      const std::size_t equals = item.find('=');
      if (equals == std::string::npos) fail("field '", item, "' has no '=value'");
      std::string field = item.substr(0, equals), value = item.substr(equals + 1);
      if (field.empty()) fail("a field has no name ('", item, "')");
      if (value.empty()) fail("field '", field, "' has no value");
      for (const auto& existing : fields_)
        if (existing.first == field) fail("field '", field, "' is given twice");
      fields_.emplace_back(std::move(field), std::move(value));
      start = comma + 1;
    }
  }

  const std::string& text() const { return text_; }
  const std::string& name() const { return name_; }

  /// Throws unless every field is one of `allowed` (the message lists them).
  void require_fields(const std::vector<std::string>& allowed) const {
    for (const auto& field : fields_) {
      bool known = false;
      for (const std::string& name : allowed) known = known || name == field.first;
      if (!known) fail("unknown field '", field.first, "' (", name_, " takes ", join(allowed), ")");
    }
    for (const std::string& name : allowed) {
      bool given = false;
      for (const auto& field : fields_) given = given || field.first == name;
      if (!given) fail("missing field '", name, "' (", name_, " takes ", join(allowed), ")");
    }
  }

  /// The integer value of `field`, which must lie in [low, high]; throws naming the field otherwise.
  Index integer(const std::string& field, Index low, Index high = Index{1} << 40) const {
    for (const auto& entry : fields_) {
      if (entry.first != field) continue;
      const std::string& value = entry.second;
      char* end = nullptr;
      errno = 0;
      const long long parsed = std::strtoll(value.c_str(), &end, 10);
      if (end != value.c_str() + value.size() || errno == ERANGE)
        fail("field '", field, "' must be an integer, got '", value, "'");
      if (parsed < low || parsed > high)
        fail("field '", field, "' must be in [", low, ", ", high, "], got ", parsed);
      return static_cast<Index>(parsed);
    }
    fail("missing field '", field, "'");
  }

  /// Throws attnscope::invalid_argument("attnscope::kvcache::parse_policy: '<spec>': <parts>").
  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    attnscope::detail::throw_invalid_argument("kvcache::parse_policy", "'", text_, "': ", parts...);
  }

 private:
  static std::string join(const std::vector<std::string>& names) {
    std::string text;
    for (std::size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "") + names[i];
    return text;
  }

  std::string text_, name_;
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace attnscope::kvcache
