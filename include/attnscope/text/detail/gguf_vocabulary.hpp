// attnscope/text/detail/gguf_vocabulary.hpp — the parts of a BPE tokenizer from a GGUF file's tokenizer metadata
// (GgufTokenizerMetadata): "llama" is a SentencePiece BPE vocabulary and goes through the same builder as a
// tokenizer.model (sentencepiece_model.hpp); "gpt2" is a byte-level BPE vocabulary with merges, pre-tokenized by the
// regex its `tokenizer.ggml.pre` names. The result has the ids of the Hugging Face tokenizer the file was converted
// from (llama.cpp's convert_hf_to_gguf.py writes that tokenizer's vocabulary, merges and token types).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/text/detail/sentencepiece_model.hpp"
#include "attnscope/text/detail/tokenizer_files.hpp"
#include "attnscope/text/tokenizer_types.hpp"

namespace attnscope::text::detail {

/// The pre-tokenizer regexes of the byte-level vocabularies by their `tokenizer.ggml.pre` name: the Split/ByteLevel
/// patterns of the Hugging Face tokenizer.json each name stands for (llama.cpp's llama-vocab.cpp maps the same names
/// to the same patterns). An empty list: the name is not supported.
inline std::vector<std::string> gguf_pre_tokenizer_patterns(const std::string& pre) {
  if (pre == "gpt-2") return {gpt2_pre_tokenizer_pattern};  // GPT-2: ByteLevel with its regex
  return {};
}

/// The parts of the tokenizer a GGUF file's metadata describes; io_error naming the file and the key for missing
/// or inconsistent keys and for an unsupported `tokenizer.ggml.model` or `tokenizer.ggml.pre`.
inline TokenizerParts gguf_tokenizer_parts(const GgufTokenizerMetadata& metadata, const char* function) {
  const LoadContext where{function, metadata.source};
  const std::size_t count = metadata.tokens.size();
  if (count == 0) where.fail("tokenizer.ggml.tokens is missing or empty");
  if (static_cast<std::int64_t>(count) - 1 > max_token_id)
    where.fail(attnscope::detail::concat("tokenizer.ggml.tokens has ", count, " tokens (at most ", max_token_id + 1, ")"));
  if (!metadata.token_types.empty() && metadata.token_types.size() != count)
    where.fail(attnscope::detail::concat("tokenizer.ggml.token_type has ", metadata.token_types.size(),
                                         " entries for ", count, " tokens"));
  const auto type_of = [&](std::size_t id) { return metadata.token_types.empty() ? 1 : int(metadata.token_types[id]); };
  const auto valid_id = [&](std::int64_t id) { return id >= 0 && id < static_cast<std::int64_t>(count); };
  const auto special_ids = [&](bool add, std::int64_t id, const char* key, std::vector<int>& into) {
    if (!add) return;
    if (!valid_id(id))
      where.fail(attnscope::detail::concat(key, " is set but the token id (", id, ") is outside the ", count,
                                           " tokens"));
    into.push_back(static_cast<int>(id));
  };

  if (metadata.model == "llama") {
    if (metadata.scores.size() != count)
      where.fail(attnscope::detail::concat("tokenizer.ggml.scores has ", metadata.scores.size(), " entries for ",
                                           count, " tokens"));
    std::vector<SentencePiece> pieces(count);
    bool byte_pieces = false;
    for (std::size_t id = 0; id < count; ++id) {
      pieces[id].text = metadata.tokens[id];
      pieces[id].score = static_cast<float>(metadata.scores[id]);
      pieces[id].type = type_of(id);
      byte_pieces = byte_pieces || pieces[id].type == 6;
    }
    SentencePieceSettings settings;
    settings.byte_fallback = byte_pieces;  // llama.cpp falls back to the <0xXX> byte pieces when the vocabulary has them
    settings.add_dummy_prefix = metadata.add_space_prefix.value_or(true);
    settings.unknown_id = valid_id(metadata.unknown_id) ? metadata.unknown_id : 0;
    special_ids(metadata.add_bos.value_or(true), metadata.bos_id, "tokenizer.ggml.add_bos_token", settings.prefix);
    special_ids(metadata.add_eos.value_or(false), metadata.eos_id, "tokenizer.ggml.add_eos_token", settings.suffix);
    return sentencepiece_parts(pieces, settings, where);
  }
  if (metadata.model == "gpt2") {
    const std::vector<std::string> patterns = gguf_pre_tokenizer_patterns(metadata.pre);
    if (patterns.empty())
      where.fail("not supported: tokenizer.ggml.pre '" + metadata.pre + "' (supported for tokenizer.ggml.model gpt2: "
                 "gpt-2)");
    if (metadata.merges.empty()) where.fail("tokenizer.ggml.merges is missing or empty (needed by a gpt2 tokenizer)");
    std::vector<MergeEntry> merges;
    merges.reserve(metadata.merges.size());
    for (std::size_t m = 0; m < metadata.merges.size(); ++m) {
      const std::string& merge = metadata.merges[m];
      const std::size_t space = merge.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == merge.size() ||
          merge.find(' ', space + 1) != std::string::npos)
        where.fail(attnscope::detail::concat("tokenizer.ggml.merges[", m, "] is not two tokens separated by one space: ",
                                             quoted_excerpt(merge)));
      merges.push_back({merge.substr(0, space), merge.substr(space + 1), m});
    }
    TokenizerParts parts;
    std::vector<std::pair<std::string, int>> entries;
    entries.reserve(count);
    std::vector<AddedToken> added;
    for (std::size_t id = 0; id < count; ++id) {
      entries.emplace_back(metadata.tokens[id], static_cast<int>(id));
      const int type = type_of(id);
      if (type == 3 || type == 4) {  // control and user-defined tokens are Hugging Face's added tokens
        AddedToken token;
        token.content = metadata.tokens[id];
        token.id = static_cast<int>(id);
        token.special = type == 3;
        if (!token.content.empty()) added.push_back(std::move(token));
      }
    }
    parts.vocabulary.set_tokens(entries, where, true);
    parts.vocabulary.set_merges(merges, MergeSource::json_array, where);
    parts.vocabulary.add_tokens(std::move(added), where);
    for (const std::string& pattern : patterns) {
      PreTokenizerStage stage;
      stage.regex.emplace(pattern);
      parts.stages.push_back(std::move(stage));
    }
    build_added_token_matchers(parts);
    special_ids(metadata.add_bos.value_or(false), metadata.bos_id, "tokenizer.ggml.add_bos_token",
                parts.post_processor.prefix);
    special_ids(metadata.add_eos.value_or(false), metadata.eos_id, "tokenizer.ggml.add_eos_token",
                parts.post_processor.suffix);
    return parts;
  }
  where.fail("not supported: tokenizer.ggml.model '" + metadata.model + "' (supported: gpt2, llama)");
}

}  // namespace attnscope::text::detail
