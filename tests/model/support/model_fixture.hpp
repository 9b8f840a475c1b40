// The stories260K model shared by the model tests (loaded once per test binary).
#pragma once

#include "attnscope/model/llama.hpp"
#include "support/data.hpp"

namespace attnscope::testing {

inline const model::LlamaModel& reference_model() {
  static const model::LlamaModel instance = model::LlamaModel::load(data_file("stories260K.bin"));
  return instance;
}

}  // namespace attnscope::testing
