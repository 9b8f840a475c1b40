// libFuzzer target: GPT-2's vocab.json + merges.txt (text::ByteLevelBpeTokenizer::from_vocab_and_merges). The input
// is split at its first byte 0xFF (which UTF-8 never contains): vocab.json before, merges.txt after (no 0xFF: all of
// it is vocab.json and merges.txt is empty). Only attnscope::io_error may escape the loader; a tokenizer that loads
// must round-trip texts as in fuzz_tokenizer_json.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "attnscope/text.hpp"
#include "fuzz_file_input.hpp"
#include "fuzz_tokenizer_round_trip.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::uint8_t* split = std::find(data, data + size, std::uint8_t{0xFF});
  const std::size_t vocab_size = static_cast<std::size_t>(split - data);
  const std::string vocab = attnscope_fuzz::write_scratch_file("vocab.json", data, vocab_size);
  const std::string merges = attnscope_fuzz::write_scratch_file(
      "merges.txt", split == data + size ? data : split + 1, split == data + size ? 0 : size - vocab_size - 1);
  try {
    const auto tokenizer = attnscope::text::ByteLevelBpeTokenizer::from_vocab_and_merges(vocab, merges);
    attnscope_fuzz::check_round_trips(tokenizer, data, size);
  } catch (const attnscope::io_error&) {
  }
  return 0;
}
