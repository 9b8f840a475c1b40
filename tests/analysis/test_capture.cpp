// Tests of analysis/capture.hpp and the per-head visitor: a forward result written in the capture layout and read
// back by AttentionFile gives, head by head, exactly the matrices of the result (float32 → double is exact) and the
// heads for_each_head visits on the result itself; selections, bare attention arrays (2-D to 5-D, batches), and the
// errors for misshapen files, missing layers and unknown layout versions.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attnscope/analysis/capture.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/io/capture_layout.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/safetensors.hpp"
#include "attnscope/model.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
namespace analysis = attnscope::analysis;
namespace io = attnscope::io;

std::string capture_test_path(const std::string& name) { return std::string(ATTNSCOPE_BINARY_DIR) + "/" + name; }

RowMatrix<float> random_float_matrix(attnscope::Random& random, Index rows, Index cols) {
  RowMatrix<float> m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(random.normal());
  return m;
}

/// Causal softmax rows of random scores (float32), the scores' future entries −inf.
void random_causal_pair(attnscope::Random& random, Index length, RowMatrix<float>& scores, RowMatrix<float>& attention) {
  scores = random_float_matrix(random, length, length);
  attention = RowMatrix<float>::Zero(length, length);
  for (Index i = 0; i < length; ++i) {
    double total = 0;
    for (Index j = 0; j <= i; ++j) total += std::exp(static_cast<double>(scores(i, j)));
    for (Index j = 0; j <= i; ++j) attention(i, j) = static_cast<float>(std::exp(static_cast<double>(scores(i, j))) / total);
    for (Index j = i + 1; j < length; ++j) scores(i, j) = -std::numeric_limits<float>::infinity();
  }
}

/// A forward result of `layers` × `heads` heads over `length` tokens with every per-head capture.
attnscope::model::ForwardResult random_forward_result(std::uint64_t seed, int layers, int heads, Index length,
                                                      Index head_size) {
  attnscope::Random random(seed);
  attnscope::model::ForwardResult result;
  result.logits = random_float_matrix(random, length, 11);
  result.layers.resize(static_cast<std::size_t>(layers));
  for (auto& layer : result.layers)
    for (int h = 0; h < heads; ++h) {
      RowMatrix<float> scores, attention;
      random_causal_pair(random, length, scores, attention);
      layer.scores.push_back(scores);
      layer.attention.push_back(attention);
      layer.q.push_back(random_float_matrix(random, length, head_size));
      layer.k.push_back(random_float_matrix(random, length, head_size));
      layer.v.push_back(random_float_matrix(random, length, head_size));
    }
  return result;
}

}  // namespace

TEST_CASE("for_each_head on a forward result visits every selected head with its matrices in double") {
  const auto result = random_forward_result(2501, 3, 4, 9, 5);
  std::vector<std::pair<int, int>> visited;
  analysis::for_each_head(result, {}, [&](const analysis::HeadInput& head) {
    visited.emplace_back(head.layer, head.head);
    const auto& layer = result.layers[static_cast<std::size_t>(head.layer)];
    CHECK(head.attention == layer.attention[static_cast<std::size_t>(head.head)].cast<double>());
    CHECK(head.scores == layer.scores[static_cast<std::size_t>(head.head)].cast<double>());
    CHECK(head.values == layer.v[static_cast<std::size_t>(head.head)].cast<double>());
  });
  REQUIRE(visited.size() == 12);
  for (std::size_t i = 0; i < visited.size(); ++i) CHECK(visited[i] == std::make_pair(int(i / 4), int(i % 4)));
  // head_inputs is the same visit collected.
  const auto inputs = analysis::head_inputs(result);
  REQUIRE(inputs.size() == 12);
  CHECK(inputs[7].layer == 1);
  CHECK(inputs[7].head == 3);
  CHECK(inputs[7].attention == result.layers[1].attention[3].cast<double>());

  // Selections, with progress (done, total) over the selected heads only.
  std::vector<std::pair<int, int>> selected, progress;
  analysis::HeadSelection selection;
  selection.layers = {2, 0};
  selection.heads = {1};
  analysis::for_each_head(
      result, selection, [&](const analysis::HeadInput& head) { selected.emplace_back(head.layer, head.head); },
      [&](int done, int total) { progress.emplace_back(done, total); });
  CHECK(selected == std::vector<std::pair<int, int>>{{0, 1}, {2, 1}});
  CHECK(progress == std::vector<std::pair<int, int>>{{1, 2}, {2, 2}});

  using attnscope::testing::error_message;
  selection.layers = {3};
  CHECK(error_message([&] { analysis::for_each_head(result, selection, [](const analysis::HeadInput&) {}); }) ==
        "attnscope::for_each_head: layer 3 is outside [0, 3)");
  selection.layers = {};
  selection.heads = {-1};
  CHECK(error_message([&] { analysis::for_each_head(result, selection, [](const analysis::HeadInput&) {}); }) ==
        "attnscope::for_each_head: head -1 is outside [0, 4)");
  auto without = result;
  without.layers[1].attention.clear();
  CHECK(error_message([&] { analysis::head_inputs(without); }) ==
        "attnscope::for_each_head: layer 1 has no attention capture");
  CHECK(error_message([&] { analysis::head_inputs(attnscope::model::ForwardResult{}); }) ==
        "attnscope::for_each_head: the result has no captured layers");
  // a forward narrowed by CaptureOptions::heads leaves empty entries: visiting around them works, naming one fails
  auto narrowed = result;
  narrowed.layers[2].attention[2] = attnscope::RowMatrix<float>();
  selection.layers = {2};
  selection.heads = {1, 3};
  selected.clear();
  analysis::for_each_head(narrowed, selection,
                          [&](const analysis::HeadInput& head) { selected.emplace_back(head.layer, head.head); });
  CHECK(selected == std::vector<std::pair<int, int>>{{2, 1}, {2, 3}});
  selection.heads = {2};
  CHECK(error_message([&] { analysis::for_each_head(narrowed, selection, [](const analysis::HeadInput&) {}); }) ==
        "attnscope::for_each_head: head 2 of layer 2 was not captured");
}

TEST_CASE("a capture written from a forward result reads back head by head with the same values (NPZ, safetensors)") {
  const auto result = random_forward_result(2502, 2, 3, 7, 4);
  const std::vector<int> tokens{1, 5, 9, 2, 7, 3, 8};
  const io::NamedArrays arrays = analysis::capture_arrays(result, tokens);
  // Names and shapes of the layout, from the library's name function.
  std::vector<std::string> names;
  for (const auto& entry : arrays) names.push_back(entry.first);
  CHECK(names == std::vector<std::string>{"layer0.q", "layer0.k", "layer0.v", "layer0.scores", "layer0.attention",
                                          "layer1.q", "layer1.k", "layer1.v", "layer1.scores", "layer1.attention",
                                          "tokens", "logits"});
  CHECK(arrays[4].second.shape() == std::vector<std::int64_t>{3, 7, 7});
  CHECK(arrays[10].second.to_vector<std::int32_t>() == std::vector<std::int32_t>(tokens.begin(), tokens.end()));

  for (const char* extension : {".npz", ".safetensors"}) {
    INFO(extension);
    const std::string path = capture_test_path(std::string("test_capture_roundtrip") + extension);
    io::write_capture_file(path, arrays, {{"map", "softmax"}});
    const analysis::AttentionFile file(path);
    CHECK(file.layout_version() == io::capture_layout_version);
    CHECK(file.query_rows() == 7);
    CHECK(file.key_count() == 7);
    CHECK(file.ignored().empty());
    CHECK(file.attention_dtype() == io::DType::float32);
    std::vector<analysis::HeadInput> from_file;
    analysis::for_each_head(file, {}, [&](const analysis::HeadInput& head) { from_file.push_back(head); });
    const auto expected = analysis::head_inputs(result);
    REQUIRE(from_file.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CHECK(from_file[i].layer == expected[i].layer);
      CHECK(from_file[i].head == expected[i].head);
      CHECK(from_file[i].attention == expected[i].attention);
      CHECK(from_file[i].scores == expected[i].scores);
      CHECK(from_file[i].values == expected[i].values);
    }
    analysis::HeadSelection selection;
    selection.layers = {1};
    selection.heads = {2, 0};
    std::vector<std::pair<int, int>> selected;
    analysis::for_each_head(file, selection, [&](const analysis::HeadInput& head) { selected.emplace_back(head.layer, head.head); });
    CHECK(selected == std::vector<std::pair<int, int>>{{1, 0}, {1, 2}});
  }
}

TEST_CASE("AttentionFile reads bare attention arrays of rank 2 to 5 and refuses misfits") {
  using attnscope::testing::error_message;
  attnscope::Random random(2503);
  // [layers = 2, batch = 3, heads = 2, q = 4, k = 5] as one attention array: matrix (l, b, h) has value code l, b, h.
  std::vector<float> values(2 * 3 * 2 * 4 * 5);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  const std::string five = capture_test_path("test_capture_five.npz");
  io::write_npz(five, {{"attention", io::Array::from_vector(values, {2, 3, 2, 4, 5})}}, io::Compression::stored);
  CHECK(error_message([&] { analysis::AttentionFile file(five); }).find("has a batch axis of size 3: choose one") !=
        std::string::npos);
  analysis::AttentionFileOptions options;
  options.batch_index = 2;
  const analysis::AttentionFile file(five, options);
  REQUIRE(file.heads().size() == 4);
  const analysis::HeadInput head = file.head(file.heads()[3]);  // layer 1, batch 2, head 1: matrix ((1·3)+2)·2+1 = 11
  CHECK(head.layer == 1);
  CHECK(head.head == 1);
  CHECK(head.attention(0, 0) == 11 * 20);
  CHECK(head.attention(3, 4) == 11 * 20 + 19);
  options.batch_index = 3;
  CHECK(error_message([&] { analysis::AttentionFile bad(five, options); }) ==
        "attnscope::AttentionFile: --batch-index 3 is outside [0, 3)");

  // A 4-D array reads as [layers, heads, q, k] unless told otherwise, and says so.
  const std::string four = capture_test_path("test_capture_four.npy");
  io::write_npy(four, io::Array::from_vector(std::vector<float>(values.begin(), values.begin() + 3 * 2 * 20), {3, 2, 4, 5}));
  const analysis::AttentionFile as_layers(four);
  CHECK(as_layers.heads().size() == 6);
  CHECK(as_layers.heads()[5].layer == 2);
  CHECK(as_layers.layout_note().find("as [layers, heads, q, k]") != std::string::npos);
  analysis::AttentionFileOptions batch;
  batch.layout = analysis::AttentionLayout::batch_heads;
  batch.batch_index = 1;
  const analysis::AttentionFile as_batch(four, batch);
  REQUIRE(as_batch.heads().size() == 2);
  CHECK(as_batch.head(as_batch.heads()[1]).attention(0, 0) == 3 * 20);

  // Misfits: values of the wrong key count, integer attention, no attention at all.
  const std::string misfit = capture_test_path("test_capture_misfit.npz");
  io::write_npz(misfit, {{"attention", io::Array::from(RowMatrix<float>::Constant(4, 5, 0.2f))},
                         {"v", io::Array::from(RowMatrix<float>::Zero(4, 3))}});
  CHECK(error_message<attnscope::io_error>([&] { analysis::AttentionFile bad(misfit); })
            .find("array 'v' has shape [4, 3], expected [..., 5, d]") != std::string::npos);
  io::write_npz(misfit, {{"attention", io::Array::from_vector(std::vector<std::int32_t>(20, 0), {4, 5})}});
  CHECK(error_message<attnscope::io_error>([&] { analysis::AttentionFile bad(misfit); }).find("has dtype int32") !=
        std::string::npos);
  const io::Array heads = io::Array::from_vector(std::vector<float>(2 * 9, 0.f), {2, 3, 3});
  // a capture of some layers only (capture --layers 0,2): the heads keep their layer numbers
  io::write_npz(misfit, {{"layer2.attention", heads}, {"layer0.attention", heads}});
  const analysis::AttentionFile some_layers(misfit);
  REQUIRE(some_layers.heads().size() == 4);
  CHECK(some_layers.heads()[0].layer == 0);
  CHECK(some_layers.heads()[2].layer == 2);
  io::write_npz(misfit, {{"a", heads}, {"b", heads}});
  CHECK(error_message<attnscope::io_error>([&] { analysis::AttentionFile bad(misfit); })
            .find("holds 2 arrays (a, b) but neither layer0.attention") != std::string::npos);
}

TEST_CASE("AttentionFile refuses captures of an unknown layout version and reads unversioned ones as version 1") {
  using attnscope::testing::error_message;
  const io::Array heads = io::Array::from_vector(std::vector<float>(9, 1.f / 3), {1, 3, 3});
  const std::string path = capture_test_path("test_capture_version.npz");
  io::write_npz(path, {{"layer0.attention", heads}}, io::Compression::stored);
  CHECK(analysis::AttentionFile(path).layout_version() == 1);
  io::write_npz(path, {{"layer0.attention", heads},
                       {io::capture_layout_key,
                        io::Array::from_vector(std::vector<std::int32_t>{io::capture_layout_version + 1}, {1})}});
  const std::string message = error_message<attnscope::io_error>([&] { analysis::AttentionFile file(path); });
  const std::string newer = std::to_string(io::capture_layout_version + 1);
  CHECK(message.find("attnscope::capture_file_layout_version: " + path + ": has capture layout version " + newer) == 0);
  CHECK(message.find("reads versions 1 to " + std::to_string(io::capture_layout_version)) != std::string::npos);
  const std::string tensors = capture_test_path("test_capture_version.safetensors");
  io::write_safetensors(tensors, {{"layer0.attention", heads}}, {{io::capture_layout_key, "v1"}});
  CHECK(error_message<attnscope::io_error>([&] { analysis::AttentionFile file(tensors); })
            .find("expected a layout version (an integer)") != std::string::npos);
}
