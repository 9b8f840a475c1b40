// Tests of `attnscope generate`, run as processes: its --stats arrays are the rows of `rowstats --model` on the
// prompt plus the generated tokens (row P - 1 + s for step s; stories260K, the gpt-oss fixture with learned sinks and
// a sliding window, gpt2-wp-mini), its tokens those of Transformer::generate_greedy / generate_sampled, the sink rate
// the mean key-0 weight of rowstats' first rows, the retrieval score that of analysis::retrieval_score; the text on
// stdout; --stop-at-eos; and every refusal named.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attnscope/analysis/sink_rate.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/model/load.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "tools/cli_runner.hpp"

namespace {

using attnscope::testing::cli::attnscope_command;
using attnscope::testing::cli::check_failures;
using attnscope::testing::cli::contains;
using attnscope::testing::cli::path_in_work_dir;

const std::string generate_stories = std::string(ATTNSCOPE_DATA) + "/stories260K.bin";

// The largest |a - b| over two matrices of one shape.
double rows_gap(const attnscope::RowMatrix<double>& a, const attnscope::RowMatrix<double>& b) {
  REQUIRE(a.rows() == b.rows());
  REQUIRE(a.cols() == b.cols());
  return a.size() == 0 ? 0.0 : (a - b).cwiseAbs().maxCoeff();
}

// "1,2,3" of token ids.
std::string generate_id_list(const std::vector<int>& tokens) {
  std::string list;
  for (const int token : tokens) list += (list.empty() ? "" : ",") + std::to_string(token);
  return list;
}

// Runs generate with --stats (model option `model`, input option `input`, extra options, the layers and the head
// selection `heads`, e.g. "--heads 0,2"), then rowstats --model with the same selection on the tokens it wrote, and
// checks every statistic of step s against row P - 1 + s, the sink rate against rowstats'
// key-0 column and the retrieval score against analysis::retrieval_score. Returns the generate arrays.
std::map<std::string, attnscope::io::Array> check_generate_against_rowstats(const std::string& model,
                                                                            const std::string& input,
                                                                            const std::string& extra,
                                                                            const std::vector<int>& layers,
                                                                            const std::vector<std::string>& names,
                                                                            const std::string& heads = "") {
  const std::string stats = path_in_work_dir("generate_stats.npz"), rows = path_in_work_dir("generate_rowstats.npz");
  const std::string layer_list = generate_id_list(layers);
  const auto run = attnscope_command("generate " + model + " " + input + " --stats " + stats + " --layers " +
                                     layer_list + " --top-k 1,4 --sink-rate-queries 8 " + extra + " " + heads);
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const auto generated = attnscope::io::read_npz(stats);
  const std::vector<int> tokens = generated.at("tokens").to_vector<int>();
  const std::int64_t prompt_length = generated.at("prompt_length").to_vector<std::int64_t>().at(0);
  CHECK(generated.at("prompt_length").rank() == 0);
  const std::int64_t steps = std::int64_t(tokens.size()) - prompt_length;
  REQUIRE(steps > 0);
  REQUIRE(attnscope_command("rowstats " + model + " --tokens " + generate_id_list(tokens) + " --layers " + layer_list +
                            " --top-k 1,4 --out " + rows + " " + heads)
              .exit_code == 0);
  const auto full = attnscope::io::read_npz(rows);
  std::vector<double> sink_scores;
  for (const int layer : layers) {
    const std::string prefix = "layer" + std::to_string(layer) + ".";
    CHECK(generated.at(prefix + "heads").to_vector<int>() == full.at(prefix + "heads").to_vector<int>());
    for (const std::string& name : names) {
      INFO(prefix << name);
      const attnscope::RowMatrix<double> step_rows = generated.at(prefix + name).to_matrix<double>();
      const attnscope::RowMatrix<double> all_rows = full.at(prefix + name).to_matrix<double>();
      REQUIRE(step_rows.cols() == steps);
      // bitwise with the packed GEMM (AVX2 + FMA); float rounding of a row alone otherwise (model tests)
      CHECK(rows_gap(step_rows, all_rows.middleCols(prompt_length - 1, steps)) <= 2e-4);
#if defined(__AVX2__) && defined(__FMA__)
      CHECK(step_rows == all_rows.middleCols(prompt_length - 1, steps));
#endif
    }
    // the sink rate: the mean key-0 weight (rowstats' sink_mass with the default sink key 0) of the first 8 rows
    const attnscope::RowMatrix<double> sink_mass = full.at(prefix + "sink_mass").to_matrix<double>();
    const std::vector<double> rates = generated.at(prefix + "sink_score").to_vector<double>();
    REQUIRE(rates.size() == std::size_t(sink_mass.rows()));
    for (std::size_t h = 0; h < rates.size(); ++h) {
      CHECK(rates[h] == Approx(sink_mass.row(attnscope::Index(h)).head(8).mean()).epsilon(1e-12));
      sink_scores.push_back(rates[h]);
    }
    if (generated.count(prefix + "retrieval_score")) {
      const auto keys = generated.at(prefix + "most_attended_key").to_matrix<std::int64_t>();
      const std::vector<double> retrieval = generated.at(prefix + "retrieval_score").to_vector<double>();
      for (std::size_t h = 0; h < retrieval.size(); ++h)
        CHECK(retrieval[h] == attnscope::analysis::retrieval_score(
                                  keys.row(attnscope::Index(h)).cast<attnscope::Index>(), tokens, prompt_length, 1, 5));
    }
  }
  CHECK(generated.at("sink_rate_fraction").to_vector<double>() ==
        attnscope::analysis::sink_rate(sink_scores).fraction);
  return generated;
}

const std::vector<std::string> step_statistic_names = {"entropy", "sink_mass", "max_weight", "max_scaled_logit",
                                                   "log_partition", "jacobian_norm", "top1_mass", "top4_mass"};

}  // namespace

TEST_CASE("attnscope generate --stats: each step is rowstats --model's row of the generated sequence (stories260K)") {
  const auto generated = check_generate_against_rowstats("--checkpoint " + generate_stories, "--tokens 1,403,407,405",
                                                         "--steps 30", {0, 3, 4}, step_statistic_names);
  const auto transformer = attnscope::model::load_model(generate_stories);
  CHECK(generated.at("tokens").to_vector<int>() == transformer.generate_greedy({1, 403, 407, 405}, 30));
  CHECK(generated.at("layer0.most_attended_key").shape() == std::vector<std::int64_t>{8, 30});
}

TEST_CASE("attnscope generate --stats on gpt-oss (learned sinks, sliding window) and gpt2-wp-mini with a needle") {
  std::vector<std::string> names = step_statistic_names;
  names.insert(names.end(), {"learned_sink", "entropy_with_sink", "content_mass"});
  const std::string gpt_oss = attnscope::testing::hf_fixture_folder("gpt_oss");
  // sampling: the tokens of generate_sampled with the same temperature and seed
  const auto sampled = check_generate_against_rowstats("--model " + gpt_oss, "--tokens 5,17,40,2,99,7",
                                                       "--steps 20 --temperature 0.8 --seed 3", {0, 1}, names);
  const auto transformer = attnscope::model::load_model(gpt_oss);
  CHECK(sampled.at("tokens").to_vector<int>() == transformer.generate_sampled({5, 17, 40, 2, 99, 7}, 20, 0.8, 3));
  const auto needle = check_generate_against_rowstats(
      "--model " + std::string(ATTNSCOPE_DATA) + "/gpt2-wp-mini",
      "--text \"Pierre said to Natasha that Pierre\"", "--steps 12 --needle 1:5", {1},
      {"entropy", "max_weight", "top4_mass"}, "--heads 0,2");
  CHECK(needle.at("layer1.retrieval_score").shape() == std::vector<std::int64_t>{2});
}

TEST_CASE("attnscope generate prints the text as it goes; --stop-at-eos stops after the end token") {
  const std::string gpt2 = attnscope::testing::hf_fixture_folder("gpt2");
  const auto run = attnscope_command("generate --model " + gpt2 + " --text \"The cat sat\" --steps 5");
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.rfind("The cat sat", 0) == 0);  // the prompt, then the continuation
  CHECK(run.out.size() > std::string("The cat sat\n").size());
  CHECK(contains(run.err, "generated 5 tokens"));
  // stories260K: ids on stdout; stop at a token the greedy run produces at step 3
  const auto transformer = attnscope::model::load_model(generate_stories);
  const std::vector<int> greedy = transformer.generate_greedy({1, 403}, 10);
  const int stop = greedy[2 + 3];
  const std::size_t first = std::size_t(std::find(greedy.begin() + 2, greedy.end(), stop) - greedy.begin());
  const std::string stats = path_in_work_dir("generate_eos.npz");
  const auto stopped = attnscope_command("generate --checkpoint " + generate_stories + " --tokens 1,403 --steps 10 " +
                                         "--stop-at-eos --eos-token " + std::to_string(stop) + " --stats " + stats);
  REQUIRE(stopped.exit_code == 0);
  const std::vector<int> expected(greedy.begin(), greedy.begin() + std::ptrdiff_t(first) + 1);
  CHECK(attnscope::io::read_npz(stats).at("tokens").to_vector<int>() == expected);
  std::string ids;
  for (const int token : expected) ids += (ids.empty() ? "" : " ") + std::to_string(token);
  CHECK(stopped.out == ids + "\n");
}

TEST_CASE("attnscope generate: bad input is refused with a message naming it") {
  const std::string model = "--checkpoint " + generate_stories + " --tokens 1,403,407 ";
  const std::string gpt2 = "--model " + attnscope::testing::hf_fixture_folder("gpt2") + " --tokens 1,2,3 ";
  check_failures({
      {"generate " + model, "missing required option --steps", 2},
      {"generate " + model + "--steps -1", "--steps", 2},
      {"generate " + model + "--steps x", "--steps", 2},
      {"generate " + model + "--steps 0 --stats " + path_in_work_dir("g.npz"), "--stats needs --steps >= 1", 2},
      {"generate " + gpt2 + "--steps 62", "the prompt's 3 tokens + --steps 62 exceed the model's seq_len 64", 1},
      {"generate " + model + "--steps 2 --stats " + path_in_work_dir("g.npz") + " --needle 1:4",
       "--needle 1:4 is not inside the prompt's 3 positions", 1},
      {"generate " + model + "--steps 2 --stats " + path_in_work_dir("g.npz") + " --needle 2:1",
       "--needle: END must be greater than START", 2},
      {"generate " + model + "--steps 2 --stats " + path_in_work_dir("g.npz") + " --needle 2",
       "--needle: expected START:END", 2},
      {"generate " + model + "--steps 2 --needle 0:2", "--needle needs --stats", 2},
      {"generate " + model + "--steps 2 --top-k 1", "--top-k needs --stats", 2},
      {"generate " + model + "--steps 2 --stats " + path_in_work_dir("g.txt"), "--stats must end in .npz", 2},
      {"generate " + model + "--steps 2 --stats " + path_in_work_dir("no_such_folder/g.npz"), "--stats", 1},
      {"generate " + model + "--steps 2 --stats " + path_in_work_dir("g.npz") + " --layers 9",
       "--layers names layer 9 but the model has 5 layers", 1},
      {"generate " + model + "--steps 2 --stats " + path_in_work_dir("g.npz") + " --heads 8",
       "--heads names head 8", 1},
      {"generate " + model + "--steps 2 --stats " + path_in_work_dir("g.npz") + " --sink-keys 3",
       "--sink-keys names key 3, past the prompt's 3 positions", 1},
      {"generate " + model + "--steps 2 --stats " + path_in_work_dir("g.npz") + " --sink-threshold 0.2,x",
       "--sink-threshold: expected comma-separated numbers", 2},
      {"generate " + model + "--steps 2 --stats " + path_in_work_dir("g.npz") + " --sink-rate-queries 0",
       "--sink-rate-queries", 2},
      {"generate " + model + "--steps 2 --seed 3", "--seed needs --temperature", 2},
      {"generate " + model + "--steps 2 --temperature -1", "--temperature: expected a finite number >= 0", 2},
      {"generate " + model + "--steps 2 --temperature nan", "--temperature: expected a finite number >= 0", 2},
      {"generate " + model + "--steps 2 --eos-token 2", "--eos-token needs --stop-at-eos", 2},
      {"generate --tokens 1 --steps 2", "give the model with --model PATH", 2},
      {"generate " + model + "--steps 2 extra", "", 2},
      {"generate --checkpoint " + generate_stories + " --tokens 1,9999 --steps 2", "9999", 1},
  });
}
