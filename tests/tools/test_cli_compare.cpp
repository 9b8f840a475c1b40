// Tests of `attnscope compare`, run as processes: its CSV holds the numbers of analysis::compare_models for the same
// models and tokens (computed here in process), a model compared with itself gives zero changes, text goes through
// both tokenizers, the HTML page shows the most changed heads, and bad input (one model, a missing model, different
// vocabularies or tokenizers, an empty text) gets a clear error.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attnscope/analysis/compare.hpp"
#include <nlohmann/json.hpp>

#include "attnscope/model/load.hpp"
#include "fixtures/gguf_fixtures.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "tools/cli_runner.hpp"

namespace {

using attnscope::testing::cli::attnscope_command;
using attnscope::testing::cli::contains;
using attnscope::testing::cli::path_in_work_dir;
using attnscope::testing::cli::slurp;

const std::string compare_stories = std::string(ATTNSCOPE_DATA) + "/stories260K.bin";

// The CSV of `compare --csv` as rows of fields (header first).
std::vector<std::vector<std::string>> compare_csv_rows(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(slurp(path));
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(cell);
    rows.push_back(fields);
  }
  return rows;
}

}  // namespace

TEST_CASE("attnscope compare writes the comparison of analysis::compare_models, most changed heads first") {
  const std::string llama = attnscope::testing::hf_fixture_folder("llama");
  const std::string gemma = attnscope::testing::hf_fixture_folder("gemma2");
  const std::string csv = path_in_work_dir("compare.csv"), html = path_in_work_dir("compare.html");
  const std::string tokens = "5,17,200,3,3,99,41,7,250,12,8,64,1,0,299,150";
  const auto run = attnscope_command("compare --model " + llama + " --model " + gemma + " --tokens " + tokens +
                                     " --top-k 3 --csv " + csv + " --html " + html + " --html-heads 2");
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.out, "js_keep"));
  const auto rows = compare_csv_rows(csv);
  const auto a = attnscope::model::load_model(llama), b = attnscope::model::load_model(gemma);
  attnscope::analysis::CompareOptions options;
  options.top_k = 3;
  const auto want = attnscope::analysis::compare_models(
      a, b, {5, 17, 200, 3, 3, 99, 41, 7, 250, 12, 8, 64, 1, 0, 299, 150}, options);
  REQUIRE(rows.size() == want.heads.size() + 1);
  CHECK(rows[0][3] == "js_keep");
  for (std::size_t r = 0; r < want.heads.size(); ++r) {
    INFO("rank " << r + 1);
    const auto& head = want.heads[r];
    REQUIRE(rows[r + 1].size() == 25);
    CHECK(std::stoi(rows[r + 1][1]) == head.layer);
    CHECK(std::stoi(rows[r + 1][2]) == head.head);
    CHECK(std::stod(rows[r + 1][3]) == Approx(head.js_keep).epsilon(1e-8));
    CHECK(std::stod(rows[r + 1][4]) == Approx(head.js_drop).epsilon(1e-8));
    CHECK(std::stod(rows[r + 1][6]) == Approx(head.top_k_overlap).epsilon(1e-8));
    CHECK(std::stod(rows[r + 1][9]) == Approx(head.delta().sink_mass).epsilon(1e-8).margin(1e-15));
    CHECK(std::stod(rows[r + 1][24]) == Approx(head.delta().jacobian_norm).epsilon(1e-8).margin(1e-15));
    if (r > 0) CHECK(std::stod(rows[r][3]) >= std::stod(rows[r + 1][3]));
  }
  const std::string page = slurp(html);
  CHECK(contains(page, "<section id=\"head-" + rows[1][1] + "-" + rows[1][2] + "\">"));
  CHECK(contains(page, "<section id=\"head-" + rows[2][1] + "-" + rows[2][2] + "\">"));
  CHECK_FALSE(contains(page, "<section id=\"head-" + rows[3][1] + "-" + rows[3][2] + "\">"));
}

TEST_CASE("attnscope compare of a model with itself: zero changes; text through both tokenizers") {
  const std::string llama = attnscope::testing::hf_fixture_folder("llama");
  const std::string csv = path_in_work_dir("compare_self.csv");
  const auto run = attnscope_command("compare --model " + llama + " --model " + llama + " --text-file " +
                                     attnscope::testing::hf_fixture_sample_text() + " --max-tokens 20 --csv " + csv);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.err, "input cut from 35 to 20 tokens"));
  const auto rows = compare_csv_rows(csv);
  REQUIRE(rows.size() == 9);  // 2 layers × 4 heads
  for (std::size_t r = 1; r < rows.size(); ++r) {
    CHECK(rows[r][3] == "0");  // js_keep
    CHECK(rows[r][4] == "0");  // js_drop
    CHECK(rows[r][6] == "1");  // top-k overlap
    for (std::size_t c = 9; c < rows[r].size(); c += 3) CHECK(rows[r][c] == "0");  // every delta_
  }
}

TEST_CASE("attnscope compare of a real model with itself at 512 tokens: zero changes") {
  // products large enough for Eigen to split them over OpenMP threads: both forwards must split them alike
  const std::string model = std::string(ATTNSCOPE_DATA) + "/gpt2-wp-mini";
  const std::string csv = path_in_work_dir("compare_wp_self.csv");
  const auto run = attnscope_command("compare --model " + model + " --model " + model + " --text-file " +
                                     std::string(ATTNSCOPE_DATA) + "/war_and_peace.txt --max-tokens 512 --csv " + csv);
  REQUIRE(run.exit_code == 0);
  const auto rows = compare_csv_rows(csv);
  REQUIRE(rows.size() == 13);  // 4 layers × 3 heads
  for (std::size_t r = 1; r < rows.size(); ++r) {
    CHECK(rows[r][3] == "0");
    CHECK(rows[r][6] == "1");
    for (std::size_t c = 9; c < rows[r].size(); c += 3) CHECK(rows[r][c] == "0");
  }
}

TEST_CASE("attnscope compare of GGUF files: Q4_K against F16 of one model changes little, each with itself nothing") {
  const std::string f16 = attnscope::testing::gguf_fixture("llama_q4k_f16.gguf");
  const std::string q4k = attnscope::testing::gguf_fixture("llama_q4k.gguf");
  const std::string tokens = "1,17,20,3,63,41,7,25,12,8,60,2,50,33,9,5,44,18,27,36";  // vocabulary of 64
  const std::string csv = path_in_work_dir("compare_gguf.csv"), self = path_in_work_dir("compare_gguf_self.csv");
  REQUIRE(attnscope_command("compare --model " + f16 + " --model " + q4k + " --tokens " + tokens + " --csv " + csv)
              .exit_code == 0);
  REQUIRE(attnscope_command("compare --model " + q4k + " --model " + q4k + " --tokens " + tokens + " --csv " + self)
              .exit_code == 0);
  const auto rows = compare_csv_rows(csv), same = compare_csv_rows(self);
  REQUIRE(rows.size() == same.size());
  REQUIRE(rows.size() > 1);
  double largest = 0;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const double js = std::stod(rows[r][3]);
    largest = std::max(largest, js);
    CHECK(js >= 0);
    CHECK(same[r][3] == "0");
    for (std::size_t c = 9; c < same[r].size(); c += 3) CHECK(same[r][c] == "0");
  }
  // Q4_K moves every row a little: JS ≈ Σ Δp²/(8p) for small changes, so logit errors of order 1e-3 (the fixture's
  // 4.5-bit weights) give JS of order 1e-7, against ~0.1 per head between two different models (the llama and
  // gemma2 fixtures above). A guard on the order of magnitude, not a derived bound.
  CHECK(largest > 0);
  CHECK(largest < 1e-5);
}

TEST_CASE("text input with a GGUF file (--text) uses the tokenizer stored in its metadata") {
  const std::filesystem::path vocab = std::filesystem::path(__FILE__).parent_path().parent_path() / "text" / "fixtures" / "real";
  // ids of Hugging Face's GPT-2 and Llama-2 tokenizers for "Hello world"
  const auto gpt2 = attnscope_command("tokenize --model " + (vocab / "ggml-vocab-gpt-2.gguf").string() + " --text 'Hello world'");
  REQUIRE(gpt2.exit_code == 0);
  CHECK(gpt2.out == "15496 995\n");
  const auto llama = attnscope_command("tokenize --model " + (vocab / "ggml-vocab-llama-spm.gguf").string() +
                                       " --text 'Hello world' --add-special-tokens");
  REQUIRE(llama.exit_code == 0);
  CHECK(llama.out == "1 15043 3186\n");
  // a GGUF model without tokenizer keys: the error names the file and the key
  const std::string q4k = attnscope::testing::gguf_fixture("llama_q4k.gguf");
  const auto run = attnscope_command("compare --model " + q4k + " --model " + q4k + " --text hello");
  CHECK(run.exit_code == 1);
  CHECK(contains(run.err, "llama_q4k.gguf"));
  CHECK(contains(run.err, "tokenizer.ggml.model"));
}

TEST_CASE("attnscope compare refuses bad input with a clear error") {
  const std::string llama = attnscope::testing::hf_fixture_folder("llama");
  const std::string empty = path_in_work_dir("compare_empty.txt");
  std::ofstream(empty).close();
  // the llama fixture with a tokenizer that has no merges: the same vocabulary, other token ids for the same text
  const std::filesystem::path unmerged = path_in_work_dir("compare_unmerged");
  std::filesystem::create_directories(unmerged);
  for (const auto& entry : std::filesystem::directory_iterator(llama))
    std::filesystem::copy_file(entry.path(), unmerged / entry.path().filename(),
                               std::filesystem::copy_options::overwrite_existing);
  nlohmann::json tokenizer = nlohmann::json::parse(slurp(llama + "/tokenizer.json"));
  tokenizer["model"]["merges"] = nlohmann::json::array();
  std::ofstream(unmerged / "tokenizer.json") << tokenizer.dump();
  attnscope::testing::cli::check_failures({
      {"compare --model " + llama + " --tokens 1,2,3", "give two models", 2},
      {"compare --model " + llama + " --model " + llama, "give the input", 2},
      {"compare --model " + llama + " --model /nonexistent/model --tokens 1,2", "/nonexistent/model", 1},
      {"compare --model " + llama + " --model " + compare_stories + " --tokens 1,2,3", "different vocabularies: 300 and 512", 1},
      {"compare --model " + llama + " --model " + llama + " --text-file " + empty, "the input has no tokens", 1},
      {"compare --model " + llama + " --model " + unmerged.string() + " --text-file " +
           attnscope::testing::hf_fixture_sample_text(),
       "tokenizers encode the text differently", 1},
      {"compare --model " + llama + " --model " + llama + " --tokens 1,2,300", "300", 1},
      {"compare --model " + llama + " --model " + llama + " --tokens 1,2 --top-k 0", "--top-k", 2},
      {"compare --model " + llama + " --model " + llama + " --tokens 1,2 --html-heads 2", "--html-heads applies", 2},
      {"compare --model " + compare_stories + " --model " + compare_stories + " --text hello", "--text", 2},
  });
}
