// Running the `attnscope` command as a process in the tests of tests/tools/: exit code, stdout and stderr of one
// invocation, a scratch folder per test process, and small text helpers.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attnscope/io/npz.hpp"
#include "support/catch.hpp"

namespace attnscope::testing::cli {

namespace fs = std::filesystem;

struct Run {
  int exit_code = -1;
  std::string out, err;
};

// A scratch folder per test process, removed when the process exits.
struct ScratchDirectory {
  fs::path path = fs::temp_directory_path() / ("attnscope_cli_test_" + std::to_string(getpid()));
  ScratchDirectory() { fs::create_directories(path); }
  ~ScratchDirectory() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

inline const fs::path& work_dir() {
  static const ScratchDirectory dir;
  return dir.path;
}

inline std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The attnscope binary under test: $ATTNSCOPE_CLI when set (scripts/sanitize.sh points it at an ASan + UBSan
// build), else the one of this build tree.
inline std::string attnscope_executable() {
  if (const char* cli = std::getenv("ATTNSCOPE_CLI"); cli && *cli) return cli;
  return std::string(ATTNSCOPE_BINARY_DIR) + "/tools/attnscope";
}

// Runs `attnscope <arguments>` (arguments are passed to the shell as written).
inline Run attnscope_command(const std::string& arguments) {
  const fs::path out = work_dir() / "stdout.txt", err = work_dir() / "stderr.txt";
  const std::string command = attnscope_executable() + " " + arguments + " > " + out.string() + " 2> " + err.string();
  const int status = std::system(command.c_str());
  Run run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = slurp(out);
  run.err = slurp(err);
  return run;
}

// A CSV output without its comment lines (the `# attnscope run:` record before the header): the table itself, which
// two runs over the same data write alike whatever their paths.
inline std::string csv_table(const std::string& text) {
  std::istringstream lines(text);
  std::string table;
  for (std::string line; std::getline(lines, line);)
    if (line.empty() || line[0] != '#') table += line + "\n";
  return table;
}

inline std::string path_in_work_dir(const std::string& name) { return (work_dir() / name).string(); }
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A command line that must fail: its exit code and a part of its stderr message.
struct ExpectedFailure {
  std::string arguments, message;
  int exit_code;
};

/// Runs each command line and checks exit code, message, and that nothing went to stdout.
inline void check_failures(const std::vector<ExpectedFailure>& cases) {
  for (const auto& c : cases) {
    INFO("attnscope " << c.arguments);
    const Run run = attnscope_command(c.arguments);
    CHECK(run.exit_code == c.exit_code);
    CHECK(contains(run.err, c.message));
    CHECK(run.out.empty());
  }
}

/// The NPZ at `actual` holds exactly the arrays of the NPZ at `expected`: the same names, shapes and bytes.
inline void require_same_npz_arrays(const std::string& actual_path, const std::string& expected_path) {
  const auto expected = attnscope::io::read_npz(expected_path);
  const auto actual = attnscope::io::read_npz(actual_path);
  REQUIRE(actual.size() == expected.size());
  for (const auto& [name, array] : expected) {
    INFO(name);
    REQUIRE(actual.count(name) == 1);
    CHECK(actual.at(name).shape() == array.shape());
    CHECK(actual.at(name).bytes() == array.bytes());
  }
}

}  // namespace attnscope::testing::cli
