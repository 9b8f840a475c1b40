// Tests of `attnscope compare`, run as processes: its CSV holds the numbers of analysis::compare_models for the same
// models and tokens (computed here in process), a model compared with itself gives zero changes, text goes through
// both tokenizers, the HTML page shows the most changed heads, and bad input (one model, a missing model, different
// vocabularies or tokenizers, an empty text) gets a clear error.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attnscope/analysis/compare.hpp"
#include "attnscope/analysis/detail/html_page.hpp"
#include <nlohmann/json.hpp>

#include "attnscope/model/load.hpp"
#include "attnscope/text/bpe_tokenizer.hpp"
#include "fixtures/gguf_bounds.hpp"
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

// The CSV of `compare --csv` as rows of fields (header first; the run record's "#" comment lines left out).
std::vector<std::vector<std::string>> compare_csv_rows(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(slurp(path));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind('#', 0) == 0) continue;
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
  // the axes carry model A's token strings (16 tokens at 2 CSS pixels: positions 0, 6 and 12 labelled)
  const auto tokenizer = attnscope::text::ByteLevelBpeTokenizer::from_folder(llama);
  for (const auto& [position, id] : {std::pair<int, int>{0, 5}, {6, 41}, {12, 1}})
    CHECK(contains(page, ">" + std::to_string(position) + " " +
                             attnscope::analysis::detail::html_escape(
                                 attnscope::analysis::detail::html_token_label(tokenizer.token_bytes(id))) +
                             "</span>"));
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

TEST_CASE("attnscope compare of GGUF files: Q4_K against F16 of one model within the bound of its quantization steps, "
          "each with itself nothing") {
  const std::string f16 = attnscope::testing::gguf_fixture("llama_q4k_f16.gguf");
  const std::string q4k = attnscope::testing::gguf_fixture("llama_q4k.gguf");
  const std::vector<int> ids = {1, 17, 20, 3, 63, 41, 7, 25, 12, 8, 60, 2, 50, 33, 9, 5, 44, 18, 27, 36};  // vocabulary 64
  std::string tokens;
  for (const int id : ids) tokens += (tokens.empty() ? "" : ",") + std::to_string(id);
  const std::string csv = path_in_work_dir("compare_gguf.csv"), self = path_in_work_dir("compare_gguf_self.csv");
  REQUIRE(attnscope_command("compare --model " + f16 + " --model " + q4k + " --tokens " + tokens + " --csv " + csv)
              .exit_code == 0);
  REQUIRE(attnscope_command("compare --model " + q4k + " --model " + q4k + " --tokens " + tokens + " --csv " + self)
              .exit_code == 0);
  const auto rows = compare_csv_rows(csv), same = compare_csv_rows(self);
  const auto quantized = attnscope::model::load_model(q4k), reference = attnscope::model::load_model(f16);
  REQUIRE(quantized.config().n_layers == 1);  // the bound below is of layer 0
  REQUIRE(rows.size() == std::size_t(quantized.config().n_heads) + 1);
  REQUIRE(same.size() == rows.size());
  // The bound [derived]. R_i = max_j B_ij bounds the change of every score of row i (attnscope::testing::
  // gguf_layer0_score_bounds, from the quantization steps stored in the file), plus 1e-6 for the float32 rounding of
  // the two forwards. Then:
  //  - ln(p′_j/p_j) = Δ_j − ln Σ_k p_k e^{Δ_k} lies in [−r, r] with r = max Δ − min Δ ≤ 2R_i; the same holds for the
  //    content compositions c = p_C/(1 − s) (a softmax over the content keys of the same scores);
  //  - JS(p, p′) ≤ ¼ Σ_j (p_j − p′_j)²/m_j, m = (p + p′)/2 (KL(p‖m) ≤ χ²(p‖m) = Σ (p − m)²/m and p − m = (p − p′)/2);
  //    with ρ = p′_j/p_j ∈ [e^{−r}, e^{r}], (p − p′)²/m = 2p(1 − ρ)²/(1 + ρ) ≤ 2p(e^r − 1)²/(e^r + 1) (the largest
  //    value on that interval is at ρ = e^r), so JS ≤ J(r) = (e^r − 1)²/(2(e^r + 1)) ≈ r²/4, for keep and drop;
  //  - every |Δp_ij| ≤ R_i (the model test's bound: ‖Δp_i‖₁ ≤ 2R_i and Σ_j Δp_ij = 0), so the sink mass (key 0) and
  //    the max weight of row i move by at most R_i.
  // Per head, the means over the rows (js_drop: over rows 1.., row 0 sees the sink key alone) bound the CSV's values.
  // A worst case over the quantization grid: R_i is about 100 times the score changes measured on this fixture and JS
  // grows with their square, so the JS bound is about 6e5 times the measured JS, the sink-mass bound about 4000 times
  // its change (ATTNSCOPE_GGUF_BOUNDS=1 prints both).
  const auto bounds = attnscope::testing::gguf_layer0_score_bounds(q4k, quantized, reference, ids);
  const auto js_bound = [](double r) { return std::pow(std::expm1(r), 2) / (2 * (std::exp(r) + 1)); };
  double largest = 0;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const int head = std::stoi(rows[r][2]);
    INFO("head " << head);
    REQUIRE(std::stoi(rows[r][1]) == 0);
    const std::vector<double>& row_bounds = bounds[std::size_t(head)];
    double keep = 0, drop = 0, moved = 0;
    for (std::size_t i = 0; i < row_bounds.size(); ++i) {
      const double score = row_bounds[i] + 1e-6;
      keep += js_bound(2 * score);
      if (i > 0) drop += js_bound(2 * score);
      moved += score;
    }
    keep /= double(row_bounds.size()), drop /= double(row_bounds.size() - 1), moved /= double(row_bounds.size());
    const double js_keep = std::stod(rows[r][3]), js_drop = std::stod(rows[r][4]);
    CHECK(js_keep >= 0);
    CHECK(js_keep <= keep);
    CHECK(js_drop <= drop);
    CHECK(std::abs(std::stod(rows[r][9])) <= moved);   // delta_sink_mass
    CHECK(std::abs(std::stod(rows[r][21])) <= moved);  // delta_max_weight
    largest = std::max(largest, js_keep);
    if (std::getenv("ATTNSCOPE_GGUF_BOUNDS") != nullptr)
      std::cerr << "Q4_K compare head " << head << ": js_keep " << js_keep << " (bound " << keep << "), js_drop "
                << js_drop << " (bound " << drop << "), |delta sink mass| " << std::abs(std::stod(rows[r][9]))
                << " (bound " << moved << ")\n";
    CHECK(same[r][3] == "0");
    for (std::size_t c = 9; c < same[r].size(); c += 3) CHECK(same[r][c] == "0");
  }
  CHECK(largest > 0);  // quantization does move the attention
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
