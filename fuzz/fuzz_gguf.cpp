// libFuzzer target: parse_gguf_header on arbitrary bytes. Only attnscope::io_error may escape; whatever parses must
// survive a serialize_gguf / parse round trip with the same metadata and tensors, and every tensor of a type the
// model can read is dequantized row by row (AddressSanitizer checks that no block read leaves the input).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "attnscope/io/gguf.hpp"
#include "attnscope/kernels/widen.hpp"
#include "attnscope/model/gguf.hpp"

namespace {

bool same_value(const attnscope::io::GgufValue& a, const attnscope::io::GgufValue& b) {
  if (a.type != b.type || a.element_type != b.element_type || a.text != b.text || a.strings != b.strings ||
      a.integers != b.integers || a.items.size() != b.items.size() || a.reals.size() != b.reals.size())
    return false;
  if (a.type == attnscope::io::GgufType::float32 || a.type == attnscope::io::GgufType::float64) {
    if (std::memcmp(&a.real, &b.real, sizeof(double)) != 0) return false;
  } else if (a.unsigned_integer != b.unsigned_integer) {
    return false;
  }
  if (a.reals.size() > 0 && std::memcmp(a.reals.data(), b.reals.data(), a.reals.size() * sizeof(double)) != 0)
    return false;
  for (std::size_t i = 0; i < a.items.size(); ++i)
    if (!same_value(a.items[i], b.items[i])) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // a copy of exactly `size` bytes, so that AddressSanitizer sees any read past the end
  std::vector<unsigned char> bytes(data, data + size);
  attnscope::io::GgufHeader header;
  try {
    header = attnscope::io::parse_gguf_header(bytes.data(), bytes.size(), "fuzz.gguf");
  } catch (const attnscope::io_error&) {
    return 0;
  }
  std::vector<attnscope::io::GgufTensorBytes> tensors;
  std::vector<float> row;
  for (const attnscope::io::GgufTensor& t : header.tensors) {
    tensors.push_back({t.name, t.dims, t.type, std::string(reinterpret_cast<const char*>(t.data), t.byte_count)});
    attnscope::kernels::StoredFloat format;
    if (!attnscope::model::detail::stored_format_of(t.type, format) || t.row_length() > (1u << 20) || t.byte_count > (1u << 24)) continue;
    row.resize(t.row_length());
    const std::size_t row_bytes = attnscope::kernels::stored_bytes(format, attnscope::Index(t.row_length()));
    for (std::uint64_t r = 0; r < t.row_count() && r < 64; ++r)
      attnscope::kernels::widen(t.data + r * row_bytes, format, attnscope::Index(t.row_length()), row.data());
  }
  const std::string written = attnscope::io::serialize_gguf(header.metadata, tensors);
  const auto back = attnscope::io::parse_gguf_header(reinterpret_cast<const unsigned char*>(written.data()),
                                                     written.size(), "round trip");
  if (back.metadata.size() != header.metadata.size() || back.tensors.size() != header.tensors.size()) std::abort();
  for (std::size_t i = 0; i < back.metadata.size(); ++i)
    if (back.metadata[i].first != header.metadata[i].first ||
        !same_value(back.metadata[i].second, header.metadata[i].second))
      std::abort();
  for (std::size_t i = 0; i < back.tensors.size(); ++i) {
    const auto& a = header.tensors[i];
    const auto& b = back.tensors[i];
    if (a.name != b.name || a.dims != b.dims || a.type != b.type || a.byte_count != b.byte_count ||
        std::memcmp(a.data, b.data, a.byte_count) != 0)
      std::abort();
  }
  return 0;
}
