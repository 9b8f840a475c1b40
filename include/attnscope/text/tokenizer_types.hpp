// attnscope/text/tokenizer_types.hpp — the plain types of the BPE tokenizers: encoding options, added
// tokens, GPT-2's pre-tokenizer pattern and the largest accepted token id. No dependency beyond the standard library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnscope::text {

/// GPT-2's pre-tokenizer regex (OpenAI encoder.py; also Hugging Face's ByteLevel pre-tokenizer with use_regex).
inline constexpr const char* gpt2_pre_tokenizer_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Largest token id accepted in a vocabulary file (guards the id -> token tables against absurd ids).
inline constexpr int max_token_id = (1 << 24) - 1;

struct EncodeOptions {
  /// When true, special tokens (e.g. "<|endoftext|>", "<s>") written in the text become their single ids; when false
  /// (the default) they are ordinary text and are split into ordinary tokens. Added tokens that are not special are
  /// always matched (as Hugging Face tokenizers does).
  bool parse_special_tokens = false;
  /// When true, the post-processor's tokens are added around the text (Llama-2's and Mistral's BOS "<s>", RoBERTa's
  /// "<s>" ... "</s>"); when false (the default) nothing is added. Both true: the ids of Hugging Face's default
  /// tokenizer(text).
  bool add_special_tokens = false;
};

/// A token that bypasses BPE: tokenizer.json's added_tokens, or a "<|...|>" token of vocab.json that no merge forms.
struct AddedToken {
  std::string content;  // the literal text, e.g. "<|endoftext|>"
  int id = 0;
  bool special = true;
  bool left_strip = false;   // absorbs the white space before it (tokenizer.json "lstrip")
  bool right_strip = false;  // absorbs the white space after it (tokenizer.json "rstrip")
  bool single_word = false;  // matches only when no word character touches it (tokenizer.json "single_word")
  bool normalized = false;   // matched in the normalized text rather than the raw text (tokenizer.json "normalized")
};

/// The tokenizer of a GGUF file as its metadata states it (llama.cpp's `tokenizer.ggml.*` keys; text/gguf_tokenizer.hpp
/// reads them from a file). `model` is "gpt2" (byte-level BPE: tokens and merges) or "llama" (SentencePiece BPE:
/// tokens, scores, token types); token types are llama.cpp's (1 normal, 2 unknown, 3 control, 4 user-defined,
/// 5 unused, 6 byte). Ids are −1 and flags unset when the file has no such key.
struct GgufTokenizerMetadata {
  std::string source;              // the file, named in errors
  std::string model;               // tokenizer.ggml.model
  std::string pre;                 // tokenizer.ggml.pre ("" when absent)
  std::vector<std::string> tokens;  // tokenizer.ggml.tokens: the token of each id
  std::vector<double> scores;      // tokenizer.ggml.scores (llama)
  std::vector<std::int64_t> token_types;  // tokenizer.ggml.token_type
  std::vector<std::string> merges;  // tokenizer.ggml.merges, "left right" (gpt2)
  std::int64_t bos_id = -1, eos_id = -1, unknown_id = -1;  // tokenizer.ggml.{bos,eos,unknown}_token_id
  std::optional<bool> add_bos, add_eos;  // tokenizer.ggml.add_bos_token, add_eos_token
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix (llama; default true)
};

}  // namespace attnscope::text
