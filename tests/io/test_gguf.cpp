// Tests of io::GgufFile / parse_gguf_header / serialize_gguf and of the ggml block dequantization
// (kernels/dequantize.hpp): the metadata fixture written by the independent numpy writer
// (tests/fixtures/make_gguf_fixtures.py) decodes to the values it was given, every value type included; the writer
// reproduces that file byte for byte; every block type dequantizes bit for bit as the numpy implementation of ggml's
// definitions, the codebook and ternary types as llama.cpp's gguf-py (whose grids match ours entry by entry); and
// every kind of corrupt file (bad magic or version, truncation at every byte, a tensor past the end, an unknown type,
// misaligned or overlapping data, bad values) is an io_error naming the file, the key or tensor and the byte offset.
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include "attnscope/io/file.hpp"
#include "attnscope/io/gguf.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/kernels/widen.hpp"
#include "fixtures/gguf_fixtures.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

using namespace attnscope;
using attnscope::testing::error_message;
using attnscope::testing::gguf_fixture;
using Catch::Matchers::Contains;

namespace {

/// The parse error of `bytes` ("" when they parse).
std::string gguf_parse_error(const std::string& bytes) {
  return error_message<io_error>([&] {
    io::parse_gguf_header(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), "bad.gguf");
  });
}

/// The byte offset of the info record of tensor `name` (its name's length field) in a GGUF byte string.
std::size_t gguf_tensor_info_at(const std::string& bytes, const std::string& name) {
  std::string needle(8, '\0');
  const std::uint64_t length = name.size();
  std::memcpy(&needle[0], &length, 8);
  needle += name;
  const std::size_t at = bytes.rfind(needle);
  REQUIRE(at != std::string::npos);
  return at;
}

template <class T>
void gguf_poke(std::string& bytes, std::size_t at, T value) {
  REQUIRE(at + sizeof(T) <= bytes.size());
  std::memcpy(&bytes[at], &value, sizeof(T));
}

io::GgufValue gguf_scalar(io::GgufType type, std::int64_t integer) {
  io::GgufValue v;
  v.type = type;
  v.integer = integer;
  v.unsigned_integer = static_cast<std::uint64_t>(integer);
  return v;
}

/// A small valid file: two metadata values and three F32 tensors (vector 8, matrix 2 × 8, vector 4).
std::string gguf_small_file() {
  io::GgufValue name;
  name.type = io::GgufType::string;
  name.text = "small";
  std::vector<io::GgufTensorBytes> tensors;
  for (const auto& [tensor, dims] : std::vector<std::pair<std::string, std::vector<std::uint64_t>>>{
           {"first", {8}}, {"second", {8, 2}}, {"third", {4}}}) {
    std::uint64_t n = 1;
    for (auto d : dims) n *= d;
    tensors.push_back({tensor, dims, io::GgmlType::f32, std::string(n * 4, '\x01')});
  }
  return io::serialize_gguf({{"general.name", name}, {"small.count", gguf_scalar(io::GgufType::uint32, 7)}},
                            tensors);
}

/// Compares every tensor `<prefix><T>` (T a stored format's ggml name in capitals: F32, Q4_K, IQ2_XXS, …) of the
/// fixture `file`, 3 × 512 elements, bit for bit with the float32 values of the same name in the fixture `npz`,
/// through widen and widen_reference, row by row as the product's panels read them; returns the tensors compared.
int gguf_dequantization_mismatches(const std::string& file_name, const std::string& npz_name,
                                   const std::vector<std::string>& prefixes) {
  const io::GgufFile file(gguf_fixture(file_name));
  const auto reference = io::read_npz(gguf_fixture(npz_name));
  int compared = 0;
  for (const kernels::StoredFormatInfo& row : kernels::stored_formats) {
    std::string type = row.ggml_name;
    for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (const std::string& prefix : prefixes) {
      const std::string name = prefix + type;
      if (!file.has_tensor(name)) continue;
      INFO(name);
      const io::GgufTensor& t = file.tensor(name);
      CHECK(static_cast<std::uint32_t>(t.type) == row.ggml_type);
      REQUIRE(t.dims == std::vector<std::uint64_t>{512, 3});
      REQUIRE(t.byte_count == kernels::stored_bytes(row.format, 3 * 512));
      const std::vector<float> expected = reference.at(name).to_vector<float>();
      REQUIRE(expected.size() == 3 * 512);
      std::vector<float> fast(3 * 512), scalar(3 * 512);
      for (int r = 0; r < 3; ++r) {
        const unsigned char* data = t.data + kernels::stored_bytes(row.format, r * 512);
        kernels::widen(data, row.format, 512, fast.data() + r * 512);
        kernels::widen_reference(data, row.format, 512, scalar.data() + r * 512);
      }
      int mismatches = 0;
      for (std::size_t i = 0; i < expected.size(); ++i)
        if (std::memcmp(&scalar[i], &expected[i], 4) != 0 && mismatches++ < 3)
          UNSCOPED_INFO("element " << i << ": " << scalar[i] << " where the reference has " << expected[i]);
      CHECK(mismatches == 0);
      CHECK(std::memcmp(fast.data(), expected.data(), expected.size() * 4) == 0);
      ++compared;
    }
  }
  return compared;
}

}  // namespace

TEST_CASE("GGUF: every metadata type of the numpy-written file decodes to the values it was given", "[io][gguf]") {
  const io::GgufFile file(gguf_fixture("metadata.gguf"));
  CHECK(file.version() == 2);
  CHECK(file.alignment() == 64);
  CHECK(file.data_offset() % 64 == 0);
  const std::vector<std::string> keys = file.keys();
  REQUIRE(keys.size() == 20);
  CHECK(keys.front() == "general.architecture");
  CHECK(keys.back() == "general.alignment");
  CHECK(file.string("general.architecture") == "none");
  CHECK(file.integer("test.uint8") == 250);
  CHECK(file.value("test.uint8").type == io::GgufType::uint8);
  CHECK(file.integer("test.int8") == -100);
  CHECK(file.integer("test.uint16") == 65000);
  CHECK(file.integer("test.int16") == -30000);
  CHECK(file.integer("test.uint32") == 4000000000LL);
  CHECK(file.integer("test.int32") == -2000000000LL);
  CHECK(file.number("test.float32") == 0.25);
  CHECK(file.boolean("test.bool"));
  CHECK(file.string("test.string") == "h\xc3\xa9llo");
  CHECK(file.integer("test.uint64") == (std::int64_t(1) << 40) + 3);
  CHECK(file.integer("test.int64") == -(std::int64_t(1) << 40));
  CHECK(file.number("test.float64") == -1.5);
  CHECK(file.number("test.uint32") == 4e9);
  CHECK(file.strings("test.strings") == std::vector<std::string>{"a", "", "\xe4\xb8\xad\xe6\x96\x87"});
  CHECK(file.numbers("test.floats") == std::vector<double>{0.5, -2.0, 3.25});
  CHECK(file.integers("test.ints") == std::vector<std::int64_t>{1, -2, 3});
  CHECK(file.numbers("test.ints") == std::vector<double>{1, -2, 3});
  CHECK(file.integers("test.bools") == std::vector<std::int64_t>{1, 0});
  CHECK(file.integers("test.empty").empty());
  CHECK(file.value("test.empty").element_type == io::GgufType::int64);
  const io::GgufValue& nested = file.value("test.nested");
  REQUIRE(nested.items.size() == 2);
  CHECK(nested.element_type == io::GgufType::array);
  CHECK(nested.items[0].integers == std::vector<std::int64_t>{1, 2});
  CHECK(nested.items[0].element_type == io::GgufType::uint8);
  CHECK(nested.items[1].strings == std::vector<std::string>{"x"});
  CHECK(file.find("absent") == nullptr);

  REQUIRE(file.tensors().size() == 2);
  const io::GgufTensor& vector = file.tensor("vector");
  CHECK(vector.dims == std::vector<std::uint64_t>{5});
  CHECK(vector.type == io::GgmlType::f32);
  CHECK(vector.file_offset == file.data_offset());
  float values[5];
  std::memcpy(values, vector.data, 20);
  CHECK((values[0] == 0 && values[4] == 4));
  const io::GgufTensor& matrix = file.tensor("matrix");
  CHECK(matrix.dims == std::vector<std::uint64_t>{3, 2});  // ggml order: the contiguous dimension first
  CHECK(matrix.row_length() == 3);
  CHECK(matrix.row_count() == 2);
  CHECK(matrix.type == io::GgmlType::f16);
  CHECK(matrix.offset == 64);  // the 20 bytes of `vector` padded to the alignment
  float row[3];
  kernels::widen(matrix.data + 6, kernels::StoredFloat::float16, 3, row);
  CHECK((row[0] == 4 && row[1] == 5 && row[2] == 6));
}

TEST_CASE("GGUF: typed accessors refuse a value of another type, naming the file, the key and its offset", "[io][gguf]") {
  const io::GgufFile file(gguf_fixture("metadata.gguf"));
  const std::string wrong = error_message<io_error>([&] { file.string("test.uint8"); });
  CHECK_THAT(wrong, Contains("GgufFile::string") && Contains("metadata.gguf") && Contains("test.uint8") &&
                        Contains("expected a string, found a uint8") && Contains("byte offset"));
  CHECK_THAT(error_message<io_error>([&] { file.strings("test.ints"); }),
             Contains("expected an array of strings, found an array of int32"));
  CHECK_THAT(error_message<io_error>([&] { file.integer("test.float32"); }), Contains("found a float32"));
  CHECK_THAT(error_message<io_error>([&] { file.integer("absent.key"); }), Contains("missing metadata key 'absent.key'"));
  CHECK_THAT(error_message<io_error>([&] { file.tensor("absent"); }), Contains("no tensor named 'absent'"));
}

TEST_CASE("GGUF: serialize_gguf writes the numpy writer's bytes for the same header and tensors", "[io][gguf]") {
  const std::vector<unsigned char> original_bytes = io::read_file(gguf_fixture("metadata.gguf"));
  const std::string original(original_bytes.begin(), original_bytes.end());
  const auto rewrite = [](const io::GgufFile& file) {
    std::vector<io::GgufTensorBytes> tensors;
    for (const io::GgufTensor& t : file.tensors())
      tensors.push_back({t.name, t.dims, t.type, std::string(reinterpret_cast<const char*>(t.data), t.byte_count)});
    return io::serialize_gguf(file.metadata(), tensors);
  };
  std::string written = rewrite(io::GgufFile(gguf_fixture("metadata.gguf")));
  REQUIRE(written.size() == original.size());
  gguf_poke<std::uint32_t>(written, 4, 2);  // serialize_gguf writes version 3, the fixture is version 2
  CHECK(written == original);
  // and a round trip of the blocks file (version 3) is the identity
  const std::vector<unsigned char> blocks_bytes = io::read_file(gguf_fixture("blocks.gguf"));
  const std::string blocks(blocks_bytes.begin(), blocks_bytes.end());
  CHECK(rewrite(io::GgufFile(gguf_fixture("blocks.gguf"))) == blocks);
  CHECK_THAT(error_message([&] {
               io::serialize_gguf({}, {{"short", {32}, io::GgmlType::q8_0, std::string(33, '\0')}});
             }),
             Contains("serialize_gguf") && Contains("'short'"));
  // a tensor without dimensions holds one element (the parser accepts it, so the writer does too)
  const std::string scalar = io::serialize_gguf({}, {{"scalar", {}, io::GgmlType::f32, std::string(4, '\0')}});
  const io::GgufHeader parsed =
      io::parse_gguf_header(reinterpret_cast<const unsigned char*>(scalar.data()), scalar.size(), "scalar.gguf");
  REQUIRE(parsed.tensors.size() == 1);
  CHECK(parsed.tensors[0].dims.empty());
  CHECK(parsed.tensors[0].element_count() == 1);
  CHECK(parsed.tensors[0].byte_count == 4);
}

TEST_CASE("GGUF: every block type dequantizes bit for bit as the numpy implementation of ggml's definitions",
          "[io][gguf][kernels]") {
  // blocks.gguf: real data quantized and random blocks of the types gguf_format.py implements
  CHECK(gguf_dequantization_mismatches("blocks.gguf", "blocks_reference.npz", {"quantized.", "random."}) == 25);
}

TEST_CASE("GGUF: corrupt headers are io_errors naming the file, the key or tensor and the offset", "[io][gguf]") {
  const std::string good = gguf_small_file();
  REQUIRE(gguf_parse_error(good).empty());
  {
    std::string bytes = good;
    bytes[0] = 'X';
    CHECK_THAT(gguf_parse_error(bytes), Contains("bad.gguf") && Contains("bad magic") && Contains("byte offset 0"));
  }
  for (const std::uint32_t version : {0u, 1u, 4u}) {
    std::string bytes = good;
    gguf_poke<std::uint32_t>(bytes, 4, version);
    CHECK_THAT(gguf_parse_error(bytes), Contains("GGUF version " + std::to_string(version) + " is not supported") &&
                                            Contains("byte offset 4"));
  }
  // truncated anywhere: an io_error, never a crash or a silent success (the last tensor ends at the file's end)
  for (std::size_t size = 0; size < good.size(); ++size) {
    INFO("size " << size);
    const std::string message = gguf_parse_error(good.substr(0, size));
    CHECK_THAT(message, Contains("bad.gguf") && Contains("byte offset"));
  }
  CHECK_THAT(gguf_parse_error(good.substr(0, good.size() - 1)),
             Contains("tensor 'third'") && Contains("past the end") && Contains("truncated"));
  {  // an unknown ggml type
    std::string bytes = good;
    const std::size_t at = gguf_tensor_info_at(bytes, "second");
    gguf_poke<std::uint32_t>(bytes, at + 8 + 6 + 4 + 16, 99);
    CHECK_THAT(gguf_parse_error(bytes), Contains("tensor 'second'") && Contains("unknown ggml type 99") &&
                                            Contains("byte offset " + std::to_string(at)));
  }
  {  // misaligned data
    std::string bytes = good;
    const std::size_t at = gguf_tensor_info_at(bytes, "second");
    gguf_poke<std::uint64_t>(bytes, at + 8 + 6 + 4 + 16 + 4, 40);
    CHECK_THAT(gguf_parse_error(bytes), Contains("tensor 'second'") && Contains("misaligned data: offset 40") &&
                                            Contains("alignment 32"));
  }
  {  // overlapping tensors
    std::string bytes = good;
    const std::size_t at = gguf_tensor_info_at(bytes, "third");
    gguf_poke<std::uint64_t>(bytes, at + 8 + 5 + 4 + 8 + 4, 32);
    CHECK_THAT(gguf_parse_error(bytes), Contains("overlaps tensor"));
  }
  {  // a tensor far past the end
    std::string bytes = good;
    const std::size_t at = gguf_tensor_info_at(bytes, "first");
    gguf_poke<std::uint64_t>(bytes, at + 8 + 5 + 4 + 8 + 4, std::uint64_t(1) << 40);
    CHECK_THAT(gguf_parse_error(bytes), Contains("tensor 'first'") && Contains("past the end"));
  }
  {  // dimensions: too many, zero, overflowing, not whole blocks
    std::string bytes = good;
    const std::size_t at = gguf_tensor_info_at(bytes, "second");
    std::string five = bytes, zero = bytes, huge = bytes, blocks = bytes;
    gguf_poke<std::uint32_t>(five, at + 8 + 6, 5);
    CHECK_THAT(gguf_parse_error(five), Contains("tensor 'second': 5 dimensions (at most 4)"));
    gguf_poke<std::uint64_t>(zero, at + 8 + 6 + 4, 0);
    CHECK_THAT(gguf_parse_error(zero), Contains("dimension 0 is 0"));
    gguf_poke<std::uint64_t>(huge, at + 8 + 6 + 4, std::uint64_t(1) << 40);
    gguf_poke<std::uint64_t>(huge, at + 8 + 6 + 12, std::uint64_t(1) << 40);
    CHECK_THAT(gguf_parse_error(huge), Contains("overflows"));
    gguf_poke<std::uint32_t>(blocks, at + 8 + 6 + 4 + 16, 12);  // q4_K rows of 8 elements
    CHECK_THAT(gguf_parse_error(blocks), Contains("not a whole number of q4_K blocks of 256"));
  }
  {  // values: an unknown type, a bool that is not 0/1, a string longer than the file, a huge array, a bad alignment
    io::GgufValue flag = gguf_scalar(io::GgufType::boolean, 1), text, array, alignment;
    text.type = io::GgufType::string;
    text.text = "abc";
    array.type = io::GgufType::array;
    array.element_type = io::GgufType::int32;
    array.integers = {1, 2, 3};
    const std::string base = io::serialize_gguf({{"k.flag", flag}, {"k.text", text}, {"k.array", array}}, {});
    REQUIRE(gguf_parse_error(base).empty());
    const std::size_t flag_at = base.find("k.flag") + 6;  // its type tag, then the byte
    std::string bad_type = base, bad_bool = base, long_text = base, huge_array = base, bad_element = base;
    gguf_poke<std::uint32_t>(bad_type, flag_at, 13);
    CHECK_THAT(gguf_parse_error(bad_type), Contains("key 'k.flag' has unknown value type 13") &&
                                               Contains("byte offset " + std::to_string(flag_at)));
    gguf_poke<std::uint8_t>(bad_bool, flag_at + 4, 2);
    CHECK_THAT(gguf_parse_error(bad_bool), Contains("key 'k.flag': a bool must be 0 or 1, not 2") &&
                                               Contains("byte offset " + std::to_string(flag_at + 4)));
    gguf_poke<std::uint64_t>(long_text, base.find("k.text") + 6 + 4, 1000);
    CHECK_THAT(gguf_parse_error(long_text), Contains("value of key 'k.text'") && Contains("1000 bytes"));
    gguf_poke<std::uint64_t>(huge_array, base.find("k.array") + 7 + 4 + 4, std::uint64_t(1) << 60);
    CHECK_THAT(gguf_parse_error(huge_array), Contains("key 'k.array' declares an array of"));
    gguf_poke<std::uint32_t>(bad_element, base.find("k.array") + 7 + 4, 77);
    CHECK_THAT(gguf_parse_error(bad_element), Contains("unknown array element type 77"));
    for (const auto& value : {gguf_scalar(io::GgufType::uint32, 48), gguf_scalar(io::GgufType::uint32, 0),
                              gguf_scalar(io::GgufType::int32, 32)}) {
      // written under another key (serialize_gguf refuses a bad alignment), then renamed
      std::string bytes = io::serialize_gguf({{"general.alignmenX", value}}, {});
      bytes[bytes.find("alignmenX") + 8] = 't';
      CHECK_THAT(gguf_parse_error(bytes), Contains("general.alignment") && Contains("power of two"));
    }
  }
  {  // duplicates
    const io::GgufValue one = gguf_scalar(io::GgufType::uint8, 1);
    CHECK_THAT(gguf_parse_error(io::serialize_gguf({{"same", one}, {"same", one}}, {})),
               Contains("duplicate metadata key 'same'"));
    const std::vector<io::GgufTensorBytes> twice{{"t", {4}, io::GgmlType::f32, std::string(16, '\0')},
                                                 {"t", {4}, io::GgmlType::f32, std::string(16, '\0')}};
    CHECK_THAT(gguf_parse_error(io::serialize_gguf({}, twice)), Contains("tensor 't': duplicate tensor name"));
  }
  // the file reader names the path
  const std::string path = (std::filesystem::temp_directory_path() / "attnscope_bad_magic.gguf").string();
  io::write_file(path, "GGUX" + good.substr(4));
  CHECK_THAT(error_message<io_error>([&] { io::GgufFile file(path); }), Contains(path) && Contains("bad magic"));
}

TEST_CASE("GGUF: the codebook and ternary types dequantize bit for bit as llama.cpp's gguf-py", "[io][gguf][kernels]") {
  // quant_blocks.gguf: random blocks of each type (finite fp16 scales, every E8M0 byte), dequantized by llama.cpp's
  // gguf-py (tests/fixtures/make_gguf_quant_fixtures.py)
  CHECK(gguf_dequantization_mismatches("quant_blocks.gguf", "quant_blocks_reference.npz", {"random."}) == 12);
}

TEST_CASE("GGUF: the i-quant grids, signs and levels are gguf-py's, entry by entry", "[io][gguf][kernels]") {
  // quant_blocks.gguf holds gguf-py's tables as I8 tensors, decoded from its own (packed hexadecimal) encoding; ours
  // are generated from ggml-common.h (scripts/make_iq_grids.py)
  const io::GgufFile file(gguf_fixture("quant_blocks.gguf"));
  const auto check_grid = [&](const std::string& name, const auto& grid, std::size_t width) {
    INFO(name);
    const io::GgufTensor& t = file.tensor(name);
    CHECK(t.type == io::GgmlType::i8);
    REQUIRE(t.dims == std::vector<std::uint64_t>{width, std::size(grid)});
    int mismatches = 0;
    for (std::size_t i = 0; i < std::size(grid); ++i)
      for (std::size_t j = 0; j < width; ++j)
        mismatches += static_cast<unsigned char>(grid[i] >> (8 * j)) != t.data[i * width + j];
    CHECK(mismatches == 0);
  };
  check_grid("grid.IQ2_XXS", kernels::detail::iq2_xxs_grid, 8);
  check_grid("grid.IQ2_XS", kernels::detail::iq2_xs_grid, 8);
  check_grid("grid.IQ2_S", kernels::detail::iq2_s_grid, 8);
  check_grid("grid.IQ3_XXS", kernels::detail::iq3_xxs_grid, 4);
  check_grid("grid.IQ3_S", kernels::detail::iq3_s_grid, 4);
  check_grid("grid.IQ1_S", kernels::detail::iq1_s_grid, 8);
  const auto check_bytes = [&](const std::string& name, const auto& table) {
    INFO(name);
    const io::GgufTensor& t = file.tensor(name);
    REQUIRE(t.byte_count == std::size(table));
    for (std::size_t i = 0; i < std::size(table); ++i) CHECK(static_cast<unsigned char>(table[i]) == t.data[i]);
  };
  check_bytes("signs.IQ2_XXS", kernels::detail::iq2_signs);
  check_bytes("values.IQ4_NL", kernels::detail::iq4_nl_values);
  check_bytes("values.MXFP4", kernels::detail::fp4_doubled_values);
}

TEST_CASE("GGUF: every stored format has the ggml type number, name and block shape of the file format",
          "[io][gguf][kernels]") {
  // kernels cannot include io (docs/design.md), so the two tables meet here: every row of kernels::stored_formats
  // names a type of io's table with the same ggml name and block shape
  for (const kernels::StoredFormatInfo& row : kernels::stored_formats) {
    INFO(row.name);
    const io::GgmlTypeInfo info = io::ggml_type_info(row.ggml_type);
    REQUIRE(info.name != nullptr);
    CHECK(std::string(info.name) == row.ggml_name);
    CHECK(Index(info.block_elements) == row.block_elements);
    CHECK(std::size_t(info.block_bytes) == row.block_bytes);
  }
}
