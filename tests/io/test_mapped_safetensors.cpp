// Tests of io::MappedSafetensors: views equal what the copying reader returns (round trips through the writer),
// F16/BF16 → float32 against bit patterns decoded by hand, and the same validation (same messages) as the copying
// reader for every malformed file, truncation at every byte, wrong dtypes and non-finite values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/mapped_safetensors.hpp"
#include "attnscope/io/safetensors.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

using namespace attnscope;
using attnscope::testing::error_message;
using Catch::Matchers::Contains;

namespace {

std::string mapped_safetensors_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("attnscope_mapped_st_" + name)).string();
}

/// An array of 16-bit patterns (F16 or BF16 bits) of the given shape.
io::Array mapped_bits_array(io::DType dtype, const std::vector<std::uint16_t>& bits, std::vector<std::int64_t> shape) {
  std::vector<unsigned char> bytes(bits.size() * 2);
  std::memcpy(bytes.data(), bits.data(), bytes.size());
  return io::Array(dtype, std::move(shape), std::move(bytes));
}

std::size_t mapped_element_count(const std::vector<std::int64_t>& shape) {
  std::size_t count = 1;
  for (auto dim : shape) count *= static_cast<std::size_t>(dim);
  return count;
}

/// IEEE binary16 decoded from its fields (sign, 5-bit exponent with bias 15, 10-bit fraction), independently of Eigen.
double mapped_decode_half(std::uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 0x1F, fraction = bits & 0x3FF;
  const double magnitude = exponent == 0 ? std::ldexp(fraction, -24) : std::ldexp(1024 + fraction, exponent - 25);
  return sign ? -magnitude : magnitude;
}

/// bfloat16 decoded from its fields (sign, 8-bit exponent with bias 127, 7-bit fraction), independently of Eigen.
double mapped_decode_bfloat16(std::uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 7) & 0xFF, fraction = bits & 0x7F;
  const double magnitude = exponent == 0 ? std::ldexp(fraction, -133) : std::ldexp(128 + fraction, exponent - 134);
  return sign ? -magnitude : magnitude;
}

}  // namespace

TEST_CASE("MappedSafetensors: views hold the bytes the copying reader returns, without copying", "[io][mapped_safetensors]") {
  // Every dtype at ranks 0 to 3 (zero-size dims included), filled with seeded random bytes (BOOL: 0 or 1).
  Random random(29);
  io::NamedArrays arrays;
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {7}, {3, 0}, {2, 3}, {1, 4, 2}, {0}, {5, 1, 1}};
  int index = 0;
  for (io::DType dtype : {io::DType::float32, io::DType::float64, io::DType::int32, io::DType::int64, io::DType::boolean,
                          io::DType::float16, io::DType::bfloat16})
    for (const auto& shape : shapes) {
      std::vector<unsigned char> bytes(io::dtype_size(dtype) * mapped_element_count(shape));
      for (auto& byte : bytes) byte = static_cast<unsigned char>(random.below(dtype == io::DType::boolean ? 2 : 256));
      arrays.emplace_back("tensor." + std::to_string(index++), io::Array(dtype, shape, std::move(bytes)));
    }
  const std::string path = mapped_safetensors_path("roundtrip.safetensors");
  io::write_safetensors(path, arrays, {{"format", "pt"}});
  const io::MappedSafetensors mapped(path);
  const io::SafetensorsContents copied = io::read_safetensors_contents(path);
  CHECK(mapped.path() == path);
  CHECK(mapped.metadata() == copied.metadata);
  REQUIRE(mapped.tensors().size() == arrays.size());
  const std::uint64_t file_size = std::filesystem::file_size(path);
  CHECK(mapped.file_size() == file_size);
  for (const auto& [name, array] : arrays) {
    REQUIRE(mapped.contains(name));
    const io::TensorView& view = mapped.tensor(name);
    CHECK(view.name == name);
    CHECK(view.dtype == array.dtype());
    CHECK(view.shape == array.shape());
    CHECK(view.byte_count == array.bytes().size());
    CHECK(view.element_count() == array.element_count());
    if (view.byte_count > 0) CHECK(std::memcmp(view.data, array.bytes().data(), view.byte_count) == 0);
    CHECK(view.to_array().bytes() == array.bytes());
  }
  // Buffer order, and the views lie back to back in one buffer ending at the end of the file (they point into the map).
  for (std::size_t i = 0; i + 1 < mapped.tensors().size(); ++i)
    CHECK(mapped.tensors()[i].data + mapped.tensors()[i].byte_count == mapped.tensors()[i + 1].data);
  const io::TensorView& last = mapped.tensors().back();
  const unsigned char* first_byte = mapped.tensors().front().data;
  CHECK(static_cast<std::uint64_t>(last.data + last.byte_count - first_byte) <= file_size);
  io::MappedSafetensors moved = io::MappedSafetensors(path);
  const unsigned char* before = moved.tensors().front().data;
  const io::MappedSafetensors target = std::move(moved);
  CHECK(target.tensors().front().data == before);  // views survive a move of the owner
  std::filesystem::remove(path);
}

TEST_CASE("MappedSafetensors: F32, F16 and BF16 convert to float32 exactly", "[io][mapped_safetensors]") {
  // Known values: 1.5, -2, 1/3 rounded, 65504 (max), 2^-24 (smallest subnormal), -0; bfloat16 3.140625, 2^-133.
  const std::vector<std::uint16_t> half_bits = {0x3E00, 0xC000, 0x3555, 0x7BFF, 0x0001, 0x8000};
  const std::vector<float> half_expected = {1.5f, -2.0f, 0.333251953125f, 65504.0f, 5.9604644775390625e-08f, -0.0f};
  const std::vector<std::uint16_t> bfloat_bits = {0x3FC0, 0xC000, 0x4049, 0x0001, 0x7F7F};
  const std::vector<float> bfloat_expected = {1.5f, -2.0f, 3.140625f, std::ldexp(1.0f, -133),
                                              std::ldexp(255.0f, 127 - 7)};
  // Every finite bit pattern of each format, decoded independently from the fields.
  std::vector<std::uint16_t> all_half, all_bfloat;
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    if (((bits >> 10) & 0x1F) != 0x1F) all_half.push_back(static_cast<std::uint16_t>(bits));
    if (((bits >> 7) & 0xFF) != 0xFF) all_bfloat.push_back(static_cast<std::uint16_t>(bits));
  }
  const std::string path = mapped_safetensors_path("convert.safetensors");
  io::write_safetensors(path, {{"half", mapped_bits_array(io::DType::float16, half_bits, {2, 3})},
                               {"bfloat", mapped_bits_array(io::DType::bfloat16, bfloat_bits, {5})},
                               {"all_half", mapped_bits_array(io::DType::float16, all_half, {std::int64_t(all_half.size())})},
                               {"all_bfloat", mapped_bits_array(io::DType::bfloat16, all_bfloat,
                                                                {std::int64_t(all_bfloat.size())})},
                               {"single", io::Array::from_vector(std::vector<float>{0.1f, -3e38f}, {2})}});
  const io::MappedSafetensors mapped(path);
  CHECK(mapped.float32_values("half") == half_expected);
  CHECK(std::signbit(mapped.float32_values("half")[5]));
  CHECK(mapped.float32_values("bfloat") == bfloat_expected);
  CHECK(mapped.float32_values("single") == std::vector<float>{0.1f, -3e38f});
  const std::vector<float> halves = mapped.float32_values("all_half"), bfloats = mapped.float32_values("all_bfloat");
  std::size_t half_mismatches = 0, bfloat_mismatches = 0;
  for (std::size_t i = 0; i < all_half.size(); ++i) half_mismatches += double(halves[i]) != mapped_decode_half(all_half[i]);
  for (std::size_t i = 0; i < all_bfloat.size(); ++i)
    bfloat_mismatches += double(bfloats[i]) != mapped_decode_bfloat16(all_bfloat[i]);
  CHECK(all_half.size() == 63488);
  CHECK(half_mismatches == 0);
  CHECK(bfloat_mismatches == 0);
  std::filesystem::remove(path);
}

TEST_CASE("MappedSafetensors: the same validation and messages as the copying reader", "[io][mapped_safetensors][errors]") {
  const std::string valid = io::serialize_safetensors(
      {{"alpha", io::Array::from_vector(std::vector<double>{1, 2, 3}, {3})},
       {"beta", io::Array::from_vector(std::vector<float>{4, 5}, {1, 2})}},
      {{"k", "v"}});
  const std::string path = mapped_safetensors_path("bad.safetensors");
  auto mapped_message = [&](const std::string& bytes) {
    io::write_file(path, bytes);
    return error_message<io_error>([&] { io::MappedSafetensors{path}; });
  };
  auto copied_message = [&](const std::string& bytes) {
    return error_message<io_error>([&] {
      io::parse_safetensors_contents(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), path);
    });
  };
  CHECK(mapped_message(valid).empty());
  // Truncation at every byte: an io_error naming the file; inside the buffer it also names the tensor cut off.
  const std::size_t buffer_start = valid.size() - 32;
  for (std::size_t cut = 0; cut < valid.size(); ++cut) {
    const std::string message = mapped_message(valid.substr(0, cut));
    REQUIRE_THAT(message, Contains(path));
    REQUIRE(message == copied_message(valid.substr(0, cut)));
    if (cut >= buffer_start + 24) REQUIRE_THAT(message, Contains("tensor 'beta'") && Contains("truncated file?"));
  }
  // Malformed headers: gaps, overlaps, bad dtype; both readers say the same thing.
  auto with_json = [](const std::string& json, const std::string& buffer) {
    std::string bytes;
    io::detail::append_little_endian<std::uint64_t>(bytes, json.size());
    return bytes + json + buffer;
  };
  for (const std::string& json :
       {std::string(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})"),
        std::string(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})"),
        std::string(R"({"a": {"dtype": "I16", "shape": [4], "data_offsets": [0, 8]}})"),
        std::string(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})"), std::string(R"({"a": )")}) {
    const std::string bytes = with_json(json, std::string(8, '\0'));
    const std::string message = mapped_message(bytes);
    CHECK_THAT(message, Contains(path));
    CHECK(message == copied_message(bytes));
  }
  CHECK_THAT(mapped_message(""), Contains("truncated: header length"));
  // Lookups and conversions.
  io::write_file(path, io::serialize_safetensors({{"ints", io::Array::from_vector(std::vector<std::int32_t>{1, 2}, {2})},
                                                 {"inf", mapped_bits_array(io::DType::float16, {0x3C00, 0x7C00}, {2})}}));
  const io::MappedSafetensors mapped(path);
  CHECK_THAT(error_message<io_error>([&] { mapped.tensor("nope"); }), Contains(path) && Contains("no tensor named 'nope'"));
  CHECK_THAT(error_message<io_error>([&] { mapped.float32_values("ints"); }),
             Contains(path) && Contains("tensor 'ints' has dtype int32"));
  CHECK_THAT(error_message<io_error>([&] { mapped.float32_values("inf"); }),
             Contains(path) && Contains("tensor 'inf' holds the non-finite value inf at flat index 1"));
  std::filesystem::remove(path);
  CHECK_THAT(error_message<io_error>([&] { io::MappedSafetensors{path}; }), Contains("bad.safetensors"));
}
