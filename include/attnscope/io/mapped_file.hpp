// attnscope/io/mapped_file.hpp — a read-only memory map of a whole file (POSIX mmap), so that large weight and
// array files are read by the page cache on demand instead of being copied into memory first. On systems without
// mmap the file is read into an owned buffer with read_file, behind the same interface.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define ATTNSCOPE_HAVE_MMAP 1
#else
#define ATTNSCOPE_HAVE_MMAP 0
#endif

#include "attnscope/core/error.hpp"
#include "attnscope/io/file.hpp"

namespace attnscope::io {

/// A whole file mapped read-only. Move-only; the mapping lives as long as the object. The bytes must not be
/// written through; a file truncated by another process while mapped is undefined behaviour at the OS level
/// (SIGBUS), as for every memory-mapped reader.
class MappedFile {
 public:
  MappedFile() = default;

  /// Maps `path`. Throws attnscope::io_error naming the file for a missing file, a directory or a failed map.
  explicit MappedFile(const std::string& path) : path_(path) {
    if (detail::path_is_directory(path)) detail::throw_io_error("MappedFile", path, "is a directory");
#if ATTNSCOPE_HAVE_MMAP
    const int descriptor = ::open(path.c_str(), O_RDONLY);
    if (descriptor < 0) detail::throw_io_error("MappedFile", path, "cannot open file for reading (missing or unreadable)");
    struct stat status {};
    if (::fstat(descriptor, &status) != 0) {
      ::close(descriptor);
      detail::throw_io_error("MappedFile", path, "cannot determine the file size");
    }
    size_ = static_cast<std::size_t>(status.st_size);
    if (size_ > 0) {
      void* address = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, descriptor, 0);
      if (address == MAP_FAILED) {
        ::close(descriptor);
        detail::throw_io_error("MappedFile", path, "mmap of ", size_, " bytes failed");
      }
      data_ = static_cast<const unsigned char*>(address);
      mapped_ = true;
    }
    ::close(descriptor);  // the mapping keeps its own reference to the file
#else
    owned_ = read_file(path);
    data_ = owned_.data();
    size_ = owned_.size();
#endif
  }

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept { swap(other); }
  MappedFile& operator=(MappedFile&& other) noexcept {
    if (this != &other) {
      MappedFile(std::move(other)).swap(*this);
    }
    return *this;
  }
  ~MappedFile() { release(); }

  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// True when the bytes come from mmap (false for an empty file or the read_file fallback).
  bool is_memory_mapped() const { return mapped_; }

 private:
  void release() noexcept {
#if ATTNSCOPE_HAVE_MMAP
    if (mapped_) ::munmap(const_cast<unsigned char*>(data_), size_);
#endif
    data_ = nullptr;
    size_ = 0;
    mapped_ = false;
  }
  void swap(MappedFile& other) noexcept {
    std::swap(path_, other.path_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(mapped_, other.mapped_);
    std::swap(owned_, other.owned_);
  }

  std::string path_;
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
  bool mapped_ = false;
  std::vector<unsigned char> owned_;  // the fallback's buffer (unused with mmap)
};

}  // namespace attnscope::io
