// Tests of `attnscope merge` on real studies, run as processes on stories260K: rowstats shards of one document split
// by --layers and --heads merge into the single run's file, bit for bit; rowstats of two documents join along their
// columns with run and position arrays and one record per document; reports split by --layers (JSON) merge into the
// full report; report CSVs of two documents get a run column; and shards made differently (another --top-k, another
// --sink-keys) or a layer split over different tokens are refused naming the field.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io/array_file.hpp"
#include "attnscope/io/run_options.hpp"
#include "support/catch.hpp"
#include "tools/cli_runner.hpp"

namespace {

using attnscope::testing::cli::attnscope_command;
using attnscope::testing::cli::contains;
using attnscope::testing::cli::path_in_work_dir;
using attnscope::testing::cli::slurp;
namespace io = attnscope::io;

const std::string study_checkpoint = std::string(ATTNSCOPE_DATA) + "/stories260K.bin";
const std::string document_a = " --tokens 1,403,407,262,226,266,4,351,8,12";
const std::string document_b = " --tokens 1,18,59,107,34,290,6";

/// Runs attnscope and requires success.
void run_ok(const std::string& arguments) {
  const auto run = attnscope_command(arguments);
  INFO("attnscope " << arguments << "\n" << run.err);
  REQUIRE(run.exit_code == 0);
}

/// The arrays of a file by name, as owned arrays.
std::vector<std::pair<std::string, io::Array>> arrays_of(const std::string& path) {
  std::vector<std::pair<std::string, io::Array>> arrays;
  const io::ArrayFile file(path);
  for (const io::MappedArray& array : file.arrays()) arrays.emplace_back(array.name(), array.to_array());
  return arrays;
}

const io::Array& named(const std::vector<std::pair<std::string, io::Array>>& arrays, const std::string& name) {
  for (const auto& entry : arrays)
    if (entry.first == name) return entry.second;
  FAIL("no array " << name);
  throw;
}

}  // namespace

TEST_CASE("attnscope merge: rowstats split by --layers and --heads give the single run's file; two documents a study") {
  const std::string rowstats = "rowstats --checkpoint " + study_checkpoint + " --top-k 1,4 --out ";
  const std::string whole_a = path_in_work_dir("study_a.npz"), whole_b = path_in_work_dir("study_b.npz");
  run_ok(rowstats + whole_a + document_a);
  run_ok(rowstats + whole_b + document_b);
  std::string shards;
  for (const std::string layers : {"0,1", "2,3,4"})
    for (const std::string heads : {"0,1,2,3", "4,5,6,7"}) {
      const std::string shard = path_in_work_dir("study_a_" + layers + "_" + heads + ".npz");
      run_ok(rowstats + "'" + shard + "'" + document_a + " --layers " + layers + " --heads " + heads);
      shards = " '" + shard + "'" + shards;  // the last shard first: the order of the inputs does not matter
    }
  const std::string merged_a = path_in_work_dir("study_a_merged.npz");
  run_ok("merge --concatenate --out " + merged_a + shards);
  CHECK(slurp(merged_a) == slurp(whole_a));  // byte for byte: arrays, order and record

  // a shard of document b beside document a's shards: a study of two documents
  const std::string study = path_in_work_dir("study.npz");
  run_ok("merge --concatenate --out " + study + " " + whole_b + shards);
  const auto joined = arrays_of(study), a = arrays_of(whole_a), b = arrays_of(whole_b);
  const std::vector<std::int32_t> run = named(joined, "run").to_vector<std::int32_t>();
  const std::vector<std::int32_t> position = named(joined, "position").to_vector<std::int32_t>();
  REQUIRE(run.size() == 7 + 10);
  for (std::size_t i = 0; i < run.size(); ++i) {
    CHECK(run[i] == (i < 7 ? 0 : 1));
    CHECK(position[i] == static_cast<std::int32_t>(i < 7 ? i : i - 7));
  }
  for (const std::string name : {"layer0.entropy", "layer4.top4_mass", "layer2.jacobian_norm"}) {
    INFO(name);
    const std::vector<double> study_values = named(joined, name).to_vector<double>();
    const std::vector<double> values_a = named(a, name).to_vector<double>(), values_b = named(b, name).to_vector<double>();
    REQUIRE(study_values.size() == 8 * 17);
    for (std::size_t h = 0; h < 8; ++h)
      for (std::size_t i = 0; i < 17; ++i)
        CHECK(study_values[h * 17 + i] == (i < 7 ? values_b[h * 7 + i] : values_a[h * 10 + i - 7]));
  }
  const io::RunOptions record = io::read_run_options(io::ArrayFile(study));
  const nlohmann::json runs = nlohmann::json::parse(record.at("runs"));
  REQUIRE(runs.size() == 2);
  CHECK(runs[0]["token_ids"] == "1,18,59,107,34,290,6");
  CHECK(runs[1]["token_ids"] == "1,403,407,262,226,266,4,351,8,12");
  CHECK(record.at("top_k") == "1,4");
  CHECK(record.count("token_ids") == 0);

  // refused: another --top-k (named), a layer split over different tokens, a study merged again
  const std::string other_k = path_in_work_dir("study_k.npz"), layer_b = path_in_work_dir("study_b_layer0.npz");
  run_ok("rowstats --checkpoint " + study_checkpoint + " --top-k 1,8 --out " + other_k + document_b);
  run_ok(rowstats + layer_b + document_b + " --layers 0");
  const auto different_k = attnscope_command("merge --out " + path_in_work_dir("x.npz") + " " + whole_a + " " + other_k);
  CHECK(different_k.exit_code == 1);
  CHECK(contains(different_k.err, "run option top_k is '1,4' in " + whole_a + " but '1,8' in " + other_k));
  const std::string layer_a = path_in_work_dir("study_a_0,1_0,1,2,3.npz");
  const auto split = attnscope_command("merge --out " + path_in_work_dir("x.npz") + " '" + layer_a + "' " + layer_b);
  CHECK(split.exit_code == 1);
  CHECK(contains(split.err, "must have the same tokens"));
  CHECK(contains(split.err, "token_ids"));
  const auto again = attnscope_command("merge --out " + path_in_work_dir("x.npz") + " " + study + " " + whole_a);
  CHECK(again.exit_code == 1);
  CHECK(contains(again.err, "already a study"));
}

TEST_CASE("attnscope merge: reports split by --layers merge into the full report; CSVs of two documents a study") {
  const std::string report = "report " + study_checkpoint + " --basic";
  const std::string full = path_in_work_dir("report_full.json");
  run_ok(report + document_a + " --json " + full);
  const std::string first = path_in_work_dir("report_l01.json"), rest = path_in_work_dir("report_l234.json");
  run_ok(report + document_a + " --layers 0,1 --json " + first);
  run_ok(report + document_a + " --layers 2,3,4 --json " + rest);
  const std::string merged = path_in_work_dir("report_merged.json");
  run_ok("merge --out " + merged + " " + rest + " " + first);
  const nlohmann::json whole = nlohmann::json::parse(slurp(full)), joined = nlohmann::json::parse(slurp(merged));
  CHECK(joined["heads"] == whole["heads"]);
  CHECK(joined["columns"] == whole["columns"]);
  REQUIRE(joined["runs"].size() == 1);
  CHECK(joined["runs"][0]["layers"] == "0,1,2,3,4");
  CHECK(joined["runs"][0]["token_ids"] == whole["runs"][0]["token_ids"]);

  const std::string csv_a = path_in_work_dir("report_a.csv"), csv_b = path_in_work_dir("report_b.csv");
  run_ok(report + document_a + " --csv " + csv_a);
  run_ok(report + document_b + " --csv " + csv_b);
  const std::string study = path_in_work_dir("report_study.csv");
  run_ok("merge --out " + study + " " + csv_a + " " + csv_b);
  const io::CsvWithRuns parsed = io::split_csv_runs(slurp(study), study);
  const io::CsvWithRuns a = io::split_csv_runs(slurp(csv_a), csv_a), b = io::split_csv_runs(slurp(csv_b), csv_b);
  REQUIRE(parsed.runs.size() == 2);
  CHECK(parsed.runs[0] == a.runs[0]);
  CHECK(parsed.runs[1] == b.runs[0]);
  CHECK(parsed.header == "run," + a.header);
  REQUIRE(parsed.rows.size() == a.rows.size() + b.rows.size());
  for (std::size_t i = 0; i < a.rows.size(); ++i) CHECK(parsed.rows[i] == "0," + a.rows[i]);
  for (std::size_t i = 0; i < b.rows.size(); ++i) CHECK(parsed.rows[a.rows.size() + i] == "1," + b.rows[i]);

  const std::string other_sink = path_in_work_dir("report_sink.csv");
  run_ok(report + document_b + " --sink-keys 0,1 --csv " + other_sink);
  const auto refused = attnscope_command("merge --out " + path_in_work_dir("x.csv") + " " + csv_a + " " + other_sink);
  CHECK(refused.exit_code == 1);
  CHECK(contains(refused.err, "run option sink_keys is '0' in " + csv_a + " but '0,1' in " + other_sink));
}
