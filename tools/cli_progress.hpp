// tools/cli_progress.hpp — a progress bar on stderr for long work (generation, capture, report), drawn only when
// stderr is a terminal (or ATTNSCOPE_PROGRESS=1), so that logs and tests see clean output.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace attnscope::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label) : label_(std::move(label)), start_(std::chrono::steady_clock::now()) {
    const char* forced = std::getenv("ATTNSCOPE_PROGRESS");
    enabled_ = forced ? std::string(forced) == "1" : isatty(STDERR_FILENO) == 1;
  }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ~ProgressBar() { finish(); }

  /// Redraws the bar for `done` of `total` steps (at most ~20 times per second, always at the end), followed by
  /// `note` (e.g. a rate).
  void update(int done, int total, const std::string& note = "") {
    if (!enabled_ || total <= 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_draw_ < std::chrono::milliseconds(50)) return;
    last_draw_ = now;
    const int width = 30, filled = static_cast<int>(static_cast<long>(width) * done / total);
    const double seconds = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "\r%s [%s%s] %d/%d %.1fs%s", label_.c_str(), std::string(std::size_t(filled), '#').c_str(),
                 std::string(std::size_t(width - filled), '.').c_str(), done, total, seconds, note.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  /// Ends the bar's line (idempotent).
  void finish() {
    if (drawn_) std::fprintf(stderr, "\n");
    drawn_ = false;
  }

  /// A callable (done, total) for the library's ProgressCallback.
  auto callback() {
    return [this](int done, int total) { update(done, total); };
  }

 private:
  std::string label_;
  bool enabled_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_{};
};

}  // namespace attnscope::cli
