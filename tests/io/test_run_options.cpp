// Tests of io/run_options.hpp (the run record every output carries) and io/rowstats_layout.hpp (the rowstats file
// layout): CRC-32 golden values from Python's zlib, the record's round trip through NPZ, safetensors and CSV comment
// lines, clear errors for corrupt records, the version against CMake's project version, and the rowstats builder and
// checker on valid and broken layouts.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/array_file.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/rowstats_layout.hpp"
#include "attnscope/io/run_options.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

using namespace attnscope;
using attnscope::testing::error_message;
using Catch::Matchers::Contains;

namespace {

namespace fs = std::filesystem;

std::string run_options_scratch(const std::string& name) {
  const fs::path folder = fs::temp_directory_path() / ("attnscope_run_options_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  return (folder / name).string();
}

io::RunOptions sample_record() {
  io::RunOptions run;
  run["attnscope_version"] = io::attnscope_version;
  run["command"] = "rowstats";
  run["model"] = "models/a b/ünïcode";
  run["text"] = "quotes \" and \\ and\nnewline, commas";
  io::record_tokens(run, {1, 2, 3, -1, 70000});
  return run;
}

}  // namespace

TEST_CASE("run record: CRC-32 of bytes and of token ids are Python's zlib.crc32") {
  // "%08x" % zlib.crc32(b"hello world"); zlib.crc32(np.asarray([1, 2, 3, -1, 70000], "<i4").tobytes())
  CHECK(io::bytes_crc32("hello world") == "0d4a1185");
  CHECK(io::bytes_crc32("") == "00000000");
  CHECK(io::tokens_crc32({1, 2, 3, -1, 70000}) == "6f912f54");
  const std::string path = run_options_scratch("crc.txt");
  std::ofstream(path, std::ios::binary) << "hello world";
  CHECK(io::file_crc32(path) == "0d4a1185");
  CHECK_THAT(error_message<io_error>([&] { io::file_crc32(path + ".missing"); }), Contains("crc.txt.missing"));
  io::RunOptions run;
  io::record_tokens(run, {1, 2, 3, -1, 70000});
  CHECK(run.at("tokens") == "5");
  CHECK(run.at("token_ids") == "1,2,3,-1,70000");
  CHECK(run.at("tokens_crc32") == "6f912f54");
}

TEST_CASE("run record: attnscope_version is the project version of CMakeLists.txt") {
  std::ifstream cache(std::string(ATTNSCOPE_BINARY_DIR) + "/CMakeCache.txt");
  REQUIRE(cache);
  std::string line, version;
  while (std::getline(cache, line))
    if (line.rfind("CMAKE_PROJECT_VERSION:STATIC=", 0) == 0) version = line.substr(line.find('=') + 1);
  CHECK(version == io::attnscope_version);
}

TEST_CASE("run record: round trip through NPZ (the run_options array) and safetensors (metadata)") {
  const io::RunOptions run = sample_record();
  const io::NamedArrays arrays = {{"layer0.entropy", io::Array::from_vector(std::vector<double>{0.5, 0.25}, {1, 2})}};
  for (const std::string name : {"record.npz", "record.safetensors"}) {
    INFO(name);
    const std::string path = run_options_scratch(name);
    io::write_array_file_with_run_options(path, arrays, run);
    const io::ArrayFile file(path);
    CHECK(io::read_run_options(file) == run);
    CHECK(file.find("layer0.entropy") != nullptr);
  }
  // the NPZ array is the record's JSON, one int32 per UTF-8 byte (what the Python recipe decodes)
  const io::ArrayFile npz(run_options_scratch("record.npz"));
  std::string bytes;
  for (const std::int32_t b : npz.find(io::run_options_array)->to_array().to_vector<std::int32_t>())
    bytes.push_back(static_cast<char>(b));
  CHECK(bytes == nlohmann::json(run).dump());
}

TEST_CASE("run record: a corrupt run_options array is an io_error naming the file and the array") {
  const std::string path = run_options_scratch("corrupt.npz");
  io::write_npz(path, {{io::run_options_array, io::Array::from_vector(std::vector<std::int32_t>{'{', 300, '}'}, {3})}});
  CHECK_THAT(error_message<io_error>([&] { io::read_run_options(io::ArrayFile(path)); }),
             Contains("corrupt.npz") && Contains("300, not a byte"));
  io::write_npz(path, {{io::run_options_array, io::Array::from_vector(std::vector<std::int32_t>{'[', '1', ']'}, {3})}});
  CHECK_THAT(error_message<io_error>([&] { io::read_run_options(io::ArrayFile(path)); }), Contains("not a JSON object"));
  io::write_npz(path, {{io::run_options_array, io::Array::from_vector(std::vector<std::int32_t>{'{', 'x'}, {2})}});
  CHECK_THAT(error_message<io_error>([&] { io::read_run_options(io::ArrayFile(path)); }), Contains("is not JSON"));
  io::write_npz(path, {{io::run_options_array, io::Array::from_vector(std::vector<double>{1.0}, {1})}});
  CHECK_THAT(error_message<io_error>([&] { io::read_run_options(io::ArrayFile(path)); }), Contains("1-D int32"));
}

TEST_CASE("run record: CSV comment lines carry it before the header and split back") {
  const io::RunOptions run = sample_record();
  const std::string table = "layer,head,entropy\n0,1,0.5\n0,2,0.25\n";
  const std::string text = io::csv_with_run(run, table);
  CHECK(text.rfind("# attnscope run: {", 0) == 0);
  CHECK(std::count(text.begin(), text.end(), '\n') == 4);  // one comment line: the record's newlines are escaped
  const io::CsvWithRuns csv = io::split_csv_runs(text, "t.csv");
  REQUIRE(csv.runs.size() == 1);
  CHECK(csv.runs[0] == run);
  CHECK(csv.header == "layer,head,entropy");
  CHECK(csv.rows == std::vector<std::string>{"0,1,0.5", "0,2,0.25"});
  // a study's numbered lines, other comments skipped (as pandas.read_csv(comment="#") does), CRLF line ends
  const std::string study = io::csv_run_line(run, 0) + io::csv_run_line(io::RunOptions{{"a", "b"}}, 1) +
                            "# a note\r\nrun,layer\r\n0,1\r\n\r\n1,1\r\n";
  const io::CsvWithRuns both = io::split_csv_runs(study, "s.csv");
  CHECK(both.runs.size() == 2);
  CHECK(both.runs[1] == io::RunOptions{{"a", "b"}});
  CHECK(both.header == "run,layer");
  CHECK(both.rows == std::vector<std::string>{"0,1", "1,1"});
  CHECK_THAT(error_message<io_error>([] { io::split_csv_runs("# attnscope run: {\"a\"\n", "bad.csv"); }),
             Contains("bad.csv") && Contains("not JSON"));
  CHECK_THAT(error_message<io_error>([] { io::split_csv_runs("# attnscope run: [1]\nx\n", "bad.csv"); }),
             Contains("not a JSON object"));
  CHECK_THAT(error_message<io_error>([] { io::split_csv_runs("# only a comment\n", "empty.csv"); }),
             Contains("empty.csv") && Contains("no CSV header"));
}

TEST_CASE("run record: the difference names the first key that differs, ignoring what it is told to") {
  const io::RunOptions a = {{"map", "softmax"}, {"input", "a.npz"}, {"top_k", "1,8"}};
  io::RunOptions b = a;
  CHECK(io::run_options_difference(a, "A", b, "B").empty());
  b["input"] = "b.npz";
  CHECK(io::run_options_difference(a, "A", b, "B") == "run option input is 'a.npz' in A but 'b.npz' in B");
  CHECK(io::run_options_difference(a, "A", b, "B", {"input"}).empty());
  b.erase("top_k");
  CHECK(io::run_options_difference(a, "A", b, "B", {"input"}) == "run option top_k is '1,8' in A but '(absent)' in B");
  b["top_k"] = std::string(500, '7');
  CHECK_THAT(io::run_options_difference(a, "A", b, "B", {"input"}), Contains("... (500 bytes)"));
  CHECK(io::run_document(sample_record()).count("token_ids") == 1);
  CHECK(io::run_document(sample_record()).count("model") == 0);
}

TEST_CASE("rowstats layout: the builder writes [heads, L] statistics and the head index of each row") {
  const std::vector<std::string> names = io::rowstats_statistic_names(true, {1, 8});
  CHECK(names == std::vector<std::string>{"entropy", "sink_mass", "max_weight", "max_scaled_logit", "log_partition",
                                          "jacobian_norm", "top1_mass", "top8_mass"});
  CHECK(io::rowstats_statistic_names(false, {}, true).back() == "content_mass");
  io::RowstatsArrays<float> builder(names);
  const Index length = 3;
  Random random(7);
  std::vector<std::vector<double>> values(2 * names.size(), std::vector<double>(length));
  for (auto& column : values)
    for (double& v : column) v = random.normal();
  builder.begin_layer(2, length, 2);
  for (std::size_t slot : {1u, 0u}) {  // any order of slots
    std::vector<const double*> columns;
    for (std::size_t s = 0; s < names.size(); ++s) columns.push_back(values[slot * names.size() + s].data());
    builder.set_head(slot, slot == 0 ? 5 : 3, columns);
  }
  builder.end_layer();
  const io::NamedArrays arrays = std::move(builder).take();
  REQUIRE(arrays.size() == names.size() + 1);
  io::check_rowstats_arrays(arrays, "built");
  CHECK(arrays.back().first == "layer2.heads");
  CHECK(arrays.back().second.to_vector<std::int32_t>() == std::vector<std::int32_t>{5, 3});
  const std::vector<float> entropy = arrays[0].second.to_vector<float>();
  CHECK(arrays[0].second.shape() == std::vector<std::int64_t>{2, length});
  for (Index i = 0; i < length; ++i) {
    CHECK(entropy[static_cast<std::size_t>(i)] == static_cast<float>(values[0][static_cast<std::size_t>(i)]));
    CHECK(entropy[static_cast<std::size_t>(length + i)] ==
          static_cast<float>(values[names.size()][static_cast<std::size_t>(i)]));
  }
  const std::string path = run_options_scratch("rows.npz");
  io::write_rowstats_file(path, arrays, sample_record());
  CHECK(io::read_run_options(io::ArrayFile(path)) == sample_record());
  CHECK_THAT(error_message([&] { builder.begin_layer(0, 0, 1); }), Contains("L = 0"));
}

TEST_CASE("rowstats layout: the checker names the array of a broken layout") {
  const auto stat = [](std::int64_t heads, std::int64_t length) {
    return io::Array::from_vector(std::vector<double>(static_cast<std::size_t>(heads * length), 0.5), {heads, length});
  };
  const auto heads = [](std::vector<std::int32_t> ids) {
    const auto n = static_cast<std::int64_t>(ids.size());
    return io::Array::from_vector(ids, {n});
  };
  const io::NamedArrays good = {{"layer0.entropy", stat(2, 4)}, {"layer0.heads", heads({0, 1})},
                                {"layer1.entropy", stat(1, 4)}, {"layer1.heads", heads({3})}};
  io::check_rowstats_arrays(good, "good");
  const auto problem = [&](io::NamedArrays arrays) {
    return error_message([&] { io::check_rowstats_arrays(arrays, "shard.npz"); });
  };
  io::NamedArrays broken = good;
  broken[1].second = heads({1, 1});
  CHECK_THAT(problem(broken), Contains("shard.npz") && Contains("layer0.heads") && Contains("twice"));
  broken = good;
  broken[2].second = stat(1, 5);
  CHECK_THAT(problem(broken), Contains("layer1.entropy") && Contains("L = 5"));
  broken = good;
  broken.pop_back();
  CHECK_THAT(problem(broken), Contains("layer1.heads") && Contains("missing"));
  broken = good;
  broken[0].second = stat(3, 4);
  CHECK_THAT(problem(broken), Contains("layer0.entropy") && Contains("3 rows"));
  broken = good;
  broken.emplace_back("logits", stat(1, 4));
  CHECK_THAT(problem(broken), Contains("'logits'") && Contains("not a rowstats array"));
  broken = good;
  broken.emplace_back("layer1.sink_mass", stat(1, 4));
  CHECK_THAT(problem(broken), Contains("statistics differ"));
  broken = good;
  broken[2].second = io::Array::from_vector(std::vector<float>(4, 0.5f), {1, 4});
  CHECK_THAT(problem(broken), Contains("float32"));
  broken = good;
  broken.emplace_back(io::rowstats_run_array, heads({0, 0, 0}));
  CHECK_THAT(problem(broken), Contains("'run'") && Contains("[4] int32"));
  CHECK_THAT(problem({}), Contains("no statistics"));
}
