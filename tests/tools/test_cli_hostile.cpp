// The hostile-input corpus of tests/tools/hostile/ (written by make_hostile.py there): every command that reads a
// kind of input runs on every input of that kind, and each run must end as a data error — exit code 1, a message
// "attnscope <command>: error: ..." naming the input, no usage text, nothing on stdout (rowstats: at most the rows of
// the heads analysed before the failing one) — never a crash, a hang, a
// success or a usage error. scripts/sanitize.sh runs this test against an ASan + UBSan build of the command
// (ATTNSCOPE_CLI), where a sanitizer report also fails it.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "fixtures/hf_reference.hpp"
#include "tools/cli_runner.hpp"
#include "support/catch.hpp"

namespace {

namespace hostile_fs = std::filesystem;
using attnscope::testing::cli::contains;

hostile_fs::path hostile_corpus_dir() { return hostile_fs::path(__FILE__).parent_path() / "hostile"; }

/// The files (or, for model folders, the folders) of one corpus subfolder, sorted.
std::vector<std::string> hostile_inputs(const std::string& kind, bool folders = false) {
  std::vector<std::string> inputs;
  for (const auto& entry : hostile_fs::directory_iterator(hostile_corpus_dir() / kind))
    if (folders ? entry.is_directory() : entry.is_regular_file()) inputs.push_back(entry.path().string());
  std::sort(inputs.begin(), inputs.end());
  REQUIRE(!inputs.empty());
  return inputs;
}

struct HostileTally {
  std::size_t inputs = 0, runs = 0;
};

HostileTally& hostile_tally() {
  static HostileTally tally;
  return tally;
}

/// Runs `attnscope <command> <arguments>` and checks that it is refused as a data error naming `named` (when given).
void expect_data_error(const std::string& command, const std::string& arguments, const std::string& named) {
  const std::string line = command + " " + arguments;
  INFO("attnscope " << line);
  const attnscope::testing::cli::Run run = attnscope::testing::cli::attnscope_command(line + " < /dev/null");
  INFO("stderr: " << run.err);
  ++hostile_tally().runs;
  CHECK(run.exit_code == 1);
  CHECK(run.err.rfind("attnscope " + command + ": error: ", 0) == 0);
  CHECK(!contains(run.err, "--help`"));  // a data error, not a usage error
  CHECK(!contains(run.err, "AddressSanitizer"));
  CHECK(!contains(run.err, "runtime error:"));  // UBSan
  CHECK(!contains(run.err, "LeakSanitizer"));
  // rowstats streams: a head that fails (a NaN in its q) comes after the summary rows of the heads before it
  if (command != "rowstats") CHECK(run.out.empty());
  if (!named.empty()) CHECK(contains(run.err, named));
}

std::string hostile_output(const std::string& name) { return attnscope::testing::cli::path_in_work_dir(name); }

}  // namespace

TEST_CASE("hostile corpus: Q/K files are refused by rowstats, report and merge", "[hostile]") {
  for (const std::string& input : hostile_inputs("qk")) {
    ++hostile_tally().inputs;
    expect_data_error("rowstats", input + " --out " + hostile_output("hostile_rows.npz"), input);
    expect_data_error("report", input, input);
    // --concatenate: Q/K shards carry no heads array, so even readable ones cannot be joined in a known order
    expect_data_error("merge", "--concatenate --out " + hostile_output("hostile_merged.npz") + " " + input + " " + input, "");
  }
}

TEST_CASE("hostile corpus: attention files and captures are refused by report", "[hostile]") {
  for (const std::string& input : hostile_inputs("attention")) {
    ++hostile_tally().inputs;
    expect_data_error("report", input, input);
    expect_data_error("report", input + " --basic --html " + hostile_output("hostile.html"), input);
  }
}

TEST_CASE("hostile corpus: arrays are refused by normalize", "[hostile]") {
  for (const std::string& input : hostile_inputs("npy")) {
    ++hostile_tally().inputs;
    expect_data_error("normalize", "--map softmax " + input + " -o " + hostile_output("hostile_out.npy"), input);
    expect_data_error("normalize", "--map sparsemax " + input + " -o " + hostile_output("hostile_out.npy"), input);
  }
}

TEST_CASE("hostile corpus: llama2.c checkpoints are refused by capture, report and rowstats", "[hostile]") {
  for (const std::string& input : hostile_inputs("checkpoint")) {
    ++hostile_tally().inputs;
    expect_data_error("capture", "--checkpoint " + input + " --out " + hostile_output("hostile_capture.npz"), input);
    expect_data_error("report", input, input);
    expect_data_error("rowstats", "--checkpoint " + input + " --tokens 1,2,3 --out " + hostile_output("hostile_rows.npz"),
                      input);
  }
}

TEST_CASE("hostile corpus: model folders with a bad config.json (and the loader's bad fixtures) are refused", "[hostile]") {
  std::vector<std::string> folders = hostile_inputs("config", true);
  for (const auto& entry : hostile_fs::directory_iterator(hostile_fs::path(__FILE__).parent_path().parent_path() /
                                                          "fixtures" / "hf" / "bad"))
    if (entry.is_directory()) folders.push_back(entry.path().string());
  for (const std::string& folder : folders) {
    ++hostile_tally().inputs;
    expect_data_error("capture", "--model " + folder + " --tokens 1,2 --out " + hostile_output("hostile_capture.npz"),
                      folder);
    expect_data_error("report", "--model " + folder + " --tokens 1,2", folder);
    expect_data_error("rowstats", "--model " + folder + " --tokens 1,2 --out " + hostile_output("hostile_rows.npz"), folder);
  }
}

TEST_CASE("hostile corpus: bad tokenizer files are refused by tokenize and capture", "[hostile]") {
  for (const std::string& folder : hostile_inputs("tokenizer", true)) {
    ++hostile_tally().inputs;
    expect_data_error("tokenize", "--model " + folder + " --text hello", folder);
    expect_data_error("capture", "--model " + folder + " --text hello --out " + hostile_output("hostile_capture.npz"),
                      folder);
  }
}

TEST_CASE("hostile corpus: text files that are not UTF-8 text are refused, naming the file", "[hostile]") {
  const std::string model = attnscope::testing::hf_fixture_folder("gpt2");
  for (const std::string& input : hostile_inputs("text")) {
    ++hostile_tally().inputs;
    const bool empty = hostile_fs::file_size(input) == 0;
    if (empty) {  // the empty text tokenizes to no ids (an empty line); the model commands have nothing to run
      const auto run = attnscope::testing::cli::attnscope_command("tokenize --model " + model + " --text-file " + input);
      CHECK(run.exit_code == 0);
      CHECK(run.out == "\n");
    } else {
      expect_data_error("tokenize", "--model " + model + " --text-file " + input, input);
    }
    expect_data_error("capture", "--model " + model + " --text-file " + input + " --out " +
                                     hostile_output("hostile_capture.npz"), input);
    expect_data_error("report", "--model " + model + " --text-file " + input, input);
    expect_data_error("rowstats", "--model " + model + " --text-file " + input + " --out " +
                                      hostile_output("hostile_rows.npz"), input);
  }
}

TEST_CASE("hostile corpus: JSON and CSV inputs are refused by merge", "[hostile]") {
  for (const std::string& input : hostile_inputs("merge")) {
    ++hostile_tally().inputs;
    const std::string out = hostile_output(input.substr(input.size() - 4) == ".csv" ? "hostile.csv" : "hostile.json");
    expect_data_error("merge", "--out " + out + " " + input + " " + input, input);
  }
}

TEST_CASE("hostile corpus: every input was run (the count the docs quote)", "[hostile]") {
  // runs after the cases above in Catch's declaration order; prints the tally for scripts/sanitize.sh
  std::size_t files = 0;
  for (const auto& entry : hostile_fs::recursive_directory_iterator(hostile_corpus_dir()))
    if (entry.is_regular_file() && entry.path().filename() != "make_hostile.py") ++files;
  WARN("hostile corpus: " << hostile_tally().inputs << " inputs (" << files << " files), " << hostile_tally().runs
                          << " command runs");
  if (hostile_tally().inputs > 0) CHECK(hostile_tally().inputs >= 100);
}
