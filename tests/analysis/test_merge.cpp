// Tests of analysis/merge.hpp, the merge rules of `attnscope merge`: shards of one document split by layer or head
// give back the whole (a property test over random splits and orders), shards of different documents concatenate
// with their document per column or row, and what was made differently, or a layer/head split over different
// tokens, is refused naming the field.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/analysis/merge.hpp"
#include "attnscope/core/random.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

using namespace attnscope;
using attnscope::testing::error_message;
using Catch::Matchers::Contains;

namespace {

io::RunOptions document_record(const std::vector<int>& tokens) {
  io::RunOptions run = {{"attnscope_version", io::attnscope_version}, {"command", "rowstats"}, {"model", "m"},
                        {"map", "softmax"}, {"top_k", "1"}};
  io::record_tokens(run, tokens);
  return run;
}

/// A whole rowstats file: `layers` layers of `heads` heads over `length` positions, random statistics.
io::NamedArrays whole_rowstats(Index layers, Index heads, Index length, Random& random) {
  io::NamedArrays arrays;
  for (Index l = 0; l < layers; ++l) {
    for (const char* statistic : {"entropy", "sink_mass"}) {
      std::vector<double> values(static_cast<std::size_t>(heads * length));
      for (double& v : values) v = random.uniform();
      arrays.emplace_back(io::layer_array_name(l, statistic), io::Array::from_vector(values, {heads, length}));
    }
    std::vector<std::int32_t> ids(static_cast<std::size_t>(heads));
    for (Index h = 0; h < heads; ++h) ids[static_cast<std::size_t>(h)] = static_cast<std::int32_t>(h);
    arrays.emplace_back(io::layer_array_name(l, "heads"), io::Array::from_vector(ids, {heads}));
  }
  return arrays;
}

/// The rows `heads` (in that order) of layer `layer` of a whole file, as a shard's arrays.
io::NamedArrays shard_of(const io::NamedArrays& whole, Index layer, const std::vector<std::size_t>& heads) {
  io::NamedArrays shard;
  for (const auto& [name, array] : whole) {
    if (analysis::detail::merged_layer_of(name) != layer) continue;
    const std::size_t row_bytes = array.bytes().size() / static_cast<std::size_t>(array.shape()[0]);
    std::vector<unsigned char> bytes;
    for (const std::size_t h : heads)
      bytes.insert(bytes.end(), array.bytes().begin() + static_cast<std::ptrdiff_t>(h * row_bytes),
                   array.bytes().begin() + static_cast<std::ptrdiff_t>((h + 1) * row_bytes));
    std::vector<std::int64_t> shape = array.shape();
    shape[0] = static_cast<std::int64_t>(heads.size());
    shard.emplace_back(name, io::Array(array.dtype(), shape, bytes));
  }
  return shard;
}

const io::Array& array_named(const io::NamedArrays& arrays, const std::string& name) {
  for (const auto& entry : arrays)
    if (entry.first == name) return entry.second;
  FAIL("no array " << name);
  throw;
}

nlohmann::json report_json(const io::RunOptions& run, const std::vector<std::pair<int, int>>& heads, double value) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [layer, head] : heads) rows.push_back({{"layer", layer}, {"head", head}, {"entropy", value + head}});
  return {{"columns", {"entropy"}}, {"heads", rows}, {"runs", {nlohmann::json(run)}}};
}

}  // namespace

TEST_CASE("merge: random splits of one document by layer and head, in any order, give back the whole file") {
  Random random(2024);
  for (int trial = 0; trial < 40; ++trial) {
    const Index layers = 1 + static_cast<Index>(random.uniform() * 3), heads = 1 + static_cast<Index>(random.uniform() * 6);
    const Index length = 1 + static_cast<Index>(random.uniform() * 9);
    const io::NamedArrays whole = whole_rowstats(layers, heads, length, random);
    const io::RunOptions run = document_record({1, 2, 3});
    std::vector<analysis::ArrayShard> shards;
    for (Index l = 0; l < layers; ++l) {
      std::vector<std::size_t> order(static_cast<std::size_t>(heads));
      for (std::size_t h = 0; h < order.size(); ++h) order[h] = h;
      for (std::size_t h = order.size(); h > 1; --h)  // a seeded shuffle of the heads
        std::swap(order[h - 1], order[static_cast<std::size_t>(random.uniform() * static_cast<double>(h)) % h]);
      std::size_t start = 0;
      while (start < order.size()) {  // consecutive pieces of random size
        const std::size_t size = 1 + static_cast<std::size_t>(random.uniform() * static_cast<double>(order.size() - start)) %
                                         (order.size() - start);
        shards.push_back({"layer" + std::to_string(l) + "." + std::to_string(start),
                          shard_of(whole, l, std::vector<std::size_t>(order.begin() + static_cast<std::ptrdiff_t>(start),
                                                                      order.begin() + static_cast<std::ptrdiff_t>(start + size))),
                          run});
        start += size;
      }
    }
    for (std::size_t i = shards.size(); i > 1; --i)
      std::swap(shards[i - 1], shards[static_cast<std::size_t>(random.uniform() * static_cast<double>(i)) % i]);
    INFO("trial " << trial << ": " << layers << " layers, " << heads << " heads, " << shards.size() << " shards");
    const analysis::MergedArrays merged = analysis::merge_array_shards(shards, true);
    CHECK(merged.run == run);
    REQUIRE(merged.arrays.size() == whole.size());
    for (const auto& [name, array] : whole) {
      INFO(name);
      CHECK(array_named(merged.arrays, name).bytes() == array.bytes());
      CHECK(array_named(merged.arrays, name).shape() == array.shape());
    }
  }
}

TEST_CASE("merge: rowstats of different documents join along their columns with run and position") {
  Random random(5);
  const io::NamedArrays first = whole_rowstats(2, 3, 4, random), second = whole_rowstats(2, 3, 2, random);
  const io::RunOptions run_a = document_record({1, 5, 6, 7}), run_b = document_record({1, 9});
  // document b split by layer: its shards join first, then the documents
  std::vector<analysis::ArrayShard> shards = {{"b0.npz", shard_of(second, 0, {2, 0, 1}), run_b},
                                              {"a.npz", first, run_a},
                                              {"b1.npz", shard_of(second, 1, {0, 1, 2}), run_b}};
  const analysis::MergedArrays study = analysis::merge_array_shards(shards);
  CHECK(array_named(study.arrays, "run").to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 0, 1, 1, 1, 1});
  CHECK(array_named(study.arrays, "position").to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 0, 1, 2, 3});
  io::check_rowstats_arrays(study.arrays, "study");
  for (const std::string name : {"layer0.entropy", "layer1.sink_mass"}) {
    const std::vector<double> joined = array_named(study.arrays, name).to_vector<double>();
    const std::vector<double> a = array_named(first, name).to_vector<double>(), b = array_named(second, name).to_vector<double>();
    REQUIRE(joined.size() == 3 * 6);
    for (std::size_t h = 0; h < 3; ++h)
      for (std::size_t i = 0; i < 6; ++i)  // document b first (its shard came first), then a
        CHECK(joined[h * 6 + i] == (i < 2 ? b[h * 2 + i] : a[h * 4 + i - 2]));
  }
  CHECK(study.run.count("token_ids") == 0);
  CHECK(study.run.at("model") == "m");
  const nlohmann::json runs = nlohmann::json::parse(study.run.at("runs"));
  REQUIRE(runs.size() == 2);
  CHECK(runs[0]["token_ids"] == "1,9");
  CHECK(runs[1]["token_ids"] == "1,5,6,7");
  // a study is not merged again
  std::vector<analysis::ArrayShard> again = {{"study.npz", study.arrays, study.run}};
  CHECK_THAT(error_message<io_error>([&] { analysis::merge_array_shards(again); }), Contains("already a study"));
}

TEST_CASE("merge: what was made differently, or a layer split over different tokens, is refused naming the field") {
  Random random(9);
  const io::NamedArrays whole = whole_rowstats(2, 2, 3, random);
  const io::RunOptions run = document_record({1, 2, 3});
  io::RunOptions other_model = run;
  other_model["model"] = "n";
  std::vector<analysis::ArrayShard> shards = {{"a.npz", whole, run}, {"b.npz", whole, other_model}};
  CHECK_THAT(error_message<io_error>([&] { analysis::merge_array_shards(shards); }),
             Contains("b.npz") && Contains("run option model is 'm' in a.npz but 'n' in b.npz"));
  io::RunOptions other_tokens = document_record({1, 2, 4});
  shards = {{"l0.npz", shard_of(whole, 0, {0, 1}), run}, {"l1.npz", shard_of(whole, 1, {0, 1}), other_tokens}};
  CHECK_THAT(error_message<io_error>([&] { analysis::merge_array_shards(shards); }),
             Contains("token_ids") && Contains("covers other heads") && Contains("must have the same tokens"));
  shards = {{"h0.npz", shard_of(whole, 0, {0}), run}, {"h1.npz", shard_of(whole, 0, {1}), other_tokens}};
  CHECK_THAT(error_message<io_error>([&] { analysis::merge_array_shards(shards); }),
             Contains("token_ids") && Contains("layer0.heads differs"));
  shards = {{"a.npz", whole, run}, {"a2.npz", whole, run}};
  CHECK_THAT(error_message([&] { analysis::merge_array_shards(shards, true); }), Contains("appears twice"));
  // documents that are not rowstats files (a capture's L x L arrays) do not join as a study
  io::NamedArrays capture = {{"layer0.attention", io::Array::from_vector(std::vector<float>(8, 0.5f), {2, 2, 2})}};
  shards = {{"c1.npz", capture, run}, {"c2.npz", capture, other_tokens}};
  CHECK_THAT(error_message<io_error>([&] { analysis::merge_array_shards(shards); }),
             Contains("join only as rowstats files") && Contains("layer0.attention"));
}

TEST_CASE("merge: reports split by --layers join into one document, reports of two documents get a run per row") {
  io::RunOptions run = document_record({1, 2, 3});
  run["command"] = "report";
  io::RunOptions layer0 = run, layer1 = run;
  layer0["layers"] = "0";
  layer1["layers"] = "1";
  const nlohmann::json merged = analysis::merge_json_documents(
      {{"l1.json", report_json(layer1, {{1, 0}, {1, 1}}, 0.5)}, {"l0.json", report_json(layer0, {{0, 1}, {0, 0}}, 0.5)}});
  REQUIRE(merged["heads"].size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {  // rows by layer, then head, whatever the inputs' order
    CHECK(merged["heads"][i]["layer"] == static_cast<int>(i / 2));
    CHECK(merged["heads"][i]["head"] == static_cast<int>(i % 2));
    CHECK_FALSE(merged["heads"][i].contains("run"));
  }
  REQUIRE(merged["runs"].size() == 1);
  CHECK(merged["runs"][0]["layers"] == "0,1");

  io::RunOptions other = document_record({1, 7});
  other["command"] = "report";
  const nlohmann::json study = analysis::merge_json_documents(
      {{"a.json", report_json(run, {{0, 0}, {0, 1}}, 0.5)}, {"b.json", report_json(other, {{0, 1}, {0, 0}}, 1.5)}});
  REQUIRE(study["runs"].size() == 2);
  CHECK(study["runs"][1]["token_ids"] == "1,7");
  REQUIRE(study["heads"].size() == 4);
  CHECK(study["heads"][2]["run"] == 1);
  CHECK(study["heads"][2]["head"] == 0);
  CHECK(study["heads"][2]["entropy"] == 1.5);
  // merging the study with a third document: its runs keep their rows
  io::RunOptions third = document_record({4});
  third["command"] = "report";
  const nlohmann::json bigger =
      analysis::merge_json_documents({{"study.json", study}, {"c.json", report_json(third, {{0, 0}, {0, 1}}, 2.5)}});
  CHECK(bigger["runs"].size() == 3);
  CHECK(bigger["heads"][5]["run"] == 2);
  CHECK(bigger["heads"][3]["entropy"] == 1.5 + 1);

  io::RunOptions lenient = run;
  lenient["lenient"] = "true";
  CHECK_THAT(error_message<io_error>([&] {
               analysis::merge_json_documents({{"a.json", report_json(run, {{0, 0}}, 0)},
                                               {"b.json", report_json(lenient, {{0, 1}}, 0)}});
             }),
             Contains("run option lenient is '(absent)' in a.json but 'true' in b.json"));
  CHECK_THAT(error_message<io_error>([&] {
               analysis::merge_json_documents({{"a.json", report_json(layer0, {{0, 0}}, 0)},
                                               {"b.json", report_json(layer0, {{0, 0}}, 0)}});
             }),
             Contains("the row (0 0)") && Contains("overlapping"));
  CHECK_THAT(error_message<io_error>([&] {
               analysis::merge_json_documents({{"a.json", report_json(layer0, {{0, 0}}, 0)},
                                               {"b.json", report_json(other, {{1, 0}}, 0)}});
             }),
             Contains("covers other heads"));
  CHECK_THAT(error_message<io_error>([&] {
               analysis::merge_json_documents({{"a.json", report_json(run, {{0, 0}}, 0)}, {"b.json", {{"x", 1}}}});
             }),
             Contains("does not record"));
}

TEST_CASE("merge: CSV with run lines joins by the same rules; a study gets a first column run") {
  io::RunOptions run = document_record({1, 2}), other = document_record({3});
  run["command"] = other["command"] = "kvsim";
  const std::string header = "layer,head,policy,spec,mean\n";
  const std::string spec = "\"streaming:sink=4,window=8\"";
  const std::string a = io::csv_with_run(run, header + "0,1,0," + spec + ",0.5\n0,0,0," + spec + ",0.25\n");
  const std::string b = io::csv_with_run(other, header + "0,0,0," + spec + ",0.75\n0,1,0," + spec + ",1\n");
  const std::string study = analysis::merge_csv_tables({{"a.csv", a}, {"b.csv", b}});
  const io::CsvWithRuns parsed = io::split_csv_runs(study, "study.csv");
  REQUIRE(parsed.runs.size() == 2);
  CHECK(parsed.runs[0] == run);
  CHECK(parsed.runs[1] == other);
  CHECK(study.find("# attnscope run 1: ") != std::string::npos);
  CHECK(parsed.header == "run,layer,head,policy,spec,mean");
  CHECK(parsed.rows == std::vector<std::string>{"0,0,0,0,\"streaming:sink=4,window=8\",0.25",
                                                "0,0,1,0,\"streaming:sink=4,window=8\",0.5",
                                                "1,0,0,0,\"streaming:sink=4,window=8\",0.75",
                                                "1,0,1,0,\"streaming:sink=4,window=8\",1"});
  // the study merges again with a split of one of its documents refused as overlapping
  CHECK_THAT(error_message<io_error>([&] { analysis::merge_csv_tables({{"study.csv", study}, {"b.csv", b}}); }),
             Contains("b.csv") && Contains("overlapping"));
  CHECK_THAT(error_message<io_error>([&] { analysis::merge_csv_tables({{"a.csv", a}, {"plain.csv", header}}); }),
             Contains("plain.csv") && Contains("does not record"));
  CHECK_THAT(error_message<io_error>([&] {
               analysis::merge_csv_tables({{"a.csv", a}, {"c.csv", io::csv_with_run(other, "layer,head\n0,0\n")}});
             }),
             Contains("c.csv") && Contains("header"));
  CHECK_THAT(error_message<io_error>([&] {
               analysis::merge_csv_tables({{"a.csv", a}, {"d.csv", io::csv_with_run(other, header + "x,0,0,s,1\n")}});
             }),
             Contains("layer 'x', not an integer"));
  // without run lines: the same header, rows appended
  CHECK(analysis::merge_csv_tables({{"p.csv", "x,y\n1,2\n"}, {"q.csv", "x,y\n3,4\n"}}) == "x,y\n1,2\n3,4\n");
}
