// Tests of the NPZ reader/writer: numpy's savez and savez_compressed output (numpy_golden.hpp), round trips,
// ZIP structure checked field by field, CRC and every corruption.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/npz.hpp"
#include "io_test_support.hpp"
#include "numpy_golden.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

using namespace attnscope;
using attnscope::testing::bytes_of;
using attnscope::testing::error_message;
using Catch::Matchers::Contains;
namespace golden = attnscope::testing::golden;

namespace {

io::NamedArrays parse_npz(const std::string& bytes, const std::string& name = "mem.npz") {
  return io::parse_npz_ordered(bytes_of(bytes), bytes.size(), name);
}

io::NamedArrays sample_arrays() {
  RowMatrix<double> m(2, 3);
  m << -1, -0.5, 0, 0.5, 1, 1.5;
  return {{"a", io::Array::from(m)}, {"b", io::Array::from_vector(std::vector<std::int32_t>{1, -2, 2147483647}, {3})}};
}

std::uint32_t u32_at(const std::string& bytes, std::size_t offset) {
  std::uint32_t value;
  std::memcpy(&value, bytes.data() + offset, 4);
  return value;
}

/// Seeded arrays of every NPY dtype with keys of 1 to 40 characters (attnscope::testing::random_named_arrays).
io::NamedArrays npz_random_arrays(Random& random) {
  return attnscope::testing::random_named_arrays(
      random,
      {io::DType::float32, io::DType::float64, io::DType::int32, io::DType::int64, io::DType::boolean,
       io::DType::float16},
      true, [&](std::size_t i) { return "k" + std::to_string(i) + std::string(random.below(40), "._ab"[random.below(4)]); });
}

}  // namespace

TEST_CASE("NPZ: write_npz writes exactly the bytes of serialize_npz, read back as the same arrays", "[io][npz]") {
  const std::string path = attnscope::testing::test_output_path("test_io_streamed.npz");
  Random random(2024);
  std::size_t members = 0;
  for (int round = 0; round < 60; ++round) {
    const io::NamedArrays arrays = round == 0 ? io::NamedArrays{} : npz_random_arrays(random);
    for (const auto compression : {io::Compression::stored, io::Compression::deflated}) {
      INFO("round " << round << ", " << (compression == io::Compression::stored ? "stored" : "deflated"));
      io::write_npz(path, arrays, compression);
      const std::string written = attnscope::testing::file_bytes(path);
      REQUIRE(written == io::serialize_npz(arrays, compression));
      // The file on its own: the reader returns the arrays given (names, dtypes, shapes and bytes, in order).
      const io::NamedArrays back = io::read_npz_ordered(path);
      REQUIRE(back.size() == arrays.size());
      for (std::size_t i = 0; i < arrays.size(); ++i) {
        CHECK(back[i].first == arrays[i].first);
        CHECK(back[i].second.dtype() == arrays[i].second.dtype());
        CHECK(back[i].second.shape() == arrays[i].second.shape());
        CHECK(back[i].second.bytes() == arrays[i].second.bytes());
        // Stored members hold the .npy file verbatim.
        if (compression == io::Compression::stored)
          CHECK(written.find(io::serialize_npy(arrays[i].second)) != std::string::npos);
      }
      members += arrays.size();
    }
  }
  CHECK(members > 300);
  // numpy's arrays written by write_npz: each stored member is numpy's own .npy file.
  io::write_npz(path, io::parse_npz_ordered(bytes_of(golden::npz_savez), golden::npz_savez.size(), "savez.npz"),
                io::Compression::stored);
  const std::string written = attnscope::testing::file_bytes(path);
  CHECK(written.compare(35, golden::npy_f8_2x3.size(), golden::npy_f8_2x3) == 0);
  CHECK(written.find(golden::npy_i4_3) != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("NPZ: write_npz rejects bad arrays before creating the file and names write_npz and the path on io errors",
          "[io][npz][errors]") {
  const std::string existing = attnscope::testing::test_output_path("test_io_existing.npz");
  const std::string absent = attnscope::testing::test_output_path("test_io_absent.npz");
  std::remove(absent.c_str());
  const auto one = io::Array::from_vector(std::vector<float>{1, 2}, {2});
  const io::NamedArrays long_name = {{std::string(0xFFFF - 3, 'n'), one}};
  const io::NamedArrays bfloat16 = {{"a", one}, {"b", io::Array(io::DType::bfloat16, {1}, {0, 0})}};
  const io::NamedArrays too_many(0xFFFF, {"x", io::Array()});  // also duplicates: the count is checked first
  const std::vector<std::pair<io::NamedArrays, std::string>> bad = {
      {{{"a", one}, {"a", one}}, "attnscope::serialize_npz: array names must be non-empty and unique, got 'a'"},
      {{{"", one}}, "attnscope::serialize_npz: array names must be non-empty and unique, got ''"},
      {long_name, "attnscope::serialize_npz: array name of 65532 bytes is too long"},
      {bfloat16, "attnscope::serialize_npy: dtype bfloat16 has no NPY equivalent"},
      {too_many, "attnscope::serialize_npz: 65535 arrays exceed the ZIP limit of 65534"}};
  for (const auto& [arrays, message] : bad)
    for (const auto compression : {io::Compression::stored, io::Compression::deflated}) {
      // The same error as serialize_npz; an existing file is left as it was and no file is created.
      CHECK(error_message([&] { io::serialize_npz(arrays, compression); }) == message);
      io::write_file(existing, "old contents");
      CHECK(error_message([&] { io::write_npz(existing, arrays, compression); }) == message);
      CHECK(attnscope::testing::file_bytes(existing) == "old contents");
      CHECK(error_message([&] { io::write_npz(absent, arrays, compression); }) == message);
      CHECK_FALSE(io::detail::path_exists(absent));
    }
  std::remove(existing.c_str());

  // A folder that does not exist, and a folder: io_error naming write_npz and the path.
  const std::string unwritable = attnscope::testing::test_output_path("no_such_folder/x.npz");
  CHECK(error_message<io_error>([&] { io::write_npz(unwritable, sample_arrays()); }) ==
        "attnscope::write_npz: " + unwritable + ": cannot open file for writing: the folder " +
            attnscope::testing::test_output_path("no_such_folder") + " does not exist");
  CHECK_THAT(error_message<io_error>([&] { io::write_npz(ATTNSCOPE_BINARY_DIR, sample_arrays()); }),
             Contains("attnscope::write_npz: " + std::string(ATTNSCOPE_BINARY_DIR) + ": cannot open file for writing"));
  // A device that accepts no byte: the write error names the path, and the device is not removed.
  if (io::detail::path_kind("/dev/full") == io::detail::PathKind::other) {
    const io::NamedArrays big = {{"big", io::Array(io::DType::float64, {1 << 17}, std::vector<unsigned char>(1 << 20))}};
    for (const auto compression : {io::Compression::stored, io::Compression::deflated})
      CHECK_THAT(error_message<io_error>([&] { io::write_npz("/dev/full", big, compression); }),
                 Contains("attnscope::write_npz: /dev/full: write failed"));
    CHECK_THAT(error_message<io_error>([&] { io::write_npz("/dev/full", sample_arrays()); }),
               Contains("attnscope::write_npz: /dev/full: write failed"));
    CHECK(io::detail::path_kind("/dev/full") == io::detail::PathKind::other);
  }
  // A failure after the file was created (here thrown by the producer) removes the partly written file.
  const std::string partial = attnscope::testing::test_output_path("test_io_partial.npz");
  CHECK(error_message([&] {
          io::detail::write_file_streamed("write_npz", partial, [](const auto& write) {
            write("PK", 2);
            attnscope::detail::throw_invalid_argument("serialize_npz", "stop");
          });
        }) == "attnscope::serialize_npz: stop");
  CHECK_FALSE(io::detail::path_exists(partial));
}

TEST_CASE("NPZ: numpy's savez and savez_compressed archives are read", "[io][npz]") {
  for (const std::string* file : {&golden::npz_savez, &golden::npz_savez_compressed}) {
    const io::NamedArrays arrays = parse_npz(*file);
    REQUIRE(arrays.size() == 2);
    CHECK(arrays[0].first == "a");
    CHECK(arrays[1].first == "b");
    CHECK(io::serialize_npy(arrays[0].second) == golden::npy_f8_2x3);
    CHECK(io::serialize_npy(arrays[1].second) == golden::npy_i4_3);
    const auto map = io::parse_npz(bytes_of(*file), file->size(), "m.npz");
    CHECK(map.at("b").to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -2, 2147483647});
  }
}

TEST_CASE("NPZ: stored and deflated archives round-trip and have the ZIP layout", "[io][npz]") {
  const io::NamedArrays arrays = sample_arrays();
  const std::string stored = io::serialize_npz(arrays, io::Compression::stored);
  const std::string deflated = io::serialize_npz(arrays);
  for (const std::string* bytes : {&stored, &deflated}) {
    const io::NamedArrays back = parse_npz(*bytes);
    REQUIRE(back.size() == 2);
    CHECK(back[0].first == "a");
    CHECK(back[0].second.bytes() == arrays[0].second.bytes());
    CHECK(back[1].second.bytes() == arrays[1].second.bytes());
    CHECK(u32_at(*bytes, 0) == 0x04034b50);
    CHECK(u32_at(*bytes, bytes->size() - 22) == 0x06054b50);
  }
  // Stored: the first member's data is the .npy file verbatim after a 30-byte header and "a.npy".
  CHECK(stored.compare(30, 5, "a.npy") == 0);
  CHECK(stored.compare(35, golden::npy_f8_2x3.size(), golden::npy_f8_2x3) == 0);
  CHECK(u32_at(stored, 14) == io::detail::zip_crc32(bytes_of(golden::npy_f8_2x3), golden::npy_f8_2x3.size()));
  CHECK(deflated[8] == 8);  // compression method deflate
  CHECK(deflated.size() < stored.size());
  // CRC-32 of "123456789" is the standard check value 0xCBF43926.
  CHECK(io::detail::zip_crc32(bytes_of("123456789"), 9) == 0xCBF43926u);
  // Many random arrays, both compressions.
  Random random(99);
  io::NamedArrays many;
  for (int i = 0; i < 20; ++i) {
    std::vector<float> values(random.below(300));
    for (auto& v : values) v = static_cast<float>(random.normal());
    many.emplace_back("layer" + std::to_string(i) + ".attention", io::Array::from_vector(values, {std::int64_t(values.size())}));
  }
  for (auto compression : {io::Compression::stored, io::Compression::deflated}) {
    const io::NamedArrays back = parse_npz(io::serialize_npz(many, compression));
    REQUIRE(back.size() == many.size());
    for (std::size_t i = 0; i < many.size(); ++i) {
      CHECK(back[i].first == many[i].first);
      CHECK(back[i].second.bytes() == many[i].second.bytes());
    }
  }
  const std::string path = std::string(ATTNSCOPE_BINARY_DIR) + "/test_io_roundtrip.npz";
  io::write_npz(path, arrays);
  CHECK(io::read_npz(path).at("a").to_matrix<double>()(1, 2) == 1.5);
  CHECK(io::read_npz_ordered(path).size() == 2);
  std::remove(path.c_str());
}

TEST_CASE("NPZ: truncation, bad CRC, ZIP64 and other corruption give io_error", "[io][npz][errors]") {
  const std::string stored = io::serialize_npz(sample_arrays(), io::Compression::stored);
  const std::string deflated = io::serialize_npz(sample_arrays());
  for (const std::string* file : {&stored, &deflated, &golden::npz_savez, &golden::npz_savez_compressed})
    for (std::size_t cut = 0; cut < file->size(); ++cut)
      REQUIRE_THAT(error_message<io_error>([&] { parse_npz(file->substr(0, cut), "cut.npz"); }), Contains("cut.npz"));
  // A flipped data byte: CRC mismatch (stored) or a broken deflate stream / CRC mismatch (deflated).
  std::string bad_crc = stored;
  bad_crc[35 + 130] ^= 0x40;
  CHECK_THAT(error_message<io_error>([&] { parse_npz(bad_crc, "crc.npz"); }), Contains("crc.npz") && Contains("CRC-32 mismatch in member 'a.npy'"));
  for (std::size_t offset = 40; offset < 120; ++offset) {
    std::string corrupt = deflated;
    corrupt[offset] ^= 0x10;
    CHECK_FALSE(error_message<io_error>([&] { parse_npz(corrupt); }).empty());
  }
  const std::size_t end = stored.size() - 22, directory = u32_at(stored, end + 16);
  auto corrupt_at = [&](std::size_t offset, std::uint32_t value, int width) {
    std::string bytes = stored;
    std::memcpy(&bytes[offset], &value, static_cast<std::size_t>(width));
    return error_message<io_error>([&] { parse_npz(bytes); });
  };
  CHECK_THAT(corrupt_at(end + 10, 0xFFFF, 2), Contains("ZIP64"));
  CHECK_THAT(corrupt_at(end + 16, 0xFFFFFFFF, 4), Contains("ZIP64"));
  CHECK_THAT(corrupt_at(directory + 20, 0xFFFFFFFF, 4), Contains("ZIP64"));  // compressed size
  CHECK_THAT(corrupt_at(directory + 42, 0xFFFFFFFF, 4), Contains("ZIP64"));  // local header offset
  CHECK_THAT(corrupt_at(end + 16, static_cast<std::uint32_t>(end), 4), Contains("points past"));
  CHECK_THAT(corrupt_at(end + 4, 1, 2), Contains("multi-disk"));
  CHECK_THAT(corrupt_at(directory + 10, 12, 2), Contains("unsupported compression method 12"));
  CHECK_THAT(corrupt_at(directory + 8, 1, 2), Contains("encrypted"));
  CHECK_THAT(corrupt_at(directory + 24, 9999, 4), Contains("stored member 'a.npy' has compressed size"));
  CHECK_THAT(corrupt_at(directory + 20, 1u << 20, 4), Contains("member data"));
  CHECK_THAT(corrupt_at(directory, 0x12345678, 4), Contains("bad central directory signature"));
  CHECK_THAT(corrupt_at(0, 0x12345678, 4), Contains("bad local header signature"));
  CHECK_THAT(corrupt_at(30, 0x78, 1), Contains("local header name differs"));
  CHECK_THAT(corrupt_at(directory + 46 + 4, 0x78, 1), Contains("is not a .npy file"));  // "a.npy" -> "a.npx"
  CHECK_THAT(corrupt_at(end + 20, 5, 2), Contains("no end-of-central-directory"));
  // A deflated member claiming an impossible expansion is refused before allocating.
  std::string huge = deflated;
  const std::size_t deflated_directory = u32_at(deflated, deflated.size() - 6);
  const std::uint32_t big = 0xF0000000u;
  std::memcpy(&huge[deflated_directory + 24], &big, 4);
  CHECK_THAT(error_message<io_error>([&] { parse_npz(huge); }), Contains("impossible for deflate"));
  // Duplicate members and a ZIP64 end-of-directory locator.
  io::NamedArrays twice = sample_arrays();
  twice[1].first = "a";
  CHECK_THROWS_AS(io::serialize_npz(twice), invalid_argument);
  std::string duplicated = stored;
  duplicated[directory + 46 + 46 + 5] = 'a';  // second directory name "b.npy" -> "a.npy"
  CHECK_THAT(error_message<io_error>([&] { parse_npz(duplicated); }), Contains("local header name differs") || Contains("duplicate member"));
  // Overlapping members (the classic ZIP bomb): a second directory entry "b.npy" whose local header lies inside
  // member "a"'s data, where a fake local header and a valid NPY file for "b" were planted.
  const std::string planted_npy = io::serialize_npy(io::Array::from_vector(std::vector<float>{1}, {1}));
  std::string fake;
  io::detail::append_little_endian(fake, io::detail::zip_local_signature);
  fake += std::string(22, '\0');
  io::detail::append_little_endian<std::uint16_t>(fake, 5);
  io::detail::append_little_endian<std::uint16_t>(fake, 0);
  fake += "b.npy" + planted_npy;
  fake.resize((fake.size() + 3) / 4 * 4, '\0');
  const std::string carrier = io::serialize_npz(
      {{"a", io::Array(io::DType::int32, {std::int64_t(fake.size() / 4)}, std::vector<unsigned char>(fake.begin(), fake.end()))}},
      io::Compression::stored);
  const std::size_t carrier_directory = u32_at(carrier, carrier.size() - 6);
  const std::size_t fake_offset = carrier.find(fake.substr(0, 30));
  REQUIRE(fake_offset < carrier_directory);
  std::string entry_b = carrier.substr(carrier_directory, 46);
  const std::uint32_t planted_crc = io::detail::zip_crc32(bytes_of(planted_npy), planted_npy.size());
  const auto planted_size = static_cast<std::uint32_t>(planted_npy.size()), planted_offset = static_cast<std::uint32_t>(fake_offset);
  std::memcpy(&entry_b[16], &planted_crc, 4);
  std::memcpy(&entry_b[20], &planted_size, 4);
  std::memcpy(&entry_b[24], &planted_size, 4);
  std::memcpy(&entry_b[42], &planted_offset, 4);
  entry_b += "b.npy";
  std::string bomb = carrier.substr(0, carrier.size() - 22) + entry_b + carrier.substr(carrier.size() - 22);
  const std::uint16_t two = 2;
  const std::uint32_t directory_bytes = 2 * 51;
  std::memcpy(&bomb[bomb.size() - 22 + 8], &two, 2);
  std::memcpy(&bomb[bomb.size() - 22 + 10], &two, 2);
  std::memcpy(&bomb[bomb.size() - 22 + 12], &directory_bytes, 4);
  CHECK_THAT(error_message<io_error>([&] { parse_npz(bomb, "bomb.npz"); }), Contains("member 'b.npy' overlaps another member's bytes"));
  std::string zip64 = stored;
  const std::uint32_t locator = 0x07064b50;
  zip64.insert(end, std::string(20, '\0'));
  std::memcpy(&zip64[end], &locator, 4);
  CHECK_THAT(error_message<io_error>([&] { parse_npz(zip64); }), Contains("ZIP64"));
  CHECK_THAT(error_message<io_error>([&] { parse_npz("PK"); }), Contains("too short"));
  CHECK_THROWS_AS(io::read_npz("/nonexistent.npz"), io_error);
  CHECK_THROWS_AS(io::serialize_npz({{"", io::Array()}}), invalid_argument);
  // A member that is not valid NPY names the archive and member.
  io::NamedArrays one = {{"x", io::Array::from_vector(std::vector<float>{1, 2}, {2})}};
  std::string inner = io::serialize_npz(one, io::Compression::stored);
  inner[35 + 1] = 'X';  // NPY magic
  const std::uint32_t crc = io::detail::zip_crc32(bytes_of(inner) + 35, inner.size() - 35 - 22 - 51);
  std::memcpy(&inner[14], &crc, 4);
  std::memcpy(&inner[inner.size() - 22 - 51 + 16], &crc, 4);
  CHECK_THAT(error_message<io_error>([&] { parse_npz(inner, "w.npz"); }), Contains("parse_npy: w.npz:x.npy: not an NPY file"));
}
