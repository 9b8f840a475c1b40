// Tests of Array and the NPY reader/writer: numpy-written golden bytes (numpy_golden.hpp) read and reproduced
// byte-for-byte, round trips over every dtype, order and rank on seeded random shapes, and every failure mode.
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/npy.hpp"
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

io::Array parse_npy(const std::string& bytes, const std::string& name = "mem.npy") {
  return io::parse_npy(bytes_of(bytes), bytes.size(), name);
}

// A random array of the dtype and shape (C order), values exactly representable in every dtype.
io::Array random_array(io::DType dtype, const std::vector<std::int64_t>& shape, Random& random) {
  std::uint64_t count = 1;
  for (auto d : shape) count *= static_cast<std::uint64_t>(d);
  std::vector<double> values(count);
  for (auto& v : values) v = static_cast<double>(static_cast<std::int64_t>(random.below(2001)) - 1000) / 8.0;
  auto make = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> typed;
    for (double v : values) {
      if constexpr (std::is_same_v<T, bool>) typed.push_back(v > 0);
      else if constexpr (std::is_same_v<T, std::uint8_t>) typed.push_back(static_cast<T>(static_cast<std::int64_t>(v * 8) & 0xFF));
      else if constexpr (std::is_integral_v<T>) typed.push_back(static_cast<T>(v * 8));
      else typed.push_back(static_cast<T>(static_cast<float>(v)));
    }
    return io::Array::from_vector(typed, shape);
  };
  switch (dtype) {
    case io::DType::float32: return make(float{});
    case io::DType::float64: return make(double{});
    case io::DType::int32: return make(std::int32_t{});
    case io::DType::int64: return make(std::int64_t{});
    case io::DType::boolean: return make(bool{});
    case io::DType::float16: return make(Eigen::half{});
    case io::DType::bfloat16: return make(Eigen::bfloat16{});
    case io::DType::uint8: return make(std::uint8_t{});
  }
  return {};
}

}  // namespace

TEST_CASE("NPY: numpy-written files are read with the right dtype, shape and values", "[io][npy]") {
  const io::Array a = parse_npy(golden::npy_f8_2x3);
  CHECK(a.dtype() == io::DType::float64);
  CHECK(a.shape() == std::vector<std::int64_t>{2, 3});
  CHECK(a.to_vector<double>() == std::vector<double>{-1, -0.5, 0, 0.5, 1, 1.5});
  RowMatrix<double> expected(2, 3);
  expected << -1, -0.5, 0, 0.5, 1, 1.5;
  CHECK(a.to_matrix<double>() == expected);
  CHECK(a.to_matrix<float>() == expected.cast<float>());

  const io::Array i = parse_npy(golden::npy_i4_3);
  CHECK(i.dtype() == io::DType::int32);
  CHECK(i.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -2, 2147483647});
  CHECK(i.to_vector<std::int64_t>() == std::vector<std::int64_t>{1, -2, 2147483647});

  const io::Array f = parse_npy(golden::npy_f4_fortran);  // Fortran order on disk, C order in memory
  CHECK(f.dtype() == io::DType::float32);
  CHECK(f.to_vector<float>() == std::vector<float>{1.5f, 2, 3, 4, 5, -6.25f});

  const io::Array b = parse_npy(golden::npy_b1_2x2);
  CHECK(b.dtype() == io::DType::boolean);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, false, false, true});
  CHECK(b.to_vector<int>() == std::vector<int>{1, 0, 0, 1});

  const io::Array s = parse_npy(golden::npy_f8_scalar);
  CHECK(s.rank() == 0);
  CHECK(s.element_count() == 1);
  CHECK(s.to_vector<double>() == std::vector<double>{3.5});

  const io::Array l = parse_npy(golden::npy_i8_2x1x2);
  CHECK(l.shape() == std::vector<std::int64_t>{2, 1, 2});
  CHECK(l.to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{1, -1, std::int64_t{1} << 40, -(std::int64_t{1} << 62)});
  CHECK(l.slice_matrix<std::int64_t>({1})(0, 0) == std::int64_t{1} << 40);

  const io::Array h = parse_npy(golden::npy_f2_3);
  CHECK(h.dtype() == io::DType::float16);
  CHECK(h.to_vector<float>() == std::vector<float>{1, 0.5f, -65504});

  for (const std::string* versioned : {&golden::npy_v2, &golden::npy_v3}) {
    const io::Array v = parse_npy(*versioned);
    CHECK(v.shape() == std::vector<std::int64_t>{2, 2});
    CHECK(v.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2, 3, 4});
  }
}

TEST_CASE("NPY: the writer reproduces numpy's bytes exactly", "[io][npy]") {
  RowMatrix<double> m(2, 3);
  m << -1, -0.5, 0, 0.5, 1, 1.5;
  CHECK(io::serialize_npy(io::Array::from(m)) == golden::npy_f8_2x3);
  // Column-major Eigen input still gives C order.
  const Eigen::MatrixXd column_major = m;
  CHECK(io::serialize_npy(io::Array::from(column_major)) == golden::npy_f8_2x3);
  CHECK(io::serialize_npy(io::Array::from_vector(std::vector<std::int32_t>{1, -2, 2147483647}, {3})) == golden::npy_i4_3);
  RowMatrix<float> f(2, 3);
  f << 1.5f, 2, 3, 4, 5, -6.25f;
  CHECK(io::serialize_npy(io::Array::from(f), true) == golden::npy_f4_fortran);
  CHECK(io::serialize_npy(io::Array::from_vector(std::vector<bool>{true, false, false, true}, {2, 2})) == golden::npy_b1_2x2);
  CHECK(io::serialize_npy(io::Array::from_vector(std::vector<double>{3.5}, {})) == golden::npy_f8_scalar);
  CHECK(io::serialize_npy(io::Array::from_vector(
            std::vector<std::int64_t>{1, -1, std::int64_t{1} << 40, -(std::int64_t{1} << 62)}, {2, 1, 2})) ==
        golden::npy_i8_2x1x2);
  CHECK(io::serialize_npy(io::Array::from_vector(
            std::vector<Eigen::half>{Eigen::half(1.0f), Eigen::half(0.5f), Eigen::half(-65504.0f)}, {3})) ==
        golden::npy_f2_3);
  // The header always has a total length that is a multiple of 64 and ends in '\n'.
  for (int digits = 1; digits < 12; ++digits) {
    std::int64_t dim = 1;
    for (int d = 1; d < digits; ++d) dim *= 10;
    const std::string bytes = io::serialize_npy(io::Array(io::DType::int32, {0, dim}, {}));
    std::uint16_t header_length;
    std::memcpy(&header_length, bytes.data() + 8, 2);
    CHECK((10 + header_length) % 64 == 0);
    CHECK(bytes.back() == '\n');
    CHECK(parse_npy(bytes).shape() == std::vector<std::int64_t>{0, dim});
  }
}

TEST_CASE("NPY: round trips of every dtype, order and rank (seeded random shapes)", "[io][npy]") {
  Random random(2024);
  const io::DType dtypes[] = {io::DType::float32, io::DType::float64, io::DType::int32, io::DType::int64,
                              io::DType::boolean, io::DType::float16, io::DType::uint8};
  for (int trial = 0; trial < 350; ++trial) {
    const io::DType dtype = dtypes[trial % 7];
    std::vector<std::int64_t> shape(random.below(6));
    for (auto& d : shape) d = static_cast<std::int64_t>(random.below(5));
    const io::Array array = random_array(dtype, shape, random);
    for (bool fortran : {false, true}) {
      const io::Array back = parse_npy(io::serialize_npy(array, fortran));
      REQUIRE(back.dtype() == dtype);
      REQUIRE(back.shape() == shape);
      REQUIRE(back.bytes() == array.bytes());
    }
  }
}

TEST_CASE("NPY: Fortran order is the transpose of C order on disk", "[io][npy]") {
  // A (2,3,4) array with value = 100 i + 10 j + k; in Fortran order the first axis varies fastest on disk.
  std::vector<std::int32_t> values;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) values.push_back(100 * i + 10 * j + k);
  const io::Array array = io::Array::from_vector(values, {2, 3, 4});
  const std::string bytes = io::serialize_npy(array, true);
  std::vector<std::int32_t> on_disk(24);
  std::memcpy(on_disk.data(), bytes.data() + bytes.size() - 96, 96);
  std::size_t position = 0;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) CHECK(on_disk[position++] == 100 * i + 10 * j + k);
  CHECK(bytes.find("'fortran_order': True") != std::string::npos);
}

TEST_CASE("Array: conversions, slices and their errors", "[io][npy]") {
  std::vector<float> values(2 * 3 * 4);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  const io::Array array = io::Array::from_vector(values, {2, 3, 4});
  CHECK(array.element_count() == 24);
  const RowMatrix<double> head1 = array.slice_matrix<double>({1});
  CHECK(head1.rows() == 3);
  CHECK(head1.cols() == 4);
  CHECK(head1(2, 3) == 23);
  CHECK(head1(0, 0) == 12);
  CHECK_THROWS_AS(array.to_matrix<float>(), invalid_argument);
  CHECK_THROWS_WITH(array.slice_matrix<float>({2}), Contains("index 2 out of range for axis 0"));
  CHECK_THROWS_AS(array.slice_matrix<float>({0, 0}), invalid_argument);
  CHECK(array.to_vector<std::int32_t>()[23] == 23);
  CHECK_THROWS_WITH(io::Array::from_vector(std::vector<float>{0.5f}, {1}).to_vector<std::int32_t>(),
                    Contains("element 0 = 0.5 is not an integer"));
  CHECK_THROWS_AS(io::Array::from_vector(std::vector<std::int64_t>{std::int64_t{1} << 40}, {1}).to_vector<std::int32_t>(),
                  invalid_argument);
  CHECK_THROWS_AS(io::Array::from_vector(std::vector<float>{std::numeric_limits<float>::quiet_NaN()}, {1})
                      .to_vector<std::int64_t>(),
                  invalid_argument);
  CHECK_THROWS_AS(io::Array::from_vector(std::vector<float>{1, 2}, {3}), invalid_argument);
  CHECK_THROWS_AS(io::Array::from_vector(std::vector<float>{}, {-1}), invalid_argument);
  CHECK_THROWS_AS(io::Array(io::DType::float32, {2}, std::vector<unsigned char>(7)), invalid_argument);
  CHECK_THROWS_AS(io::Array(io::DType::float32, std::vector<std::int64_t>(65, 1), std::vector<unsigned char>(4)),
                  invalid_argument);  // rank limit 64
  const io::Array rank64(io::DType::float32, std::vector<std::int64_t>(64, 1), std::vector<unsigned char>(4));
  CHECK(io::parse_npy(bytes_of(io::serialize_npy(rank64, true)), io::serialize_npy(rank64, true).size(), "r").rank() == 64);
  const io::Array bf = io::Array::from_vector(std::vector<Eigen::bfloat16>{Eigen::bfloat16(1.5f), Eigen::bfloat16(-2.0f)}, {2});
  CHECK(bf.to_vector<float>() == std::vector<float>{1.5f, -2.0f});
  CHECK_THROWS_WITH(io::serialize_npy(bf), Contains("bfloat16 has no NPY equivalent"));
  CHECK(io::Array().element_count() == 0);
}

TEST_CASE("NPY: every truncation, corrupt header and unsupported dtype gives io_error", "[io][npy][errors]") {
  for (const std::string* file : {&golden::npy_f8_2x3, &golden::npy_f4_fortran, &golden::npy_v2, &golden::npy_v3}) {
    for (std::size_t cut = 0; cut < file->size(); ++cut)
      CHECK_THAT(error_message<io_error>([&] { parse_npy(file->substr(0, cut), "cut.npy"); }), Contains("cut.npy"));
    CHECK_THAT(error_message<io_error>([&] { parse_npy(*file + "x"); }), Contains("follow the header"));
  }
  auto with_header = [](const std::string& dict) {
    std::string header = dict;
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    io::detail::append_little_endian<std::uint16_t>(bytes, static_cast<std::uint16_t>(header.size()));
    return bytes + header;
  };
  auto message = [&](const std::string& dict, const std::string& data = std::string(16, '\0')) {
    return error_message<io_error>([&] { parse_npy(with_header(dict) + data, "bad.npy"); });
  };
  CHECK(message("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }").empty());
  CHECK_THAT(message("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }"), Contains("big-endian dtype '>f8'"));
  CHECK_THAT(message("{'descr': '<u2', 'fortran_order': False, 'shape': (8,), }"), Contains("unsupported dtype '<u2'"));
  CHECK_THAT(message("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }"), Contains("unsupported dtype"));
  CHECK_THAT(message("{'descr': '<f8', 'shape': (2,), }"), Contains("lacks one of the keys"));
  CHECK_THAT(message("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'extra': 1}"), Contains("'extra'"));
  CHECK_THAT(message("{'descr': '<f8', 'fortran_order': Maybe, 'shape': (2,), }"), Contains("True or False"));
  CHECK_THAT(message("{'descr': '<f8', 'fortran_order': False, 'shape': (-2,), }"), Contains("non-negative integers"));
  CHECK_THAT(message("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), } x"), Contains("after the header"));
  CHECK_THAT(message("{'descr': '<f8, 'fortran_order': False, 'shape': (2,), }"), Contains("bad NPY header"));
  CHECK_THAT(message("{'descr': '<f8', 'fortran_order': False, 'shape': (2,"), Contains("bad NPY header"));
  // Absurd shapes: overflowing products and sizes far beyond the data — rejected before any allocation.
  CHECK_THAT(message("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }"),
             Contains("absurd shape"));
  CHECK_THAT(message("{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 100000, 1000), }"),
             Contains("needs 80000000000000 data bytes but 16 follow"));
  CHECK_THAT(message("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
             Contains("too large"));
  std::string bad_magic = golden::npy_f8_2x3;
  bad_magic[1] = 'M';
  CHECK_THAT(error_message<io_error>([&] { parse_npy(bad_magic); }), Contains("bad magic"));
  std::string bad_version = golden::npy_f8_2x3;
  bad_version[6] = 4;
  CHECK_THAT(error_message<io_error>([&] { parse_npy(bad_version); }), Contains("unsupported NPY format version 4.0"));
  std::string long_header = golden::npy_f8_2x3;
  long_header[8] = '\xff';
  CHECK_THAT(error_message<io_error>([&] { parse_npy(long_header); }), Contains("truncated: header needs"));
  // Every single bit of the header flipped: valid or io_error, nothing else.
  for (std::size_t i = 0; i < 128; ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = golden::npy_i8_2x1x2;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      try {
        parse_npy(flipped);
      } catch (const io_error&) {
      }
    }
  CHECK_THROWS_WITH(io::read_npy("/nonexistent/a.npy"), Contains("/nonexistent/a.npy"));
  CHECK_THROWS_AS(io::write_npy("/nonexistent/dir/a.npy", io::Array::from_vector(std::vector<float>{1}, {1})), io_error);
}

TEST_CASE("NPY: files round-trip through disk", "[io][npy]") {
  const std::string path = std::string(ATTNSCOPE_BINARY_DIR) + "/test_io_roundtrip.npy";
  RowMatrix<float> m(4, 5);
  Random random(3);
  attnscope::testing::fill_normal(m, random);
  io::write_npy(path, io::Array::from(m), true);
  CHECK(io::read_npy(path).to_matrix<float>() == m);
  std::remove(path.c_str());
}
