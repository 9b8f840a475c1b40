// tools/cli_common.hpp — what every `attnscope` subcommand shares: the command table entry, --threads/--help
// handling, timing and small file helpers. Each subcommand lives in its own tools/command_<name>.cpp.
#pragma once

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/io/file.hpp"
#include "cli_arguments.hpp"
#include "cli_output.hpp"

namespace attnscope::cli {

/// One subcommand: its name, one-line summary (general usage), full usage text and entry point
/// (argv[1] is the command name; options start at argv[2]). Exit codes: 0 success, 1 runtime error, 2 usage error.
struct Command {
  const char* name;
  const char* summary;
  const char* usage;
  int (*run)(int argc, char** argv);
};

inline double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

inline bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline std::string read_text_file(const std::string& path) {
  const std::vector<unsigned char> bytes = io::read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

/// Applies --threads (default 1): OpenMP threads for Eigen products and row loops of this process.
inline void apply_threads(const Arguments& arguments) {
  const long threads = parse_integer(arguments.get("threads", "1"), "--threads", 0, 4096);
#if defined(_OPENMP)
  if (threads > 0) omp_set_num_threads(static_cast<int>(threads));
#else
  (void)threads;
#endif
}

/// Adds --threads and --help, parses argv[2..), applies --threads; prints the usage and returns true for --help.
inline bool parse_subcommand(Arguments& arguments, int argc, char** argv, const char* usage) {
  arguments.value_option("threads").flag("help");
  arguments.parse(argc, argv, 2);
  apply_threads(arguments);
  if (!arguments.has("help")) return false;
  std::cout << usage;
  return true;
}

/// Throws usage_error when positional arguments were given to a command that takes none.
inline void require_no_positional(const Arguments& arguments) {
  if (!arguments.positional().empty()) throw usage_error("unexpected argument '" + arguments.positional()[0] + "'");
}

}  // namespace attnscope::cli
