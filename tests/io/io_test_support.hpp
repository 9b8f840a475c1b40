// Shared helpers of the IO tests: random llama2.c weights and byte strings.
#pragma once

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/llama2c.hpp"

namespace attnscope::testing {

/// Fills a float matrix/vector with seeded normal values of the given scale.
template <class Matrix>
void fill_normal(Matrix& matrix, Random& random, double scale = 0.5) {
  for (Index i = 0; i < matrix.size(); ++i) matrix.data()[i] = static_cast<float>(scale * random.normal());
}

/// Random weights for a configuration (classifier = embedding when shared).
inline io::LlamaWeights random_llama_weights(const io::LlamaConfig& config, std::uint64_t seed) {
  Random random(seed);
  io::LlamaWeights w;
  w.config = config;
  io::detail::llama_allocate(w);
  fill_normal(w.token_embedding, random);
  for (auto& layer : w.layers) {
    fill_normal(layer.rms_attention, random);
    fill_normal(layer.rms_ffn, random);
    for (auto* m : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w1, &layer.w2, &layer.w3}) fill_normal(*m, random);
  }
  fill_normal(w.rms_final, random);
  if (config.shared_classifier)
    w.classifier = w.token_embedding;
  else
    fill_normal(w.classifier, random);
  return w;
}

/// A small GQA configuration (dim 8, 2 heads of 4, 1 kv head).
inline io::LlamaConfig small_llama_config(bool shared_classifier) {
  io::LlamaConfig c;
  c.dim = 8;
  c.hidden_dim = 12;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.vocab_size = 16;
  c.seq_len = 6;
  c.shared_classifier = shared_classifier;
  return c;
}

inline const unsigned char* bytes_of(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }

/// Overwrites 4 bytes at an offset with a little-endian int32.
inline void poke_int32(std::string& bytes, std::size_t offset, std::int32_t value) {
  std::memcpy(&bytes[offset], &value, 4);
}

/// A path in the build folder for a test's output file.
inline std::string test_output_path(const std::string& name) { return std::string(ATTNSCOPE_BINARY_DIR) + "/" + name; }

/// The bytes of a file as a string ("" when it cannot be read).
inline std::string file_bytes(const std::string& path) {
  std::ifstream stream(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>());
}

/// Seeded arrays for the writer tests: up to 6 of the given dtypes, ranks 0 to 4 with dims 0 to 6 (scalars and
/// 0-sized arrays included) and now and then one of 512 × 256 (about 1 MB), named key(i). With `low_entropy`, half
/// of them hold bytes in {0, 1, 2}, so that deflate has something to compress.
template <class Key>
io::NamedArrays random_named_arrays(Random& random, const std::vector<io::DType>& dtypes, bool low_entropy, Key&& key) {
  io::NamedArrays arrays;
  const std::size_t count = random.below(7);
  for (std::size_t i = 0; i < count; ++i) {
    const io::DType dtype = dtypes[random.below(dtypes.size())];
    std::vector<std::int64_t> shape(random.below(5));
    for (auto& dim : shape) dim = static_cast<std::int64_t>(random.below(7));
    if (random.below(25) == 0) shape = {512, 256};
    std::uint64_t elements = 1;
    for (const auto dim : shape) elements *= static_cast<std::uint64_t>(dim);
    std::vector<unsigned char> bytes(elements * io::dtype_size(dtype));
    const unsigned range = low_entropy && random.below(2) == 0 ? 3 : 256;
    for (auto& b : bytes) b = static_cast<unsigned char>(dtype == io::DType::boolean ? random.below(2) : random.below(range));
    arrays.emplace_back(key(i), io::Array(dtype, shape, std::move(bytes)));
  }
  return arrays;
}

}  // namespace attnscope::testing
