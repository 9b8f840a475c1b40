// Tests of `attnscope report --layers/--heads`: the selected heads' rows are bitwise those rows of the full report (a
// Hugging Face folder, a llama2.c checkpoint and an attention file), the JSON records the selection, and layers or
// heads outside the input stop the report naming the value.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io.hpp"
#include "support/catch.hpp"
#include "tools/cli_runner.hpp"

namespace {

using namespace attnscope::testing::cli;

// The "heads" entries of a report's JSON by (layer, head).
std::map<std::pair<int, int>, nlohmann::json> selection_report_heads(const std::string& path) {
  std::map<std::pair<int, int>, nlohmann::json> heads;
  const nlohmann::json document = nlohmann::json::parse(slurp(path));
  for (const auto& entry : document.at("heads"))
    heads[{entry.at("layer").get<int>(), entry.at("head").get<int>()}] = entry;
  return heads;
}

// Runs `report <input> <options> --json` with and without the selection; checks that the selected heads are exactly
// `expected` and that each of their rows equals the full report's row of that head, every value bitwise (the JSON
// writes doubles with enough digits to round-trip).
void check_selected_rows(const std::string& input, const std::string& options, const std::string& selection,
                         const std::vector<std::pair<int, int>>& expected, const std::string& name) {
  const std::string full = path_in_work_dir(name + "_full.json"), part = path_in_work_dir(name + "_part.json");
  const Run all = attnscope_command("report " + input + " " + options + " --json " + full);
  REQUIRE(all.exit_code == 0);
  const Run selected = attnscope_command("report " + input + " " + options + " " + selection + " --json " + part);
  REQUIRE(selected.exit_code == 0);
  CHECK(contains(selected.out, std::to_string(expected.size()) + " heads"));
  const auto full_heads = selection_report_heads(full), part_heads = selection_report_heads(part);
  REQUIRE(part_heads.size() == expected.size());
  for (const auto& key : expected) {
    INFO(name << ": layer " << key.first << " head " << key.second);
    REQUIRE(part_heads.count(key) == 1);
    REQUIRE(full_heads.count(key) == 1);
    const nlohmann::json& got = part_heads.at(key);
    const nlohmann::json& want = full_heads.at(key);
    CHECK(got.size() == want.size());
    for (const auto& [column, value] : want.items()) {
      INFO(column);
      REQUIRE(got.contains(column));
      if (value.is_number_float()) CHECK(got.at(column).get<double>() == value.get<double>());
      else CHECK(got.at(column) == value);
    }
  }
  const nlohmann::json run = nlohmann::json::parse(slurp(part)).at("runs").at(0);
  CHECK(run.contains("layers") == contains(selection, "--layers"));
  CHECK(run.contains("heads") == contains(selection, "--heads"));
}

}  // namespace

TEST_CASE("report --layers/--heads of a model: the selected rows are bitwise those of the full report",
          "[cli][report][models]") {
  const std::string data = ATTNSCOPE_DATA;
  // a real GPT-2-layout folder (4 layers × 3 heads): layer 2 is not the last, so the forward stops early
  const std::string tokens = "--tokens 464,3290,286,262,2159,11,290,511,7621,6777,7373,13,383,5398,7050,373,1049,"
                             "290,257,1178,12,2481,2390,286,257,1295,13,198,198,1,3792,11,11171,11,523,34170";
  check_selected_rows("--model " + data + "/gpt2-wp-mini", tokens, "--layers 2,0 --heads 1",
                      {{0, 1}, {2, 1}}, "selection_wp");
  check_selected_rows("--model " + data + "/gpt2-wp-mini", tokens, "--heads 2", {{0, 2}, {1, 2}, {2, 2}, {3, 2}},
                      "selection_wp_heads");
  // a llama2.c checkpoint (5 layers × 8 heads, GQA): its default greedy generation runs the whole model
  check_selected_rows(data + "/stories260K.bin", "--generate 40 --basic", "--layers 3 --heads 7,0", {{3, 7}, {3, 0}},
                      "selection_stories");
}

TEST_CASE("report --layers/--heads of an attention file selects the same rows", "[cli][report]") {
  // a [layers = 2, heads = 3, 6, 6] causal attention array written here (rows: softmax of seeded-looking scores)
  std::vector<float> values;
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 3; ++h)
      for (int i = 0; i < 6; ++i) {
        double total = 0;
        std::vector<double> row(6, 0.0);
        for (int j = 0; j <= i; ++j) total += row[std::size_t(j)] = 1.0 + ((l * 7 + h * 5 + i * 3 + j) % 4);
        for (int j = 0; j < 6; ++j) values.push_back(static_cast<float>(row[std::size_t(j)] / total));
      }
  const std::string path = path_in_work_dir("selection_attention.npy");
  attnscope::io::write_npy(path, attnscope::io::Array::from_vector(values, {2, 3, 6, 6}));
  check_selected_rows(path, "--basic", "--layers 1 --heads 2,0", {{1, 2}, {1, 0}}, "selection_file");
}

TEST_CASE("report refuses layers and heads the input does not have, naming the value", "[cli][report][errors]") {
  const std::string data = ATTNSCOPE_DATA;
  const std::string model = "report --model " + data + "/gpt2-wp-mini --tokens 464,3290,286 ";
  check_failures({
      {model + "--layers 4", "--layers names layer 4 but the model has 4 layers (0..3)", 1},
      {model + "--layers 0,7", "layer 7", 1},
      {model + "--heads 3", "--heads names head 3 but the model has 3 heads per layer (0..2)", 1},
      {model + "--layers 1,1", "--layers names 1 twice", 2},
      {model + "--heads -1", "--heads: expected non-negative integers, got -1", 2},
      {"report " + data + "/stories260K.bin --tokens 1,2 --layers 5", "layer 5", 1},
  });
  const std::string path = path_in_work_dir("selection_errors.npy");
  attnscope::io::write_npy(path, attnscope::io::Array::from_vector(std::vector<float>{1, 0, 0.5f, 0.5f}, {1, 2, 2}));
  check_failures({
      {"report " + path + " --heads 1", "head 1 is outside [0, 1)", 1},
      {"report " + path + " --layers 2", "layer 2 is outside [0, 1)", 1},
  });
}
