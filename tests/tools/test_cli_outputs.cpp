// Tests of the `attnscope` command's outputs (tools/cli_output.hpp over io/atomic_file.hpp): every output path is
// checked before any input or model is opened (the inputs here are FIFOs, which block whoever opens them), SIGINT at
// random moments of real capture and rowstats runs leaves the previous output byte for byte and no other file, and a
// completed run writes the same bytes into a new file and over an existing one.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/data.hpp"
#include "tools/cli_runner.hpp"

// Named (not anonymous): test_tools is one unity translation unit, and its other files have helpers of the same names.
namespace cli_outputs_test {

namespace fs = std::filesystem;
using namespace attnscope::testing::cli;
using Clock = std::chrono::steady_clock;

/// A fresh folder of the scratch folder for one test case.
struct CaseFolder {
  fs::path path;
  explicit CaseFolder(const std::string& name) : path(work_dir() / name) {
    std::error_code ignored;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(path, ignored);
    fs::create_directories(path);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::set<std::string> names() const {
    std::set<std::string> result;
    for (const auto& entry : fs::directory_iterator(path)) result.insert(entry.path().filename().string());
    return result;
  }
};

void put_file_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A running `attnscope` process: fork + execv (no shell, so that a signal reaches attnscope itself), stdout and
/// stderr into `log`.
pid_t spawn_attnscope(const std::vector<std::string>& arguments, const std::string& log) {
  const std::string executable = attnscope_executable();
  std::vector<std::string> strings = {executable};
  strings.insert(strings.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(&s[0]);
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // only async-signal-safe calls between fork and exec
    const int descriptor = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (descriptor < 0) ::_exit(126);
    ::signal(SIGINT, SIG_DFL);  // a background job of a non-interactive shell inherits SIGINT ignored
    ::dup2(descriptor, STDOUT_FILENO);
    ::dup2(descriptor, STDERR_FILENO);
    ::execv(executable.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

/// The wait status of `pid`, killing it (and failing) when it has not ended after `limit`.
int wait_for(pid_t pid, std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL("attnscope still running after " << limit.count() << " s: killed");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return status;
}

/// Exit code of a wait status (-signal when the process was ended by a signal it did not handle).
int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status); }

std::string checkpoint() { return attnscope::testing::data_file("stories260K.bin"); }

/// `count` token ids of stories260K's vocabulary (512), BOS first.
std::string token_list(int count, int stride) {
  std::string text = "1";
  for (int i = 1; i < count; ++i) text += "," + std::to_string((i * stride + 11) % 512);
  return text;
}

/// Whether a folder holds a temporary file of the target `name` (".<name>.tmp-...").
bool has_temporary_file(const CaseFolder& folder, const std::string& name) {
  for (const std::string& entry : folder.names())
    if (entry.rfind("." + name + ".tmp-", 0) == 0) return true;
  return false;
}


TEST_CASE("cli outputs: a bad output path is refused before any input or model is opened", "[cli][outputs]") {
  const CaseFolder folder("early_checks");
  // FIFOs as models and inputs: opening one blocks until a writer comes, so a command that touched its input before
  // checking its output would never end (wait_for kills it after 60 s and fails).
  const std::string fifo = folder.file("model.bin"), fifo_csv = folder.file("input.csv");
  const std::string fifo_npy = folder.file("input.npy");
  for (const std::string& path : {fifo, fifo_csv, fifo_npy}) REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
  put_file_bytes(folder.file("file.txt"), "a file, not a folder");
  struct BadPath {
    std::string path_without_extension, problem;
    bool prefix_only;
  };
  std::vector<BadPath> bad_paths = {
      {folder.file("missing/out"), "the folder " + folder.file("missing") + " does not exist", false},
      {folder.file("file.txt/out"), folder.file("file.txt") + " is not a folder", false},
      {folder.file("folder"), "is a directory", false}};
  if (::geteuid() != 0) {
    fs::create_directory(folder.path / "read_only");
    fs::permissions(folder.path / "read_only", fs::perms::owner_read | fs::perms::owner_exec);
    bad_paths.push_back({folder.file("read_only/out"),
                         "no file can be created in the folder " + folder.file("read_only") + " (", true});
  } else if (fs::is_directory("/sys")) {  // root writes into any read-only folder, not into sysfs
    bad_paths.push_back({"/sys/out", "no file can be created in the folder /sys (", true});
  }
  struct Command {
    std::string name, before, option, extension;
  };
  const std::vector<Command> commands = {
      {"capture", "--checkpoint " + fifo + " --tokens 1,2", "--out", ".npz"},
      {"capture", "--model " + fifo + " --text hi", "--out", ".safetensors"},
      {"rowstats", fifo, "--out", ".npz"},
      {"rowstats", "--checkpoint " + fifo + " --tokens 1,2", "--out", ".safetensors"},
      {"report", fifo, "--csv", ".csv"},
      {"report", fifo, "--json", ".json"},
      {"report", "--model " + fifo + " --text hi", "--html", ".html"},
      {"normalize", fifo_npy + " --map softmax", "--out", ".npy"},
      {"merge", fifo_csv, "--out", ".csv"},
      {"compare", "--model " + fifo + " --model " + fifo + " --text hi", "--csv", ".csv"},
      {"compare", "--model " + fifo + " --model " + fifo + " --text hi", "--html", ".html"},
      {"kvsim", "--checkpoint " + fifo + " --tokens 1,2 --policy streaming:sink=4,recent=60", "--out", ".npz"},
      {"kvsim", "--checkpoint " + fifo + " --tokens 1,2 --policy streaming:sink=4,recent=60 --out " +
                    folder.file("good.npz"), "--csv", ".csv"},
      {"kvsim", "--checkpoint " + fifo + " --tokens 1,2 --policy streaming:sink=4,recent=60 --out " +
                    folder.file("good.npz"), "--html", ".html"}};
  int checked = 0;
  for (const Command& command : commands)
    for (const BadPath& bad : bad_paths) {
      const std::string path = bad.path_without_extension + command.extension;
      if (bad.problem == "is a directory") fs::create_directories(path);
      std::vector<std::string> arguments = {command.name};
      std::istringstream words(command.before);
      for (std::string word; words >> word;) arguments.push_back(word);
      arguments.push_back(command.option);
      arguments.push_back(path);
      INFO("attnscope " << command.name << " " << command.before << " " << command.option << " " << path);
      const std::string log = (work_dir() / "early_check.log").string();
      const auto start = Clock::now();
      const int status = wait_for(spawn_attnscope(arguments, log));
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      const std::string output = slurp(log);
      CHECK(exit_code_of(status) == 1);
      const std::string expected = "attnscope " + command.name + ": error: " + command.option + " " + path + ": " +
                                   bad.problem;
      if (bad.prefix_only) {
        CHECK(output.rfind(expected, 0) == 0);
      } else {
        CHECK(output == expected + "\n");
      }
      CHECK(std::count(output.begin(), output.end(), '\n') == 1);  // one line: no progress, no model message
      CHECK(seconds < 10);
      ++checked;
    }
  CHECK(checked == static_cast<int>(commands.size() * bad_paths.size()));

  // Two outputs naming one file are refused as well (the second write would replace the first).
  const std::string same = folder.file("same.csv");
  const Run run = attnscope_command("report " + fifo + " --csv " + same + " --json " + same);
  CHECK(run.exit_code == 1);
  CHECK(run.err == "attnscope report: error: --csv and --json name the same file " + same + "\n");
  CHECK_FALSE(fs::exists(same));
}

TEST_CASE("cli outputs: SIGINT at random moments of capture and rowstats leaves the previous output and nothing "
          "else", "[cli][outputs][signal]") {
  const CaseFolder folder("interrupted");
  const CaseFolder reference_folder("interrupted_reference");
  const std::string log = (work_dir() / "interrupted.log").string();
  std::mt19937_64 random(20261207);
  struct Scenario {
    std::string name, file;
    std::vector<std::string> arguments;  // without --out
    std::string previous_tokens;
    bool targeted;  // also interrupt while the temporary output file exists
  };
  const std::string long_input = token_list(400, 37), short_input = token_list(24, 101);
  const std::vector<Scenario> scenarios = {
      {"capture", "capture.npz", {"capture", "--checkpoint", checkpoint(), "--tokens", long_input}, short_input, true},
      {"rowstats", "rowstats.safetensors",
       {"rowstats", "--checkpoint", checkpoint(), "--tokens", long_input, "--top-k", "1,4"}, short_input, false}};
  for (const Scenario& scenario : scenarios) {
    INFO(scenario.name);
    const std::string target = folder.file(scenario.file);
    // The new output, written by an uninterrupted run elsewhere, and its duration.
    std::vector<std::string> arguments = scenario.arguments;
    arguments.push_back("--out");
    arguments.push_back(reference_folder.file(scenario.file));
    double run_seconds = 1e9;  // the shortest of three runs: a signal before it finds the command still running
    for (int run = 0; run < 3; ++run) {
      const auto start = Clock::now();
      REQUIRE(exit_code_of(wait_for(spawn_attnscope(arguments, log))) == 0);
      run_seconds = std::min(run_seconds, std::chrono::duration<double>(Clock::now() - start).count());
    }
    const std::string fresh = slurp(reference_folder.file(scenario.file));
    REQUIRE(fresh.size() > 1000);
    // The previous output: a real output of the command on other tokens.
    std::vector<std::string> previous_arguments = scenario.arguments;
    previous_arguments[4] = scenario.previous_tokens;
    previous_arguments.push_back("--out");
    previous_arguments.push_back(target);
    REQUIRE(exit_code_of(wait_for(spawn_attnscope(previous_arguments, log))) == 0);
    const std::string previous = slurp(target);
    REQUIRE(previous != fresh);

    arguments.back() = target;
    int interrupted = 0, completed = 0, interrupted_while_writing = 0, late_interrupts = 0;
    const int untargeted_trials = 8, targeted_trials = scenario.targeted ? 6 : 0;
    for (int trial = 0; trial < untargeted_trials + targeted_trials; ++trial) {
      const bool targeted = trial >= untargeted_trials;
      INFO("trial " << trial << (targeted ? " (after the temporary file appeared)" : ""));
      const pid_t pid = spawn_attnscope(arguments, log);
      bool writing = false;
      if (targeted) {  // wait for the temporary file, then a random part of the write
        const auto deadline = Clock::now() + std::chrono::seconds(60);
        while (!(writing = has_temporary_file(folder, scenario.file)) && Clock::now() < deadline &&
               ::waitpid(pid, nullptr, WNOHANG) == 0) {
        }
        std::uniform_real_distribution<double> delay(0, 0.02);
        std::this_thread::sleep_for(std::chrono::duration<double>(delay(random)));
      } else {  // at least 20 ms (the handler is installed on the first line of main), at most 80 % of a run
        std::uniform_real_distribution<double> delay(0.02, std::max(0.03, 0.8 * run_seconds));
        std::this_thread::sleep_for(std::chrono::duration<double>(delay(random)));
      }
      ::kill(pid, SIGINT);  // a no-op on a finished (not yet reaped) process
      const int status = wait_for(pid);
      const std::string output = slurp(log);
      const std::string now = slurp(target);
      if (exit_code_of(status) == 130) {
        // The previous output, unless the signal came after the new one was complete (between its rename and the
        // end of the process): never a mixture.
        const bool kept = now == previous;
        CHECK((kept || now == fresh));
        interrupted += kept;
        interrupted_while_writing += kept && writing;
        late_interrupts += !kept;
        CHECK(output.find("attnscope: interrupted; unfinished output files removed") != std::string::npos);
        if (!kept) put_file_bytes(target, previous);
      } else {
        CHECK(exit_code_of(status) == 0);
        ++completed;
        CHECK(now == fresh);
        put_file_bytes(target, previous);
      }
      CHECK(folder.names() == std::set<std::string>{scenario.file});
    }
    INFO(interrupted << " interrupted (" << interrupted_while_writing << " while writing), " << late_interrupts
                     << " after the output was complete, " << completed << " completed");
    CHECK(interrupted >= 1);  // the others ended first (a run's length varies on a busy machine)
    if (scenario.targeted) CHECK(interrupted_while_writing >= 1);
    WARN(scenario.name << ": run of " << run_seconds << " s; " << interrupted << " interrupted ("
                       << interrupted_while_writing << " while the temporary file existed), " << late_interrupts
                       << " after the output was complete, " << completed << " completed");
    fs::remove(target);
  }
}

TEST_CASE("cli outputs: a completed run writes the same bytes into a new file and over a longer existing one",
          "[cli][outputs]") {
  const CaseFolder folder("replace");
  const std::string tokens = token_list(40, 13);
  for (const std::string command : {"capture", "rowstats"})
    for (const std::string extension : {".npz", ".safetensors"}) {
      INFO(command << " " << extension);
      const std::string fresh = folder.file("fresh" + extension), replaced = folder.file("replaced" + extension);
      put_file_bytes(replaced, std::string(4 << 20, 'x'));  // longer than the output: no byte of it may remain
      for (const std::string& out : {fresh, replaced}) {
        const Run run = attnscope_command(command + " --checkpoint " + checkpoint() + " --tokens " + tokens +
                                          " --out " + out);
        REQUIRE(run.exit_code == 0);
      }
      CHECK(slurp(replaced) == slurp(fresh));
      if (extension == ".npz") require_same_npz_arrays(replaced, fresh);
    }
  std::set<std::string> expected;
  for (const std::string name : {"fresh", "replaced"})
    for (const std::string extension : {".npz", ".safetensors"}) expected.insert(name + extension);
  CHECK(folder.names() == expected);
}

}  // namespace cli_outputs_test
