// Tests of io::ArrayFile and the matrix access of io::MappedArray: NPY, NPZ (stored and deflated) and safetensors
// files give the same names, dtypes, shapes and bytes as the copying readers; matrices convert exactly from
// float16 / bfloat16 / float32 / float64; with_slice views aligned data of the right dtype and copies otherwise;
// bad files throw io_error naming the file.
#include <fstream>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attnscope/core/random.hpp"
#include "attnscope/io/array_file.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/npy.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/safetensors.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {

std::string array_file_test_path(const std::string& name) { return std::string(ATTNSCOPE_BINARY_DIR) + "/" + name; }

attnscope::io::Array seeded_float_array(std::uint64_t seed, std::vector<std::int64_t> shape) {
  attnscope::Random random(seed);
  std::int64_t count = 1;
  for (const auto extent : shape) count *= extent;
  std::vector<float> values(static_cast<std::size_t>(count));
  for (float& value : values) value = static_cast<float>(random.normal());
  return attnscope::io::Array::from_vector(values, std::move(shape));
}

}  // namespace

TEST_CASE("ArrayFile reads NPY, NPZ and safetensors files by content with the copying readers' bytes") {
  namespace io = attnscope::io;
  const io::Array q = seeded_float_array(2601, {3, 5, 4});
  const io::Array scores = io::Array::from(attnscope::RowMatrix<double>::Random(4, 6));
  const io::Array tokens = io::Array::from_vector(std::vector<std::int32_t>{3, 1, 4}, {3});
  const io::NamedArrays arrays{{"layer0.q", q}, {"scores", scores}, {"tokens", tokens}};
  struct Case {
    std::string file;
    io::ArrayFileFormat format;
  };
  const std::string npz = array_file_test_path("test_array_file.npz"), deflated = array_file_test_path("test_array_file_deflated.npz"),
                    tensors = array_file_test_path("test_array_file.safetensors");
  io::write_npz(npz, arrays, io::Compression::stored);
  io::write_npz(deflated, arrays, io::Compression::deflated);
  io::write_safetensors(tensors, arrays, {{"map", "softmax"}});
  // Extensions do not matter: a safetensors file named .npz is read as safetensors.
  const std::string renamed = array_file_test_path("test_array_file_renamed.npz");
  const std::vector<unsigned char> tensor_bytes = io::read_file(tensors);
  io::write_file(renamed, std::string(tensor_bytes.begin(), tensor_bytes.end()));
  for (const Case& c : {Case{npz, io::ArrayFileFormat::npz}, Case{deflated, io::ArrayFileFormat::npz},
                        Case{tensors, io::ArrayFileFormat::safetensors}, Case{renamed, io::ArrayFileFormat::safetensors}}) {
    INFO(c.file);
    const io::ArrayFile file(c.file);
    CHECK(file.format() == c.format);
    CHECK(file.names() == std::vector<std::string>{"layer0.q", "scores", "tokens"});
    for (const auto& [name, array] : arrays) {
      const io::MappedArray& mapped = file.at(name);
      CHECK(mapped.dtype() == array.dtype());
      CHECK(mapped.shape() == array.shape());
      CHECK(mapped.byte_count() == array.bytes().size());
      CHECK(mapped.to_array().bytes() == array.bytes());
    }
    CHECK(file.at("layer0.q").is_view() == (c.file != deflated));
    CHECK(file.metadata().count("map") == (c.format == io::ArrayFileFormat::safetensors ? 1u : 0u));
    // Matrix 2 of q as [3, 5, 4] in double, and as [15, 4] matrices 10..14 flattened: the same values.
    const auto head = file.at("layer0.q").matrix<double>(2, 5, 4, true);
    CHECK(head == q.slice_matrix<float>({2}).cast<double>());
    CHECK(file.at("layer0.q").matrix<float>(0, 15, 4).bottomRows(5) == q.slice_matrix<float>({2}));
    file.at("layer0.q").with_slice<float>(1, [&](const auto& slice) { CHECK(slice == q.slice_matrix<float>({1})); });
    file.at("layer0.q").with_slice<double>(1, [&](const auto& slice) {
      CHECK(slice == q.slice_matrix<float>({1}).cast<double>());
    });
    CHECK(attnscope::testing::error_message<attnscope::io_error>([&] { file.at("layer0.q").matrix<double>(3, 5, 4); }) ==
          "attnscope::MappedArray::matrix: layer0.q: matrix 3 of 5x4 is outside the array of shape [3, 5, 4]");
    CHECK(attnscope::testing::error_message<attnscope::io_error>([&] { file.at("tokens").matrix<double>(0, 1, 3); })
              .find("has dtype int32; only float32, float64, float16 and bfloat16 convert") != std::string::npos);
    CHECK(attnscope::testing::error_message<attnscope::io_error>([&] { file.at("nothing"); }) ==
          "attnscope::ArrayFile::at: " + c.file + ": has no array 'nothing'");
  }
  // An NPY file holds one array named after its stem.
  const std::string npy = array_file_test_path("attention_file_q.npy");
  io::write_npy(npy, q);
  const io::ArrayFile one(npy);
  CHECK(one.format() == io::ArrayFileFormat::npy);
  CHECK(one.names() == std::vector<std::string>{"attention_file_q"});
}

TEST_CASE("MappedArray::matrix widens float16 and bfloat16 exactly") {
  namespace io = attnscope::io;
  const std::vector<float> values{0.5f, -1.25f, 3.0f, 65504.0f, 1.0f / 1024, -0.0f};
  std::vector<Eigen::half> halves;
  std::vector<Eigen::bfloat16> brains;
  for (const float value : values) {
    halves.emplace_back(value);
    brains.emplace_back(value);
  }
  const std::string path = array_file_test_path("test_array_file_half.safetensors");
  io::write_safetensors(path, {{"h", io::Array::from_vector(halves, {2, 3})}, {"b", io::Array::from_vector(brains, {2, 3})}});
  const io::ArrayFile file(path);
  const auto h = file.at("h").matrix<double>(0, 2, 3);
  const auto b = file.at("b").matrix<float>(0, 2, 3);
  for (int i = 0; i < 6; ++i) {
    CHECK(h.data()[i] == static_cast<double>(static_cast<float>(halves[static_cast<std::size_t>(i)])));
    CHECK(b.data()[i] == static_cast<float>(brains[static_cast<std::size_t>(i)]));
  }
  CHECK(h(0, 0) == 0.5);
  CHECK(h(1, 0) == 65504.0);
}

TEST_CASE("ArrayFile refuses missing, empty, unknown and truncated files naming them") {
  namespace io = attnscope::io;
  using attnscope::testing::error_message;
  CHECK(error_message<attnscope::io_error>([] { io::ArrayFile file(array_file_test_path("no_such_array_file.npz")); })
            .find("no_such_array_file.npz") != std::string::npos);
  const std::string text = array_file_test_path("test_array_file.txt");
  io::write_file(text, std::string("hello, not arrays"));
  CHECK(error_message<attnscope::io_error>([&] { io::ArrayFile file(text); }) ==
        "attnscope::ArrayFile: " + text + ": is not an NPY, NPZ or safetensors file (17 bytes; the format is read "
        "from the content, not the extension)");
  const std::string npz = array_file_test_path("test_array_file_truncated.npz");
  io::write_npz(npz, {{"x", seeded_float_array(2602, {4, 4})}}, io::Compression::stored);
  std::vector<unsigned char> bytes = io::read_file(npz);
  bytes.resize(bytes.size() / 2);
  io::write_file(npz, std::string(bytes.begin(), bytes.end()));
  CHECK_THROWS_AS(io::ArrayFile(npz), attnscope::io_error);
  const std::string tensors = array_file_test_path("test_array_file_truncated.safetensors");
  io::write_safetensors(tensors, {{"x", seeded_float_array(2603, {8, 8})}});
  bytes = io::read_file(tensors);
  bytes.resize(bytes.size() - 10);
  io::write_file(tensors, std::string(bytes.begin(), bytes.end()));
  CHECK(error_message<attnscope::io_error>([&] { io::ArrayFile file(tensors); }).find(tensors) != std::string::npos);
}

TEST_CASE("write_array_file writes NPZ or safetensors by extension, read back byte for byte") {
  namespace io = attnscope::io;
  const io::Array q = seeded_float_array(2602, {2, 3, 4});
  const io::NamedArrays arrays{{"layer0.q", q}};
  const std::string npz = array_file_test_path("write_array_file.npz");
  const std::string tensors = array_file_test_path("write_array_file.safetensors");
  io::write_array_file(npz, arrays, {{"map", "softmax"}}, io::Compression::deflated);
  io::write_array_file(tensors, arrays, {{"map", "softmax"}});
  const io::ArrayFile from_npz(npz), from_tensors(tensors);
  CHECK(from_npz.format() == io::ArrayFileFormat::npz);
  CHECK(from_tensors.format() == io::ArrayFileFormat::safetensors);
  CHECK(from_npz.at("layer0.q").to_array().bytes() == q.bytes());
  CHECK(from_tensors.at("layer0.q").to_array().bytes() == q.bytes());
  CHECK_FALSE(from_npz.at("layer0.q").is_view());  // deflated member: a decoded copy
  CHECK(from_npz.metadata().empty());              // NPZ has no metadata
  CHECK(from_tensors.metadata().at("map") == "softmax");
  const std::string npy = array_file_test_path("write_array_file.npy");
  CHECK(attnscope::testing::error_message([&] { io::write_array_file(npy, arrays); }) ==
        "attnscope::write_array_file: the path must end in .npz or .safetensors: " + npy);
}
