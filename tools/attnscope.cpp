// tools/attnscope.cpp — the `attnscope` command: dispatches to the subcommands of tools/commands.hpp (one file
// each, tools/command_<name>.cpp). Documented in docs/cli.md. Exit codes: 0 success, 1 runtime error (bad file,
// bad input), 2 usage error, 128 + N when ended by signal N (130 for SIGINT: tools/cli_output.hpp).
#include <algorithm>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>

#include "commands.hpp"

namespace {

std::string general_usage() {
  std::ostringstream text;
  text << "usage: attnscope <command> [options]\n\nCommands:\n";
  for (const attnscope::cli::Command* command : attnscope::cli::all_commands()) {
    std::string name = command->name;
    name.resize(std::max<std::size_t>(name.size() + 1, 11), ' ');
    text << "  " << name << command->summary << "\n";
  }
  text << R"(
Run `attnscope <command> --help` for the options of a command. Documentation: docs/cli.md.
Every command accepts --threads N (default 1; 0 = all cores via OpenMP): the model's matrices are small, so
threads rarely pay off and on a busy machine they cost far more than they save.
)";
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  attnscope::cli::install_interrupt_cleanup();  // SIGINT/SIGTERM: remove unfinished outputs, exit 128 + signal
  const std::string name = argc > 1 ? argv[1] : "";
  const attnscope::cli::Command* command = nullptr;
  for (const attnscope::cli::Command* candidate : attnscope::cli::all_commands())
    if (name == candidate->name) command = candidate;
  if (command == nullptr) {
    if (name == "--help" || name == "-h" || name == "help") {
      std::cout << general_usage();
      return 0;
    }
    if (name == "--version") {
      std::cout << "attnscope 0.1.0\n";
      return 0;
    }
    std::cerr << (name.empty() ? std::string("attnscope: missing command") : "attnscope: unknown command '" + name + "'")
              << "\nsee `attnscope --help`\n";
    return 2;
  }
  try {
    return command->run(argc, argv);
  } catch (const attnscope::cli::usage_error& error) {
    // one line, then where the options are: the full usage text would bury the message
    std::cerr << "attnscope " << name << ": " << error.what() << "\nsee `attnscope " << name << " --help`\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "attnscope " << name << ": error: " << error.what() << "\n";
    return 1;
  }
}
