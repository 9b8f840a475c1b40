// tools/cli_arguments.hpp — command-line parsing for the attnscope subcommands: declared options
// (`--name VALUE`, flags, short aliases such as -o), positional arguments, and usage errors.
#pragma once

#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace attnscope::cli {

/// A mistake in the command line: reported in one line with a pointer to the subcommand's --help, exit code 2.
class usage_error : public std::runtime_error {
 public:
  explicit usage_error(const std::string& what) : std::runtime_error(what) {}
};

/// Declared options of one subcommand and the parsed result.
class Arguments {
 public:
  /// An option taking a value (`--name VALUE` or `--name=VALUE`); `alias` is an optional short form like "-o".
  Arguments& value_option(const std::string& name, const std::string& alias = "") {
    takes_value_.insert(name);
    if (!alias.empty()) aliases_[alias] = "--" + name;
    return *this;
  }
  /// An option taking a value that may be given several times (`--model A --model B`); read with get_all.
  Arguments& repeated_option(const std::string& name) {
    takes_value_.insert(name);
    repeated_.insert(name);
    return *this;
  }
  /// An option without a value.
  Arguments& flag(const std::string& name) {
    flags_.insert(name);
    return *this;
  }

  /// Parses argv[first..argc). Throws usage_error for unknown options, missing values, repeated options.
  void parse(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) {
      std::string argument = argv[i];
      if (const auto alias = aliases_.find(argument); alias != aliases_.end()) argument = alias->second;
      if (argument.size() > 2 && argument.compare(0, 2, "--") == 0) {
        std::string name = argument.substr(2), value;
        const auto equals = name.find('=');
        const bool inline_value = equals != std::string::npos;
        if (inline_value) {
          value = name.substr(equals + 1);
          name = name.substr(0, equals);
        }
        if (flags_.count(name) && !inline_value) {
          present_.insert(name);
          continue;
        }
        if (!takes_value_.count(name)) throw usage_error("unknown option --" + name);
        if (values_.count(name) && !repeated_.count(name)) throw usage_error("option --" + name + " given twice");
        if (!inline_value) {
          if (i + 1 >= argc) throw usage_error("option --" + name + " needs a value");
          value = argv[++i];
        }
        values_[name] = value;
        all_values_[name].push_back(value);
        present_.insert(name);
      } else if (argument.size() > 1 && argument[0] == '-' && !(argument[1] >= '0' && argument[1] <= '9')) {
        throw usage_error("unknown option " + argument);
      } else {
        positional_.push_back(argument);
      }
    }
  }

  bool has(const std::string& name) const { return present_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const {
    const auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  /// Value of a required option; throws usage_error when absent.
  std::string require(const std::string& name) const {
    if (!values_.count(name)) throw usage_error("missing required option --" + name);
    return values_.at(name);
  }
  /// Every value of a repeated option, in the order given (empty when absent).
  std::vector<std::string> get_all(const std::string& name) const {
    const auto it = all_values_.find(name);
    return it == all_values_.end() ? std::vector<std::string>{} : it->second;
  }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::set<std::string> takes_value_, flags_, present_, repeated_;
  std::map<std::string, std::string> aliases_, values_;
  std::map<std::string, std::vector<std::string>> all_values_;
  std::vector<std::string> positional_;
};

/// Parses a whole string as an integer in [low, high]; throws usage_error naming the option otherwise.
inline long parse_integer(const std::string& text, const std::string& what, long low, long high) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || value < low || value > high)
    throw usage_error(what + ": expected an integer in [" + std::to_string(low) + ", " + std::to_string(high) +
                      "], got '" + text + "'");
  return value;
}

/// Token ids separated by commas and/or whitespace, e.g. "1, 2,3" or one per line.
inline std::vector<int> parse_token_list(const std::string& text, const std::string& what) {
  std::vector<int> tokens;
  std::string current;
  auto flush = [&]() {
    if (current.empty()) return;
    tokens.push_back(static_cast<int>(parse_integer(current, what, -2147483647L, 2147483647L)));
    current.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\n' || c == '\t' || c == '\r') flush();
    else current.push_back(c);
  }
  flush();
  if (tokens.empty()) throw usage_error(what + ": no token ids found");
  return tokens;
}

}  // namespace attnscope::cli
