// attnscope/text/tokenizer_types.hpp — the plain types of the byte-level BPE tokenizers: encoding options, added
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
  /// When true, added/special tokens (e.g. "<|endoftext|>") found in the text become their single ids; when false
  /// (the default) they are ordinary text and are split into ordinary tokens.
  bool parse_special_tokens = false;
};

/// A token that bypasses BPE: tokenizer.json's added_tokens, or a "<|...|>" token of vocab.json that no merge forms.
struct AddedToken {
  std::string content;  // the literal text, e.g. "<|endoftext|>"
  int id = 0;
  bool special = true;
  bool left_strip = false;   // absorbs ASCII whitespace before it (tokenizer.json "lstrip")
  bool right_strip = false;  // absorbs ASCII whitespace after it (tokenizer.json "rstrip")
};

}  // namespace attnscope::text
