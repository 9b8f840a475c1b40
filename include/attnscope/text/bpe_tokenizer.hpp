// attnscope/text/bpe_tokenizer.hpp — BPE tokenizers with the ids of Hugging Face's tokenizers: byte-level (GPT-2,
// RoBERTa, GPT-NeoX, Llama-3, Qwen2, ...) and SentencePiece-style (Llama-2, Mistral, TinyLlama, Phi-3: characters,
// byte_fallback), loaded from OpenAI's encoder.json + vocab.bpe, Hugging Face's vocab.json + merges.txt, a Hugging
// Face tokenizer.json or SentencePiece's tokenizer.model. Encoding: split out added tokens, normalize, pre-tokenize
// (regex on PCRE2, Metaspace), turn each piece into its starting symbols and merge them by rank (bpe_merge.hpp),
// then (on request) add the post-processor's tokens. Decoding: each token's bytes (byte-level) or the decoder steps.
// Needs nlohmann-json and libpcre2-8 (link attnscope::text).
//
// The parts live in text/detail/: the files (tokenizer_files.hpp, sentencepiece_model.hpp), the vocabulary, merges
// and added tokens (vocabulary.hpp, added_token_matcher.hpp), the normalizer (normalizer.hpp,
// unicode_normalization.hpp), the pre-tokenizer (pre_tokenizer.hpp), post-processor and decoder (processors.hpp) and
// the word cache (word_cache.hpp). The tokenizer is a class template on the JSON type its files are parsed with
// (ByteLevelBpeTokenizer uses nlohmann::json), so that including this header compiles no JSON parser: a member is
// compiled only in the translation units that use it.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/core/error.hpp"
#include "attnscope/text/bpe_merge.hpp"
#include "attnscope/text/byte_level.hpp"
#include "attnscope/text/detail/gguf_vocabulary.hpp"
#include "attnscope/text/detail/pre_tokenizer.hpp"
#include "attnscope/text/detail/sentencepiece_model.hpp"
#include "attnscope/text/detail/tokenizer_files.hpp"
#include "attnscope/text/detail/vocabulary.hpp"
#include "attnscope/text/detail/word_cache.hpp"
#include "attnscope/text/tokenizer_types.hpp"

namespace attnscope::text {

/// A BPE tokenizer (byte-level or SentencePiece-style; the name is historical). Immutable after loading except for an internal word cache; all const members may be
/// called from several threads at once (the cache is guarded by a mutex). Json is the JSON type the files are
/// parsed with; use the alias ByteLevelBpeTokenizer.
template <class Json>
class BasicByteLevelBpeTokenizer {
 public:
  /// GPT-2's files: vocab.json (or encoder.json), token string -> id, and merges.txt (or vocab.bpe), one merge
  /// "left right" per line after an optional "#version" line. Pre-tokenizer: GPT-2's regex. Vocabulary tokens
  /// "<|...|>" that no merge forms (GPT-2's "<|endoftext|>") are added tokens.
  static BasicByteLevelBpeTokenizer from_vocab_and_merges(const std::string& vocab_json_path,
                                                          const std::string& merges_txt_path) {
    return BasicByteLevelBpeTokenizer(detail::load_vocab_and_merges<Json>(
        vocab_json_path, merges_txt_path, "text::ByteLevelBpeTokenizer::from_vocab_and_merges"));
  }

  /// A Hugging Face tokenizer.json whose model is BPE: byte-level (a ByteLevel pre-tokenizer) or SentencePiece-style
  /// (characters, byte_fallback, Metaspace or Prepend/Replace). The normalizers, pre-tokenizers, added-token flags,
  /// post-processors and decoders listed in docs/api/text.md are honoured; anything else (Unigram/WordPiece models,
  /// other normalizers or pre-tokenizers) throws io_error "... not supported: ..." naming the file and what it found.
  static BasicByteLevelBpeTokenizer from_tokenizer_json(const std::string& tokenizer_json_path) {
    return BasicByteLevelBpeTokenizer(
        detail::load_tokenizer_json<Json>(tokenizer_json_path, "text::ByteLevelBpeTokenizer::from_tokenizer_json"));
  }

  /// SentencePiece's tokenizer.model (a BPE ModelProto: Llama-1/2, Mistral-7B v0.1, TinyLlama), read as Hugging
  /// Face's LlamaConverter turns it into a tokenizer.json (see docs/api/text.md). io_error naming the file for a
  /// malformed protobuf and "not supported" for Unigram models, precompiled normalizers and
  /// remove_extra_whitespaces.
  static BasicByteLevelBpeTokenizer from_sentencepiece_model(const std::string& tokenizer_model_path) {
    return BasicByteLevelBpeTokenizer(detail::load_sentencepiece_model(
        tokenizer_model_path, "text::ByteLevelBpeTokenizer::from_sentencepiece_model"));
  }

  /// The tokenizer a GGUF file's metadata describes (text/gguf_tokenizer.hpp reads it from the file):
  /// tokenizer.ggml.model "llama" (SentencePiece BPE: tokens, scores, token types, byte fallback to the <0xXX>
  /// pieces, add_space_prefix) or "gpt2" (byte-level BPE: tokens and merges, with the pre-tokenizer `tokenizer.ggml.pre`
  /// names: gpt-2); control and user-defined tokens are added tokens; add_bos_token / add_eos_token put BOS / EOS
  /// around the text when EncodeOptions::add_special_tokens is set. io_error naming the file and the key for an
  /// unsupported model or pre-tokenizer and for missing or inconsistent keys.
  static BasicByteLevelBpeTokenizer from_gguf_metadata(const GgufTokenizerMetadata& metadata) {
    return BasicByteLevelBpeTokenizer(
        detail::gguf_tokenizer_parts(metadata, "text::ByteLevelBpeTokenizer::from_gguf_metadata"));
  }

  /// A model folder: tokenizer.json when present (it then decides: an unsupported tokenizer.json throws rather than
  /// fall back to files that may describe a different pre-tokenizer), else tokenizer.model, else vocab.json +
  /// merges.txt, else encoder.json + vocab.bpe; else io_error naming the folder. A tokenizer.model that cannot be
  /// read is reported together with the missing tokenizer.json.
  static BasicByteLevelBpeTokenizer from_folder(const std::string& folder) {
    using io::detail::join_path;
    if (!io::detail::path_is_directory(folder))
      attnscope::detail::throw_io_error("text::ByteLevelBpeTokenizer::from_folder", folder, "is not a directory");
    const auto has = [&](const char* name) { return io::detail::path_is_regular_file(join_path(folder, name)); };
    if (has("tokenizer.json")) return from_tokenizer_json(join_path(folder, "tokenizer.json"));
    if (has("tokenizer.model")) {
      try {
        return from_sentencepiece_model(join_path(folder, "tokenizer.model"));
      } catch (const attnscope::io_error& model_error) {
        attnscope::detail::throw_io_error("text::ByteLevelBpeTokenizer::from_folder", folder,
                                          "has no tokenizer.json, and its tokenizer.model cannot be used: ",
                                          model_error.what());
      }
    }
    if (has("vocab.json") && has("merges.txt"))
      return from_vocab_and_merges(join_path(folder, "vocab.json"), join_path(folder, "merges.txt"));
    if (has("encoder.json") && has("vocab.bpe"))
      return from_vocab_and_merges(join_path(folder, "encoder.json"), join_path(folder, "vocab.bpe"));
    attnscope::detail::throw_io_error("text::ByteLevelBpeTokenizer::from_folder", folder,
                                      "no tokenizer found: no tokenizer.json (looked also for tokenizer.model, "
                                      "vocab.json + merges.txt, encoder.json + vocab.bpe)");
  }

  /// Token ids of UTF-8 text: added tokens are split out (special ones only with options.parse_special_tokens), the
  /// rest is normalized, pre-tokenized and merged; with options.add_special_tokens the post-processor's ids (BOS/EOS)
  /// are put around the result. Throws attnscope::invalid_argument naming the byte offset of the first ill-formed
  /// UTF-8 sequence.
  std::vector<int> encode(std::string_view utf8_text, const EncodeOptions& options = {}) const {
    if (const auto bad = first_invalid_utf8_offset(utf8_text))
      attnscope::detail::throw_invalid_argument("text::ByteLevelBpeTokenizer::encode", "invalid UTF-8 at byte offset ",
                                                *bad, " (byte 0x", detail::hex_byte(utf8_text[*bad]), ")");
    EncodeState state(parts_.stages);
    state.ids.reserve(utf8_text.size() / 3 + 1);
    if (options.add_special_tokens)
      state.ids.insert(state.ids.end(), parts_.post_processor.prefix.begin(), parts_.post_processor.prefix.end());
    const bool special = options.parse_special_tokens;
    const bool raw_search = parts_.raw_added.searches(special);
    const bool normalized_search = parts_.normalized_added.searches(special);
    const auto push_id = [&](int id) { state.ids.push_back(id); };
    // Text between raw-matched added tokens: normalized, then searched for normalized added tokens.
    const auto encode_stretch = [&](std::string_view stretch, std::size_t offset) {
      std::string normalized_storage;
      std::string_view normalized = stretch;
      if (!parts_.normalizer.empty()) {
        normalized_storage = detail::apply_normalizer(parts_.normalizer, stretch);
        normalized = normalized_storage;
      }
      if (!normalized_search) {
        encode_ordinary(normalized, state, offset == 0);
        return;
      }
      parts_.normalized_added.split(
          normalized, special,
          [&](std::string_view piece, std::size_t inner) { encode_ordinary(piece, state, offset == 0 && inner == 0); },
          push_id);
    };
    if (raw_search)
      parts_.raw_added.split(utf8_text, special, encode_stretch, push_id);
    else
      encode_stretch(utf8_text, 0);
    if (options.add_special_tokens)
      state.ids.insert(state.ids.end(), parts_.post_processor.suffix.begin(), parts_.post_processor.suffix.end());
    return std::move(state.ids);
  }

  /// The text of token ids. Byte-level vocabularies: each token's bytes, concatenated (a prefix of a multi-byte
  /// character may end the result when the ids were cut). Character vocabularies: the tokenizer's decoder (Llama-2:
  /// "▁" -> " ", <0xNN> runs -> their bytes or U+FFFD, the first space removed). Throws attnscope::invalid_argument
  /// for an id outside the vocabulary.
  std::string decode(const std::vector<int>& ids) const {
    const detail::BpeVocabulary& vocabulary = parts_.vocabulary;
    if (vocabulary.byte_level()) return vocabulary.decode(ids, "text::ByteLevelBpeTokenizer::decode");
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (!vocabulary.has_id(ids[i]))
        attnscope::detail::throw_invalid_argument("text::ByteLevelBpeTokenizer::decode", "ids[", i, "] = ", ids[i],
                                                  " is not in the vocabulary (size ", vocabulary.vocab_size(), ")");
      tokens.push_back(vocabulary.decoder_input(ids[i]));
    }
    return detail::run_decoder(parts_.decoder, std::move(tokens));
  }

  /// Largest token id + 1, added tokens included.
  int vocab_size() const { return parts_.vocabulary.vocab_size(); }

  /// The (first) regex of the pre-tokenizer; "" when the text is not split (ByteLevel with use_regex false alone).
  const std::string& pre_tokenizer_pattern() const {
    static const std::string empty;
    for (const auto& stage : parts_.stages)
      if (stage.regex) return stage.regex->pattern();
    return empty;
  }
  /// Every regex of the pre-tokenizer, in the order they are applied.
  std::vector<std::string> pre_tokenizer_patterns() const {
    std::vector<std::string> patterns;
    for (const auto& stage : parts_.stages)
      if (stage.regex) patterns.push_back(stage.regex->pattern());
    return patterns;
  }

  /// Id of a token: an added token by its content, else a vocabulary token by its string in the vocabulary file
  /// (the byte-level form, e.g. "Ġthe" for " the"); std::nullopt when there is none.
  std::optional<int> token_id(std::string_view token) const {
    const int id = parts_.vocabulary.token_id(token);
    if (id < 0) return std::nullopt;
    return id;
  }
  /// The raw bytes of a token (its content for added tokens; for character vocabularies the byte of a <0xNN> token,
  /// else the token with the decoder's replacements, "▁the" -> " the"). Throws invalid_argument for an id outside
  /// the vocabulary.
  std::string token_bytes(int id) const {
    const detail::BpeVocabulary& vocabulary = parts_.vocabulary;
    if (vocabulary.byte_level()) return decode({id});
    if (!vocabulary.has_id(id))
      attnscope::detail::throw_invalid_argument("text::ByteLevelBpeTokenizer::token_bytes", "id ", id,
                                                " is not in the vocabulary (size ", vocabulary.vocab_size(), ")");
    if (const auto byte = detail::byte_fallback_value(vocabulary.token_string(id))) return std::string(1, static_cast<char>(*byte));
    std::vector<detail::DecoderStep> replacements;
    for (const auto& step : parts_.decoder)
      if (step.kind == detail::DecoderStep::Kind::replace) replacements.push_back(step);
      else if (step.kind == detail::DecoderStep::Kind::metaspace)
        replacements.push_back({detail::DecoderStep::Kind::replace, step.pattern, " ", 0, 0, detail::PrependScheme::never});
    return detail::run_decoder(replacements.empty() ? std::vector<detail::DecoderStep>{{}} : replacements,
                               {vocabulary.token_string(id)});
  }
  /// The added tokens (special or not), in id order.
  const std::vector<AddedToken>& added_tokens() const { return parts_.vocabulary.added_tokens(); }
  /// The normalizer's step types, e.g. "NFC" or "Prepend,Replace"; "" for none.
  const std::string& normalizer_name() const { return parts_.normalizer_name; }
  /// The ids that EncodeOptions::add_special_tokens puts before and after the text (the post-processor's).
  const std::vector<int>& added_prefix_ids() const { return parts_.post_processor.prefix; }
  const std::vector<int>& added_suffix_ids() const { return parts_.post_processor.suffix; }
  /// True for SentencePiece-style (character) vocabularies, false for byte-level ones.
  bool is_character_vocabulary() const { return !parts_.vocabulary.byte_level(); }

 private:
  struct EncodeState {
    explicit EncodeState(const std::vector<detail::PreTokenizerStage>& stages) : pre_tokenizer(stages) {}
    std::vector<int> ids;
    detail::PreTokenizerScratch pre_tokenizer;
    std::string word;
    detail::BpeMergeScratch merge_scratch;
  };

  explicit BasicByteLevelBpeTokenizer(detail::TokenizerParts parts) : parts_(std::move(parts)) {}

  // Pre-tokenizes `text` (no added tokens in it) and appends the BPE tokens of every piece.
  void encode_ordinary(std::string_view text, EncodeState& state, bool starts_text) const {
    if (text.empty()) return;
    detail::pre_tokenize(parts_.stages, text, state.pre_tokenizer, starts_text);
    for (const std::string_view piece : state.pre_tokenizer.pieces) encode_piece(piece, state);
  }

  // BPE of one pre-tokenized piece, through the word cache.
  void encode_piece(std::string_view piece, EncodeState& state) const {
    if (piece.empty()) return;
    const detail::BpeVocabulary& vocabulary = parts_.vocabulary;
    if (piece.size() == 1 && vocabulary.byte_level()) {
      if (const int id = vocabulary.merges().byte_token_id[static_cast<unsigned char>(piece[0])]; id >= 0)
        state.ids.push_back(id);
      return;
    }
    if (vocabulary.ignores_merges()) {  // tokenizer.json "ignore_merges": a piece that is a whole token is that token
      if (const int id = vocabulary.whole_token(piece, state.word); id >= 0) {
        state.ids.push_back(id);
        return;
      }
    }
    // A long word of a character vocabulary (the whole text under Llama-2's legacy form, which has no pre-tokenizer)
    // is cut where no token spans the boundary, so that its parts go through the cache like words.
    if (!vocabulary.byte_level() && vocabulary.cuts_allowed() && piece.size() > 64) {
      std::size_t start = 0, i = 0;
      char32_t previous = detail::next_code_point(piece, i);
      for (std::size_t position = i; position < piece.size(); position = i) {
        const char32_t current = detail::next_code_point(piece, i);
        if (vocabulary.cut_allowed(previous, current)) {
          merge_piece(piece.substr(start, position - start), state);
          start = position;
        }
        previous = current;
      }
      merge_piece(piece.substr(start), state);
      return;
    }
    merge_piece(piece, state);
  }

  // BPE of one word (or one independent part of it), through the word cache.
  void merge_piece(std::string_view piece, EncodeState& state) const {
    const detail::BpeVocabulary& vocabulary = parts_.vocabulary;
    // Pieces longer than max_cached_piece_bytes (a whole text under a SentencePiece-style tokenizer without a
    // pre-tokenizer) are merged without the cache: they rarely repeat and would fill it.
    const bool cached = piece.size() <= detail::WordCache::max_cached_piece_bytes;
    const std::size_t hash = cached ? std::hash<std::string_view>{}(piece) : 0;
    if (cached && cache_.append(piece, hash, state.ids)) return;
    const std::size_t first = state.ids.size();
    if (vocabulary.byte_level())
      detail::merge_word(vocabulary.merges(), piece, state.ids, state.merge_scratch);
    else if (vocabulary.character_symbols(piece, state.merge_scratch))
      detail::merge_symbols(vocabulary.merges(), state.ids, state.merge_scratch);
    if (state.ids.size() == first) return;
    if (cached) cache_.insert(piece, hash, state.ids.data() + first, state.ids.size() - first);
  }

  detail::TokenizerParts parts_;
  detail::WordCache cache_;
};

/// The byte-level BPE tokenizer whose files are parsed with nlohmann::json.
using ByteLevelBpeTokenizer = BasicByteLevelBpeTokenizer<nlohmann::json>;

}  // namespace attnscope::text
