// Tests of io::MappedArrays: NPY files and stored/deflated NPZ members read through a memory map give exactly the
// values read_npy / read_npz give; stored float32 members are views (no copy), per-head slices of [H, L, d] match
// Array::slice_matrix; corrupt files and misuse throw io_error naming the file or array.
#include <fstream>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/mapped_arrays.hpp"
#include "attnscope/io/npy.hpp"
#include "attnscope/io/npz.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {

/// A seeded [heads, length, dimension] float array.
attnscope::io::Array random_heads_array(std::uint64_t seed, std::int64_t heads, std::int64_t length,
                                        std::int64_t dimension) {
  attnscope::Random random(seed);
  std::vector<float> values(static_cast<std::size_t>(heads * length * dimension));
  for (float& value : values) value = static_cast<float>(random.normal());
  return attnscope::io::Array::from_vector(values, {heads, length, dimension});
}

std::string mapped_test_path(const std::string& name) { return std::string(ATTNSCOPE_BINARY_DIR) + "/" + name; }

}  // namespace

TEST_CASE("MappedArrays reads stored and deflated NPZ members as read_npz does, stored ones in place") {
  using attnscope::io::MappedArrays;
  const auto q = random_heads_array(1201, 3, 17, 5), k = random_heads_array(1202, 3, 17, 5);
  const attnscope::RowMatrix<double> scores = attnscope::RowMatrix<double>::Random(4, 6);
  const attnscope::io::NamedArrays arrays{{"layer0.q", q}, {"layer0.k", k}, {"scores", attnscope::io::Array::from(scores)}};
  for (const auto compression : {attnscope::io::Compression::stored, attnscope::io::Compression::deflated}) {
    const bool stored = compression == attnscope::io::Compression::stored;
    INFO("stored " << stored);
    const std::string path = mapped_test_path("test_mapped_arrays.npz");
    attnscope::io::write_npz(path, arrays, compression);
    const MappedArrays mapped(path);
    CHECK(mapped.names() == std::vector<std::string>{"layer0.q", "layer0.k", "scores"});
    CHECK(mapped.contains("layer0.k"));
    CHECK_FALSE(mapped.contains("layer1.k"));
    const auto& mapped_q = mapped.at("layer0.q");
    CHECK(mapped_q.is_view() == stored);
    CHECK(mapped_q.shape() == q.shape());
    CHECK(mapped_q.slice_count() == 3);
    for (attnscope::Index head = 0; head < 3; ++head) {
      const attnscope::RowMatrix<float> expected = q.slice_matrix<float>({head});
      CHECK(mapped_q.slice_copy<float>(head) == expected);
      if (mapped_q.is_aligned()) CHECK(attnscope::RowMatrix<float>(mapped_q.slice<float>(head)) == expected);
    }
    CHECK(mapped.at("scores").slice_copy<double>(0) == scores);  // rank 2: the one slice
    if (stored) {  // the view points into the mapped file itself
      const auto& file_bytes = mapped.at("layer0.k");
      CHECK(file_bytes.is_view());
    }
  }
}

TEST_CASE("MappedArrays reads an NPY file (C and Fortran order) named after the file") {
  const auto q = random_heads_array(1203, 2, 9, 4);
  const std::string path = mapped_test_path("q.npy");
  attnscope::io::write_npy(path, q);
  const attnscope::io::MappedArrays mapped(path);
  REQUIRE(mapped.names() == std::vector<std::string>{"q"});
  const auto& array = mapped.at("q");
  CHECK(array.is_view());
  CHECK(array.is_aligned());  // NPY data start at a multiple of 64 bytes
  CHECK(attnscope::RowMatrix<float>(array.slice<float>(1)) == q.slice_matrix<float>({1}));
  attnscope::io::write_npy(path, q, true);  // Fortran order: decoded into a C-order copy
  const attnscope::io::MappedArrays fortran(path);
  CHECK_FALSE(fortran.at("q").is_view());
  CHECK(fortran.at("q").slice_copy<float>(1) == q.slice_matrix<float>({1}));
}

TEST_CASE("MappedArrays: corrupt files and misuse throw io_error naming the file or the array") {
  using attnscope::testing::error_message;
  const std::string path = mapped_test_path("test_mapped_arrays_errors.npz");
  attnscope::io::write_npz(path, {{"q", random_heads_array(1204, 2, 8, 4)}}, attnscope::io::Compression::stored);
  const attnscope::io::MappedArrays mapped(path);
  CHECK(error_message<attnscope::io_error>([&] { mapped.at("k"); }) ==
        "attnscope::MappedArrays::at: " + path + ": has no array 'k'");
  CHECK(error_message<attnscope::io_error>([&] { mapped.at("q").slice_copy<double>(0); }) ==
        "attnscope::MappedArray::slice_copy: q: holds float32, not float64");
  CHECK(error_message<attnscope::io_error>([&] { mapped.at("q").slice_copy<float>(2); }) ==
        "attnscope::MappedArray::slice_copy: q: slice 2 is outside [0, 2)");
  // a flipped data byte: the CRC-32 check at open names the member
  std::vector<unsigned char> bytes = attnscope::io::read_file(path);
  bytes[bytes.size() / 2] ^= 0x40;
  attnscope::io::write_file(path, std::string(bytes.begin(), bytes.end()));
  CHECK(error_message<attnscope::io_error>([&] { attnscope::io::MappedArrays corrupt(path); })
            .find("CRC-32 mismatch in member 'q.npy'") != std::string::npos);
  // truncated: the ZIP directory is gone
  bytes.resize(bytes.size() / 2);
  attnscope::io::write_file(path, std::string(bytes.begin(), bytes.end()));
  CHECK(error_message<attnscope::io_error>([&] { attnscope::io::MappedArrays truncated(path); })
            .find("not a ZIP archive") != std::string::npos);
  CHECK(error_message<attnscope::io_error>([&] { attnscope::io::MappedArrays missing(path + ".missing"); })
            .find("cannot open file") != std::string::npos);
}
