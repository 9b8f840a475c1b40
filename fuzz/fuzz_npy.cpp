// libFuzzer target: parse_npy and parse_npz on arbitrary bytes. Only attnscope::io_error may escape the parsers;
// whatever parses must survive a write/read round trip unchanged (NPY in both orders, NPZ both compressions).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "attnscope/io/npy.hpp"
#include "attnscope/io/npz.hpp"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

const unsigned char* bytes_of(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }

void check_npy_round_trip(const attnscope::io::Array& array) {
  for (bool fortran : {false, true}) {
    const std::string bytes = attnscope::io::serialize_npy(array, fortran);
    const attnscope::io::Array back = attnscope::io::parse_npy(bytes_of(bytes), bytes.size(), "round trip");
    require(back.dtype() == array.dtype() && back.shape() == array.shape() && back.bytes() == array.bytes());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    check_npy_round_trip(attnscope::io::parse_npy(data, size, "fuzz.npy"));
  } catch (const attnscope::io_error&) {
  }
  try {
    const attnscope::io::NamedArrays arrays = attnscope::io::parse_npz_ordered(data, size, "fuzz.npz");
    for (auto compression : {attnscope::io::Compression::stored, attnscope::io::Compression::deflated}) {
      const std::string bytes = attnscope::io::serialize_npz(arrays, compression);
      const attnscope::io::NamedArrays back = attnscope::io::parse_npz_ordered(bytes_of(bytes), bytes.size(), "round trip");
      require(back.size() == arrays.size());
      for (std::size_t i = 0; i < arrays.size(); ++i)
        require(back[i].first == arrays[i].first && back[i].second.bytes() == arrays[i].second.bytes() &&
                back[i].second.shape() == arrays[i].second.shape());
    }
  } catch (const attnscope::io_error&) {
  }
  return 0;
}
