// Tests that every output of attnscope records its run (io/run_options.hpp), run as processes: the token ids, the
// text source (file and CRC-32, --from, --max-tokens), the model (path, architecture, weight types), the options and
// the version, in capture's NPZ and safetensors, rowstats's arrays, report's CSV (a "# attnscope run:" comment line
// that pandas.read_csv(comment="#") skips), JSON and HTML header, compare's CSV and page, kvsim's NPZ, CSV and page,
// generate's --stats.
// The ids recorded are the ids the capture stored, and the CRC-32s are those of the text file and of the ids.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io/array_file.hpp"
#include "attnscope/io/capture_layout.hpp"
#include "attnscope/io/run_options.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "tools/cli_runner.hpp"

namespace {

using attnscope::testing::cli::attnscope_command;
using attnscope::testing::cli::contains;
using attnscope::testing::cli::path_in_work_dir;
using attnscope::testing::cli::slurp;
namespace io = attnscope::io;

/// The record of the first "# attnscope run: " line of a CSV (fails the test when there is none).
io::RunOptions csv_record(const std::string& path) {
  const io::CsvWithRuns csv = io::split_csv_runs(slurp(path), path);
  REQUIRE(csv.runs.size() == 1);
  return csv.runs.front();
}

/// "1,2,3" of an int32 array.
std::string joined_ids(const io::ArrayFile& file, const std::string& name) {
  REQUIRE(file.find(name) != nullptr);
  return io::join_integers(file.find(name)->to_array().to_vector<std::int32_t>());
}

}  // namespace

TEST_CASE("attnscope capture, rowstats and report record the token ids, the text source, the model and the version") {
  const std::string folder = attnscope::testing::hf_fixture_folder("gpt2");
  const std::string text_file = attnscope::testing::hf_fixture_sample_text();
  const std::string input = " --model " + folder + " --text-file " + text_file + " --from the --max-tokens 9";
  const std::string capture_npz = path_in_work_dir("provenance_capture.npz");
  const std::string capture_st = path_in_work_dir("provenance_capture.safetensors");
  for (const std::string& out : {capture_npz, capture_st}) {
    const auto run = attnscope_command("capture" + input + " --no-logits --out " + out);
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
  }
  const io::ArrayFile capture(capture_npz);
  const io::RunOptions captured = io::read_run_options(capture);
  const std::string ids = joined_ids(capture, "tokens");
  std::vector<int> id_list;
  for (const std::int32_t id : capture.find("tokens")->to_array().to_vector<std::int32_t>()) id_list.push_back(id);
  CHECK(id_list.size() == 9);
  CHECK(captured.at("token_ids") == ids);
  CHECK(captured.at("tokens") == "9");
  CHECK(captured.at("tokens_crc32") == io::tokens_crc32(id_list));
  CHECK(captured.at("text_file") == text_file);
  CHECK(captured.at("text_crc32") == io::file_crc32(text_file));
  CHECK(captured.at("from") == "the");
  CHECK(captured.at("max_tokens") == "9");
  CHECK(captured.at("model") == folder);
  CHECK(captured.at("architecture") == "gpt2");
  CHECK(captured.at("model_dtype") == "float32");
  CHECK(captured.at("attnscope_version") == io::attnscope_version);
  CHECK(captured.at("command") == "capture");
  CHECK(captured.at("map") == "softmax");
  io::RunOptions metadata = io::read_run_options(io::ArrayFile(capture_st));  // safetensors: the record as metadata,
  CHECK(metadata.erase(io::capture_layout_key) == 1);                          // beside the layout version
  CHECK(metadata == captured);

  // rowstats from the model and from the capture: both name the model and the ids
  const std::string rows_model = path_in_work_dir("provenance_rows_model.npz");
  const std::string rows_file = path_in_work_dir("provenance_rows_file.safetensors");
  REQUIRE(attnscope_command("rowstats" + input + " --top-k 1,2 --out " + rows_model).exit_code == 0);
  const auto from_file = attnscope_command("rowstats " + capture_npz + " --top-k 1,2 --out " + rows_file);
  INFO(from_file.err);
  REQUIRE(from_file.exit_code == 0);
  const io::RunOptions model_rows = io::read_run_options(io::ArrayFile(rows_model));
  const io::RunOptions file_rows = io::read_run_options(io::ArrayFile(rows_file));
  for (const io::RunOptions* rows : {&model_rows, &file_rows}) {
    CHECK(rows->at("command") == "rowstats");
    CHECK(rows->at("token_ids") == ids);
    CHECK(rows->at("model") == folder);
    CHECK(rows->at("top_k") == "1,2");
    CHECK(rows->at("attnscope_version") == io::attnscope_version);
  }
  CHECK(model_rows.at("text_crc32") == io::file_crc32(text_file));
  CHECK(file_rows.at("input") == capture_npz);
  CHECK(file_rows.at("input_crc32") == io::file_crc32(capture_npz));

  // report: CSV comment line, JSON runs and the HTML header carry one record
  const std::string csv = path_in_work_dir("provenance_report.csv"), json = path_in_work_dir("provenance_report.json");
  const std::string html = path_in_work_dir("provenance_report.html");
  const auto report = attnscope_command("report" + input + " --basic --sort entropy --csv " + csv + " --json " + json +
                                        " --html " + html);
  INFO(report.err);
  REQUIRE(report.exit_code == 0);
  const io::RunOptions reported = csv_record(csv);
  CHECK(reported.at("command") == "report");
  CHECK(reported.at("token_ids") == ids);
  CHECK(reported.at("text_file") == text_file);
  CHECK(reported.at("model_dtype") == "float32");
  CHECK(reported.at("sort") == "entropy");
  CHECK(slurp(csv).rfind("# attnscope run: {", 0) == 0);
  const nlohmann::json document = nlohmann::json::parse(slurp(json));
  REQUIRE(document["runs"].size() == 1);
  CHECK(io::run_options_from_json(document["runs"][0], json) == reported);
  const std::string page = slurp(html);
  CHECK(contains(page, "<details class=\"run\""));  // the header: the record's summary line and table
  CHECK(contains(page, "<th>model</th><td>" + folder + "</td>"));
  CHECK(contains(page, "<th>token_ids</th><td>" + ids + "</td>"));
  CHECK(contains(page, "<th>attnscope_version</th><td>" + std::string(io::attnscope_version) + "</td>"));
  CHECK(contains(page, "<th>text_crc32</th><td>" + io::file_crc32(text_file) + "</td>"));

  // report of the capture file: the file and its CRC-32, and the capture's model and ids; no warning about the record
  const std::string file_csv = path_in_work_dir("provenance_file_report.csv");
  const auto file_report = attnscope_command("report " + capture_npz + " --basic --csv " + file_csv);
  REQUIRE(file_report.exit_code == 0);
  CHECK_FALSE(contains(file_report.err, "ignored arrays"));
  const io::RunOptions file_reported = csv_record(file_csv);
  CHECK(file_reported.at("input_crc32") == io::file_crc32(capture_npz));
  CHECK(file_reported.at("token_ids") == ids);
  CHECK(file_reported.at("model") == folder);
}

TEST_CASE("attnscope compare, kvsim and generate record their runs in every output") {
  const std::string folder = attnscope::testing::hf_fixture_folder("llama");
  const std::string csv = path_in_work_dir("provenance_compare.csv"), html = path_in_work_dir("provenance_compare.html");
  const auto compare = attnscope_command("compare --model " + folder + " --model " + folder +
                                         " --tokens 1,5,9,13,17 --top-k 2 --csv " + csv + " --html " + html);
  INFO(compare.err);
  REQUIRE(compare.exit_code == 0);
  const io::RunOptions compared = csv_record(csv);
  CHECK(compared.at("command") == "compare");
  CHECK(compared.at("a_model") == folder);
  CHECK(compared.at("b_architecture") == "llama");
  CHECK(compared.at("token_ids") == "1,5,9,13,17");
  CHECK(compared.at("top_k") == "2");
  CHECK(contains(slurp(html), "<th>token_ids</th><td>1,5,9,13,17</td>"));

  const std::string stories = std::string(ATTNSCOPE_DATA) + "/stories260K.bin";
  const std::string npz = path_in_work_dir("provenance_kv.npz"), kv_csv = path_in_work_dir("provenance_kv.csv");
  const std::string kv_html = path_in_work_dir("provenance_kv.html");
  const auto kvsim = attnscope_command("kvsim --checkpoint " + stories + " --tokens 1,2,3,4,5,6 --policy "
                                       "oracle:budget=2 --out " + npz + " --csv " + kv_csv + " --html " + kv_html);
  INFO(kvsim.err);
  REQUIRE(kvsim.exit_code == 0);
  const io::RunOptions simulated = io::read_run_options(io::ArrayFile(npz));
  CHECK(simulated.at("token_ids") == "1,2,3,4,5,6");
  CHECK(simulated.at("model") == stories);
  CHECK(simulated.at("model_dtype") == "float32");
  CHECK(simulated.at("policy0") == "oracle:budget=2");
  CHECK(csv_record(kv_csv) == simulated);
  CHECK(contains(slurp(kv_html), "<th>policy0</th><td>oracle:budget=2</td>"));

  // generate --stats: the prompt and the generated tokens, as its tokens array holds them
  const std::string stats = path_in_work_dir("provenance_generate.npz");
  const auto generate = attnscope_command("generate --checkpoint " + stories + " --tokens 1,2,3 --steps 4 --stats " +
                                          stats);
  INFO(generate.err);
  REQUIRE(generate.exit_code == 0);
  const io::ArrayFile generated(stats);
  const io::RunOptions generated_run = io::read_run_options(generated);
  REQUIRE(generated.find("tokens") != nullptr);
  CHECK(generated_run.at("token_ids") ==
        io::join_integers(generated.find("tokens")->to_array().to_vector<std::int64_t>()));
  CHECK(generated_run.at("tokens") == "7");
  CHECK(generated_run.at("command") == "generate");
  CHECK(generated_run.at("architecture") == "llama2.c");
}
