// attnscope/core/error.hpp — the library's exception types and argument checks.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace attnscope {

/// Thrown for invalid arguments: NaN/Inf input, empty input, shape mismatch, fully masked rows,
/// out-of-range parameters. The message always starts with "attnscope::<function>: ".
class invalid_argument : public std::invalid_argument {
 public:
  explicit invalid_argument(const std::string& what) : std::invalid_argument(what) {}
};

/// Thrown for unreadable, truncated or corrupt files; the message names the file and what is wrong.
class io_error : public std::runtime_error {
 public:
  explicit io_error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {

/// Concatenates any streamable values into one string.
template <class... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream stream;
  stream.precision(17);
  (stream << ... << std::forward<Parts>(parts));
  return stream.str();
}

/// Throws attnscope::invalid_argument("attnscope::<function>: <message parts>").
template <class... Parts>
[[noreturn]] void throw_invalid_argument(const char* function, Parts&&... parts) {
  throw invalid_argument(concat("attnscope::", function, ": ", std::forward<Parts>(parts)...));
}

/// Throws attnscope::io_error("attnscope::<function>: <file>: <message parts>").
template <class... Parts>
[[noreturn]] void throw_io_error(const char* function, const std::string& file, Parts&&... parts) {
  throw io_error(concat("attnscope::", function, ": ", file, ": ", std::forward<Parts>(parts)...));
}

}  // namespace detail
}  // namespace attnscope
