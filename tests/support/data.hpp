// Location of ../shared/data for tests (override with the ATTNSCOPE_DATA environment variable).
#pragma once
#include <cstdlib>
#include <string>

namespace attnscope::testing {

/// Directory of the shared data (stories260K.bin, ...).
inline std::string data_dir() {
  if (const char* env = std::getenv("ATTNSCOPE_DATA")) return env;
  return ATTNSCOPE_DATA_DIR;
}

/// Full path of a shared data file.
inline std::string data_file(const std::string& name) { return data_dir() + "/" + name; }

}  // namespace attnscope::testing
