// attnscope/io/atomic_file.hpp — output files replaced whole or not at all. An AtomicOutputFile writes to a temporary
// file beside its target (same folder, so that the rename stays on one file system) and renames it over the target
// only after the bytes are flushed to the disk (fsync) and the file is closed: rename(2) replaces a directory entry
// atomically (POSIX.1-2017, rename), so a reader sees the previous file or the new one, never a mixture, and a failed
// write (full disk, an exception, an interrupted program) leaves the previous file as it was. The library keeps no
// list of temporary files: a program that removes them on a signal passes a TemporaryFileListener and keeps its own.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "attnscope/core/error.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#define ATTNSCOPE_IO_POSIX_FILES 1
#else
#include <filesystem>
#endif

namespace attnscope::io {

/// Told about each temporary file an AtomicOutputFile uses: `temporary_file_created` just before the file is created
/// (so that a signal arriving in between finds the name already known) and `temporary_file_gone` once it was renamed
/// over its target or removed. A program that must remove temporary files when it is interrupted (the `attnscope`
/// command's SIGINT handler) records the names it is given; the library itself keeps none.
class TemporaryFileListener {
 public:
  virtual void temporary_file_created(const std::string& temporary_path) = 0;
  virtual void temporary_file_gone(const std::string& temporary_path) = 0;

 protected:
  ~TemporaryFileListener() = default;
};

namespace detail {

/// The folder part of a path ("." for a bare file name, "/" for a file in the root).
inline std::string parent_folder(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? std::string("/") : path.substr(0, slash);
}

/// The file-name part of a path (after its last '/').
inline std::string file_name_part(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// A temporary name beside `target`: `<folder>/.<name>.tmp-<pid>-<tag>` (the name cut to 160 bytes so that the whole
/// stays below NAME_MAX = 255).
inline std::string temporary_path_beside(const std::string& target, const std::string& tag) {
  std::string name = file_name_part(target).substr(0, 160);
  const std::string folder = parent_folder(target);
#if defined(ATTNSCOPE_IO_POSIX_FILES)
  const long process = static_cast<long>(::getpid());
#else
  const long process = 0;
#endif
  std::string result = folder == "/" ? std::string("/") : folder + "/";
  if (target.find('/') == std::string::npos) result.clear();
  return result + "." + name + ".tmp-" + std::to_string(process) + "-" + tag;
}

/// Eight hexadecimal digits that differ from call to call (SplitMix64 of the clock, an address and an attempt count;
/// they only make a name unique, O_EXCL makes it safe).
inline std::string unique_tag(const void* address, unsigned attempt) {
  std::uint64_t x = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                    (static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(address)) << 16) ^ attempt;
  x += 0x9e3779b97f4a7c15ull;  // SplitMix64 (Steele, Lea, Flood 2014)
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  static const char digits[] = "0123456789abcdef";
  std::string tag(8, '0');
  for (int i = 0; i < 8; ++i) tag[static_cast<std::size_t>(i)] = digits[(x >> (4 * i)) & 15];
  return tag;
}

/// The file a write to `path` replaces: the final target of a symbolic link (so that the link is kept and the file
/// it names is replaced), else `path` itself.
inline std::string replaced_file(const std::string& path) {
#if defined(ATTNSCOPE_IO_POSIX_FILES)
  struct stat link {};
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) != nullptr) return resolved;
  }
#endif
  return path;
}

/// What a path names, following symbolic links: nothing (or nothing that can be inspected), a directory, a regular
/// file, or something else (a device, a pipe, a socket, …). POSIX stat where there is one (<filesystem> costs a
/// translation unit as much parsing as <Eigen/Core>).
enum class PathKind { missing, directory, regular_file, other };

inline PathKind path_kind(const std::string& path) {
#if defined(ATTNSCOPE_IO_POSIX_FILES)
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) return PathKind::missing;
  if (S_ISDIR(status.st_mode)) return PathKind::directory;
  return S_ISREG(status.st_mode) ? PathKind::regular_file : PathKind::other;
#else
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error || !std::filesystem::exists(status)) return PathKind::missing;
  if (std::filesystem::is_directory(status)) return PathKind::directory;
  return std::filesystem::is_regular_file(status) ? PathKind::regular_file : PathKind::other;
#endif
}

inline std::string system_error_text(int error) { return std::strerror(error); }

}  // namespace detail

/// Why a file cannot be written at `path`, or "" when it can: an empty path, a directory, a missing parent folder
/// (or a parent that is not a folder), a folder where no file can be created (read-only, no permission: tested by
/// creating and removing a probe file, since permission bits do not bind every user), an existing file that is
/// read-only, or a device that is not writable. Cheap (a few system calls); meant to be called before long work, so
/// that a bad output path is reported before, not after, it. `listener` hears of the probe file like of any
/// temporary file.
inline std::string output_path_problem(const std::string& path, TemporaryFileListener* listener = nullptr) {
  if (path.empty()) return "the output path is empty";
  const std::string target = detail::replaced_file(path);
  switch (detail::path_kind(target)) {
    case detail::PathKind::directory: return "is a directory";
    case detail::PathKind::other:  // a device or a pipe is written in place: it must be writable itself
#if defined(ATTNSCOPE_IO_POSIX_FILES)
      if (::access(target.c_str(), W_OK) != 0) return "is not writable (" + detail::system_error_text(errno) + ")";
#endif
      return "";
    case detail::PathKind::regular_file:
#if defined(ATTNSCOPE_IO_POSIX_FILES)
      if (::access(target.c_str(), W_OK) != 0) return "the existing file is not writable (" +
                                                      detail::system_error_text(errno) + ")";
#endif
      break;
    case detail::PathKind::missing: break;
  }
  const std::string folder = detail::parent_folder(target);
  switch (detail::path_kind(folder)) {
    case detail::PathKind::missing: return "the folder " + folder + " does not exist";
    case detail::PathKind::directory: break;
    default: return folder + " is not a folder";
  }
#if defined(ATTNSCOPE_IO_POSIX_FILES)
  const std::string probe = detail::temporary_path_beside(target, "check");
  if (listener) listener->temporary_file_created(probe);
  const int descriptor = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const int open_error = errno;
  if (descriptor >= 0) {
    ::close(descriptor);
    ::unlink(probe.c_str());
  }
  if (listener) listener->temporary_file_gone(probe);
  if (descriptor < 0 && open_error != EEXIST)
    return "no file can be created in the folder " + folder + " (" + detail::system_error_text(open_error) + ")";
#else
  (void)listener;
#endif
  return "";
}

/// One output file written whole or not at all. The constructor creates a temporary file beside `path`
/// (`.<name>.tmp-<pid>-<8 hex digits>`, in the same folder, with the permission bits of the file it replaces);
/// write() appends bytes; commit() flushes them to the disk (fsync), closes the file and renames it over `path`.
/// Until commit() returns, `path` is untouched; the destructor of an uncommitted file removes the temporary file
/// (an exception, a full disk). A symbolic link at `path` is kept and the file it names replaced. A path naming
/// something that is not a regular file or a directory (a device such as /dev/null, a pipe) is written in place:
/// there is nothing to replace atomically. Every failure throws attnscope::io_error
/// "attnscope::<function>: <path>: <what failed>: <system error>".
class AtomicOutputFile {
 public:
  AtomicOutputFile(const char* function, std::string path, TemporaryFileListener* listener = nullptr)
      : function_(function), path_(std::move(path)), listener_(listener) {
    if (path_.empty()) attnscope::detail::throw_io_error(function_, path_, "the output path is empty");
    target_ = detail::replaced_file(path_);
    const detail::PathKind kind = detail::path_kind(target_);
    if (kind == detail::PathKind::directory)
      attnscope::detail::throw_io_error(function_, path_, "cannot open file for writing: is a directory");
#if defined(ATTNSCOPE_IO_POSIX_FILES)
    if (kind == detail::PathKind::other) {  // a device or a pipe: written in place
      descriptor_ = ::open(target_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
      if (descriptor_ < 0) fail("cannot open file for writing", errno);
      return;
    }
    if (kind == detail::PathKind::regular_file && ::access(target_.c_str(), W_OK) != 0)
      fail("cannot open file for writing: the existing file is not writable", errno);
    const std::string folder = detail::parent_folder(target_);
    if (detail::path_kind(folder) != detail::PathKind::directory)
      attnscope::detail::throw_io_error(function_, path_, "cannot open file for writing: the folder ", folder,
                                        " does not exist");
    struct stat replaced {};
    const bool keep_mode = kind == detail::PathKind::regular_file && ::stat(target_.c_str(), &replaced) == 0;
    for (unsigned attempt = 0; attempt < 64; ++attempt) {
      temporary_ = detail::temporary_path_beside(target_, detail::unique_tag(this, attempt));
      if (listener_) listener_->temporary_file_created(temporary_);
      descriptor_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (descriptor_ >= 0) break;
      const int error = errno;
      if (listener_) listener_->temporary_file_gone(temporary_);
      if (error != EEXIST) {
        temporary_.clear();
        fail("cannot open file for writing: cannot create a temporary file in " + folder, error);
      }
    }
    if (descriptor_ < 0) {
      temporary_.clear();
      fail("cannot open file for writing: no unused temporary name in " + folder, EEXIST);
    }
    if (keep_mode && ::fchmod(descriptor_, replaced.st_mode & 07777) != 0) {
      const int error = errno;
      discard();
      fail("cannot give the temporary file the permissions of the file it replaces", error);
    }
#else
    temporary_ = kind == detail::PathKind::other
                     ? std::string()
                     : detail::temporary_path_beside(target_, detail::unique_tag(this, 0));
    if (listener_ && !temporary_.empty()) listener_->temporary_file_created(temporary_);
    stream_ = std::fopen((temporary_.empty() ? target_ : temporary_).c_str(), "wb");
    if (stream_ == nullptr) {
      discard();
      fail("cannot open file for writing", errno);
    }
#endif
  }

  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  ~AtomicOutputFile() { discard(); }

  /// Appends `size` bytes. Throws io_error "write failed after N bytes: <system error>" (and removes nothing yet:
  /// the destructor does).
  void write(const char* data, std::size_t size) {
    if (committed_) attnscope::detail::throw_io_error(function_, path_, "write after commit");
#if defined(ATTNSCOPE_IO_POSIX_FILES)
    while (size > 0) {
      const std::size_t chunk = size < (std::size_t{1} << 30) ? size : (std::size_t{1} << 30);
      const ssize_t written = ::write(descriptor_, data, chunk);
      if (written < 0) {
        if (errno == EINTR) continue;
        fail("write failed after " + std::to_string(written_) + " bytes", errno);
      }
      if (written == 0) fail("write failed after " + std::to_string(written_) + " bytes", ENOSPC);
      data += written;
      size -= static_cast<std::size_t>(written);
      written_ += static_cast<std::uint64_t>(written);
    }
#else
    if (size > 0 && std::fwrite(data, 1, size, stream_) != size)
      fail("write failed after " + std::to_string(written_) + " bytes", errno);
    written_ += size;
#endif
  }

  /// Flushes the bytes to the disk, closes the file and renames it over the target; after it returns the target
  /// holds exactly the bytes written. Throws io_error on any failure (the target is then untouched, the temporary
  /// file removed by the destructor).
  void commit() {
    if (committed_) return;
#if defined(ATTNSCOPE_IO_POSIX_FILES)
    // fsync of a pipe or a character device fails with EINVAL: there is nothing to flush there
    if (::fsync(descriptor_) != 0 && errno != EINVAL && errno != ENOTSUP)
      fail("write failed (" + std::to_string(written_) + " bytes) when flushing to the disk", errno);
    const int descriptor = descriptor_;
    descriptor_ = -1;
    if (::close(descriptor) != 0 && errno != EINTR)
      fail("write failed (" + std::to_string(written_) + " bytes) when closing", errno);
    if (!temporary_.empty()) {
      if (::rename(temporary_.c_str(), target_.c_str()) != 0)
        fail("cannot replace the file with its new contents", errno);
      const std::string renamed = temporary_;
      temporary_.clear();
      if (listener_) listener_->temporary_file_gone(renamed);
      // the rename itself reaches the disk with the folder's entries
      const int folder = ::open(detail::parent_folder(target_).c_str(), O_RDONLY | O_CLOEXEC);
      if (folder >= 0) {
        ::fsync(folder);
        ::close(folder);
      }
    }
#else
    std::FILE* stream = stream_;
    stream_ = nullptr;
    if (std::fclose(stream) != 0) fail("write failed (" + std::to_string(written_) + " bytes)", errno);
    if (!temporary_.empty()) {
      std::error_code error;
      std::filesystem::rename(temporary_, target_, error);
      if (error) attnscope::detail::throw_io_error(function_, path_, "cannot replace the file: ", error.message());
      const std::string renamed = temporary_;
      temporary_.clear();
      if (listener_) listener_->temporary_file_gone(renamed);
    }
#endif
    committed_ = true;
  }

  /// The path given to the constructor.
  const std::string& path() const { return path_; }
  /// The temporary file being written ("" when the target is written in place, and after commit()).
  const std::string& temporary_path() const { return temporary_; }
  /// Bytes written so far.
  std::uint64_t bytes_written() const { return written_; }

 private:
  [[noreturn]] void fail(const std::string& what, int error) const {
    attnscope::detail::throw_io_error(function_, path_, what, ": ", detail::system_error_text(error));
  }

  /// Closes and removes an uncommitted temporary file.
  void discard() noexcept {
#if defined(ATTNSCOPE_IO_POSIX_FILES)
    if (descriptor_ >= 0) ::close(descriptor_);
    descriptor_ = -1;
    if (!temporary_.empty()) ::unlink(temporary_.c_str());
#else
    if (stream_ != nullptr) std::fclose(stream_);
    stream_ = nullptr;
    if (!temporary_.empty()) std::remove(temporary_.c_str());
#endif
    if (!temporary_.empty() && listener_) {
      try {
        listener_->temporary_file_gone(temporary_);
      } catch (...) {  // a listener that throws cannot stop the clean-up
      }
    }
    temporary_.clear();
  }

  const char* function_;
  std::string path_, target_, temporary_;
  TemporaryFileListener* listener_ = nullptr;
#if defined(ATTNSCOPE_IO_POSIX_FILES)
  int descriptor_ = -1;
#else
  std::FILE* stream_ = nullptr;
#endif
  std::uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace attnscope::io
