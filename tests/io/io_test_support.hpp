// Shared helpers of the IO tests: random llama2.c weights and byte strings.
#pragma once

#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
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

}  // namespace attnscope::testing
