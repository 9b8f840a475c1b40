// The stories260K model shared by the model tests and llama2.c run.c's outputs for it (each loaded once per test
// binary).
#pragma once

#include <fstream>

#include <nlohmann/json.hpp>

#include "attnscope/model/llama.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"

namespace attnscope::testing {

inline const model::LlamaModel& reference_model() {
  static const model::LlamaModel instance = model::LlamaModel::load(data_file("stories260K.bin"));
  return instance;
}

/// stories260K.greedy.json: run.c's greedy tokens from BOS and its logits, scores and attention at 5 positions.
inline const nlohmann::json& reference_outputs() {
  static const nlohmann::json value = [] {
    std::ifstream in(data_file("stories260K.greedy.json"));
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
  }();
  return value;
}

}  // namespace attnscope::testing
