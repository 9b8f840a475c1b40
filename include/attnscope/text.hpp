// attnscope/text.hpp — umbrella header of the text module: BPE tokenizers, byte-level (GPT-2, Llama-3, Qwen2, ...) and
// SentencePiece-style (Llama-2, Mistral, Phi-3), from vocab.json + merges.txt, tokenizer.json or tokenizer.model.
// Needs nlohmann-json and libpcre2-8 (link attnscope::text).
#pragma once

#include "attnscope/text/bpe_merge.hpp"
#include "attnscope/text/bpe_tokenizer.hpp"
#include "attnscope/text/byte_level.hpp"
#include "attnscope/text/regex.hpp"
#include "attnscope/text/tokenizer_types.hpp"
