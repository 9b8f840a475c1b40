// Tests of the error-message helpers of core/error.hpp (concat, throw_invalid_argument, throw_io_error): each message
// equals what one std::ostringstream with precision 17 makes of the same values streamed in order, the reference
// written out here independently, for every kind of value the library passes (literals, character arrays, C strings,
// std::string, std::string_view, integers, floating point, characters, booleans, stream manipulators).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ios>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>

#include "attnscope/core/error.hpp"
#include "support/catch.hpp"

namespace {

template <class... Values>
std::string message_reference(const Values&... values) {
  std::ostringstream stream;
  stream.precision(17);
  (stream << ... << values);
  return stream.str();
}

}  // namespace

TEST_CASE("concat streams every kind of value as one ostringstream with precision 17 does", "[core][error]") {
  const char* c_string = "c-string";
  char array[8] = "array";
  const std::string text = "text";
  const std::string_view view = "view";
  const long negative = -42;
  const unsigned long long large = std::numeric_limits<unsigned long long>::max();
  const std::size_t size = 7;
  const double tenth = 0.1;
  const float third = 1.0f / 3.0f;
  const char letter = 'q';
  const bool flag = true;
  const std::string made = attnscope::detail::concat("literal ", c_string, ' ', array, text, view, negative, large, size,
                                                     tenth, third, letter, flag, std::string("temporary"), 3, 2.5);
  CHECK(made == message_reference("literal ", c_string, ' ', array, text, view, negative, large, size, tenth, third,
                                  letter, flag, std::string("temporary"), 3, 2.5));
  CHECK(made.find("0.10000000000000001") != std::string::npos);  // 17 significant digits
  CHECK(attnscope::detail::concat() == "");
  CHECK(attnscope::detail::concat("only") == "only");
}

TEST_CASE("concat applies stream manipulators in place (std::hex ... std::dec)", "[core][error]") {
  const std::uint32_t magic = 0x46554747u;
  const std::string made = attnscope::detail::concat("bad magic 0x", std::hex, magic, std::dec, ", then ", 255);
  CHECK(made == "bad magic 0x46554747, then 255");
  CHECK(made == message_reference("bad magic 0x", std::hex, magic, std::dec, ", then ", 255));
}

TEST_CASE("concat of random integers and doubles equals the ostringstream reference", "[core][error]") {
  std::mt19937_64 generator(20261202);
  std::uniform_int_distribution<long long> integers(std::numeric_limits<long long>::min(),
                                                    std::numeric_limits<long long>::max());
  std::uniform_real_distribution<double> exponents(-300.0, 300.0);
  std::uniform_real_distribution<double> mantissas(-1.0, 1.0);
  for (int trial = 0; trial < 500; ++trial) {
    const long long integer = integers(generator);
    const double value = mantissas(generator) * std::pow(10.0, exponents(generator));
    const float single = static_cast<float>(mantissas(generator));
    INFO("trial " << trial);
    CHECK(attnscope::detail::concat("row ", integer, ": ", value, " / ", single) ==
          message_reference("row ", integer, ": ", value, " / ", single));
  }
}

TEST_CASE("throw_invalid_argument and throw_io_error: type and the message prefix with function and file",
          "[core][error]") {
  try {
    attnscope::detail::throw_invalid_argument("softmax", "temperature must be > 0, got ", -1.5, " (row ", 3L, ")");
    FAIL("no exception");
  } catch (const attnscope::invalid_argument& e) {
    CHECK(std::string(e.what()) == "attnscope::softmax: temperature must be > 0, got -1.5 (row 3)");
  }
  const std::string file = "/data/model.gguf";
  try {
    attnscope::detail::throw_io_error("read_gguf", file, "tensor '", std::string("blk.0.attn_q.weight"),
                                      "' at offset ", std::size_t{4096}, ": ", 0.25);
    FAIL("no exception");
  } catch (const attnscope::io_error& e) {
    CHECK(std::string(e.what()) ==
          "attnscope::read_gguf: /data/model.gguf: tensor 'blk.0.attn_q.weight' at offset 4096: 0.25");
  }
  // io_error is a std::runtime_error, invalid_argument a std::invalid_argument
  CHECK_THROWS_AS(attnscope::detail::throw_io_error("f", file, "x"), std::runtime_error);
  CHECK_THROWS_AS(attnscope::detail::throw_invalid_argument("f", "x"), std::invalid_argument);
}
