// libFuzzer target: parse_llama2c on arbitrary bytes, twice — as given, and "size-repaired": zero-padded to a full
// header and then cut or padded to exactly the size its header implies (when that is ≤ 1 MiB), so that mutations
// reach the weight-reading code past the exact-size check. Only attnscope::io_error may escape; a parsed version-0
// or version-1 checkpoint must re-serialize (same version) and parse back to identical weights.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "attnscope/io/llama2c.hpp"

namespace {

void parse_and_round_trip(const unsigned char* data, std::size_t size) {
  attnscope::io::LlamaWeights weights;
  try {
    weights = attnscope::io::parse_llama2c(data, size, "fuzz.bin");
  } catch (const attnscope::io_error&) {
    return;
  }
  if (weights.version == 2) return;  // re-quantization is lossy; the reader itself was exercised
  const std::string bytes = attnscope::io::serialize_llama2c(weights, weights.version);
  const auto back = attnscope::io::parse_llama2c(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                                                 "round trip");
  bool same = back.token_embedding == weights.token_embedding && back.classifier == weights.classifier &&
              back.rms_final == weights.rms_final && back.layers.size() == weights.layers.size();
  for (std::size_t l = 0; same && l < back.layers.size(); ++l)
    same = back.layers[l].wq == weights.layers[l].wq && back.layers[l].w2 == weights.layers[l].w2 &&
           back.layers[l].rms_ffn == weights.layers[l].rms_ffn;
  if (!same) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  parse_and_round_trip(data, size);
  std::vector<unsigned char> repaired(data, data + size);
  if (repaired.size() < attnscope::io::llama_versioned_header_bytes)
    repaired.resize(attnscope::io::llama_versioned_header_bytes, 0);
  attnscope::io::detail::ByteReader reader(repaired.data(), repaired.size(), "fuzz", "repaired.bin");
  try {
    const auto header = attnscope::io::detail::llama_read_header(reader);
    if (header.expected_size > (1u << 20) || header.expected_size == size) return 0;
    repaired.resize(header.expected_size, 0);
  } catch (const attnscope::io_error&) {
    return 0;
  }
  parse_and_round_trip(repaired.data(), repaired.size());
  return 0;
}
