// The Hugging Face fixture models of tests/fixtures/hf/ (fixtures/hf_reference.hpp: paths, reference outputs of an
// independent plain-PyTorch forward pass and the comparison), the real gpt2-wp-mini folder of the shared data, and
// scratch folders built from the fixtures for the error tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnscope/model/huggingface.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"

namespace attnscope::testing {

/// The fixture models, each loaded once per test binary.
inline const model::Transformer& hf_fixture_model(const std::string& name) {
  static std::map<std::string, model::Transformer> models;
  auto found = models.find(name);
  if (found == models.end())
    found = models.emplace(name, model::load_huggingface_model(attnscope::testing::hf_fixture_folder(name))).first;
  return found->second;
}

/// ../shared/data/gpt2-wp-mini: a small GPT-2 trained on War and Peace without Book Two.
inline const model::Transformer& war_and_peace_model() {
  static const model::Transformer instance = model::load_huggingface_model(data_file("gpt2-wp-mini"));
  return instance;
}

/// GPT-2 token ids of 6000 characters of Book One, Chapter I (war_and_peace.gpt2-tokens.json).
inline const std::vector<int>& war_and_peace_book_one_tokens() {
  static const std::vector<int> tokens = [] {
    std::ifstream in(data_file("war_and_peace.gpt2-tokens.json"));
    REQUIRE(in.good());
    return nlohmann::json::parse(in).at("gpt2_tokens").get<std::vector<int>>();
  }();
  return tokens;
}

/// A fresh copy of a fixture folder under the build directory (for the error tests to break).
inline std::string scratch_copy_of_fixture(const std::string& name, const std::string& case_name) {
  namespace fs = std::filesystem;
  const fs::path target = fs::path(ATTNSCOPE_BINARY_DIR) / "model_test_folders" / case_name;
  fs::remove_all(target);
  fs::create_directories(target);
  for (const auto& entry : fs::directory_iterator(attnscope::testing::hf_fixture_folder(name)))
    fs::copy_file(entry.path(), target / entry.path().filename());
  return target.string();
}

inline nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

inline void write_json_file(const std::string& path, const nlohmann::json& value) {
  std::ofstream out(path);
  out << value.dump(2);
  REQUIRE(out.good());
}

// A scratch copy of a fixture with config.json fields replaced (null deletes the field).
inline std::string fixture_with_config(const std::string& name, const std::string& case_name, const nlohmann::json& changes) {
  const std::string folder = attnscope::testing::scratch_copy_of_fixture(name, case_name);
  auto config = attnscope::testing::read_json_file(folder + "/config.json");
  for (const auto& [key, value] : changes.items()) {
    if (value.is_null()) config.erase(key);
    else config[key] = value;
  }
  attnscope::testing::write_json_file(folder + "/config.json", config);
  return folder;
}

}  // namespace attnscope::testing
