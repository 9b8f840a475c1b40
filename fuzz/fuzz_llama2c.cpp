// libFuzzer target: parse_llama2c on arbitrary bytes. Only attnscope::io_error may escape; a parsed version-0 or
// version-1 checkpoint must re-serialize (same version) and parse back to identical weights.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "attnscope/io/llama2c.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  attnscope::io::LlamaWeights weights;
  try {
    weights = attnscope::io::parse_llama2c(data, size, "fuzz.bin");
  } catch (const attnscope::io_error&) {
    return 0;
  }
  if (weights.version == 2) return 0;  // re-quantization is lossy; the reader itself was exercised
  const std::string bytes = attnscope::io::serialize_llama2c(weights, weights.version);
  const auto back = attnscope::io::parse_llama2c(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                                                 "round trip");
  bool same = back.token_embedding == weights.token_embedding && back.classifier == weights.classifier &&
              back.rms_final == weights.rms_final && back.layers.size() == weights.layers.size();
  for (std::size_t l = 0; same && l < back.layers.size(); ++l)
    same = back.layers[l].wq == weights.layers[l].wq && back.layers[l].w2 == weights.layers[l].w2 &&
           back.layers[l].rms_ffn == weights.layers[l].rms_ffn;
  if (!same) std::abort();
  return 0;
}
