// fuzz/fuzz_file_input.hpp — for the fuzz targets whose parsers read files and folders (Hugging Face config.json,
// tokenizer files, captures): a scratch folder per fuzzer process (removed at exit) into which each input is written.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace attnscope_fuzz {

/// The process's scratch folder, $TMPDIR/attnscope_fuzz_<pid>, created on first use and removed at exit.
inline const std::filesystem::path& scratch_folder() {
  struct Folder {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("attnscope_fuzz_" + std::to_string(getpid()));
    Folder() { std::filesystem::create_directories(path); }
    ~Folder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  return folder.path;
}

/// Writes bytes to scratch_folder()/name and returns its path.
inline std::string write_scratch_file(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path path = scratch_folder() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path.string();
}

}  // namespace attnscope_fuzz
