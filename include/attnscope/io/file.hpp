// attnscope/io/file.hpp — whole-file reading and writing, bounds-checked little-endian byte decoding.
// Every parser in attnscope::io reads through detail::ByteReader, so that no read can leave the buffer: a short
// or corrupt input becomes an attnscope::io_error naming the file, the item being read and the byte offset.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/io/atomic_file.hpp"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "attnscope::io assumes a little-endian host");
#endif

namespace attnscope::io {
namespace detail {
// attnscope::io::detail shadows attnscope::detail: make the core error helpers visible in it.
using attnscope::detail::concat;
using attnscope::detail::throw_invalid_argument;
using attnscope::detail::throw_io_error;

/// (PathKind and path_kind: io/atomic_file.hpp.)
inline bool path_is_directory(const std::string& path) { return path_kind(path) == PathKind::directory; }
inline bool path_is_regular_file(const std::string& path) { return path_kind(path) == PathKind::regular_file; }
inline bool path_exists(const std::string& path) { return path_kind(path) != PathKind::missing; }

/// `folder/name` for a file name inside a folder (one separator between them; `name` alone for an empty folder).
inline std::string join_path(const std::string& folder, const std::string& name) {
  if (folder.empty()) return name;
  return folder.back() == '/' ? folder + name : folder + '/' + name;
}
}  // namespace detail

/// Reads a whole file into memory. Throws attnscope::io_error for a missing file, a directory or a read failure.
inline std::vector<unsigned char> read_file(const std::string& path) {
  if (detail::path_is_directory(path)) detail::throw_io_error("read_file", path, "is a directory");
  std::ifstream stream(path, std::ios::binary);
  if (!stream) detail::throw_io_error("read_file", path, "cannot open file for reading (missing or unreadable)");
  stream.seekg(0, std::ios::end);
  const std::streamoff end = stream.tellg();
  if (end < 0) detail::throw_io_error("read_file", path, "cannot determine the file size");
  stream.seekg(0, std::ios::beg);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(end));
  if (!bytes.empty() && !stream.read(reinterpret_cast<char*>(bytes.data()), end))
    detail::throw_io_error("read_file", path, "read failed after ", stream.gcount(), " of ", end, " bytes");
  return bytes;
}

/// Writes bytes to a file, replacing it whole or not at all (an AtomicOutputFile: a temporary file beside `path`,
/// renamed over it once flushed; `listener` hears of that temporary file). Throws attnscope::io_error naming
/// write_file and the path when the file cannot be written; `path` is then left as it was.
inline void write_file(const std::string& path, const std::string& bytes, TemporaryFileListener* listener = nullptr) {
  AtomicOutputFile file("write_file", path, listener);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

namespace detail {

/// Writes the file `path` through an AtomicOutputFile: calls produce(write), where write(const char* data,
/// std::size_t size) appends bytes, so that a writer streams its output instead of building the whole file in memory,
/// then commits. Throws attnscope::io_error "attnscope::<function>: <path>: ..." when the file cannot be created or
/// a write fails. When produce or a write throws, the exception propagates, the temporary file is removed and `path`
/// is left as it was (a device such as /dev/full is written in place and never removed).
template <class Produce>
void write_file_streamed(const char* function, const std::string& path, Produce&& produce,
                         TemporaryFileListener* listener = nullptr) {
  AtomicOutputFile file(function, path, listener);
  produce([&file](const char* data, std::size_t size) { file.write(data, size); });
  file.commit();
}

/// Reads a whole file and hands its bytes to an in-memory parser `parse(data, size, name_for_errors)`.
template <class Parser>
auto parse_file(const std::string& path, Parser&& parse) {
  const std::vector<unsigned char> bytes = read_file(path);
  return parse(bytes.data(), bytes.size(), path);
}

/// a·b, or false when the product overflows std::uint64_t.
inline bool multiply_checked(std::uint64_t a, std::uint64_t b, std::uint64_t& product) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return false;
  product = a * b;
  return true;
}

/// a+b, or false when the sum overflows std::uint64_t.
inline bool add_checked(std::uint64_t a, std::uint64_t b, std::uint64_t& sum) {
  if (b > std::numeric_limits<std::uint64_t>::max() - a) return false;
  sum = a + b;
  return true;
}

/// Appends the little-endian bytes of an integer or float value to a byte string.
template <class T>
void append_little_endian(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // the host is little-endian (static_assert above)
  out.append(bytes, sizeof(T));
}

/// Bounds-checked cursor over an in-memory file. Every failure throws attnscope::io_error
/// "attnscope::<function>: <name>: <what is wrong> (byte offset N)".
class ByteReader {
 public:
  ByteReader(const unsigned char* data, std::size_t size, const char* function, std::string name)
      : data_(data), size_(size), function_(function), name_(std::move(name)) {
    if (data_ == nullptr && size_ != 0) fail("null data pointer with size ", size_);
  }

  std::size_t size() const { return size_; }
  std::size_t position() const { return position_; }
  std::size_t remaining() const { return size_ - position_; }
  const unsigned char* data() const { return data_; }
  const std::string& name() const { return name_; }
  const char* function() const { return function_; }

  /// Throws io_error with the file name, the message and the current offset.
  template <class... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    throw_io_error(function_, name_, std::forward<Parts>(parts)..., " (byte offset ", position_, ")");
  }

  /// Moves to an absolute offset ≤ size.
  void seek(std::uint64_t offset, const char* what) {
    if (offset > size_) fail(what, " at offset ", offset, " points past the end of the ", size_, "-byte input");
    position_ = static_cast<std::size_t>(offset);
  }

  /// Returns a pointer to the next `count` bytes and advances past them.
  const unsigned char* take(std::uint64_t count, const char* what) {
    if (count > remaining())
      fail("truncated: ", what, " needs ", count, " bytes but only ", remaining(), " remain of ", size_);
    const unsigned char* start = data_ + position_;
    position_ += static_cast<std::size_t>(count);
    return start;
  }

  /// Reads one little-endian value of type T.
  template <class T>
  T read(const char* what) {
    T value;
    std::memcpy(&value, take(sizeof(T), what), sizeof(T));
    return value;
  }

 private:
  const unsigned char* data_;
  std::size_t size_;
  const char* function_;
  std::string name_;
  std::size_t position_ = 0;
};

}  // namespace detail
}  // namespace attnscope::io
