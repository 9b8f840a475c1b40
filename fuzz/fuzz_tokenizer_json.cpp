// libFuzzer target: a tokenizer.json (text::ByteLevelBpeTokenizer::from_tokenizer_json). Only attnscope::io_error
// may escape the loader; a tokenizer that loads encodes fixed texts (ASCII, accents, CJK, emoji, digits, spaces and
// newlines) and a UTF-8 prefix of the input itself with the properties of fuzz_tokenizer_round_trip.hpp: ids in the
// vocabulary that decode, the post-processor's ids around them on request, and for byte-level BPE without a
// normalizer the text back byte for byte, unless the vocabulary lacks a byte (attnscope::invalid_argument or io_error).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "attnscope/text.hpp"
#include "fuzz_file_input.hpp"
#include "fuzz_tokenizer_round_trip.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = attnscope_fuzz::write_scratch_file("tokenizer.json", data, size);
  try {
    const auto tokenizer = attnscope::text::ByteLevelBpeTokenizer::from_tokenizer_json(path);
    attnscope_fuzz::check_round_trips(tokenizer, data, size);
  } catch (const attnscope::io_error&) {
  }
  return 0;
}
