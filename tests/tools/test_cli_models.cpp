// Tests of the `attnscope` command on Hugging Face model folders (docs/cli.md): `tokenize` against the reference
// GPT-2 encoder's ids, `capture --model` end to end against the fixtures' independent PyTorch references, `report
// --model --text-file` (text to report in one command), the --max-tokens rule, and the errors of the new options.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
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

// A fixture family and one of its config variants (tests/fixtures/hf/<family>/variants.json; "" for the folder as
// written).
struct FamilyCase {
  std::string family, variant;
  std::string label() const { return variant.empty() ? family : family + "." + variant; }
};

// One case ready to run: its folder (the fixture, or a scratch copy with the variant's config.json changes), config,
// sizes and reference outputs.
struct FamilyFixture {
  std::string folder;
  nlohmann::json config;
  int layers = 0, heads = 0;
  attnscope::testing::HfReference reference;
  std::int64_t length() const { return std::int64_t(reference.tokens.size()); }
  std::string token_list() const { return "'" + space_separated(reference.tokens) + "'"; }
};

FamilyFixture prepare_family_case(const FamilyCase& c) {
  FamilyFixture fixture;
  fixture.folder = attnscope::testing::hf_fixture_folder(c.family);
  if (!c.variant.empty()) {
    const fs::path copy = path_in_work_dir("family_" + c.family + "_" + c.variant);
    fs::remove_all(copy);
    fs::copy(fixture.folder, copy);
    nlohmann::json config = nlohmann::json::parse(slurp(copy / "config.json"));
    const nlohmann::json changes = nlohmann::json::parse(slurp(copy / "variants.json")).at(c.variant);
    for (const auto& [key, value] : changes.items()) config[key] = value;
    std::ofstream(copy / "config.json") << config.dump(2);
    fixture.folder = copy.string();
  }
  fixture.config = nlohmann::json::parse(slurp(fixture.folder + "/config.json"));
  fixture.layers = fixture.config.value("num_hidden_layers", fixture.config.value("n_layer", 0));
  fixture.heads = fixture.config.value("num_attention_heads", fixture.config.value("n_head", 0));
  fixture.reference = attnscope::testing::read_hf_reference(c.family, c.variant);
  REQUIRE(fixture.layers * fixture.heads > 0);
  REQUIRE(fixture.reference.attention.size() == std::size_t(fixture.layers));
  return fixture;
}

// Every family fixture and every config variant of one.
std::vector<FamilyCase> family_cases() {
  std::vector<FamilyCase> cases;
  for (const std::string family : {"gpt2", "llama", "qwen2", "llama_rope", "smollm", "qwen3", "gemma2", "gemma3",
                                   "phi3", "gpt_neox", "olmo2"}) {
    cases.push_back({family, ""});
    const fs::path variants = fs::path(attnscope::testing::hf_fixture_folder(family)) / "variants.json";
    if (!fs::exists(variants)) continue;
    const nlohmann::json listed = nlohmann::json::parse(slurp(variants));  // kept alive while items() is iterated
    for (const auto& [variant, changes] : listed.items()) cases.push_back({family, variant});
  }
  return cases;
}

// The per-row statistics of a reference attention matrix (rows are queries): weight on key 0, entropy in nats, and
// largest weight.
struct ReferenceRow {
  double sink, entropy, max_weight;
};
ReferenceRow reference_row(const attnscope::RowMatrix<double>& attention, Eigen::Index row) {
  ReferenceRow result{attention(row, 0), 0.0, attention.row(row).maxCoeff()};
  for (Eigen::Index key = 0; key < attention.cols(); ++key)
    if (attention(row, key) > 0) result.entropy -= attention(row, key) * std::log(attention(row, key));
  return result;
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

TEST_CASE("capture --model equals the fixtures' independent PyTorch forward, config variants included",
          "[cli][capture][models]") {
  // The families as written through --text-file (the reference tokens are the fixture tokenizer's encoding of
  // sample.txt, so --text-file must give the same ids); the config variants (rope_scaling linear/dynamic/yarn, Qwen2's
  // per-layer windows, Phi-3's short factors, GPT-NeoX's sequential residual) on a copy of the folder with their
  // config changes, through --tokens.
  std::size_t compared = 0;
  for (const FamilyCase& c : family_cases()) {
    INFO("fixture " << c.label());
    const FamilyFixture fixture = prepare_family_case(c);
    const attnscope::testing::HfReference& reference = fixture.reference;
    const std::string out = path_in_work_dir("capture_" + c.label() + ".npz");
    const std::string input = c.variant.empty() ? " --text-file " + attnscope::testing::hf_fixture_sample_text()
                                                : " --tokens " + fixture.token_list();
    const Run run = attnscope_command("capture --model " + fixture.folder + input + " --out " + out);
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
    ++compared;
  }
  CHECK(compared == 17);  // 11 families and 6 variants
}

TEST_CASE("report --model --text-file: text to per-head report in one command", "[cli][report][models]") {
  const std::string csv = path_in_work_dir("report_llama.csv");
  const Run run = attnscope_command("report --model " + attnscope::testing::hf_fixture_folder("llama") + " --text-file " +
                                    attnscope::testing::hf_fixture_sample_text() + " --basic --csv " + csv);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json config = nlohmann::json::parse(slurp(attnscope::testing::hf_fixture_folder("llama") + "/config.json"));
  const int heads = config.at("num_hidden_layers").get<int>() * config.at("num_attention_heads").get<int>();
  CHECK(contains(run.out, std::to_string(heads) + " heads"));
  // CSV: the run record, a header line, then one line per layer and head.
  CHECK(slurp(csv).rfind("# attnscope run: ", 0) == 0);
  std::istringstream lines(csv_table(slurp(csv)));
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

TEST_CASE("report --model --tokens on every family and config variant: one finite row per layer and head, as the "
          "reference attention says", "[cli][report][models]") {
  // The reference tokens go in as --tokens; the report's per-head means must be those of the independent PyTorch
  // reference attention (fixtures/hf_reference.hpp): sink_mass (weight on key 0) and max_max_weight (rows seeing >= 2
  // keys: every row but the first) to the attention tolerance, entropy to 1e-4 nats (p ln p amplifies the error of a
  // small p; measured: 3e-7). Variants run on a copy of the folder with their config changes.
  std::size_t reports = 0;
  for (const FamilyCase& c : family_cases()) {
    INFO("fixture " << c.label());
    const FamilyFixture fixture = prepare_family_case(c);
    const attnscope::testing::HfReference& reference = fixture.reference;
    const std::string& folder = fixture.folder;
    const int layers = fixture.layers, heads = fixture.heads;
    const std::string tokens = "--tokens " + fixture.token_list();
    const auto length = Eigen::Index(fixture.length());
    const std::string json_file = path_in_work_dir("family_report_" + c.label() + ".json");
    const Run run = attnscope_command("report --model " + folder + " " + tokens + " --json " + json_file);
    REQUIRE(run.exit_code == 0);
    CHECK(contains(run.out, std::to_string(layers * heads) + " heads, L = " + std::to_string(length)));
    CHECK(contains(run.err, fixture.config.at("model_type").get<std::string>()));
    const nlohmann::json report = nlohmann::json::parse(slurp(json_file));
    const nlohmann::json& rows = report.at("heads");
    REQUIRE(rows.size() == std::size_t(layers * heads));
    std::set<std::pair<int, int>> seen;
    for (const nlohmann::json& row : rows) {
      const int layer = row.at("layer").get<int>(), head = row.at("head").get<int>();
      INFO("layer " << layer << ", head " << head << ": " << row.dump());
      REQUIRE((layer >= 0 && layer < layers && head >= 0 && head < heads));
      seen.emplace(layer, head);
      for (const std::string column : {"sink_mass", "entropy", "max_max_weight", "max_scaled_logit",
                                       "mean_jacobian_norm", "max_jacobian_norm", "content_entropy",
                                       "sink_entropy_share"}) {
        INFO("column " << column);
        REQUIRE(row.at(column).is_number());
        CHECK(std::isfinite(row.at(column).get<double>()));
      }
      const attnscope::RowMatrix<double>& attention = reference.attention[std::size_t(layer)][std::size_t(head)];
      double sink = 0, entropy = 0, max_weight = 0;
      for (Eigen::Index i = 0; i < length; ++i) {
        const ReferenceRow expected = reference_row(attention, i);
        sink += expected.sink / double(length);
        entropy += expected.entropy / double(length);
        if (i > 0) max_weight = std::max(max_weight, expected.max_weight);
      }
      CHECK(std::abs(row.at("sink_mass").get<double>() - sink) <= attnscope::testing::hf_attention_tolerance);
      CHECK(std::abs(row.at("max_max_weight").get<double>() - max_weight) <= attnscope::testing::hf_attention_tolerance);
      CHECK(std::abs(row.at("entropy").get<double>() - entropy) <= 1e-4);
      // bounds that hold for any causal attention: entropy <= ln L, the exact softmax Jacobian norm <= 1/2
      CHECK(row.at("entropy").get<double>() <= std::log(double(length)) + 1e-9);
      CHECK(row.at("max_jacobian_norm").get<double>() <= 0.5 + 1e-9);
    }
    CHECK(seen.size() == std::size_t(layers * heads));
    ++reports;
  }
  CHECK(reports == 17);  // 11 families and 6 variants
}
