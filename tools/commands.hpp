// tools/commands.hpp — the table of `attnscope` subcommands. A new subcommand is a tools/command_<name>.cpp that
// defines `const Command& <name>_command()`, declared here and listed in all_commands().
#pragma once

#include <vector>

#include "cli_common.hpp"

namespace attnscope::cli {

const Command& capture_command();
const Command& report_command();
const Command& normalize_command();
const Command& tokenize_command();
const Command& rowstats_command();
const Command& merge_command();
const Command& compare_command();
const Command& kvsim_command();
const Command& generate_command();

/// Every subcommand, in the order of the general usage text.
inline std::vector<const Command*> all_commands() {
  return {&capture_command(), &report_command(), &tokenize_command(), &normalize_command(), &rowstats_command(),
          &merge_command(), &compare_command(), &kvsim_command(), &generate_command()};
}

}  // namespace attnscope::cli
