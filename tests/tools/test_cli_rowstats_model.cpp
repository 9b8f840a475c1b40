// Tests of `attnscope rowstats --checkpoint/--model` (the model's streaming forward), run as processes: on
// stories260K it writes the statistics that `rowstats` computes from the q/k that `attnscope capture` writes for the
// same tokens (dense forward); inputs beyond the trained length need --beyond-trained-length and say so; options
// that belong to the model or to a Q/K file are refused.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attnscope/io/npz.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "tools/cli_runner.hpp"

namespace {

using attnscope::testing::cli::attnscope_command;
using attnscope::testing::cli::contains;
using attnscope::testing::cli::path_in_work_dir;

const std::string stories_checkpoint = std::string(ATTNSCOPE_DATA) + "/stories260K.bin";

// "1,a,b,..." of `length` token ids below 512 (a fixed arithmetic pattern; BOS first).
std::string model_rowstats_token_list(int length) {
  std::string list = "1";
  for (int p = 1; p < length; ++p) list += "," + std::to_string((37 * p + 11) % 500 + 3);
  return list;
}

}  // namespace

TEST_CASE("attnscope rowstats --checkpoint equals rowstats of the q/k that capture writes for the same tokens") {
  const std::string tokens = model_rowstats_token_list(120);
  const std::string captured = path_in_work_dir("model_rowstats_capture.npz");
  const std::string from_file = path_in_work_dir("model_rowstats_file.npz");
  const std::string from_model = path_in_work_dir("model_rowstats_model.npz");
  REQUIRE(attnscope_command("capture --checkpoint " + stories_checkpoint + " --tokens " + tokens + " --out " + captured)
              .exit_code == 0);
  REQUIRE(attnscope_command("rowstats " + captured + " --top-k 1,4 --out " + from_file).exit_code == 0);
  const auto run = attnscope_command("rowstats --checkpoint " + stories_checkpoint + " --tokens " + tokens +
                                     " --top-k 1,4 --layers 0,4 --out " + from_model);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.out, "J_median"));
  CHECK_FALSE(contains(run.err, "beyond"));
  const auto file_rows = attnscope::io::read_npz(from_file);
  const auto model_rows = attnscope::io::read_npz(from_model);
  CHECK(model_rows.count("layer1.entropy") == 0);  // --layers 0,4
  // The file path is float32 statistics of the dense forward's q/k; the model path float32 statistics of the
  // streaming forward's q/k (equal at layer 0, within float rounding after): probabilities to 2e-5, logits,
  // log-partitions, entropies and ‖J‖₂ to 2e-4 (as tests/model/test_streaming_forward.cpp).
  for (const int layer : {0, 4}) {
    const std::string prefix = "layer" + std::to_string(layer) + ".";
    CHECK(model_rows.at(prefix + "heads").to_vector<int>() == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
    for (const char* name : {"entropy", "sink_mass", "max_weight", "max_scaled_logit", "log_partition",
                             "jacobian_norm", "top1_mass", "top4_mass"}) {
      INFO(prefix << name);
      const attnscope::RowMatrix<double> expected = file_rows.at(prefix + name).slice_matrix<double>({});
      const attnscope::RowMatrix<double> actual = model_rows.at(prefix + name).slice_matrix<double>({});
      REQUIRE(actual.rows() == 8);
      REQUIRE(actual.cols() == 120);
      const bool probability = std::string(name).find("mass") != std::string::npos ||
                               std::string(name) == "max_weight";
      CHECK((actual - expected).cwiseAbs().maxCoeff() <= (probability ? 2e-5 : 2e-4));
    }
  }
}

TEST_CASE("attnscope rowstats --model on every Hugging Face fixture equals the statistics of capture --model") {
  // The streaming forward (rowstats) against the dense capture of the same text: per layer, head and row, the max
  // scaled logit and log-partition from the captured scores (−inf where invisible: windows, softcaps and logit
  // scales included), the entropy and max weight from the captured attention. Tolerances as above.
  for (const std::string name : {"gpt2", "llama", "qwen2", "llama_rope", "smollm", "qwen3", "gemma2", "gemma3", "phi3",
                                 "gpt_neox", "olmo2"}) {
    INFO("fixture " << name);
    const std::string folder = attnscope::testing::hf_fixture_folder(name);
    const std::string text = " --text-file " + attnscope::testing::hf_fixture_sample_text();
    const std::string captured = path_in_work_dir("family_capture_" + name + ".npz");
    const std::string statistics = path_in_work_dir("family_rowstats_" + name + ".npz");
    REQUIRE(attnscope_command("capture --model " + folder + text + " --out " + captured).exit_code == 0);
    REQUIRE(attnscope_command("rowstats --model " + folder + text + " --out " + statistics).exit_code == 0);
    const auto dense = attnscope::io::read_npz(captured);
    const auto rows = attnscope::io::read_npz(statistics);
    double worst_logit = 0, worst_probability = 0;
    for (int layer = 0; dense.count("layer" + std::to_string(layer) + ".scores") != 0; ++layer) {
      const std::string prefix = "layer" + std::to_string(layer) + ".";
      const attnscope::io::Array& scores = dense.at(prefix + "scores");
      const attnscope::io::Array& attention = dense.at(prefix + "attention");
      const auto entropy = rows.at(prefix + "entropy").slice_matrix<double>({});
      const auto max_logit = rows.at(prefix + "max_scaled_logit").slice_matrix<double>({});
      const auto log_partition = rows.at(prefix + "log_partition").slice_matrix<double>({});
      const auto max_weight = rows.at(prefix + "max_weight").slice_matrix<double>({});
      for (std::int64_t head = 0; head < scores.shape()[0]; ++head) {
        const auto s = scores.slice_matrix<double>({head});
        const auto p = attention.slice_matrix<double>({head});
        for (Eigen::Index i = 0; i < s.rows(); ++i) {
          double top = -INFINITY, sum = 0, h = 0;
          for (Eigen::Index j = 0; j < s.cols(); ++j)
            if (std::isfinite(s(i, j))) top = std::max(top, s(i, j));
          for (Eigen::Index j = 0; j < s.cols(); ++j) {
            if (std::isfinite(s(i, j))) sum += std::exp(s(i, j) - top);
            if (p(i, j) > 0) h -= p(i, j) * std::log(p(i, j));
          }
          worst_logit = std::max({worst_logit, std::abs(max_logit(head, i) - top),
                                  std::abs(log_partition(head, i) - (top + std::log(sum))),
                                  std::abs(entropy(head, i) - h)});
          worst_probability = std::max(worst_probability, std::abs(max_weight(head, i) - p.row(i).maxCoeff()));
        }
      }
    }
    CHECK(worst_logit <= 2e-4);
    CHECK(worst_probability <= 2e-5);
  }
}

TEST_CASE("attnscope rowstats --checkpoint beyond the trained length, and the options it refuses") {
  const std::string long_tokens = model_rowstats_token_list(530);  // stories260K: seq_len 512
  const std::string out = path_in_work_dir("model_rowstats_long.npz");
  const auto refused = attnscope_command("rowstats --checkpoint " + stories_checkpoint + " --tokens " + long_tokens +
                                         " --no-jacobian --out " + out);
  CHECK(refused.exit_code != 0);
  CHECK(contains(refused.err, "530 tokens"));
  CHECK(contains(refused.err, "512 positions"));
  CHECK(contains(refused.err, "--beyond-trained-length"));
  CHECK(refused.out.empty());
  const auto beyond = attnscope_command("rowstats --checkpoint " + stories_checkpoint + " --tokens " + long_tokens +
                                        " --no-jacobian --layers 2 --heads 1,6 --beyond-trained-length --out " + out);
  REQUIRE(beyond.exit_code == 0);
  CHECK(contains(beyond.err, "beyond the model's trained length of 512 positions"));
  const auto rows = attnscope::io::read_npz(out);
  CHECK(rows.at("layer2.heads").to_vector<int>() == std::vector<int>{1, 6});
  const attnscope::RowMatrix<double> entropy = rows.at("layer2.entropy").slice_matrix<double>({});
  REQUIRE(entropy.cols() == 530);
  CHECK(entropy.allFinite());
  CHECK(std::abs(entropy(0, 0)) <= 1e-6);  // the first row sees one key
  CHECK(rows.count("layer2.jacobian_norm") == 0);

  const std::string short_tokens = model_rowstats_token_list(8);
  for (const auto& [arguments, message] : std::vector<std::pair<std::string, std::string>>{
           {"--window 4", "--window and --scale come from the model"},
           {"--full", "--window and --scale come from the model"},
           {"--heads 8", "head 8 is outside [0, 8)"},
           {"--layers 5", "the model has no layer 5"}}) {
    INFO(arguments);
    const auto run = attnscope_command("rowstats --checkpoint " + stories_checkpoint + " --tokens " + short_tokens +
                                       " " + arguments + " --out " + out);
    CHECK(run.exit_code != 0);
    CHECK(contains(run.err, message));
  }
  const auto both = attnscope_command("rowstats " + out + " --checkpoint " + stories_checkpoint + " --out " + out);
  CHECK(both.exit_code != 0);
  CHECK(contains(both.err, "not both"));
  const auto tokens_without_model = attnscope_command("rowstats " + out + " --tokens 1,2 --out " + out);
  CHECK(tokens_without_model.exit_code != 0);
  CHECK(contains(tokens_without_model.err, "--tokens needs --model PATH"));
}

TEST_CASE("attnscope rowstats --checkpoint at L = 4096 stays far below one L x L matrix (peak RSS of the process)") {
  // /usr/bin/time (Debian package `time`) reports the peak RSS of the command it runs, a fresh process: the number
  // does not depend on what this test binary allocated before. The dense forward holds a score and an attention
  // buffer of L × L floats per head: 2 × 64 MB at L = 4096. The streaming forward measured 39 MB for the whole
  // process (docs/performance.md); the bound 96 MB lies between the two.
  if (!std::filesystem::exists("/usr/bin/time")) {
    WARN("/usr/bin/time not installed: peak-memory check not run");
    return;
  }
  const std::string tokens_file = path_in_work_dir("model_rowstats_4096.txt");
  {
    std::ofstream ids(tokens_file);
    for (int p = 0; p < 4096; ++p) ids << (p == 0 ? 1 : (37 * p + 11) % 500 + 3) << "\n";
  }
  const std::string memory_file = path_in_work_dir("model_rowstats_peak_kb.txt");
  const std::string command = "/usr/bin/time -f %M -o " + memory_file + " " + std::string(ATTNSCOPE_BINARY_DIR) +
                              "/tools/attnscope rowstats --checkpoint " + stories_checkpoint + " --tokens-file " +
                              tokens_file + " --beyond-trained-length --no-jacobian --layers 4 --heads 7 --out " +
                              path_in_work_dir("model_rowstats_4096.npz") + " > /dev/null 2>&1";
  REQUIRE(std::system(command.c_str()) == 0);
  const long peak_kb = std::stol(attnscope::testing::cli::slurp(memory_file));
  INFO("peak RSS " << peak_kb << " KB");
  CHECK(peak_kb > 0);
  CHECK(peak_kb < 96 * 1024);
}

TEST_CASE("attnscope rowstats --checkpoint with --layers/--heads: the selected rows are bitwise those of a full run") {
  // Only the selected heads are analysed (the others run the same attention without statistics), so their arrays
  // equal the full run's rows of those heads exactly; a head or layer outside the model is an error naming it.
  const std::string tokens = model_rowstats_token_list(90);
  const std::string everything = path_in_work_dir("model_rowstats_all_heads.npz");
  const std::string selected = path_in_work_dir("model_rowstats_selected_heads.npz");
  const std::string model = "rowstats --checkpoint " + stories_checkpoint + " --tokens " + tokens + " --top-k 1,4";
  REQUIRE(attnscope_command(model + " --out " + everything).exit_code == 0);
  REQUIRE(attnscope_command(model + " --layers 3,1 --heads 6,0 --out " + selected).exit_code == 0);
  const auto all_rows = attnscope::io::read_npz(everything);
  const auto some_rows = attnscope::io::read_npz(selected);
  CHECK(some_rows.count("layer0.entropy") == 0);
  CHECK(some_rows.count("layer4.entropy") == 0);
  for (const int layer : {1, 3}) {
    const std::string prefix = "layer" + std::to_string(layer) + ".";
    CHECK(some_rows.at(prefix + "heads").to_vector<int>() == std::vector<int>{6, 0});
    for (const char* name : {"entropy", "sink_mass", "max_weight", "max_scaled_logit", "log_partition",
                             "jacobian_norm", "top1_mass", "top4_mass"}) {
      INFO(prefix << name);
      const attnscope::RowMatrix<double> full = all_rows.at(prefix + name).slice_matrix<double>({});
      const attnscope::RowMatrix<double> part = some_rows.at(prefix + name).slice_matrix<double>({});
      REQUIRE(part.rows() == 2);
      CHECK((part.row(0).array() == full.row(6).array()).all());
      CHECK((part.row(1).array() == full.row(0).array()).all());
    }
  }
  const auto no_head = attnscope_command(model + " --heads 8 --out " + selected);
  CHECK(no_head.exit_code == 1);
  CHECK(contains(no_head.err, "head 8 is outside [0, 8)"));
  const auto no_layer = attnscope_command(model + " --layers 5 --out " + selected);
  CHECK(no_layer.exit_code == 1);
  CHECK(contains(no_layer.err, "no layer 5"));
}
