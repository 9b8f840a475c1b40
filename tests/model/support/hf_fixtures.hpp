// The Hugging Face model-folder fixtures of tests/fixtures/hf/ (random weights; reference outputs of an independent
// plain-PyTorch forward pass, tests/fixtures/make_hf_fixtures.py) and the real gpt2-wp-mini folder of the shared data,
// plus scratch folders built from them for the error tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io/npz.hpp"
#include "attnscope/model/huggingface.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"

namespace attnscope::testing {

/// tests/fixtures/hf (found from this header's own path; override with the ATTNSCOPE_HF_FIXTURES environment
/// variable).
inline std::string hf_fixture_dir(const std::string& name) {
  if (const char* env = std::getenv("ATTNSCOPE_HF_FIXTURES")) return std::string(env) + "/" + name;
  const std::filesystem::path here(__FILE__);  // tests/model/support/hf_fixtures.hpp
  return (here.parent_path().parent_path().parent_path() / "fixtures" / "hf" / name).string();
}

/// reference.npz of a fixture: tokens [L], logits [L, vocab], layer{i}.attention [H, L, L].
struct HuggingFaceReference {
  std::vector<int> tokens;
  RowMatrix<double> logits;
  std::vector<std::vector<RowMatrix<double>>> attention;  // [layer][head]
};

inline HuggingFaceReference read_hf_reference(const std::string& folder) {
  const auto arrays = io::read_npz(folder + "/reference.npz");
  HuggingFaceReference reference;
  for (const auto token : arrays.at("tokens").to_vector<std::int64_t>()) reference.tokens.push_back(int(token));
  reference.logits = arrays.at("logits").to_matrix<double>();
  for (int layer = 0;; ++layer) {
    const auto found = arrays.find("layer" + std::to_string(layer) + ".attention");
    if (found == arrays.end()) break;
    std::vector<RowMatrix<double>> heads;
    for (std::int64_t head = 0; head < found->second.shape().at(0); ++head)
      heads.push_back(found->second.slice_matrix<double>({head}));
    reference.attention.push_back(std::move(heads));
  }
  return reference;
}

/// The fixture models, each loaded once per test binary.
inline const model::Transformer& hf_fixture_model(const std::string& name) {
  static std::map<std::string, model::Transformer> models;
  auto found = models.find(name);
  if (found == models.end()) found = models.emplace(name, model::load_huggingface_model(hf_fixture_dir(name))).first;
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
  for (const auto& entry : fs::directory_iterator(hf_fixture_dir(name)))
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

}  // namespace attnscope::testing
