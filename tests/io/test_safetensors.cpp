// Tests of the safetensors reader/writer: hand-built files per the format (header length, JSON, buffer), F16/BF16
// bit patterns, round trips of every dtype, and every malformed header, offset and buffer.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/safetensors.hpp"
#include "io_test_support.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

using namespace attnscope;
using attnscope::testing::bytes_of;
using attnscope::testing::error_message;
using Catch::Matchers::Contains;

namespace {

// header length (8 bytes LE) + JSON + buffer, as the format specifies.
std::string file_of(const std::string& json, const std::string& buffer) {
  std::string bytes;
  io::detail::append_little_endian<std::uint64_t>(bytes, json.size());
  return bytes + json + buffer;
}

io::SafetensorsContents parse_safetensors(const std::string& bytes, const std::string& name = "mem.safetensors") {
  return io::parse_safetensors_contents(bytes_of(bytes), bytes.size(), name);
}

std::string buffer_of(std::initializer_list<std::uint16_t> values) {
  std::string out;
  for (auto v : values) io::detail::append_little_endian(out, v);
  return out;
}

/// Seeded tensors of every dtype (attnscope::testing::random_named_arrays).
io::NamedArrays safetensors_random_tensors(Random& random) {
  return attnscope::testing::random_named_arrays(
      random,
      {io::DType::float32, io::DType::float64, io::DType::int32, io::DType::int64, io::DType::boolean,
       io::DType::float16, io::DType::bfloat16},
      false, [&](std::size_t i) { return "model.layers." + std::to_string(i) + std::string(random.below(30), 'w'); });
}

}  // namespace

TEST_CASE("safetensors: write_safetensors writes exactly the bytes of serialize_safetensors, read back as the same "
          "tensors", "[io][safetensors]") {
  const std::string path = attnscope::testing::test_output_path("test_io_streamed.safetensors");
  Random random(2025);
  std::size_t tensors_written = 0;
  for (int round = 0; round < 60; ++round) {
    INFO("round " << round);
    const io::NamedArrays tensors = round == 0 ? io::NamedArrays{} : safetensors_random_tensors(random);
    std::map<std::string, std::string> metadata;
    for (std::uint64_t i = random.below(3); i-- > 0;)
      metadata["key" + std::to_string(i)] = round % 2 ? "ünïcode ✓" : std::string(random.below(20), 'v');
    io::write_safetensors(path, tensors, metadata);
    const std::string written = attnscope::testing::file_bytes(path);
    REQUIRE(written == io::serialize_safetensors(tensors, metadata));
    // The file on its own: the reader returns the tensors given (compared by name: 0-sized tensors share their
    // offset with a neighbour, so their buffer order is not the order given) and the metadata.
    const io::SafetensorsContents back = io::read_safetensors_contents(path);
    CHECK(back.metadata == metadata);
    REQUIRE(back.tensors.size() == tensors.size());
    const auto map = io::read_safetensors(path);
    for (const auto& [name, array] : tensors) {
      REQUIRE(map.count(name) == 1);
      CHECK(map.at(name).dtype() == array.dtype());
      CHECK(map.at(name).shape() == array.shape());
      CHECK(map.at(name).bytes() == array.bytes());
    }
    tensors_written += tensors.size();
  }
  CHECK(tensors_written > 150);
  std::remove(path.c_str());
}

TEST_CASE("safetensors: write_safetensors rejects bad tensors before creating the file and names write_safetensors "
          "and the path on io errors", "[io][safetensors][errors]") {
  const std::string existing = attnscope::testing::test_output_path("test_io_existing.safetensors");
  const std::string absent = attnscope::testing::test_output_path("test_io_absent.safetensors");
  std::remove(absent.c_str());
  const auto one = io::Array::from_vector(std::vector<float>{1, 2}, {2});
  const std::string names_error = "attnscope::serialize_safetensors: tensor names must be non-empty, unique and not "
                                  "__metadata__, got '";
  const std::vector<std::tuple<io::NamedArrays, std::map<std::string, std::string>, std::string>> bad = {
      {{{"a", one}, {"a", one}}, {}, names_error + "a'"},
      {{{"", one}}, {}, names_error + "'"},
      {{{"__metadata__", one}}, {}, names_error + "__metadata__'"},
      {{{"bad\xff", one}}, {}, "attnscope::serialize_safetensors: a tensor name or metadata string is not valid UTF-8"},
      {{{"a", one}}, {{"k", "bad\xff"}}, "attnscope::serialize_safetensors: a tensor name or metadata string is not valid UTF-8"}};
  for (const auto& [tensors, metadata, message] : bad) {
    // The same error as serialize_safetensors; an existing file is left as it was and no file is created.
    CHECK_THAT(error_message([&] { io::serialize_safetensors(tensors, metadata); }), Catch::Matchers::StartsWith(message));
    io::write_file(existing, "old contents");
    CHECK_THAT(error_message([&] { io::write_safetensors(existing, tensors, metadata); }),
               Catch::Matchers::StartsWith(message));
    CHECK(attnscope::testing::file_bytes(existing) == "old contents");
    CHECK_THAT(error_message([&] { io::write_safetensors(absent, tensors, metadata); }),
               Catch::Matchers::StartsWith(message));
    CHECK_FALSE(io::detail::path_exists(absent));
  }
  std::remove(existing.c_str());

  // A folder that does not exist, and a folder: io_error naming write_safetensors and the path.
  const io::NamedArrays good = {{"x", one}};
  const std::string unwritable = attnscope::testing::test_output_path("no_such_folder/x.safetensors");
  CHECK(error_message<io_error>([&] { io::write_safetensors(unwritable, good); }) ==
        "attnscope::write_safetensors: " + unwritable + ": cannot open file for writing: the folder " +
            attnscope::testing::test_output_path("no_such_folder") + " does not exist");
  CHECK(error_message<io_error>([&] { io::write_safetensors(ATTNSCOPE_BINARY_DIR, good); }) ==
        "attnscope::write_safetensors: " + std::string(ATTNSCOPE_BINARY_DIR) + ": cannot open file for writing: is a directory");
  // A device that accepts no byte: the write error names the path (mid-way for a large tensor, at the final flush
  // for a small file), and the device is not removed.
  if (io::detail::path_kind("/dev/full") == io::detail::PathKind::other) {
    const io::NamedArrays big = {{"big", io::Array(io::DType::float64, {1 << 17}, std::vector<unsigned char>(1 << 20))}};
    for (const io::NamedArrays* tensors : {&big, &good})
      CHECK_THAT(error_message<io_error>([&] { io::write_safetensors("/dev/full", *tensors); }),
                 Contains("attnscope::write_safetensors: /dev/full: write failed"));
    CHECK(io::detail::path_kind("/dev/full") == io::detail::PathKind::other);
  }
}

TEST_CASE("safetensors: a hand-built file with F16, BF16, F32, I64 and metadata", "[io][safetensors]") {
  // 1.5 = 0x3E00 in binary16 and 0x3FC0 in bfloat16; -2 = 0xC000 and 0xC000.
  std::string buffer = buffer_of({0x3E00, 0xC000}) + buffer_of({0x3FC0, 0xC000, 0x4049});
  io::detail::append_little_endian(buffer, 0.25f);
  io::detail::append_little_endian<std::int64_t>(buffer, -7);
  const std::string json =
      R"({"bf": {"shape": [3], "dtype": "BF16", "data_offsets": [4, 10]},)"
      R"( "__metadata__": {"format": "pt", "note": "hand-built"},)"
      R"( "h": {"dtype": "F16", "shape": [1, 2], "data_offsets": [0, 4]},)"
      R"( "i": {"dtype": "I64", "shape": [], "data_offsets": [14, 22]},)"
      R"( "f": {"dtype": "F32", "shape": [1], "data_offsets": [10, 14]}}   )";
  const io::SafetensorsContents contents = parse_safetensors(file_of(json, buffer));
  REQUIRE(contents.tensors.size() == 4);
  CHECK(contents.tensors[0].first == "h");  // buffer order
  CHECK(contents.tensors[1].first == "bf");
  CHECK(contents.tensors[2].first == "f");
  CHECK(contents.tensors[3].first == "i");
  CHECK(contents.tensors[0].second.dtype() == io::DType::float16);
  CHECK(contents.tensors[0].second.shape() == std::vector<std::int64_t>{1, 2});
  CHECK(contents.tensors[0].second.to_vector<float>() == std::vector<float>{1.5f, -2.0f});
  CHECK(contents.tensors[1].second.dtype() == io::DType::bfloat16);
  CHECK(contents.tensors[1].second.to_vector<float>() == std::vector<float>{1.5f, -2.0f, 3.140625f});
  CHECK(contents.tensors[2].second.to_vector<double>() == std::vector<double>{0.25});
  CHECK(contents.tensors[3].second.rank() == 0);
  CHECK(contents.tensors[3].second.to_vector<std::int64_t>() == std::vector<std::int64_t>{-7});
  CHECK(contents.metadata.at("format") == "pt");
  CHECK(contents.metadata.at("note") == "hand-built");
  const auto map = io::parse_safetensors(bytes_of(file_of(json, buffer)), 8 + json.size() + buffer.size(), "x");
  CHECK(map.at("h").to_matrix<float>()(0, 1) == -2.0f);
}

TEST_CASE("safetensors: the writer's exact bytes and round trips of every dtype", "[io][safetensors]") {
  const io::NamedArrays one = {{"x", io::Array::from_vector(std::vector<float>{1.0f, -0.5f}, {2})}};
  const std::string expected_json = R"({"x":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  std::string padded = expected_json;
  padded.append((8 - padded.size() % 8) % 8, ' ');
  std::string expected_buffer;
  io::detail::append_little_endian(expected_buffer, 1.0f);
  io::detail::append_little_endian(expected_buffer, -0.5f);
  CHECK(io::serialize_safetensors(one) == file_of(padded, expected_buffer));
  CHECK(padded.size() % 8 == 0);

  Random random(17);
  io::NamedArrays all;
  const io::DType dtypes[] = {io::DType::float32, io::DType::float64, io::DType::int32, io::DType::int64,
                              io::DType::boolean, io::DType::float16, io::DType::bfloat16};
  for (int i = 0; i < 40; ++i) {
    const io::DType dtype = dtypes[i % 7];
    std::vector<std::int64_t> shape(random.below(4));
    for (auto& d : shape) d = static_cast<std::int64_t>(random.below(5));
    std::uint64_t count = 1;
    for (auto d : shape) count *= static_cast<std::uint64_t>(d);
    std::vector<unsigned char> bytes(count * io::dtype_size(dtype));
    for (auto& b : bytes) b = dtype == io::DType::boolean ? random.below(2) : random.below(256);
    all.emplace_back("t" + std::to_string(i), io::Array(dtype, shape, bytes));
  }
  const std::map<std::string, std::string> metadata = {{"model", "stories260K"}, {"ünïcode", "✓"}};
  const io::SafetensorsContents back = parse_safetensors(io::serialize_safetensors(all, metadata));
  CHECK(back.metadata == metadata);
  // Zero-size tensors share an offset with their neighbour; compare by name.
  const auto map = io::parse_safetensors(bytes_of(io::serialize_safetensors(all)), io::serialize_safetensors(all).size(), "m");
  REQUIRE(map.size() == all.size());
  for (const auto& [name, array] : all) {
    CHECK(map.at(name).dtype() == array.dtype());
    CHECK(map.at(name).shape() == array.shape());
    CHECK(map.at(name).bytes() == array.bytes());
  }
  const std::string path = std::string(ATTNSCOPE_BINARY_DIR) + "/test_io_roundtrip.safetensors";
  io::write_safetensors(path, one, {{"a", "b"}});
  CHECK(io::read_safetensors(path).at("x").to_vector<float>() == std::vector<float>{1.0f, -0.5f});
  CHECK(io::read_safetensors_contents(path).metadata.at("a") == "b");
  std::remove(path.c_str());
  CHECK_THROWS_AS(io::serialize_safetensors({{"__metadata__", io::Array()}}), invalid_argument);
  CHECK_THROWS_AS(io::serialize_safetensors({{"x", io::Array()}, {"x", io::Array()}}), invalid_argument);
  CHECK_THROWS_WITH(io::serialize_safetensors({{"bad\xff", io::Array()}}), Contains("UTF-8"));
}

TEST_CASE("safetensors: malformed headers, offsets and buffers give io_error", "[io][safetensors][errors]") {
  const std::string eight(8, '\0');
  auto message = [](const std::string& json, const std::string& buffer) {
    return error_message<io_error>([&] { parse_safetensors(file_of(json, buffer), "bad.safetensors"); });
  };
  auto tensor = [](const std::string& name, const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return "\"" + name + "\": {\"dtype\": \"" + dtype + "\", \"shape\": " + shape + ", \"data_offsets\": " + offsets + "}";
  };
  CHECK(message("{" + tensor("a", "F32", "[2]", "[0, 8]") + "}", eight).empty());
  CHECK_THAT(message("{" + tensor("a", "F32", "[2]", "[0, 8]") + "}", eight + "x"), Contains("cover only 8"));
  CHECK_THAT(message("{" + tensor("a", "F32", "[2]", "[0, 12]") + "}", eight), Contains("outside the 8-byte data buffer"));
  CHECK_THAT(message("{" + tensor("a", "F32", "[2]", "[4, 0]") + "}", eight), Contains("outside"));
  CHECK_THAT(message("{" + tensor("a", "F32", "[3]", "[0, 8]") + "}", eight), Contains("span 8 bytes but shape [3]"));
  CHECK_THAT(message("{" + tensor("a", "F32", "[1]", "[0, 4]") + ", " + tensor("b", "F32", "[1]", "[2, 6]") + "}",
                     eight),
             Contains("tensor 'b' at [2, 6) overlaps"));
  CHECK_THAT(message("{" + tensor("a", "F32", "[1]", "[4, 8]") + "}", eight), Contains("gap in the data buffer: bytes [0, 4)"));
  CHECK_THAT(message("{" + tensor("a", "I16", "[4]", "[0, 8]") + "}", eight), Contains("unsupported dtype \"I16\""));
  CHECK_THAT(message("{" + tensor("a", "F32", "[-2]", "[0, 8]") + "}", eight), Contains("not a non-negative integer"));
  CHECK_THAT(message("{" + tensor("a", "F32", "[2.0]", "[0, 8]") + "}", eight), Contains("not a non-negative integer"));
  CHECK_THAT(message("{" + tensor("a", "F32", "[4611686018427387904, 4611686018427387904]", "[0, 8]") + "}", eight),
             Contains("absurd shape"));
  CHECK_THAT(message("{" + tensor("a", "F32", "[1000000, 1000000]", "[0, 8]") + "}", eight), Contains("needs 4000000000000"));
  CHECK_THAT(message("{" + tensor("a", "F32", "[2]", "[0]") + "}", eight), Contains("data_offsets must be two"));
  CHECK_THAT(message("{" + tensor("a", "F32", "[2]", "[0, -8]") + "}", eight), Contains("data_offsets must be two"));
  CHECK_THAT(message(R"({"a": {"dtype": "F32", "shape": [2]}})", eight), Contains("expected exactly the keys"));
  CHECK_THAT(message(R"({"a": [1, 2]})", eight), Contains("expected exactly the keys"));
  CHECK_THAT(message(R"({"__metadata__": {"k": 1}})", ""), Contains("is not a string"));
  CHECK_THAT(message(R"({"__metadata__": []})", ""), Contains("__metadata__ is not an object"));
  CHECK_THAT(message(R"({"a": )", eight), Contains("malformed JSON header"));
  CHECK_THAT(message(R"([1, 2])", ""), Contains("does not start with '{'"));
  CHECK_THAT(message("", ""), Contains("does not start with '{'"));
  CHECK_THAT(message("{" + tensor("a", "BOOL", "[1]", "[0, 1]") + "}", "\x02"), Contains("neither 0 nor 1"));
  CHECK(message("{}", "").empty());
  CHECK_THAT(message("{" + tensor("", "F32", "[2]", "[0, 8]") + "}", eight), Contains("empty tensor name"));
  // Header length past the end, absurd header length, truncation at every offset of a valid file.
  std::string bytes;
  io::detail::append_little_endian<std::uint64_t>(bytes, 1000);
  CHECK_THAT(error_message<io_error>([&] { parse_safetensors(bytes + "{}"); }), Contains("truncated: JSON header needs 1000 bytes"));
  bytes.clear();
  io::detail::append_little_endian<std::uint64_t>(bytes, ~std::uint64_t{0});
  CHECK_THAT(error_message<io_error>([&] { parse_safetensors(bytes + "{}"); }), Contains("exceeds the limit"));
  const std::string valid = io::serialize_safetensors(
      {{"a", io::Array::from_vector(std::vector<double>{1, 2, 3}, {3})},
       {"b", io::Array::from_vector(std::vector<std::int64_t>{4, 5}, {1, 2})}},
      {{"k", "v"}});
  for (std::size_t cut = 0; cut < valid.size(); ++cut)
    REQUIRE_THAT(error_message<io_error>([&] { parse_safetensors(valid.substr(0, cut), "cut.safetensors"); }), Contains("cut.safetensors"));
  // Every single bit of the header flipped: valid or io_error, nothing else.
  for (std::size_t i = 0; i < valid.size() - 40; ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = valid;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      try {
        parse_safetensors(flipped);
      } catch (const io_error&) {
      }
    }
  CHECK_THROWS_AS(io::read_safetensors("/nonexistent.safetensors"), io_error);
}
