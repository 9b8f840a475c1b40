// tools/cli_output.hpp — the output files of the `attnscope` subcommands: each output path checked before any model
// or input is read (a bad --out is reported at once, not after a forward pass of minutes), and the temporary files of
// the library's atomic writes (io/atomic_file.hpp) removed when the command is interrupted. The command keeps the
// registry of those temporary files (the library keeps none): SIGINT and SIGTERM remove every registered file and
// end the process with 128 + the signal number (130 for SIGINT, 143 for SIGTERM), so that an interrupted command
// leaves each previous output as it was and nothing half-written behind.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnscope/io/atomic_file.hpp"
#include "cli_arguments.hpp"

namespace attnscope::cli {
namespace output_detail {

// The registry lives in fixed buffers so that the signal handler reads it without allocating or locking: a slot's
// path is written before the slot is marked in use, and unmarked before the path may change.
inline constexpr int temporary_slots = 8;
inline constexpr std::size_t temporary_path_capacity = 4096;
inline char temporary_paths[temporary_slots][temporary_path_capacity];
inline volatile std::sig_atomic_t temporary_in_use[temporary_slots];

/// The handler of SIGINT and SIGTERM: only async-signal-safe calls (unlink, write, _exit; POSIX.1-2017 2.4.3).
inline void remove_temporary_files_and_exit(int signal_number) {
  for (int slot = 0; slot < temporary_slots; ++slot)
    if (temporary_in_use[slot]) ::unlink(temporary_paths[slot]);
  static const char interrupted[] = "attnscope: interrupted; unfinished output files removed\n";
  static const char terminated[] = "attnscope: terminated; unfinished output files removed\n";
  const bool is_interrupt = signal_number == SIGINT;
  const ssize_t ignored = ::write(STDERR_FILENO, is_interrupt ? interrupted : terminated,
                                  (is_interrupt ? sizeof interrupted : sizeof terminated) - 1);
  (void)ignored;
  ::_exit(128 + signal_number);
}

/// Records the temporary files of the command's atomic writes for the signal handler.
class TemporaryFileRegistry final : public io::TemporaryFileListener {
 public:
  void temporary_file_created(const std::string& path) override {
    if (path.size() >= temporary_path_capacity)
      throw std::runtime_error("output path of " + std::to_string(path.size()) + " bytes is too long: " + path);
    for (int slot = 0; slot < temporary_slots; ++slot) {
      if (temporary_in_use[slot]) continue;
      std::memcpy(temporary_paths[slot], path.c_str(), path.size() + 1);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the path is complete before the handler may read it
      temporary_in_use[slot] = 1;
      return;
    }
    throw std::runtime_error("more than " + std::to_string(temporary_slots) + " output files written at once");
  }
  void temporary_file_gone(const std::string& path) override {
    for (int slot = 0; slot < temporary_slots; ++slot)
      if (temporary_in_use[slot] && path == temporary_paths[slot]) {
        temporary_in_use[slot] = 0;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        return;
      }
  }
};

}  // namespace output_detail

/// The command's registry of temporary files: pass it to every library writer (io::write_file, write_npz, …).
inline io::TemporaryFileListener* temporary_files() {
  static output_detail::TemporaryFileRegistry registry;
  return &registry;
}

/// Installs the SIGINT/SIGTERM handler that removes the registered temporary files and exits with 128 + the signal
/// number. A signal the shell set to be ignored (a background job of a non-interactive shell, nohup) stays ignored.
inline void install_interrupt_cleanup() {
  for (const int signal_number : {SIGINT, SIGTERM}) {
    struct sigaction previous {};
    if (::sigaction(signal_number, nullptr, &previous) == 0 && previous.sa_handler == SIG_IGN) continue;
    struct sigaction action {};
    action.sa_handler = output_detail::remove_temporary_files_and_exit;
    sigemptyset(&action.sa_mask);
    sigaddset(&action.sa_mask, SIGINT);
    sigaddset(&action.sa_mask, SIGTERM);
    ::sigaction(signal_number, &action, nullptr);
  }
}

/// Checks every given output option among `options` before any work: its path must be writable (io::
/// output_path_problem: not a directory, an existing writable parent folder, …) and no two options may name the same
/// path. Throws std::runtime_error (exit code 1) with one line "--out PATH: <problem>".
inline void check_output_options(const Arguments& arguments, std::initializer_list<const char*> options) {
  std::vector<std::pair<std::string, std::string>> seen;  // (option, path)
  for (const char* option : options) {
    if (!arguments.has(option)) continue;
    const std::string path = arguments.get(option), name = std::string("--") + option;
    for (const auto& [other, other_path] : seen)
      if (other_path == path) throw std::runtime_error(other + " and " + name + " name the same file " + path);
    seen.emplace_back(name, path);
    const std::string problem = io::output_path_problem(path, temporary_files());
    if (!problem.empty()) throw std::runtime_error(name + " " + path + ": " + problem);
  }
}

}  // namespace attnscope::cli
