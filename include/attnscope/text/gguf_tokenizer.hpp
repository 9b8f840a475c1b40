// attnscope/text/gguf_tokenizer.hpp — the tokenizer stored in a GGUF file's metadata (llama.cpp's
// `tokenizer.ggml.*` keys), read from the memory-mapped file of io/gguf.hpp into a GgufTokenizerMetadata and built by
// ByteLevelBpeTokenizer::from_gguf_metadata. Not included by attnscope/text.hpp (it maps files): include it where GGUF
// files are read. Needs zlib, nlohmann-json and PCRE2 (link attnscope::text).
#pragma once

#include <string>

#include "attnscope/io/gguf.hpp"
#include "attnscope/text/bpe_tokenizer.hpp"
#include "attnscope/text/tokenizer_types.hpp"

namespace attnscope::text {

/// The tokenizer keys of a GGUF file: tokenizer.ggml.model and .tokens (required), .pre, .scores, .token_type,
/// .merges, .bos_token_id, .eos_token_id, .unknown_token_id, .add_bos_token, .add_eos_token, .add_space_prefix (each
/// when present). Throws io_error naming the file, the key and its offset for a missing required key or a value of
/// the wrong type.
inline GgufTokenizerMetadata gguf_tokenizer_metadata(const io::GgufFile& file) {
  GgufTokenizerMetadata out;
  out.source = file.path();
  const std::string prefix = "tokenizer.ggml.";
  out.model = file.string(prefix + "model");
  out.tokens = file.strings(prefix + "tokens");
  if (file.has(prefix + "pre")) out.pre = file.string(prefix + "pre");
  if (file.has(prefix + "scores")) out.scores = file.numbers(prefix + "scores");
  if (file.has(prefix + "token_type")) out.token_types = file.integers(prefix + "token_type");
  if (file.has(prefix + "merges")) out.merges = file.strings(prefix + "merges");
  if (file.has(prefix + "bos_token_id")) out.bos_id = file.integer(prefix + "bos_token_id");
  if (file.has(prefix + "eos_token_id")) out.eos_id = file.integer(prefix + "eos_token_id");
  if (file.has(prefix + "unknown_token_id")) out.unknown_id = file.integer(prefix + "unknown_token_id");
  if (file.has(prefix + "add_bos_token")) out.add_bos = file.boolean(prefix + "add_bos_token");
  if (file.has(prefix + "add_eos_token")) out.add_eos = file.boolean(prefix + "add_eos_token");
  if (file.has(prefix + "add_space_prefix")) out.add_space_prefix = file.boolean(prefix + "add_space_prefix");
  return out;
}

/// The tokenizer of an opened GGUF file (see ByteLevelBpeTokenizer::from_gguf_metadata for what is supported).
inline ByteLevelBpeTokenizer gguf_tokenizer(const io::GgufFile& file) {
  return ByteLevelBpeTokenizer::from_gguf_metadata(gguf_tokenizer_metadata(file));
}

/// The tokenizer of the GGUF file at `path` (a model or a vocabulary-only file such as llama.cpp's ggml-vocab-*.gguf).
inline ByteLevelBpeTokenizer gguf_tokenizer(const std::string& path) { return gguf_tokenizer(io::GgufFile(path)); }

}  // namespace attnscope::text
