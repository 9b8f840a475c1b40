// attnscope/text/detail/gguf_vocabulary.hpp — the parts of a BPE tokenizer from a GGUF file's tokenizer metadata
// (GgufTokenizerMetadata): "llama" is a SentencePiece BPE vocabulary and goes through the same builder as a
// tokenizer.model (sentencepiece_model.hpp); "gpt2" is a byte-level BPE vocabulary with merges, pre-tokenized by the
// regex its `tokenizer.ggml.pre` names. The result has the ids of the Hugging Face tokenizer the file was converted
// from (llama.cpp's convert_hf_to_gguf.py writes that tokenizer's vocabulary, merges and token types).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/text/detail/sentencepiece_model.hpp"
#include "attnscope/text/detail/tokenizer_files.hpp"
#include "attnscope/text/tokenizer_types.hpp"

namespace attnscope::text::detail {

/// Llama 3's pre-tokenizer regex (the Split step of Meta-Llama-3's tokenizer.json; also cl100k_base's): contractions
/// in any case, letters with one leading non-letter, digits in groups of at most three, punctuation runs with their
/// line breaks, line-break runs, then white space.
inline constexpr const char* llama3_pre_tokenizer_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
/// Qwen2's pre-tokenizer regex (the Split step of Qwen1.5/Qwen2/Qwen2.5/Qwen3's tokenizer.json): Llama 3's with
/// every digit on its own.
inline constexpr const char* qwen2_pre_tokenizer_pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
/// Hugging Face's Digits pre-tokenizer with individual_digits: every character of Unicode category N is a piece
/// (Rust's char::is_numeric is categories Nd, Nl, No).
inline constexpr const char* individual_digits_pattern = R"(\p{N})";

/// What a `tokenizer.ggml.pre` name stands for: the normalizer, pre-tokenizer and BPE options of the Hugging Face
/// tokenizer.json that llama.cpp's convert_hf_to_gguf.py gives that name (it recognises the tokenizer by the ids it
/// gives a test text, then writes only the name, the vocabulary and the merges).
struct GgufPreTokenizer {
  std::vector<std::string> patterns;  // Split (behaviour Isolated) steps, in order
  bool nfc = false;                   // an NFC normalizer
  bool ignore_merges = false;         // the BPE model's ignore_merges
  bool add_bos = false;               // BOS by default when the file has no tokenizer.ggml.add_bos_token
};

/// The names supported, in the order error messages list them.
inline constexpr const char* gguf_supported_pre_names =
    "gpt-2, phi-2, llama-bpe (llama3, llama-v3), dbrx, qwen2, smollm, starcoder, refact, mpt, olmo";

/// The Hugging Face pre-tokenizer a `tokenizer.ggml.pre` name stands for; std::nullopt when the name is not supported.
/// The tokenizer.json each name was taken from (convert_hf_to_gguf_update.py lists them):
///   gpt-2 (openai-community/gpt2), phi-2 (microsoft/phi-2): ByteLevel with GPT-2's regex;
///   llama-bpe (meta-llama/Meta-Llama-3-8B; llama.cpp also reads llama3, llama-v3): Split(Llama 3 regex), then
///     ByteLevel without regex; ignore_merges; TemplateProcessing with <|begin_of_text|>;
///   dbrx (databricks/dbrx-base; also the name the converter gives OLMo 2's tokenizer, allenai's dolma2): Split(Llama
///     3 regex, the cl100k_base pattern), then ByteLevel without regex; no ignore_merges, no BOS;
///   qwen2 (Qwen/Qwen1.5-7B; the same in Qwen2, Qwen2.5, Qwen3): NFC, Split(Qwen2 regex), ByteLevel without regex;
///   smollm (HuggingFaceTB/SmolLM-135M, also SmolLM2), starcoder (bigcode/starcoder2-3b), refact
///     (smallcloudai/Refact-1_6-base): Digits(individual_digits), then ByteLevel with GPT-2's regex;
///   mpt (mosaicml/mpt-7b, whose tokenizer is EleutherAI/gpt-neox-20b's, as Pythia's; llama.cpp's converter also
///     gives this name to GPT-NeoX models without tokenizer files), olmo (allenai/OLMo-1.7-7B-hf, GPT-NeoX-based):
///     NFC, ByteLevel with GPT-2's regex.
inline std::optional<GgufPreTokenizer> gguf_pre_tokenizer(const std::string& pre) {
  GgufPreTokenizer result;
  if (pre == "gpt-2" || pre == "phi-2") {
    result.patterns = {gpt2_pre_tokenizer_pattern};
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    result.patterns = {llama3_pre_tokenizer_pattern};
    result.ignore_merges = true;
    result.add_bos = true;
  } else if (pre == "dbrx") {
    result.patterns = {llama3_pre_tokenizer_pattern};
  } else if (pre == "qwen2") {
    result.patterns = {qwen2_pre_tokenizer_pattern};
    result.nfc = true;
  } else if (pre == "smollm" || pre == "starcoder" || pre == "refact") {
    result.patterns = {individual_digits_pattern, gpt2_pre_tokenizer_pattern};
  } else if (pre == "mpt" || pre == "olmo") {
    result.patterns = {gpt2_pre_tokenizer_pattern};
    result.nfc = true;
  } else {
    return std::nullopt;
  }
  return result;
}

/// True for the placeholder tokens "[PAD<id>]" that llama.cpp's converter writes for the ids a vocabulary leaves out
/// (between the tokenizer's last token and the model's embedding rows); they are no tokens of the Hugging Face
/// tokenizer, so they are not made added tokens.
inline bool is_gguf_padding_token(const std::string& token, std::size_t id) {
  return token == "[PAD" + std::to_string(id) + "]";
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
    if (metadata.pre.empty())
      where.fail(std::string("tokenizer.ggml.pre is missing: the pre-tokenizer of a gpt2 tokenizer is unknown "
                             "(supported: ") + gguf_supported_pre_names + ")");
    const std::optional<GgufPreTokenizer> pre = gguf_pre_tokenizer(metadata.pre);
    if (!pre)
      where.fail("not supported: tokenizer.ggml.pre '" + metadata.pre + "' (supported for tokenizer.ggml.model gpt2: " +
                 gguf_supported_pre_names + ")");
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
      if ((type == 3 || type == 4) && !is_gguf_padding_token(metadata.tokens[id], id)) {
        // control and user-defined tokens are Hugging Face's added tokens
        AddedToken token;
        token.content = metadata.tokens[id];
        token.id = static_cast<int>(id);
        token.special = type == 3;
        if (!token.content.empty()) added.push_back(std::move(token));
      }
    }
    parts.vocabulary.set_tokens(entries, where, true);
    parts.vocabulary.set_merges(merges, MergeSource::json_array, where);
    if (pre->ignore_merges) parts.vocabulary.enable_whole_tokens();
    parts.vocabulary.add_tokens(std::move(added), where);
    if (pre->nfc) {
      NormalizerStep nfc;
      nfc.kind = NormalizerStep::Kind::unicode_form;
      nfc.form = NormalizationForm::nfc;
      parts.normalizer.push_back(nfc);
      parts.normalizer_name = "NFC";
    }
    for (const std::string& pattern : pre->patterns) {
      PreTokenizerStage stage;
      stage.regex.emplace(pattern);
      parts.stages.push_back(std::move(stage));
    }
    build_added_token_matchers(parts);
    special_ids(metadata.add_bos.value_or(pre->add_bos), metadata.bos_id, "tokenizer.ggml.add_bos_token",
                parts.post_processor.prefix);
    special_ids(metadata.add_eos.value_or(false), metadata.eos_id, "tokenizer.ggml.add_eos_token",
                parts.post_processor.suffix);
    return parts;
  }
  where.fail("not supported: tokenizer.ggml.model '" + metadata.model + "' (supported: gpt2, llama)");
}

}  // namespace attnscope::text::detail
