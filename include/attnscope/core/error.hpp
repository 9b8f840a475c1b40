// attnscope/core/error.hpp — the library's exception types and argument checks.
#pragma once

#include <cstddef>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
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

/// One part of a message: the address of a value and the function that streams it. The message functions below
/// collect their arguments as such parts and stream them in one non-template function, so each distinct list of
/// argument types costs the program a few instructions (filling an array) instead of its own copy of the
/// std::ostringstream code (compile time and code size: there are hundreds of such lists).
struct MessagePart {
  const void* value;
  void (*write)(std::ostream&, const void*);
  std::ios_base& (*manipulator)(std::ios_base&);  // instead of `write`, for std::hex, std::dec, ...
};

template <class T>
void write_message_part(std::ostream& out, const void* value) {
  out << *static_cast<const T*>(value);
}

inline void write_message_chars(std::ostream& out, const void* value) { out << static_cast<const char*>(value); }

/// A string literal, character array or C string is streamed as text through one function for all of them.
template <class Part>
MessagePart message_part(const Part& part) {
  if constexpr (std::is_array_v<Part> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<Part>>, char>)
    return {part, &write_message_chars, nullptr};
  else if constexpr (std::is_same_v<Part, const char*> || std::is_same_v<Part, char*>)
    return {part, &write_message_chars, nullptr};
  else
    return {&part, &write_message_part<Part>, nullptr};
}

inline MessagePart message_part(std::ios_base& (*manipulator)(std::ios_base&)) {
  return {nullptr, nullptr, manipulator};
}

/// Streams the parts, in order, into one string (floating-point values with 17 significant digits).
inline std::string join_message(const MessagePart* parts, std::size_t count) {
  std::ostringstream stream;
  stream.precision(17);
  for (std::size_t i = 0; i < count; ++i) {
    if (parts[i].write)
      parts[i].write(stream, parts[i].value);
    else
      stream << parts[i].manipulator;
  }
  return stream.str();
}

[[noreturn]] inline void throw_invalid_argument_message(const MessagePart* parts, std::size_t count) {
  throw invalid_argument(join_message(parts, count));
}

[[noreturn]] inline void throw_io_error_message(const MessagePart* parts, std::size_t count) {
  throw io_error(join_message(parts, count));
}

/// Concatenates any streamable values into one string.
template <class... Parts>
std::string concat(const Parts&... parts) {
  const MessagePart list[sizeof...(Parts) + 1] = {message_part(parts)..., MessagePart{nullptr, nullptr, nullptr}};
  return join_message(list, sizeof...(Parts));
}

/// Throws attnscope::invalid_argument("attnscope::<function>: <message parts>").
template <class... Parts>
[[noreturn]] void throw_invalid_argument(const char* function, const Parts&... parts) {
  const MessagePart list[] = {message_part("attnscope::"), message_part(function), message_part(": "),
                              message_part(parts)...};
  throw_invalid_argument_message(list, 3 + sizeof...(Parts));
}

/// Throws attnscope::io_error("attnscope::<function>: <file>: <message parts>").
template <class... Parts>
[[noreturn]] void throw_io_error(const char* function, const std::string& file, const Parts&... parts) {
  const MessagePart list[] = {message_part("attnscope::"), message_part(function), message_part(": "),
                              message_part(file),          message_part(": "),     message_part(parts)...};
  throw_io_error_message(list, 5 + sizeof...(Parts));
}

}  // namespace detail
}  // namespace attnscope
