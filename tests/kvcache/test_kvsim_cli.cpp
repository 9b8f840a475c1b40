// `attnscope kvsim` end to end on the Qwen2 fixture (GQA): the documented arrays with their shapes and dtypes, the
// policy specs in run_options, the values against kvcache::simulate_layer run here on the same forward pass, the CSV
// and the page, and the refused command lines.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io/npz.hpp"
#include "attnscope/kvcache.hpp"
#include "model/support/hf_fixtures.hpp"
#include "support/catch.hpp"
#include "tools/cli_runner.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
namespace cli_test = attnscope::testing::cli;

std::vector<int> kvsim_tokens(Index length) {
  std::vector<int> tokens;
  for (Index i = 0; i < length; ++i) tokens.push_back(static_cast<int>((i * 37 + 11) % 299));
  return tokens;
}

std::string token_list(const std::vector<int>& tokens) {
  std::string text;
  for (std::size_t i = 0; i < tokens.size(); ++i) text += (i ? "," : "") + std::to_string(tokens[i]);
  return text;
}

}  // namespace

TEST_CASE("kvsim writes the documented arrays, CSV and page", "[kvcache][cli]") {
  const std::string folder = attnscope::testing::hf_fixture_folder("qwen2");
  const Index length = 30, first = 2, prefill = 12;
  const std::vector<int> tokens = kvsim_tokens(length);
  const std::vector<std::string> specs = {"streaming:sink=2,recent=6", "oracle:budget=8", "h2o:heavy=4,recent=4",
                                          "tova:budget=8", "snapkv:window=4,kernel=3,budget=8"};
  const std::string out = cli_test::path_in_work_dir("kv.npz"), csv = cli_test::path_in_work_dir("kv.csv"),
                    html = cli_test::path_in_work_dir("kv.html");
  std::string command = "kvsim --model " + folder + " --tokens " + token_list(tokens) + " --out " + out + " --csv " +
                        csv + " --html " + html + " --evaluate-from 2 --prefill 12";
  for (const std::string& spec : specs) command += " --policy " + spec;
  const cli_test::Run run = cli_test::attnscope_command(command);
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(cli_test::contains(run.out, "streaming:sink=2,recent=6"));

  const auto& model = attnscope::testing::hf_fixture_model("qwen2");
  const auto& config = model.config();
  const int layers = config.n_layers, heads = config.n_heads, kv_heads = config.n_kv_heads;
  const auto arrays = attnscope::io::read_npz(out);
  const Index evaluated = length - first;
  REQUIRE(arrays.count("queries") == 1);
  CHECK(arrays.at("queries").dtype() == attnscope::io::DType::int64);
  const std::vector<std::int64_t> queries = arrays.at("queries").to_vector<std::int64_t>();
  REQUIRE(queries.size() == static_cast<std::size_t>(evaluated));
  for (Index t = 0; t < evaluated; ++t) CHECK(queries[static_cast<std::size_t>(t)] == first + t);
  // the policy specs, in order, in the run options' JSON (one int32 per UTF-8 byte)
  std::string json;
  for (const std::int32_t byte : arrays.at("run_options").to_vector<std::int32_t>()) json.push_back(static_cast<char>(byte));
  const nlohmann::json options = nlohmann::json::parse(json);
  for (std::size_t p = 0; p < specs.size(); ++p) CHECK(options.at("policy" + std::to_string(p)) == specs[p]);

  // the same simulation through the library on the same forward pass
  std::vector<RowMatrix<float>> queries_of(layers), keys_of(layers);
  std::vector<attnscope::stream::RowStatisticsOptions> attention_of(layers);
  attnscope::model::ForwardOptions forward_options;
  forward_options.capture.v = true;
  forward_options.logits = false;
  forward_options.layer_attention_inputs = [&](int l, const attnscope::RowMatrixView<float>& q,
                                               const attnscope::RowMatrixView<float>& k,
                                               const attnscope::stream::RowStatisticsOptions& attention) {
    queries_of[l] = q;
    keys_of[l] = k;
    attention_of[l] = attention;
  };
  const auto forward = model.forward(tokens, forward_options);
  std::vector<attnscope::kvcache::Policy> policies;
  for (const std::string& spec : specs) policies.push_back(attnscope::kvcache::parse_policy(spec));
  attnscope::kvcache::SimulationOptions simulation;
  simulation.evaluate_from = first;
  simulation.prefill = prefill;
  for (std::size_t p = 0; p < specs.size(); ++p) {
    const std::string prefix = "policy" + std::to_string(p);
    INFO(prefix);
    for (const char* name : {".lost_mass", ".output_error", ".oracle_lost_mass"}) {
      REQUIRE(arrays.count(prefix + name) == 1);
      CHECK(arrays.at(prefix + name).dtype() == attnscope::io::DType::float64);
      CHECK(arrays.at(prefix + name).shape() == std::vector<std::int64_t>{layers, heads, evaluated});
    }
    REQUIRE(arrays.count(prefix + ".cache_size") == 1);
    CHECK(arrays.at(prefix + ".cache_size").dtype() == attnscope::io::DType::int64);
    CHECK(arrays.at(prefix + ".cache_size").shape() == std::vector<std::int64_t>{layers, kv_heads, evaluated});
  }
  for (int l = 0; l < layers; ++l) {
    const Index value_size = forward.layers[l].v[0].cols();
    RowMatrix<float> values(length, kv_heads * value_size);
    for (int g = 0; g < kv_heads; ++g)
      values.middleCols(g * value_size, value_size) = forward.layers[l].v[g * (heads / kv_heads)];
    const auto expected = attnscope::kvcache::simulate_layer(queries_of[l], keys_of[l], values, heads, kv_heads,
                                                             attention_of[l], policies, simulation);
    for (std::size_t p = 0; p < specs.size(); ++p) {
      const std::string prefix = "policy" + std::to_string(p);
      const auto lost = arrays.at(prefix + ".lost_mass").to_vector<double>();
      const auto error = arrays.at(prefix + ".output_error").to_vector<double>();
      const auto sizes = arrays.at(prefix + ".cache_size").to_vector<std::int64_t>();
      for (int h = 0; h < heads; ++h)
        for (Index t = 0; t < evaluated; ++t) {
          const std::size_t at = (static_cast<std::size_t>(l * heads + h)) * evaluated + t;
          CHECK(lost[at] == Approx(expected[p].lost_mass(h, t)).margin(1e-12));
          CHECK(error[at] == Approx(expected[p].output_error(h, t)).margin(1e-12));
        }
      for (int g = 0; g < kv_heads; ++g)
        for (Index t = 0; t < evaluated; ++t)
          CHECK(sizes[(static_cast<std::size_t>(l * kv_heads + g)) * evaluated + t] == expected[p].cache_size(g, t));
    }
  }
  // CSV: a header and one row per (layer, head, policy)
  CHECK(cli_test::slurp(csv).rfind("# attnscope run: ", 0) == 0);  // the run record, then the table
  const std::string table = cli_test::csv_table(cli_test::slurp(csv));
  CHECK(table.rfind("layer,head,policy,spec,mean_lost_mass,p95_lost_mass,max_lost_mass,mean_output_error,oracle_gap\n", 0) == 0);
  CHECK(static_cast<std::size_t>(std::count(table.begin(), table.end(), '\n')) == 1 + layers * heads * specs.size());
  const std::string page = cli_test::slurp(html);
  CHECK(cli_test::contains(page, "<table id=\"heatmap\">"));
  CHECK(cli_test::contains(page, "<th>h2o:heavy=4,recent=4</th>"));
  CHECK(!cli_test::contains(page, "<script src"));  // self-contained
}

TEST_CASE("kvsim refuses bad command lines naming the option", "[kvcache][cli]") {
  const std::string folder = attnscope::testing::hf_fixture_folder("qwen2");
  const std::string base = "kvsim --model " + folder + " --tokens 1,2,3,4,5,6 --out " +
                           cli_test::path_in_work_dir("bad.npz");
  cli_test::check_failures({
      {base, "give at least one --policy SPEC", 2},
      {base + " --policy streaming:sink=4", "--policy: attnscope::kvcache::parse_policy: 'streaming:sink=4': missing field 'recent'", 2},
      {base + " --policy lru:size=3", "unknown policy 'lru'", 2},
      {base + " --policy snapkv:window=2,kernel=3,budget=4", "needs --prefill P", 2},
      {base + " --policy oracle:budget=2 --prefill 9", "--prefill 9 is longer than the 6 input tokens", 1},
      {base + " --policy oracle:budget=2 --evaluate-from 6", "--evaluate-from 6 leaves no query", 1},
      {base + " --policy snapkv:window=5,kernel=3,budget=6 --prefill 4", "window 5 is longer than the prefill (4)", 1},
      {"kvsim --tokens 1,2 --policy oracle:budget=2 --out x.npz", "give the model with --model", 2},
      {base + " --policy oracle:budget=2 --closed-loop", "unknown option --closed-loop", 2},
  });
  CHECK(cli_test::attnscope_command("kvsim --model " + folder + " --tokens 1,2 --policy oracle:budget=2 --out x.csv")
            .exit_code == 2);
}
