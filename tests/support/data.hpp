// Location of the shared data for tests: the ATTNSCOPE_DATA environment variable when set, else the folder compiled
// in from the CMake cache variable ATTNSCOPE_DATA (default ../shared/data).
#pragma once
#include <cstdlib>
#include <string>

namespace attnscope::testing {

/// Directory of the shared data (stories260K.bin, ...).
inline std::string data_dir() {
  if (const char* env = std::getenv("ATTNSCOPE_DATA"); env && *env) return env;
  return ATTNSCOPE_DATA;
}

/// Full path of a shared data file.
inline std::string data_file(const std::string& name) { return data_dir() + "/" + name; }

}  // namespace attnscope::testing
