// Tests of the guarantees that keep results trustworthy, run as processes: rowstats refuses Q/K files it cannot
// analyse, every rowstats / report output records its run options, merge refuses shards that cannot be merged and
// sorts the ones that can, exit codes (2 = usage only; data errors exit 1 without the usage text), errors naming the
// file, --from / --skip-tokens on text inputs, capture --layers / --no-logits, and the report's default columns.
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/core/random.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/safetensors.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/data.hpp"
#include "tools/cli_runner.hpp"
#include "support/catch.hpp"

namespace {

using attnscope::testing::cli::contains;
using attnscope::testing::cli::path_in_work_dir;
using TrustRun = attnscope::testing::cli::Run;

TrustRun trust_command(const std::string& arguments) { return attnscope::testing::cli::attnscope_command(arguments); }

/// A Q/K file layer{l}.q / layer{l}.k [heads, length, dimension], float64, seeded.
std::string trust_query_key_file(const std::string& name, int layers, std::int64_t heads, std::int64_t length,
                                 std::int64_t dimension, std::uint64_t seed = 2808) {
  attnscope::Random random(seed);
  attnscope::io::NamedArrays arrays;
  for (int l = 0; l < layers; ++l)
    for (const char* which : {"q", "k"}) {
      std::vector<double> values(static_cast<std::size_t>(heads * length * dimension));
      for (double& value : values) value = random.normal();
      arrays.emplace_back("layer" + std::to_string(l) + "." + which,
                          attnscope::io::Array::from_vector(values, {heads, length, dimension}));
    }
  const std::string path = path_in_work_dir(name);
  attnscope::io::write_npz(path, arrays, attnscope::io::Compression::stored);
  return path;
}

/// zlib's CRC-32 of bytes, as 8 lowercase hex digits (an independent computation of the recorded checksums).
std::string trust_crc32(const std::string& bytes) {
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size()));
  char text[16];
  std::snprintf(text, sizeof text, "%08lx", static_cast<unsigned long>(crc));
  return text;
}

/// The run options of an NPZ written by rowstats: the JSON held byte by byte in the int32 array "run_options".
std::map<std::string, std::string> trust_npz_run_options(const std::string& path) {
  const auto arrays = attnscope::io::read_npz(path);
  REQUIRE(arrays.count("run_options") == 1);
  std::string text;
  for (const std::int32_t byte : arrays.at("run_options").to_vector<std::int32_t>()) text.push_back(static_cast<char>(byte));
  return nlohmann::json::parse(text).get<std::map<std::string, std::string>>();
}

/// Arrays of an NPZ read back in file order, without the run options (the statistics only).
attnscope::io::NamedArrays trust_statistics(const std::string& path) {
  attnscope::io::NamedArrays arrays;
  for (auto& entry : attnscope::io::read_npz_ordered(path))
    if (entry.first != "run_options") arrays.push_back(std::move(entry));
  return arrays;
}

std::string trust_stories() { return attnscope::testing::data_file("stories260K.bin"); }

}  // namespace

TEST_CASE("rowstats refuses Q/K files with no heads, no rows or d = 0 (exit 1, naming the file and the axis)") {
  const std::string out = path_in_work_dir("trust_empty_axis.npz");
  const struct {
    std::int64_t heads, length, dimension;
    const char* axis;
  } cases[] = {{2, 0, 4, "has no rows (L)"}, {2, 5, 0, "has no dimensions (d)"}, {0, 5, 4, "has no heads (H)"}};
  for (const auto& c : cases) {
    const std::string input = trust_query_key_file("trust_axis_" + std::string(c.axis).substr(7, 4) + ".npz", 1,
                                                   c.heads, c.length, c.dimension);
    INFO(input);
    const TrustRun run = trust_command("rowstats " + input + " --out " + out);
    CHECK(run.exit_code == 1);
    CHECK(contains(run.err, input));
    CHECK(contains(run.err, c.axis));
    CHECK(!contains(run.err, "--help`"));  // a data error, not a usage error
    CHECK(!std::ifstream(out).good());
  }
}

TEST_CASE("rowstats records its run options: input CRC-32, map, dtype, scale, window, causal, sink keys, top-k") {
  const std::string input = trust_query_key_file("trust_options.npz", 1, 2, 9, 4);
  const std::string npz = path_in_work_dir("trust_options_rows.npz"), st = path_in_work_dir("trust_options_rows.safetensors");
  REQUIRE(trust_command("rowstats " + input + " --out " + npz + " --top-k 1,3 --sink-keys 0,2 --window 4").exit_code == 0);
  const auto options = trust_npz_run_options(npz);
  CHECK(options.at("command") == "rowstats");
  CHECK(options.at("input") == input);
  CHECK(options.at("input_crc32") == trust_crc32(attnscope::testing::cli::slurp(input)));
  CHECK(options.at("map") == "softmax");
  CHECK(options.at("dtype") == "float64");
  CHECK(options.at("scale") == "1/sqrt(d)");
  CHECK(options.at("window") == "4");
  CHECK(options.at("causal") == "true");
  CHECK(options.at("sink_keys") == "0,2");
  CHECK(options.at("top_k") == "1,3");
  // safetensors: the same options as __metadata__
  REQUIRE(trust_command("rowstats " + input + " --out " + st + " --top-k 1,3 --sink-keys 0,2 --window 4").exit_code == 0);
  CHECK(attnscope::io::read_safetensors_contents(st).metadata == options);
  // the model path: the model and the CRC-32 of the token ids (little-endian int32)
  const std::string model_rows = path_in_work_dir("trust_model_rows.npz");
  REQUIRE(trust_command("rowstats --checkpoint " + trust_stories() + " --tokens 1,5,9 --out " + model_rows).exit_code == 0);
  const auto model_options = trust_npz_run_options(model_rows);
  CHECK(model_options.at("model") == trust_stories());
  CHECK(model_options.at("tokens_crc32") == trust_crc32(std::string("\1\0\0\0\5\0\0\0\x09\0\0\0", 12)));
  CHECK(model_options.at("dtype") == "float64");
}

TEST_CASE("merge refuses shards that cannot be merged: one shard twice, other top-k, causal vs window, full vs causal") {
  const std::string input = trust_query_key_file("trust_shards.npz", 1, 4, 12, 4);
  const auto shard = [&](const std::string& name, const std::string& options) {
    const std::string out = path_in_work_dir(name);
    REQUIRE(trust_command("rowstats " + input + " --out " + out + " " + options).exit_code == 0);
    return out;
  };
  const std::string h01 = shard("trust_h01.npz", "--heads 0,1"), h23 = shard("trust_h23.npz", "--heads 2,3");
  const std::string merged = path_in_work_dir("trust_merged.npz");
  attnscope::testing::cli::check_failures({
      {"merge --concatenate --out " + merged + " " + h01 + " " + h01,
       "head 0 of layer 0 appears twice (overlapping shards, or one shard given twice)", 1},
      {"merge --concatenate --out " + merged + " " + h01 + " " + shard("trust_h23_top.npz", "--heads 2,3 --top-k 8"),
       "run option top_k is '1,8,64' in " + h01 + " but '8' in", 1},
      {"merge --concatenate --out " + merged + " " + h01 + " " + shard("trust_h23_window.npz", "--heads 2,3 --window 3"),
       "run option window is 'none' in " + h01 + " but '3' in", 1},
      {"merge --concatenate --out " + merged + " " + h01 + " " + shard("trust_h23_full.npz", "--heads 2,3 --full"),
       "run option causal is 'true' in " + h01 + " but 'false' in", 1},
      {"merge --concatenate --out " + merged + " " + h01 + " " + shard("trust_h23_sinks.npz", "--heads 2,3 --sink-keys 1"),
       "run option sink_keys is '0'", 1},
      {"merge --concatenate --out " + merged + " " + h01 + " " + shard("trust_h23_nojac.npz", "--heads 2,3 --no-jacobian"),
       "run option jacobian_norm is 'true'", 1},
  });
  // another input file (other contents): another CRC-32
  const std::string other_input = trust_query_key_file("trust_shards_other.npz", 1, 4, 12, 4, 99);
  const std::string other = path_in_work_dir("trust_other_h23.npz");
  REQUIRE(trust_command("rowstats " + other_input + " --heads 2,3 --out " + other).exit_code == 0);
  const TrustRun mixed = trust_command("merge --concatenate --out " + merged + " " + h01 + " " + other);
  CHECK(mixed.exit_code == 1);
  CHECK(contains(mixed.err, "analysed another document than"));
  CHECK(contains(mixed.err, "covers other heads"));
  CHECK(!contains(mixed.err, "--help`"));
  // the same shards in either order give the one-run arrays (heads sorted, whatever the order of the inputs)
  const std::string whole = shard("trust_whole.npz", "");
  for (const auto& order : {h01 + " " + h23, h23 + " " + h01}) {
    REQUIRE(trust_command("merge --concatenate --out " + merged + " " + order).exit_code == 0);
    attnscope::testing::cli::require_same_npz_arrays(merged, whole);
    CHECK(trust_npz_run_options(merged) == trust_npz_run_options(whole));
  }
}

TEST_CASE("merge sorts shards by head index (glob order head10 < head2) and by layer, and refuses what it cannot order") {
  const std::string input = trust_query_key_file("trust_many_heads.npz", 2, 12, 6, 3);
  const std::string whole = path_in_work_dir("trust_many_whole.npz");
  REQUIRE(trust_command("rowstats " + input + " --out " + whole).exit_code == 0);
  std::string shards;  // in shell-glob order of head0.npz ... head11.npz: 0, 1, 10, 11, 2, 3, ...
  for (const int head : {0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9}) {
    const std::string out = path_in_work_dir("trust_head" + std::to_string(head) + ".npz");
    REQUIRE(trust_command("rowstats " + input + " --heads " + std::to_string(head) + " --out " + out).exit_code == 0);
    shards += " " + out;
  }
  const std::string merged = path_in_work_dir("trust_many_merged.npz");
  REQUIRE(trust_command("merge --concatenate --out " + merged + shards).exit_code == 0);
  attnscope::testing::cli::require_same_npz_arrays(merged, whole);
  CHECK(attnscope::io::read_npz(merged).at("layer1.heads").to_vector<int>() ==
        std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  // by layer, the later layer first: the arrays come out in layer order
  const std::string layer0 = path_in_work_dir("trust_layer0.npz"), layer1 = path_in_work_dir("trust_layer1.npz");
  REQUIRE(trust_command("rowstats " + input + " --layers 0 --out " + layer0).exit_code == 0);
  REQUIRE(trust_command("rowstats " + input + " --layers 1 --out " + layer1).exit_code == 0);
  REQUIRE(trust_command("merge --out " + merged + " " + layer1 + " " + layer0).exit_code == 0);
  attnscope::testing::cli::require_same_npz_arrays(merged, whole);
  const auto ordered = trust_statistics(merged);
  CHECK(ordered.front().first.rfind("layer0.", 0) == 0);
  CHECK(ordered.back().first.rfind("layer1.", 0) == 0);
  // Q/K shards carry no heads array: joining them by --concatenate is refused, not done in input order
  const TrustRun unordered = trust_command("merge --concatenate --out " + merged + " " + input + " " +
                                           trust_query_key_file("trust_many_heads2.npz", 2, 12, 6, 3, 7));
  CHECK(unordered.exit_code == 1);
  CHECK(contains(unordered.err, "cannot tell the head order of 'layer0."));
}

TEST_CASE("merge refuses row counts that disagree with the heads array (shards without run options)") {
  const std::string input = trust_query_key_file("trust_rows.npz", 1, 4, 10, 4);
  const std::string a = path_in_work_dir("trust_rows_a.npz"), b = path_in_work_dir("trust_rows_b.npz");
  REQUIRE(trust_command("rowstats " + input + " --heads 0,1 --out " + a).exit_code == 0);
  REQUIRE(trust_command("rowstats " + input + " --heads 2,3 --top-k 1,8 --out " + b).exit_code == 0);
  // strip the run options (as an older attnscope or another tool would write them): the row counts still tell
  for (const std::string& path : {a, b}) attnscope::io::write_npz(path, trust_statistics(path));
  const TrustRun run = trust_command("merge --concatenate --out " + path_in_work_dir("trust_rows_merged.npz") + " " + a +
                                     " " + b);
  CHECK(run.exit_code == 1);
  CHECK(contains(run.err, "'layer0.top64_mass' has shape [2, 10] but layer0.heads lists 4 heads"));
}

TEST_CASE("report JSON records its run options; merge joins reports of several documents and refuses other options") {
  const std::string stories = trust_stories();
  const std::string a = path_in_work_dir("trust_report_a.json"), b = path_in_work_dir("trust_report_b.json");
  REQUIRE(trust_command("report " + stories + " --tokens 1,5,9,20 --basic --json " + a).exit_code == 0);
  REQUIRE(trust_command("report " + stories + " --tokens 1,7,3,2,8 --basic --json " + b).exit_code == 0);
  const auto document = nlohmann::json::parse(attnscope::testing::cli::slurp(a));
  REQUIRE(document["runs"].size() == 1);
  const auto& run = document["runs"][0];
  CHECK(run["command"] == "report");
  CHECK(run["model"] == stories);
  CHECK(run["tokens"] == "4");
  CHECK(run["tokens_crc32"] == trust_crc32(std::string("\1\0\0\0\5\0\0\0\x09\0\0\0\x14\0\0\0", 16)));
  CHECK(run["map"] == "softmax");
  CHECK(run["sink_keys"] == "0");
  const std::string merged = path_in_work_dir("trust_report_ab.json");
  REQUIRE(trust_command("merge --out " + merged + " " + a + " " + b).exit_code == 0);
  const auto joined = nlohmann::json::parse(attnscope::testing::cli::slurp(merged));
  CHECK(joined["runs"].size() == 2);
  CHECK(joined["heads"].size() == 80);
  const std::string c = path_in_work_dir("trust_report_c.json");
  REQUIRE(trust_command("report " + stories + " --tokens 1,7,3,2,8 --basic --sink-keys 1 --json " + c).exit_code == 0);
  const TrustRun refused = trust_command("merge --out " + merged + " " + a + " " + c);
  CHECK(refused.exit_code == 1);
  CHECK(contains(refused.err, "run option sink_keys is '0' in " + a + " but '1' in " + c));
}

TEST_CASE("exit codes: data errors exit 1 without the usage text; usage errors exit 2 with it") {
  const std::string model = attnscope::testing::hf_fixture_folder("gpt2");
  const std::string empty = path_in_work_dir("trust_empty.txt"), bad = path_in_work_dir("trust_bad_utf8.txt");
  std::ofstream(empty).flush();
  std::ofstream(bad) << "Prince Andrew\xff went";
  const auto data_error = [](const std::string& arguments, const std::string& message) {
    INFO("attnscope " << arguments);
    const TrustRun run = trust_command(arguments);
    CHECK(run.exit_code == 1);
    CHECK(contains(run.err, message));
    CHECK(!contains(run.err, "--help`"));  // a data error, not a usage error
    CHECK(run.out.empty());
  };
  data_error("report --model " + model + " --text-file " + empty, "the input has no tokens: " + empty + " is empty");
  data_error("capture --model " + model + " --text '' --out x.npz", "the input has no tokens: the --text is empty");
  data_error("report --model /nonexistent/model --text hi", "/nonexistent/model: does not exist");
  data_error("tokenize --model /nonexistent/model --text hi", "/nonexistent/model: does not exist");
  data_error("rowstats --model " + model + " --tokens-file " + attnscope::testing::hf_fixture_sample_text() +
                 " --out x.npz", "is not a list of token ids");
  data_error("tokenize --model " + model + " --text-file " + bad,
             bad + ": cannot be encoded: attnscope::text::ByteLevelBpeTokenizer::encode: invalid UTF-8 at byte offset 13");
  data_error("capture --model " + model + " --text-file " + bad + " --out x.npz", bad + ": cannot be encoded");
  // longer than the trained positions without --beyond-trained-length (the fixture has 64)
  std::string long_tokens = "1";
  for (int i = 0; i < 80; ++i) long_tokens += ",2";
  data_error("rowstats --model " + model + " --tokens " + long_tokens + " --out x.npz",
             "the input has 81 tokens but the model was trained on 64 positions; --beyond-trained-length");
  const TrustRun usage = trust_command("normalize --map nosuchmap x.npy -o y.npy");
  CHECK(usage.exit_code == 2);
  CHECK(contains(usage.err, "--map: attnscope::parse_normalization_map: unknown normalization map 'nosuchmap'"));
  CHECK(contains(usage.err, "see `attnscope normalize --help`"));
  const TrustRun report_map = trust_command("report --checkpoint " + trust_stories() + " --map nosuchmap");
  CHECK(report_map.exit_code == 2);
  CHECK(contains(report_map.err, "--map: attnscope::parse_normalization_map: unknown normalization map 'nosuchmap'"));
  CHECK(contains(report_map.err, "see `attnscope report --help`"));
}

TEST_CASE("text inputs start where --from and --skip-tokens say") {
  const std::string model = attnscope::testing::hf_fixture_folder("gpt2");
  const std::string text = attnscope::testing::cli::slurp(attnscope::testing::hf_fixture_sample_text());
  const std::string sample = attnscope::testing::hf_fixture_sample_text();
  const auto ids_of = [](const TrustRun& run) {
    REQUIRE(run.exit_code == 0);
    std::vector<int> ids;
    std::istringstream line(run.out);
    for (int id; line >> id;) ids.push_back(id);
    return ids;
  };
  const std::vector<int> all = ids_of(trust_command("tokenize --model " + model + " --text-file " + sample));
  REQUIRE(all.size() > 6);
  const std::vector<int> skipped = ids_of(trust_command("tokenize --model " + model + " --text-file " + sample +
                                                        " --skip-tokens 5"));
  CHECK(skipped == std::vector<int>(all.begin() + 5, all.end()));
  // --from: the text from the first occurrence of a word in its middle, as if the file began there
  std::size_t middle = text.find(' ', text.size() / 2) + 1;
  std::string word = text.substr(middle, text.find(' ', middle) - middle);
  while (word.size() < 4 || word.find_first_not_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos) {
    middle = text.find(' ', middle) + 1;
    REQUIRE(middle != std::string::npos + 1);
    word = text.substr(middle, text.find(' ', middle) - middle);
  }
  const std::string tail_file = path_in_work_dir("trust_tail.txt");
  std::ofstream(tail_file, std::ios::binary) << text.substr(text.find(word));
  CHECK(ids_of(trust_command("tokenize --model " + model + " --text-file " + sample + " --from " + word)) ==
        ids_of(trust_command("tokenize --model " + model + " --text-file " + tail_file)));
  // the capture starts there too: its tokens array
  const std::string capture = path_in_work_dir("trust_from.npz");
  REQUIRE(trust_command("capture --model " + model + " --text-file " + sample + " --skip-tokens 5 --max-tokens 8 --out " +
                        capture).exit_code == 0);
  CHECK(attnscope::io::read_npz(capture).at("tokens").to_vector<int>() == std::vector<int>(all.begin() + 5, all.begin() + 13));
  attnscope::testing::cli::check_failures({
      {"tokenize --model " + model + " --text-file " + sample + " --from zzzNotThere", sample +
       ": does not contain the --from text 'zzzNotThere'", 1},
      {"capture --model " + model + " --text-file " + sample + " --skip-tokens 100000 --out x.npz",
       "--skip-tokens 100000 leaves none", 1},
      {"capture --model " + model + " --tokens 1,2 --from x --out x.npz", "--from applies to --text or --text-file only", 2},
      {"report " + capture + " --skip-tokens 3", "apply to a model INPUT only", 2},
  });
}

TEST_CASE("capture --layers and --no-logits write only what was asked for; report reads the result") {
  const std::string capture = path_in_work_dir("trust_layers.npz");
  REQUIRE(trust_command("capture --checkpoint " + trust_stories() + " --tokens 1,5,9,20,7 --layers 1,3 --no-logits --out " +
                        capture).exit_code == 0);
  const auto arrays = attnscope::io::read_npz(capture);
  CHECK(arrays.count("logits") == 0);
  CHECK(arrays.count("layer0.attention") == 0);
  CHECK(arrays.count("layer2.q") == 0);
  CHECK(arrays.count("layer1.attention") == 1);
  CHECK(arrays.count("layer3.scores") == 1);
  const std::string full = path_in_work_dir("trust_layers_full.npz");
  REQUIRE(trust_command("capture --checkpoint " + trust_stories() + " --tokens 1,5,9,20,7 --out " + full).exit_code == 0);
  const auto all = attnscope::io::read_npz(full);
  CHECK(all.count("logits") == 1);
  CHECK(arrays.at("layer3.attention").bytes() == all.at("layer3.attention").bytes());
  const TrustRun report = trust_command("report " + capture + " --basic");
  REQUIRE(report.exit_code == 0);
  CHECK(contains(report.out, "16 heads"));
  attnscope::testing::cli::check_failures({
      {"capture --checkpoint " + trust_stories() + " --tokens 1,2 --layers 7 --out x.npz",
       "--layers names layer 7 but the model has 5 layers", 1},
      {"capture --checkpoint " + trust_stories() + " --tokens 1,2 --layers 1,1 --out x.npz", "names layer 1 twice", 2},
  });
}

TEST_CASE("report: the costly columns are opt-in (--columns all), and --help says so") {
  const std::string capture = path_in_work_dir("trust_columns.npz");
  REQUIRE(trust_command("capture --checkpoint " + trust_stories() + " --tokens 1,5,9,20,7,3,2 --out " + capture).exit_code == 0);
  const std::string fast = path_in_work_dir("trust_fast.json"), all = path_in_work_dir("trust_all.json");
  REQUIRE(trust_command("report " + capture + " --json " + fast).exit_code == 0);
  REQUIRE(trust_command("report " + capture + " --columns all --json " + all).exit_code == 0);
  const auto fast_columns = nlohmann::json::parse(attnscope::testing::cli::slurp(fast))["columns"];
  const auto all_columns = nlohmann::json::parse(attnscope::testing::cli::slurp(all))["columns"];
  CHECK(fast_columns.size() == 9);
  CHECK(all_columns.size() == 12);
  for (const char* costly : {"causal_stable_rank", "separability_at_critical_n", "gradient_sensitivity"}) {
    CHECK(std::find(fast_columns.begin(), fast_columns.end(), costly) == fast_columns.end());
    CHECK(std::find(all_columns.begin(), all_columns.end(), costly) != all_columns.end());
  }
  const TrustRun help = trust_command("report --help");
  CHECK(contains(help.out, "Three costly columns are computed only when asked for (--columns all"));
}
