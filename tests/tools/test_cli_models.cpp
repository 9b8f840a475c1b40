// Tests of the `attnscope` command on Hugging Face model folders (docs/cli.md): `tokenize` against the reference
// GPT-2 encoder's ids, `capture --model` end to end against the fixtures' independent PyTorch references, `report
// --model --text-file` (text to report in one command), the --max-tokens rule, and the errors of the new options.
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"
#include "tools/cli_runner.hpp"

namespace {

using namespace attnscope::testing::cli;

std::string gpt2_wp_mini() { return attnscope::testing::data_file("gpt2-wp-mini"); }

// The ids of one output line of `attnscope tokenize` (single spaces, then a newline).
std::vector<std::int64_t> ids_of_line(const std::string& line) {
  std::vector<std::int64_t> ids;
  std::istringstream stream(line);
  for (std::int64_t id; stream >> id;) ids.push_back(id);
  return ids;
}

std::string space_separated(const std::vector<std::int64_t>& ids) {
  std::string text;
  for (std::size_t i = 0; i < ids.size(); ++i) text += (i ? " " : "") + std::to_string(ids[i]);
  return text;
}

}  // namespace

TEST_CASE("tokenize matches the reference GPT-2 encoder on War and Peace", "[cli][tokenize]") {
  // war_and_peace.gpt2-tokens.json: 6000 characters of Book One and their ids from gpt-3-encoder 1.1.4 (an
  // independent JavaScript GPT-2 encoder); gpt2-wp-mini carries GPT-2's vocab.json and merges.txt.
  const auto bytes = attnscope::io::read_file(attnscope::testing::data_file("war_and_peace.gpt2-tokens.json"));
  const nlohmann::json reference = nlohmann::json::parse(bytes.begin(), bytes.end());
  const std::string text_file = path_in_work_dir("war_and_peace_excerpt.txt");
  attnscope::io::write_file(text_file, reference.at("text").get<std::string>());
  const Run run = attnscope_command("tokenize --model " + gpt2_wp_mini() + " --text-file " + text_file);
  REQUIRE(run.exit_code == 0);
  REQUIRE(run.out.back() == '\n');
  CHECK(run.out.find('\n') == run.out.size() - 1);  // one line
  CHECK(run.out.find("  ") == std::string::npos);   // single spaces
  CHECK(ids_of_line(run.out) == reference.at("gpt2_tokens").get<std::vector<std::int64_t>>());
}

TEST_CASE("tokenize: empty text, special tokens only with the flag", "[cli][tokenize]") {
  const Run empty = attnscope_command("tokenize --model " + gpt2_wp_mini() + " --text ''");
  CHECK(empty.exit_code == 0);
  CHECK(empty.out == "\n");
  // GPT-2's <|endoftext|> is id 50256; as plain text it is the BPE of its characters ("<", "|", "endo", ...).
  const Run plain = attnscope_command("tokenize --model " + gpt2_wp_mini() + " --text '<|endoftext|>'");
  const Run special = attnscope_command("tokenize --model " + gpt2_wp_mini() + " --text '<|endoftext|>' --special-tokens");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(special.exit_code == 0);
  CHECK(ids_of_line(special.out) == std::vector<std::int64_t>{50256});
  CHECK(ids_of_line(plain.out).size() > 1);
  for (const std::int64_t id : ids_of_line(plain.out)) CHECK(id != 50256);
}

TEST_CASE("tokenize: --add-special-tokens adds the post-processor's BOS; with --special-tokens, HF's default",
          "[cli][tokenize]") {
  // A folder holding only Llama-2's tokenizer.model (tests/text/fixtures/real): BOS <s> is id 1.
  const fs::path folder = path_in_work_dir("llama2_tokenizer_model");
  fs::create_directories(folder);
  fs::copy_file(fs::path(__FILE__).parent_path() / "../text/fixtures/real/llama2.tokenizer.model",
                folder / "tokenizer.model", fs::copy_options::overwrite_existing);
  const std::string base = "tokenize --model " + folder.string() + " --text 'Hello <s>world'";
  const Run plain = attnscope_command(base);
  const Run added = attnscope_command(base + " --add-special-tokens");
  const Run both = attnscope_command(base + " --add-special-tokens --special-tokens");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(added.exit_code == 0);
  REQUIRE(both.exit_code == 0);
  const std::vector<std::int64_t> plain_ids = ids_of_line(plain.out), added_ids = ids_of_line(added.out),
                                  both_ids = ids_of_line(both.out);
  CHECK(plain_ids.front() != 1);
  REQUIRE(added_ids.size() == plain_ids.size() + 1);
  CHECK(added_ids.front() == 1);
  CHECK(std::vector<std::int64_t>(added_ids.begin() + 1, added_ids.end()) == plain_ids);
  // With both flags the <s> in the text is id 1 as well.
  CHECK(both_ids.front() == 1);
  CHECK(std::count(both_ids.begin(), both_ids.end(), 1) == 2);
  CHECK(std::count(plain_ids.begin(), plain_ids.end(), 1) == 0);
}

TEST_CASE("capture --model equals the fixtures' independent PyTorch forward", "[cli][capture][models]") {
  for (const std::string name : {"gpt2", "llama", "qwen2", "llama_rope", "smollm", "qwen3", "gemma2", "gemma3", "phi3",
                                 "gpt_neox", "olmo2"}) {
    INFO("fixture " << name);
    const attnscope::testing::HfReference reference = attnscope::testing::read_hf_reference(name);
    const std::string out = path_in_work_dir("capture_" + name + ".npz");
    // The reference tokens are the fixture tokenizer's encoding of sample.txt: --text-file must give the same ids.
    const Run run = attnscope_command("capture --model " + attnscope::testing::hf_fixture_folder(name) + " --text-file " +
                                      attnscope::testing::hf_fixture_sample_text() + " --out " + out);
    REQUIRE(run.exit_code == 0);
    const auto arrays = attnscope::io::read_npz(out);
    CHECK(arrays.at("tokens").to_vector<std::int64_t>() == reference.tokens);
    CHECK(attnscope::testing::hf_logits_error(arrays.at("logits").to_matrix<double>(), reference.logits) <=
          attnscope::testing::hf_logits_relative_tolerance);
    for (std::size_t layer = 0; layer < reference.attention.size(); ++layer) {
      const attnscope::io::Array& heads = arrays.at("layer" + std::to_string(layer) + ".attention");
      REQUIRE(heads.shape()[0] == static_cast<std::int64_t>(reference.attention[layer].size()));
      for (std::int64_t head = 0; head < heads.shape()[0]; ++head)
        CHECK(attnscope::testing::hf_attention_error(heads.slice_matrix<double>({head}),
                                                 reference.attention[layer][std::size_t(head)]) <=
              attnscope::testing::hf_attention_tolerance);
    }
    for (const char* member : {"layer0.q", "layer0.k", "layer0.v", "layer0.scores"}) CHECK(arrays.count(member) == 1);
  }
}

TEST_CASE("report --model --text-file: text to per-head report in one command", "[cli][report][models]") {
  const std::string csv = path_in_work_dir("report_llama.csv");
  const Run run = attnscope_command("report --model " + attnscope::testing::hf_fixture_folder("llama") + " --text-file " +
                                    attnscope::testing::hf_fixture_sample_text() + " --basic --csv " + csv);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json config = nlohmann::json::parse(slurp(attnscope::testing::hf_fixture_folder("llama") + "/config.json"));
  const int heads = config.at("num_hidden_layers").get<int>() * config.at("num_attention_heads").get<int>();
  CHECK(contains(run.out, std::to_string(heads) + " heads"));
  // CSV: a header line, then one line per layer and head.
  std::istringstream lines(slurp(csv));
  int count = 0;
  for (std::string line; std::getline(lines, line);) count += line.empty() ? 0 : 1;
  CHECK(count == heads + 1);
  CHECK(contains(run.err, "llama"));
}

TEST_CASE("input longer than the model's positions: an error, or cut by --max-tokens and said so", "[cli][models]") {
  const std::string folder = attnscope::testing::hf_fixture_folder("gpt2");
  const nlohmann::json config = nlohmann::json::parse(slurp(folder + "/config.json"));
  const int positions = config.at("n_positions").get<int>();
  std::vector<std::int64_t> ids;
  for (int p = 0; p < positions + 10; ++p) ids.push_back(p % 200);
  const std::string out = path_in_work_dir("long.npz");
  const std::string tokens = "--tokens '" + space_separated(ids) + "'";
  const Run too_long = attnscope_command("capture --model " + folder + " " + tokens + " --out " + out);
  CHECK(too_long.exit_code == 1);
  CHECK(contains(too_long.err, std::to_string(positions + 10) + " tokens"));
  CHECK(contains(too_long.err, "--max-tokens"));
  const Run cut = attnscope_command("capture --model " + folder + " " + tokens + " --max-tokens " +
                                    std::to_string(positions) + " --out " + out);
  REQUIRE(cut.exit_code == 0);
  CHECK(contains(cut.err, "cut from " + std::to_string(positions + 10) + " to " + std::to_string(positions)));
  const auto arrays = attnscope::io::read_npz(out);
  CHECK(arrays.at("tokens").to_vector<std::int64_t>() ==
        std::vector<std::int64_t>(ids.begin(), ids.begin() + positions));
}

TEST_CASE("model-folder errors name the problem", "[cli][models][errors]") {
  const std::string out = path_in_work_dir("bad_model.npz");
  const std::string llama2c = attnscope::testing::data_file("stories260K.bin");
  const std::vector<ExpectedFailure> cases = {
      {"capture --model " + attnscope::testing::hf_fixture_folder("gpt2") + " --out " + out, "needs input", 2},
      {"capture --model " + attnscope::testing::hf_fixture_folder("bad/unknown_model_type") + " --tokens 1 --out " + out,
       "model_type", 1},
      {"capture --model " + attnscope::testing::hf_fixture_folder("bad/missing_shard") + " --tokens 1 --out " + out,
       "missing_shard", 1},
      {"tokenize --model " + llama2c + " --text hi", "stories260K.bin", 1},
      {"tokenize --model " + gpt2_wp_mini(), "exactly one of --text, --text-file", 2},
      {"report --model " + gpt2_wp_mini() + " --text hi --tokens 1", "only one of", 2},
  };
  check_failures(cases);
}
