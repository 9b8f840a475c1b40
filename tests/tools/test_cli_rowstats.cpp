// Tests of `attnscope rowstats` and `attnscope merge`, run as processes: the statistics written for every (layer,
// head) equal the dense computation (normalize module on the materialized softmax), head/layer selection, errors,
// and the scale-out recipe — shards by layer or by head, run one after another or with GNU parallel, merged with
// `attnscope merge`, give byte-identical arrays to one run; CSV and JSON merging.
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/safetensors.hpp"
#include "attnscope/normalize/entropy.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "attnscope/normalize/spectral_norm.hpp"
#include "tools/cli_runner.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::testing::cli::contains;
using attnscope::testing::cli::path_in_work_dir;
using RowstatsRun = attnscope::testing::cli::Run;

std::string attnscope_binary() { return std::string(ATTNSCOPE_BINARY_DIR) + "/tools/attnscope"; }

/// Runs a shell command line (several commands, GNU parallel; the attnscope binary is $ATTNSCOPE) and captures the
/// output of all of it.
RowstatsRun rowstats_shell(const std::string& command_line) {
  const std::string out = path_in_work_dir("shell_stdout.txt"), err = path_in_work_dir("shell_stderr.txt");
  const std::string command =
      "ATTNSCOPE=" + attnscope_binary() + "; { " + command_line + "; } > " + out + " 2> " + err;
  const int status = std::system(command.c_str());
  RowstatsRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = attnscope::testing::cli::slurp(out);
  run.err = attnscope::testing::cli::slurp(err);
  return run;
}

RowstatsRun rowstats_command(const std::string& arguments) { return attnscope::testing::cli::attnscope_command(arguments); }

/// A capture-like Q/K file: layer{l}.q / layer{l}.k of shape [heads, length, dimension], float64, seeded.
std::string write_query_key_file(const std::string& name, int layers, std::int64_t heads, std::int64_t length,
                                 std::int64_t dimension) {
  attnscope::Random random(1301);
  attnscope::io::NamedArrays arrays;
  for (int l = 0; l < layers; ++l)
    for (const char* which : {"q", "k"}) {
      std::vector<double> values(static_cast<std::size_t>(heads * length * dimension));
      for (double& value : values) value = 1.5 * random.normal();
      arrays.emplace_back("layer" + std::to_string(l) + "." + which,
                          attnscope::io::Array::from_vector(values, {heads, length, dimension}));
    }
  const std::string path = path_in_work_dir(name);
  attnscope::io::write_npz(path, arrays, attnscope::io::Compression::stored);
  return path;
}

}  // namespace

TEST_CASE("attnscope rowstats writes the dense per-row statistics of every head") {
  const std::int64_t length = 37, dimension = 6;
  const std::string input = write_query_key_file("qk.npz", 2, 3, length, dimension);
  const std::string output = path_in_work_dir("rows.npz");
  const RowstatsRun run = rowstats_command("rowstats " + input + " --out " + output + " --top-k 1,4 --sink-keys 0,2");
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.out, "J_median"));
  const auto inputs = attnscope::io::read_npz(input);
  const auto rows = attnscope::io::read_npz(output);
  for (int layer = 0; layer < 2; ++layer)
    for (std::int64_t head = 0; head < 3; ++head) {
      INFO("layer " << layer << ", head " << head);
      const std::string prefix = "layer" + std::to_string(layer) + ".";
      const attnscope::RowMatrix<double> q = inputs.at(prefix + "q").slice_matrix<double>({head});
      const attnscope::RowMatrix<double> k = inputs.at(prefix + "k").slice_matrix<double>({head});
      const attnscope::RowMatrix<double> logits = (q * k.transpose()).eval() / std::sqrt(double(dimension));
      const attnscope::RowMatrix<double> p = attnscope::softmax(logits, 1.0, attnscope::causal);
      const auto entropy = attnscope::row_entropy(p, attnscope::causal);
      const auto norms = attnscope::softmax_jacobian_spectral_norm(p, 1.0, attnscope::causal);
      const auto column = [&](const std::string& name) { return rows.at(prefix + name).slice_matrix<double>({}).row(head); };
      for (std::int64_t i = 0; i < length; ++i) {
        CHECK(column("entropy")(i) == Approx(entropy(i)).epsilon(1e-9).margin(1e-12));
        CHECK(column("jacobian_norm")(i) == Approx(norms(i)).epsilon(1e-9).margin(1e-12));
        CHECK(column("max_weight")(i) == Approx(p.row(i).maxCoeff()).epsilon(1e-12));
        CHECK(column("top1_mass")(i) == Approx(p.row(i).maxCoeff()).epsilon(1e-12));
        CHECK(column("sink_mass")(i) == Approx(p(i, 0) + (i >= 2 ? p(i, 2) : 0.0)).epsilon(1e-12));
        CHECK(column("max_scaled_logit")(i) == Approx(logits.row(i).head(i + 1).maxCoeff()).epsilon(1e-12).margin(1e-12));
        double partition = 0;
        for (std::int64_t j = 0; j <= i; ++j) partition += std::exp(logits(i, j));
        CHECK(column("log_partition")(i) == Approx(std::log(partition)).epsilon(1e-12).margin(1e-12));
      }
    }
  CHECK(rows.at("layer1.heads").to_vector<int>() == std::vector<int>{0, 1, 2});
}

TEST_CASE("attnscope rowstats: layer and head selection, safetensors input and output, --help, errors") {
  const std::string input = write_query_key_file("qk_select.npz", 2, 3, 20, 4);
  const std::string output = path_in_work_dir("select.safetensors");
  const RowstatsRun run = rowstats_command("rowstats " + input + " --out " + output + " --layers 1 --heads 2,0 --window 5");
  REQUIRE(run.exit_code == 0);
  const auto rows = attnscope::io::read_safetensors(output);
  CHECK(rows.count("layer0.entropy") == 0);
  CHECK(rows.at("layer1.entropy").shape() == std::vector<std::int64_t>{2, 20});
  CHECK(rows.at("layer1.heads").to_vector<int>() == std::vector<int>{2, 0});
  CHECK(rows.at("layer1.sink_mass").slice_matrix<double>({}).rightCols(15).isZero());  // key 0 left every window
  // safetensors input (memory-mapped by io::MappedSafetensors) gives the bytes the NPZ input gives
  const std::string converted = path_in_work_dir("qk_select.safetensors");
  REQUIRE(rowstats_command("merge --out " + converted + " " + input).exit_code == 0);
  REQUIRE(rowstats_command("rowstats " + converted + " --out " + path_in_work_dir("from_st.npz")).exit_code == 0);
  REQUIRE(rowstats_command("rowstats " + input + " --out " + path_in_work_dir("from_npz.npz")).exit_code == 0);
  {  // the same statistics, byte for byte; only the recorded run options differ (the input's path and CRC-32)
    const auto from_st = attnscope::io::read_npz_ordered(path_in_work_dir("from_st.npz"));
    const auto from_npz = attnscope::io::read_npz_ordered(path_in_work_dir("from_npz.npz"));
    REQUIRE(from_st.size() == from_npz.size());
    for (std::size_t i = 0; i < from_st.size(); ++i) {
      CHECK(from_st[i].first == from_npz[i].first);
      if (from_st[i].first != "run_options") CHECK(from_st[i].second.bytes() == from_npz[i].second.bytes());
    }
  }
  for (const std::string command : {"rowstats", "merge"}) {
    const RowstatsRun help = rowstats_command(command + " --help");
    CHECK(help.exit_code == 0);
    CHECK(contains(help.out, "usage: attnscope " + command));
  }
  attnscope::testing::cli::check_failures({
      {"rowstats " + input, "missing required option --out", 2},
      {"rowstats --out x.npz", "expected exactly one INPUT", 2},
      {"rowstats " + input + " --out x.txt", "--out must end in .npz or .safetensors", 2},
      {"rowstats " + input + " --out " + output + " --heads 3", "head 3 is outside [0, 3)", 1},
      {"rowstats " + input + " --out " + output + " --layers 4", "has no layer 4", 1},
      {"rowstats " + input + " --out " + output + " --top-k 0", "--top-k: expected k >= 1, got 0", 2},
      {"rowstats " + input + " --out " + output + " --window 0", "--window: expected an integer in [1", 2},
      {"rowstats " + input + " --out " + output + " --sink-keys 20", "sink key 20 is outside [0, 20)", 1},
      {"rowstats /nonexistent.npz --out " + output, "/nonexistent.npz", 1},
      {"rowstats " + output + " --out " + path_in_work_dir("again.npz"), "holds neither layer0.q / layer0.k", 1},
  });
}

TEST_CASE("scale-out recipe: shards by layer and by head, merged, equal one run (also with GNU parallel)") {
  const std::string input = write_query_key_file("qk_shards.npz", 2, 4, 25, 4);
  const std::string whole = path_in_work_dir("whole.npz");
  REQUIRE(rowstats_command("rowstats " + input + " --out " + whole).exit_code == 0);
  const auto require_same = [&](const std::string& merged) {
    attnscope::testing::cli::require_same_npz_arrays(merged, whole);
  };
  // by layer: disjoint array names
  for (const char* layer : {"0", "1"})
    REQUIRE(rowstats_command("rowstats " + input + " --layers " + layer + " --out " +
                             path_in_work_dir(std::string("layer") + layer + ".npz")).exit_code == 0);
  const std::string by_layer = path_in_work_dir("by_layer.npz");
  REQUIRE(rowstats_command("merge --out " + by_layer + " " + path_in_work_dir("layer0.npz") + " " +
                           path_in_work_dir("layer1.npz")).exit_code == 0);
  require_same(by_layer);
  // by head: the same names in both shards, joined along the head axis
  const RowstatsRun clash = rowstats_shell("$ATTNSCOPE rowstats " + input + " --heads 0,1 --out " +
                                           path_in_work_dir("h01.npz") + " && $ATTNSCOPE rowstats " + input +
                                           " --heads 2,3 --out " + path_in_work_dir("h23.npz") + " && $ATTNSCOPE merge --out " +
                                           path_in_work_dir("clash.npz") + " " + path_in_work_dir("h01.npz") + " " +
                                           path_in_work_dir("h23.npz"));
  CHECK(clash.exit_code == 1);
  CHECK(contains(clash.err, "differs from an earlier input's (use --concatenate"));
  const std::string by_head = path_in_work_dir("by_head.npz");
  REQUIRE(rowstats_command("merge --concatenate --out " + by_head + " " + path_in_work_dir("h01.npz") + " " +
                           path_in_work_dir("h23.npz")).exit_code == 0);
  require_same(by_head);
  // the documented GNU parallel recipe (docs/cli.md), when parallel is installed
  if (std::system("command -v parallel > /dev/null 2>&1") == 0) {
    const std::string shards = path_in_work_dir("parallel");
    const RowstatsRun recipe = rowstats_shell(
        "mkdir -p " + shards + " && parallel --will-cite -j 2 $ATTNSCOPE rowstats " + input +
        " --layers {} --out " + shards + "/layer{}.npz ::: 0 1 && $ATTNSCOPE merge --out " + shards + "/all.npz " +
        shards + "/layer0.npz " + shards + "/layer1.npz");
    INFO(recipe.err);
    REQUIRE(recipe.exit_code == 0);
    require_same(shards + "/all.npz");
  } else {
    WARN("GNU parallel not installed: the parallel form of the recipe was not run");
  }
}

TEST_CASE("attnscope merge joins CSV tables and JSON reports and rejects mismatches") {
  const std::string first = path_in_work_dir("a.csv"), second = path_in_work_dir("b.csv"), merged = path_in_work_dir("ab.csv");
  std::ofstream(first) << "layer,head,entropy\n0,0,1.5\n0,1,2.5\n";
  std::ofstream(second) << "layer,head,entropy\n1,0,0.5\n";
  REQUIRE(rowstats_command("merge --out " + merged + " " + first + " " + second).exit_code == 0);
  CHECK(attnscope::testing::cli::slurp(merged) == "layer,head,entropy\n0,0,1.5\n0,1,2.5\n1,0,0.5\n");
  std::ofstream(second) << "layer,head,sink\n1,0,0.5\n";
  const RowstatsRun header = rowstats_command("merge --out " + merged + " " + first + " " + second);
  CHECK(header.exit_code == 1);
  CHECK(contains(header.err, "has CSV header 'layer,head,sink'"));

  const std::string json_a = path_in_work_dir("a.json"), json_b = path_in_work_dir("b.json"), json = path_in_work_dir("ab.json");
  std::ofstream(json_a) << R"({"columns": ["entropy"], "heads": [{"layer": 0, "head": 0, "entropy": 1.5}]})";
  std::ofstream(json_b) << R"({"columns": ["entropy"], "heads": [{"layer": 1, "head": 0, "entropy": 0.5}]})";
  REQUIRE(rowstats_command("merge --out " + json + " " + json_a + " " + json_b).exit_code == 0);
  const std::string merged_json = attnscope::testing::cli::slurp(json);
  CHECK(contains(merged_json, "\"layer\": 1"));
  CHECK(contains(merged_json, "\"layer\": 0"));
  std::ofstream(json_b) << R"({"columns": ["sink"], "heads": []})";
  const RowstatsRun clash = rowstats_command("merge --out " + json + " " + json_a + " " + json_b);
  CHECK(clash.exit_code == 1);
  CHECK(contains(clash.err, "key 'columns' differs"));
  const RowstatsRun kinds = rowstats_command("merge --out " + json + " " + first);
  CHECK(kinds.exit_code == 2);
  CHECK(contains(kinds.err, "is not of the kind of --out"));
}
