// The help of every `attnscope` command agrees with its parser and with the documentation: each option a --help
// names is accepted by that command's parser (never "unknown option"), each option of a command's synopsis in
// docs/cli.md is in its --help and each option of its --help is documented in its section, and every command line in
// the README and the guides uses options its command has. Usage errors are one line and a pointer to --help.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"
#include "tools/cli_runner.hpp"

namespace {

using namespace attnscope::testing::cli;

/// The repository's root, from this file's place in it (tests/tools/).
fs::path repository_root() { return fs::path(__FILE__).parent_path().parent_path().parent_path(); }

/// The options named in a text: "--name" tokens (not inside a word) and "-o" where it stands alone.
std::set<std::string> options_in(const std::string& text) {
  static const std::regex option("(^|[^A-Za-z0-9_-])(--[a-z][a-z0-9-]*[a-z0-9]|-o)(?=[^A-Za-z0-9_-]|$)");
  std::set<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), option); it != std::sregex_iterator(); ++it)
    found.insert((*it)[2].str());
  return found;
}

/// The subcommands listed by `attnscope --help` (the lines of its "Commands:" block).
std::vector<std::string> command_names() {
  const Run general = attnscope_command("--help");
  REQUIRE(general.exit_code == 0);
  std::vector<std::string> names;
  std::istringstream lines(general.out);
  std::string line;
  bool in_list = false;
  while (std::getline(lines, line)) {
    if (line == "Commands:") {
      in_list = true;
    } else if (in_list && line.rfind("  ", 0) == 0) {
      names.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (in_list) {
      break;
    }
  }
  REQUIRE(names.size() >= 8);
  return names;
}

/// The --help text of every command.
const std::map<std::string, std::string>& help_texts() {
  static const std::map<std::string, std::string> texts = [] {
    std::map<std::string, std::string> result;
    for (const std::string& name : command_names()) {
      const Run run = attnscope_command(name + " --help");
      REQUIRE(run.exit_code == 0);
      result[name] = run.out;
    }
    return result;
  }();
  return texts;
}

/// The sections "## `attnscope CMD`" of docs/cli.md (up to the next "## " heading), by command.
std::map<std::string, std::string> cli_doc_sections() {
  std::istringstream lines(slurp(repository_root() / "docs" / "cli.md"));
  std::map<std::string, std::string> sections;
  std::string line, current;
  while (std::getline(lines, line)) {
    if (line.rfind("## ", 0) == 0) {
      static const std::regex heading("^## `attnscope ([a-z]+)`");
      std::smatch match;
      current = std::regex_search(line, match, heading) ? match[1].str() : "";
      continue;
    }
    if (!current.empty()) sections[current] += line + "\n";
  }
  return sections;
}

/// The first ```text block of a section: the command's synopsis.
std::string synopsis_of(const std::string& section) {
  const std::size_t start = section.find("```text\n");
  if (start == std::string::npos) return "";
  const std::size_t end = section.find("```", start + 8);
  return section.substr(start + 8, end - start - 8);
}

/// The `attnscope CMD ...` command lines of a Markdown file: in code blocks (continued over trailing backslashes, up
/// to a comment, a pipe, `;` or `&&`) and in inline code spans, as (command, the arguments after it).
std::vector<std::pair<std::string, std::string>> documented_command_lines(const std::string& markdown,
                                                                         const std::set<std::string>& commands) {
  std::vector<std::pair<std::string, std::string>> found;
  const auto collect = [&](const std::string& text) {
    static const std::regex invocation("attnscope ([a-z]+)([^|;&#`]*)");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), invocation); it != std::sregex_iterator(); ++it)
      if (commands.count((*it)[1].str())) found.emplace_back((*it)[1].str(), (*it)[2].str());
  };
  std::istringstream lines(markdown);
  std::string line, logical;
  bool in_block = false;
  while (std::getline(lines, line)) {
    if (line.rfind("```", 0) == 0) {
      in_block = !in_block;
      continue;
    }
    if (in_block) {
      const std::size_t first = line.find_first_not_of(' ');
      if (first != std::string::npos && line[first] == '#') continue;  // a shell comment, or #SBATCH
      if (!line.empty() && line.back() == '\\') {
        logical += line.substr(0, line.size() - 1) + " ";
        continue;
      }
      collect(logical + line);
      logical.clear();
    } else {
      static const std::regex span("`([^`]+)`");
      for (auto it = std::sregex_iterator(line.begin(), line.end(), span); it != std::sregex_iterator(); ++it)
        collect((*it)[1].str());
    }
  }
  return found;
}

}  // namespace

TEST_CASE("every option a command's --help names is accepted by that command's parser") {
  for (const auto& [name, help] : help_texts()) {
    const std::set<std::string> options = options_in(help);
    INFO("attnscope " << name << " --help names " << options.size() << " options");
    CHECK(options.count("--help"));
    CHECK(options.count("--threads"));
    for (const std::string& option : options) {
      if (option == "--help") continue;
      // alone, a value option lacks its value and a flag lacks the command's required options: a usage error that
      // is never "unknown option" for an option the parser declares
      const Run run = attnscope_command(name + " " + option);
      INFO("attnscope " << name << " " << option << ": " << run.err);
      CHECK(run.exit_code == 2);
      CHECK(!contains(run.err, "unknown option"));
    }
  }
}

TEST_CASE("a usage error is one line and a pointer to the command's --help") {
  for (const auto& [name, help] : help_texts()) {
    const Run run = attnscope_command(name + " --no-such-option");
    INFO("attnscope " << name << " --no-such-option");
    CHECK(run.exit_code == 2);
    CHECK(run.out.empty());
    CHECK(run.err == "attnscope " + name + ": unknown option --no-such-option\nsee `attnscope " + name + " --help`\n");
  }
  const Run missing = attnscope_command("rowstats --top-k 0 x.npz --out x.npz");
  CHECK(missing.exit_code == 2);
  CHECK(std::count(missing.err.begin(), missing.err.end(), '\n') == 2);
  const Run unknown = attnscope_command("frobnicate");
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err == "attnscope: unknown command 'frobnicate'\nsee `attnscope --help`\n");
}

TEST_CASE("docs/cli.md documents every command's options, and its synopses name only options the command has") {
  const std::map<std::string, std::string> sections = cli_doc_sections();
  for (const auto& [name, help] : help_texts()) {
    INFO("docs/cli.md, section `attnscope " << name << "`");
    REQUIRE(sections.count(name));
    const std::string& section = sections.at(name);
    const std::string synopsis = synopsis_of(section);
    CHECK(!synopsis.empty());
    const std::set<std::string> in_help = options_in(help);
    for (const std::string& option : options_in(synopsis)) {
      INFO("the synopsis names " << option);
      CHECK(in_help.count(option));
    }
    // the documentation names every option of the help (--help, --threads and -o, short for --out, are described
    // once, for all commands)
    const std::set<std::string> in_section = options_in(section);
    for (const std::string& option : in_help) {
      if (option == "--help" || option == "--threads" || option == "-o") continue;
      INFO("--help names " << option);
      CHECK(in_section.count(option));
    }
  }
}

TEST_CASE("the command lines of the README and the guides use options their command has") {
  std::set<std::string> commands;
  for (const auto& [name, help] : help_texts()) commands.insert(name);
  for (const char* file : {"README.md", "docs/cli.md", "docs/guide.md", "docs/models.md", "docs/robustness.md"}) {
    const std::string markdown = slurp(repository_root() / file);
    REQUIRE(!markdown.empty());
    const auto lines = documented_command_lines(markdown, commands);
    for (const auto& [name, arguments] : lines) {
      const std::set<std::string> in_help = options_in(help_texts().at(name));
      for (const std::string& option : options_in(arguments)) {
        INFO(file << ": attnscope " << name << arguments);
        CHECK(in_help.count(option));
      }
    }
  }
}

TEST_CASE("the model: --model names any model by content, --checkpoint is its alias, and - reads stdin") {
  const std::string stories = attnscope::testing::data_file("stories260K.bin");
  const std::string gpt2 = attnscope::testing::hf_fixture_folder("gpt2");
  const std::string sample = attnscope::testing::hf_fixture_sample_text();
  // a llama2.c checkpoint through --model, through --checkpoint and as report's INPUT: the same attention
  const std::string by_model = path_in_work_dir("help_by_model.npz"), by_alias = path_in_work_dir("help_by_alias.npz");
  REQUIRE(attnscope_command("capture --model " + stories + " --tokens 1,2,3,4 --no-logits --out " + by_model).exit_code == 0);
  REQUIRE(attnscope_command("capture --checkpoint " + stories + " --tokens 1,2,3,4 --no-logits --out " + by_alias)
              .exit_code == 0);
  const auto model_arrays = attnscope::io::read_npz(by_model), alias_arrays = attnscope::io::read_npz(by_alias);
  CHECK(model_arrays.at("layer0.attention").bytes() == alias_arrays.at("layer0.attention").bytes());
  CHECK(model_arrays.at("tokens").bytes() == alias_arrays.at("tokens").bytes());
  const Run report_model = attnscope_command("report --model " + stories + " --tokens 1,2,3,4 --basic");
  const Run report_input = attnscope_command("report " + stories + " --tokens 1,2,3,4 --basic");
  const Run report_alias = attnscope_command("report --checkpoint " + stories + " --tokens 1,2,3,4 --basic");
  REQUIRE(report_model.exit_code == 0);
  const auto table = [](const std::string& out) { return out.substr(out.find('\n')); };  // without the timed line
  CHECK(table(report_model.out) == table(report_input.out));
  CHECK(table(report_model.out) == table(report_alias.out));
  const Run rows = attnscope_command("rowstats --model " + stories + " --tokens 1,2,3,4 --out " +
                                     path_in_work_dir("help_rows.npz"));
  CHECK(rows.exit_code == 0);
  const Run kv = attnscope_command("kvsim --model " + stories + " --tokens 1,2,3,4 --policy oracle:budget=2 --out " +
                                   path_in_work_dir("help_kv.npz"));
  CHECK(kv.exit_code == 0);

  // text and token ids from stdin are those of the file
  const Run from_file = attnscope_command("tokenize --model " + gpt2 + " --text-file " + sample);
  const Run from_stdin = attnscope_command("tokenize --model " + gpt2 + " --text-file - < " + sample);
  REQUIRE(from_file.exit_code == 0);
  CHECK(from_stdin.exit_code == 0);
  CHECK(from_stdin.out == from_file.out);
  const std::string ids = path_in_work_dir("help_ids.txt");
  { std::ofstream(ids) << "1 2\n3,4\n"; }
  const std::string by_stdin = path_in_work_dir("help_by_stdin.npz");
  REQUIRE(attnscope_command("capture --model " + stories + " --tokens-file - --no-logits --out " + by_stdin + " < " + ids)
              .exit_code == 0);
  CHECK(attnscope::io::read_npz(by_stdin).at("layer0.attention").bytes() == model_arrays.at("layer0.attention").bytes());
  // compare encodes one text from stdin with both models' tokenizers
  const Run compared = attnscope_command("compare --model " + gpt2 + " --model " + gpt2 + " --text-file - < " + sample);
  CHECK(compared.exit_code == 0);
  CHECK(contains(compared.out, "js_keep"));

  // what is not a model, or has no tokenizer, is named
  const std::vector<ExpectedFailure> failures = {
      {"capture --model " + ids + " --tokens 1 --out " + path_in_work_dir("never.npz"),
       ids + ": not a model (a Hugging Face model folder", 1},
      {"rowstats --model /nonexistent/model --tokens 1 --out " + path_in_work_dir("never.npz"),
       "/nonexistent/model: does not exist", 1},
      {"tokenize --model " + stories + " --text hello", "is a llama2.c checkpoint, which carries no tokenizer", 1},
      {"capture --model " + stories + " --tokens-file - --out " + path_in_work_dir("never.npz") + " < /dev/null",
       "stdin: is not a list of token ids", 1},
      {"capture --model " + gpt2 + " --text-file - --out " + path_in_work_dir("never.npz") + " < /dev/null",
       "stdin is empty", 1},
      {"capture --model " + stories + " --checkpoint " + stories + " --out " + path_in_work_dir("never.npz"),
       "give either --model or --checkpoint", 2},
      {"compare --model " + gpt2 + " --model " + gpt2 + " --tokens 1,2 --top-k 1,2", "compare takes one k", 2},
      {"compare --model " + gpt2 + " --model " + gpt2 + " --tokens 1,2 --top-k 0", "--top-k: expected k >= 1, got 0", 2},
  };
  check_failures(failures);
}
