// attnscope/text/tokenizer_types.hpp — the plain types of the BPE tokenizers: encoding options, added
// tokens, GPT-2's pre-tokenizer pattern and the largest accepted token id. No dependency beyond the standard library.
#pragma once

#include <string>

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

}  // namespace attnscope::text
