// tools/run_options.hpp — the run record of the library (attnscope/io/run_options.hpp) in the command line's
// namespace, and its array writer on the command's registry of temporary files (removed on SIGINT/SIGTERM).
#pragma once

#include <string>

#include "attnscope/io/array_file.hpp"
#include "attnscope/io/run_options.hpp"
#include "cli_output.hpp"

namespace attnscope::cli {

using io::RunOptions;
using io::file_crc32;
using io::join_integers;
using io::read_run_options;
using io::run_options_array;
using io::tokens_crc32;

/// Writes `arrays` with their run record (io::write_array_file_with_run_options: safetensors metadata, or the NPZ array
/// run_options), replacing `path` whole or not at all.
inline void write_arrays_with_run_options(const std::string& path, io::NamedArrays arrays, const RunOptions& options) {
  io::write_array_file_with_run_options(path, std::move(arrays), options, io::Compression::stored, temporary_files());
}

}  // namespace attnscope::cli
