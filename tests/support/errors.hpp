// Exception checks shared by the test suites: run a call and return the message of the exception it throws.
#pragma once

#include <string>

#include "attnscope/core/error.hpp"

namespace attnscope::testing {

/// Runs `call` and returns what() of the `Exception` it throws (attnscope::invalid_argument unless told, e.g.
/// attnscope::io_error); "" when it throws nothing and "<other exception>" when it throws something else (its text
/// is left out, so a check on the message cannot pass by an exception of the wrong type).
template <class Exception = attnscope::invalid_argument, class Call>
std::string error_message(Call&& call) {
  try {
    call();
  } catch (const Exception& error) {
    return error.what();
  } catch (...) {
    return "<other exception>";
  }
  return "";
}

}  // namespace attnscope::testing
