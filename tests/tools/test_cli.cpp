// Tests of the `attnscope` command (tools/attnscope.cpp and tools/command_*.cpp), run as a process: --help, usage and runtime errors
// (non-zero exit, message on stderr), capture → report round trips against the library, and normalize.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io/capture_layout.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/io.hpp"
#include "attnscope/analysis.hpp"
#include "attnscope/model.hpp"
#include "attnscope/normalize/maps.hpp"
#include "support/catch.hpp"
#include "support/data.hpp"
#include "support/random_matrices.hpp"
#include "tools/cli_runner.hpp"

namespace {

namespace fs = std::filesystem;
using attnscope::RowMatrix;
using namespace attnscope::testing::cli;

std::string checkpoint() { return attnscope::testing::data_file("stories260K.bin"); }

const attnscope::model::LlamaModel& llama() {
  static const attnscope::model::LlamaModel model = attnscope::model::LlamaModel::load(checkpoint());
  return model;
}

}  // namespace

TEST_CASE("every subcommand's --help exits 0 and prints its usage") {
  for (const std::string command : {"capture", "report", "tokenize", "normalize"}) {
    const Run run = attnscope_command(command + " --help");
    CHECK(run.exit_code == 0);
    CHECK(contains(run.out, "usage: attnscope " + command));
    CHECK(run.err.empty());
  }
  const Run general = attnscope_command("--help");
  CHECK(general.exit_code == 0);
  CHECK(contains(general.out, "capture"));
  CHECK(contains(general.out, "normalize"));
}

TEST_CASE("bad arguments give a non-zero exit and a message on stderr") {
  const std::string ckpt = checkpoint();
  const std::string out = path_in_work_dir("bad.npz");
  const std::vector<ExpectedFailure> cases = {
      {"", "missing command", 2},
      {"frobnicate", "unknown command 'frobnicate'", 2},
      {"capture --checkpoint " + ckpt, "missing required option --out", 2},
      {"capture --checkpoint " + ckpt + " --out x.txt", "--out must end in .npz or .safetensors", 2},
      {"capture --checkpoint " + ckpt + " --out " + out + " --bogus 1", "unknown option --bogus", 2},
      {"capture --checkpoint " + ckpt + " --out " + out + " --tokens 1,600", "token 600 at position 1", 1},
      {"capture --checkpoint " + ckpt + " --out " + out + " --tokens 1,x", "--tokens: expected an integer", 2},
      {"capture --checkpoint " + ckpt + " --out " + out + " --tokens 1 --tokens-file f", "only one of --tokens", 2},
      {"capture --checkpoint " + ckpt + " --out " + out + " --text hello", "need a model with a tokenizer", 2},
      {"capture --checkpoint " + ckpt + " --out " + out + " --tokens 1 --special-tokens", "--special-tokens applies",
       2},
      {"capture --checkpoint " + ckpt + " --out " + out + " --tokens 1 --add-special-tokens",
       "--add-special-tokens applies", 2},
      {"capture --checkpoint " + ckpt + " --model " + ckpt + " --out " + out, "either --model or --checkpoint", 2},
      {"capture --model " + ckpt + "_missing --out " + out, "--model expects a Hugging Face model folder", 1},
      {"capture --checkpoint " + ckpt + " --out " + out + " --tokens 1 --max-tokens 0", "--max-tokens", 2},
      {"capture --checkpoint " + ckpt + " --out " + out + " --generate -4", "--generate: expected an integer", 2},
      {"capture --checkpoint " + ckpt + " --out " + out + " --generate 600", "exceeds seq_len 512", 1},
      {"capture --checkpoint " + ckpt + " --out " + out + " --map ssmax:-1", "s must be finite and > 0", 2},
      {"capture --checkpoint /nonexistent/model.bin --out " + out, "/nonexistent/model.bin", 1},
      {"capture --checkpoint " + attnscope::testing::data_file("war_and_peace.txt") + " --out " + out,
       "war_and_peace.txt", 1},
      {"report", "expected exactly one INPUT", 2},
      {"report /nonexistent.npz", "/nonexistent.npz", 1},
      {"report x.npz --generate 3", "x.npz", 1},  // the format is read from the content: a missing file is a data error
      {"report x.npz --model " + ckpt, "without INPUT", 2},
      {"normalize --map softmax", "expected exactly one input", 2},
      {"normalize --map nope in.npy -o out.npy", "unknown normalization map 'nope'", 2},
      {"normalize --map softmax /nonexistent.npy -o out.npy", "/nonexistent.npy", 1},
      {"capture --threads many --checkpoint " + ckpt + " --out " + out, "--threads: expected an integer", 2},
  };
  check_failures(cases);
  CHECK(!fs::exists(out));
}

TEST_CASE("capture writes the documented arrays, equal to the library's forward pass") {
  const std::string out = path_in_work_dir("capture.npz");
  const Run run = attnscope_command("capture --checkpoint " + checkpoint() + " --tokens 1,45,20,300 --generate 12 --out " + out);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.err, "16 tokens"));
  const auto arrays = attnscope::io::read_npz(out);
  // per layer q, k, v, scores, attention; tokens, logits, the layout version, the run record
  CHECK(arrays.size() == 5 * 5 + 4);
  CHECK(arrays.count("run_options") == 1);
  CHECK(arrays.at(attnscope::io::capture_layout_key).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{attnscope::io::capture_layout_version});

  const std::vector<int> tokens = llama().generate_greedy({1, 45, 20, 300}, 12);
  CHECK(arrays.at("tokens").to_vector<int>() == tokens);
  attnscope::model::ForwardOptions options;
  options.capture = attnscope::model::CaptureOptions::everything();
  const auto expected = llama().forward(tokens, options);
  CHECK(arrays.at("logits").to_matrix<float>() == expected.logits);
  for (int l = 0; l < 5; ++l) {
    const std::string prefix = "layer" + std::to_string(l) + ".";
    CHECK(arrays.at(prefix + "q").shape() == std::vector<std::int64_t>{8, 16, 8});
    CHECK(arrays.at(prefix + "attention").shape() == std::vector<std::int64_t>{8, 16, 16});
    for (std::int64_t h = 0; h < 8; ++h) {
      const auto& layer = expected.layers[std::size_t(l)];
      CHECK(arrays.at(prefix + "q").slice_matrix<float>({h}) == layer.q[std::size_t(h)]);
      CHECK(arrays.at(prefix + "k").slice_matrix<float>({h}) == layer.k[std::size_t(h)]);
      CHECK(arrays.at(prefix + "v").slice_matrix<float>({h}) == layer.v[std::size_t(h)]);
      CHECK(arrays.at(prefix + "scores").slice_matrix<float>({h}) == layer.scores[std::size_t(h)]);
      CHECK(arrays.at(prefix + "attention").slice_matrix<float>({h}) == layer.attention[std::size_t(h)]);
    }
  }
  const RowMatrix<float> scores = arrays.at("layer3.scores").slice_matrix<float>({2});
  CHECK(scores(4, 5) == -std::numeric_limits<float>::infinity());
  CHECK(arrays.at("layer3.attention").slice_matrix<float>({2})(4, 5) == 0.0f);
}

TEST_CASE("capture → report round trip: the table equals the library's head report; safetensors gives the same") {
  const std::string npz = path_in_work_dir("round.npz"), safetensors = path_in_work_dir("round.safetensors");
  REQUIRE(attnscope_command("capture --checkpoint " + checkpoint() + " --generate 40 --out " + npz).exit_code == 0);
  REQUIRE(attnscope_command("capture --checkpoint " + checkpoint() + " --generate 40 --out " + safetensors).exit_code == 0);
  const std::string csv = path_in_work_dir("round.csv"), json = path_in_work_dir("round.json");
  const Run report = attnscope_command("report " + npz + " --basic --csv " + csv + " --json " + json);
  REQUIRE(report.exit_code == 0);
  CHECK(contains(report.out, "40 heads, L = 41"));
  CHECK(contains(report.out, "sink_mass"));
  CHECK(contains(report.out, "max_jacobian_norm"));

  attnscope::model::ForwardOptions options;
  options.capture = attnscope::model::CaptureOptions::attention_only();
  options.capture.v = true;
  const auto expected = attnscope::analysis::compute_head_report(
      attnscope::analysis::head_inputs(llama().forward(llama().generate_greedy({1}, 40), options)),
      attnscope::analysis::default_report_columns());
  const auto written = nlohmann::json::parse(slurp(json));
  REQUIRE(written["heads"].size() == 40);
  CHECK(written["columns"].get<std::vector<std::string>>() == expected.columns);
  for (std::size_t i = 0; i < 40; ++i)
    for (std::size_t c = 0; c < expected.columns.size(); ++c)
      CHECK(written["heads"][i][expected.columns[c]].get<double>() == Approx(expected.rows[i].values[c]).epsilon(1e-12));
  CHECK(slurp(csv).rfind("# attnscope run: ", 0) == 0);  // the run record, then the table
  CHECK(csv_table(slurp(csv)) == attnscope::analysis::head_report_csv(expected));

  const std::string csv2 = path_in_work_dir("round2.csv");
  REQUIRE(attnscope_command("report " + safetensors + " --basic --csv " + csv2).exit_code == 0);
  CHECK(csv_table(slurp(csv2)) == csv_table(slurp(csv)));
  // A checkpoint INPUT captures first: the same tokens give the same table.
  const std::string csv3 = path_in_work_dir("round3.csv");
  REQUIRE(attnscope_command("report " + checkpoint() + " --basic --generate 40 --csv " + csv3).exit_code == 0);
  CHECK(csv_table(slurp(csv3)) == csv_table(slurp(csv)));
  // Without --basic the analysis modules' columns follow the six standard ones.
  const std::string json4 = path_in_work_dir("round4.json");
  REQUIRE(attnscope_command("report " + npz + " --columns all --json " + json4).exit_code == 0);
  const auto full = nlohmann::json::parse(slurp(json4));
  CHECK(full["columns"].size() == 12);
  CHECK(full["columns"][8] == "sink_score");
  CHECK(full["columns"][9] == "causal_stable_rank");
  CHECK(full["heads"][5]["entropy"] == written["heads"][5]["entropy"]);
}

TEST_CASE("report reads attention arrays of shape [heads, L, L] and [layers, heads, L, L] from NPY") {
  attnscope::model::ForwardOptions options;
  options.capture.attention = true;
  const auto result = llama().forward(llama().generate_greedy({1}, 19), options);
  std::vector<float> all;
  for (const auto& layer : result.layers)
    for (const auto& head : layer.attention) all.insert(all.end(), head.data(), head.data() + head.size());
  const std::string four = path_in_work_dir("attention4.npy"), three = path_in_work_dir("attention3.npy");
  attnscope::io::write_npy(four, attnscope::io::Array::from_vector(all, {5, 8, 20, 20}));
  attnscope::io::write_npy(three, attnscope::io::Array::from_vector(
                                      std::vector<float>(all.begin() + 8 * 400, all.begin() + 16 * 400), {8, 20, 20}));
  const std::string json4 = path_in_work_dir("a4.json"), json3 = path_in_work_dir("a3.json");
  REQUIRE(attnscope_command("report " + four + " --json " + json4).exit_code == 0);
  REQUIRE(attnscope_command("report " + three + " --json " + json3).exit_code == 0);
  const auto report4 = nlohmann::json::parse(slurp(json4)), report3 = nlohmann::json::parse(slurp(json3));
  REQUIRE(report4["heads"].size() == 40);
  REQUIRE(report3["heads"].size() == 8);
  CHECK(report4["heads"][8]["entropy"] == report3["heads"][0]["entropy"]);  // layer 1 head 0
  CHECK(report4["heads"][8]["layer"] == 1);
  CHECK(report3["heads"][0]["max_scaled_logit"].is_null());  // no scores in an attention-only file
  CHECK(report3["heads"][0]["sink_mass"].get<double>() ==
        Approx(result.layers[1].attention[0].col(0).cast<double>().mean()).epsilon(1e-12));
  // A wrong rank is an error naming the file.
  const std::string flat = path_in_work_dir("flat.npy");
  attnscope::io::write_npy(flat, attnscope::io::Array::from_vector(std::vector<float>(5, 0.2f), {5}));
  const Run bad = attnscope_command("report " + flat);
  CHECK(bad.exit_code == 1);
  CHECK(contains(bad.err, "flat.npy"));
}

TEST_CASE("normalize applies a map row-wise, -inf entries are masked, dtype is kept") {
  attnscope::Random random(17);
  RowMatrix<double> logits = attnscope::testing::random_logits(random, 12, 9, 3.0);
  for (long i = 0; i < 12; ++i)
    for (long j = i + 1; j < 9; ++j) logits(i, j) = -std::numeric_limits<double>::infinity();  // causal
  const std::vector<double> values(logits.data(), logits.data() + logits.size());
  const std::string in = path_in_work_dir("logits.npy"), out = path_in_work_dir("weights.npy");
  attnscope::io::write_npy(in, attnscope::io::Array::from_vector(values, {3, 4, 9}));
  for (const std::string map : {"softmax", "ssmax:0.5", "sparsemax", "temperature:3"}) {
    INFO(map);
    REQUIRE(attnscope_command("normalize --map " + map + " " + in + " -o " + out).exit_code == 0);
    const auto result = attnscope::io::read_npy(out);
    CHECK(result.dtype() == attnscope::io::DType::float64);
    CHECK(result.shape() == std::vector<std::int64_t>{3, 4, 9});
    const RowMatrix<double> expected =
        attnscope::apply_map(attnscope::parse_normalization_map(map), logits, attnscope::Causal{});
    const auto got = result.to_vector<double>();
    CHECK(std::vector<double>(expected.data(), expected.data() + expected.size()) == got);
  }
  attnscope::io::write_npy(in, attnscope::io::Array::from_vector(std::vector<float>{1.0f, 2.0f, 3.0f}, {3}));
  REQUIRE(attnscope_command("normalize --map softmax " + in + " --out " + out).exit_code == 0);
  const auto result = attnscope::io::read_npy(out);
  CHECK(result.dtype() == attnscope::io::DType::float32);
  CHECK(result.to_vector<float>()[2] == Approx(std::exp(2.0) / (1 + std::exp(1.0) + std::exp(2.0))).epsilon(1e-6));
  // NaN and fully masked rows are errors.
  attnscope::io::write_npy(in, attnscope::io::Array::from_vector(std::vector<double>{1.0, std::nan("")}, {1, 2}));
  Run bad = attnscope_command("normalize --map softmax " + in + " -o " + out);
  CHECK(bad.exit_code == 1);
  CHECK(contains(bad.err, "nan"));
  const double minus_inf = -std::numeric_limits<double>::infinity();
  attnscope::io::write_npy(in, attnscope::io::Array::from_vector(std::vector<double>{minus_inf, minus_inf}, {1, 2}));
  bad = attnscope_command("normalize --map softmax " + in + " -o " + out);
  CHECK(bad.exit_code == 1);
  CHECK(contains(bad.err, "every key masked"));
}
