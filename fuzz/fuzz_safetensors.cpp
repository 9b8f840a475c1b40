// libFuzzer target: parse_safetensors_contents on arbitrary bytes. Only attnscope::io_error may escape; whatever
// parses must survive a write/read round trip with the same tensors and metadata.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "attnscope/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  attnscope::io::SafetensorsContents contents;
  try {
    contents = attnscope::io::parse_safetensors_contents(data, size, "fuzz.safetensors");
  } catch (const attnscope::io_error&) {
    return 0;
  }
  const std::string bytes = attnscope::io::serialize_safetensors(contents.tensors, contents.metadata);
  const auto back = attnscope::io::parse_safetensors_contents(reinterpret_cast<const unsigned char*>(bytes.data()),
                                                              bytes.size(), "round trip");
  if (back.metadata != contents.metadata || back.tensors.size() != contents.tensors.size()) std::abort();
  const auto map = attnscope::io::detail::to_map(std::move(contents.tensors));
  for (const auto& [name, array] : back.tensors) {
    const auto found = map.find(name);
    if (found == map.end() || found->second.bytes() != array.bytes() || found->second.shape() != array.shape() ||
        found->second.dtype() != array.dtype())
      std::abort();
  }
  return 0;
}
