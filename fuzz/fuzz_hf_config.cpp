// libFuzzer target: a Hugging Face config.json → TransformerConfig → Transformer, through the folder loader
// (model::load_model). Each input becomes the config.json of a scratch folder that also holds the tiny GPT-2
// fixture's weights (tests/fixtures/hf/gpt2/model.safetensors, 64 wide, 2 layers, 4 heads, 300 tokens), so that
// configs agreeing with those tensors get past the shape checks into the Transformer's own validation and a forward
// pass. Only attnscope::io_error and attnscope::invalid_argument may escape; a model that loads must run 3 tokens to
// finite logits of its vocabulary size.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "attnscope/model.hpp"
#include "attnscope/model/load.hpp"
#include "fuzz_file_input.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::filesystem::path weights = std::filesystem::path(ATTNSCOPE_FUZZ_FIXTURES) / "gpt2" / "model.safetensors";
  std::filesystem::copy_file(weights, attnscope_fuzz::scratch_folder() / "model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  attnscope_fuzz::write_scratch_file("config.json", data, size);
  try {
    const attnscope::model::Transformer model = attnscope::model::load_model(attnscope_fuzz::scratch_folder().string());
    const std::vector<int> tokens = {0, 1, 2};
    if (model.config().vocab_size < 3 || model.config().seq_len < 3) return 0;
    const auto result = model.forward(tokens);
    if (result.logits.rows() != 3 || result.logits.cols() != model.config().vocab_size || !result.logits.allFinite())
      std::abort();
  } catch (const attnscope::io_error&) {
  } catch (const attnscope::invalid_argument&) {
  }
  return 0;
}
