// attnscope/text/bpe_tokenizer.hpp — byte-level BPE tokenizers (GPT-2, RoBERTa, Llama-3, Mistral-Nemo, Qwen2, ...)
// loaded from OpenAI's encoder.json + vocab.bpe, Hugging Face's vocab.json + merges.txt or a Hugging Face
// tokenizer.json. Encoding: split out added tokens (on request), pre-tokenize with a regex (PCRE2), turn each piece
// into bytes and merge them by rank (bpe_merge.hpp). Decoding: concatenate each token's bytes.
// Needs nlohmann-json and libpcre2-8 (link attnscope::text).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/core/error.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/text/bpe_merge.hpp"
#include "attnscope/text/byte_level.hpp"
#include "attnscope/text/regex.hpp"

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

namespace detail {

/// One step of the pre-tokenizer: optionally prefix a space to each piece that lacks one, then optionally split each
/// piece with a regex (behaviour "Isolated": matches and the gaps between them are pieces).
struct PreTokenizerStage {
  bool add_prefix_space = false;
  std::optional<Regex> regex;
};

/// Cache word -> token ids, shared by the calls of one tokenizer and guarded by a mutex. Copies start empty.
class WordCache {
 public:
  static constexpr std::size_t max_entries = 1 << 18;  // cleared when full, so memory stays bounded
  WordCache() = default;
  WordCache(const WordCache&) {}
  WordCache& operator=(const WordCache&) { return *this; }

  /// Appends the cached ids of `word` to `out` and returns true, or returns false when `word` is not cached.
  bool append(const std::string& word, std::vector<int>& out) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = entries_.find(word);
    if (found == entries_.end()) return false;
    out.insert(out.end(), found->second.begin(), found->second.end());
    return true;
  }
  void insert(const std::string& word, const int* ids, std::size_t count) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (entries_.size() >= max_entries) entries_.clear();
    entries_.emplace(word, std::vector<int>(ids, ids + count));
  }

 private:
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::vector<int>> entries_;
};

/// Parses a JSON file; io_error naming the file and the byte position for malformed JSON.
inline nlohmann::json read_json_file(const std::string& path, const char* function) {
  const std::vector<unsigned char> bytes = io::read_file(path);
  try {
    return nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::parse_error& error) {
    attnscope::detail::throw_io_error(function, path, "malformed JSON at byte ", error.byte, ": ", error.what());
  }
}

/// A short, printable excerpt of a string for error messages.
inline std::string quoted_excerpt(std::string_view text) {
  constexpr std::size_t limit = 60;
  return "'" + std::string(text.substr(0, limit)) + (text.size() > limit ? "...'" : "'");
}

}  // namespace detail

/// A byte-level BPE tokenizer. Immutable after loading except for an internal word cache; all const members may be
/// called from several threads at once (the cache is guarded by a mutex).
class ByteLevelBpeTokenizer {
 public:
  /// GPT-2's files: vocab.json (or encoder.json), token string -> id, and merges.txt (or vocab.bpe), one merge
  /// "left right" per line after an optional "#version" line. Pre-tokenizer: GPT-2's regex. Vocabulary tokens
  /// "<|...|>" that no merge forms (GPT-2's "<|endoftext|>") are added tokens.
  static ByteLevelBpeTokenizer from_vocab_and_merges(const std::string& vocab_json_path,
                                                     const std::string& merges_txt_path) {
    constexpr const char* function = "text::ByteLevelBpeTokenizer::from_vocab_and_merges";
    ByteLevelBpeTokenizer tokenizer;
    tokenizer.set_vocabulary(detail::read_json_file(vocab_json_path, function), vocab_json_path, function);
    const std::vector<unsigned char> bytes = io::read_file(merges_txt_path);
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    std::vector<std::pair<std::string, std::string>> merges;
    std::size_t line_start = 0, line_number = 0;
    while (line_start < text.size()) {
      std::size_t line_end = text.find('\n', line_start);
      if (line_end == std::string_view::npos) line_end = text.size();
      std::string_view line = text.substr(line_start, line_end - line_start);
      line_start = line_end + 1;
      ++line_number;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty() || (line_number == 1 && line.substr(0, 8) == "#version")) continue;
      const std::size_t space = line.find(' ');
      if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
          line.find(' ', space + 1) != std::string_view::npos)
        attnscope::detail::throw_io_error(function, merges_txt_path, "line ", line_number,
                                          ": expected two tokens separated by one space, found ",
                                          detail::quoted_excerpt(line));
      merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
    }
    tokenizer.set_merges(merges, merges_txt_path, function, "line ");
    tokenizer.add_unmerged_special_tokens();
    tokenizer.stages_.push_back({false, Regex(gpt2_pre_tokenizer_pattern)});
    return tokenizer;
  }

  /// A Hugging Face tokenizer.json whose model is BPE over GPT-2's byte alphabet with a ByteLevel pre-tokenizer,
  /// alone or in a Sequence after Split pre-tokenizers (behaviour "Isolated"; Llama-3, Qwen2). Normalizer: none, an
  /// empty Sequence or NFC (NFC is not applied: the text must already be NFC; see docs/api/text.md). Anything else
  /// (Unigram/WordPiece models, Metaspace, byte_fallback, other normalizers or pre-tokenizers) throws io_error
  /// "... not supported: ..." naming the file and what it found.
  static ByteLevelBpeTokenizer from_tokenizer_json(const std::string& tokenizer_json_path) {
    constexpr const char* function = "text::ByteLevelBpeTokenizer::from_tokenizer_json";
    const nlohmann::json root = detail::read_json_file(tokenizer_json_path, function);
    ByteLevelBpeTokenizer tokenizer;
    tokenizer.load_tokenizer_json(root, tokenizer_json_path, function);
    return tokenizer;
  }

  /// A model folder: tokenizer.json when present (it then decides: an unsupported tokenizer.json throws rather than
  /// fall back to files that may describe a different pre-tokenizer), else vocab.json + merges.txt, else
  /// encoder.json + vocab.bpe; else io_error naming the folder.
  static ByteLevelBpeTokenizer from_folder(const std::string& folder) {
    namespace fs = std::filesystem;
    std::error_code error;
    if (!fs::is_directory(folder, error))
      attnscope::detail::throw_io_error("text::ByteLevelBpeTokenizer::from_folder", folder, "is not a directory");
    const fs::path base(folder);
    const auto has = [&](const char* name) { return fs::is_regular_file(base / name, error); };
    if (has("tokenizer.json")) return from_tokenizer_json((base / "tokenizer.json").string());
    if (has("vocab.json") && has("merges.txt"))
      return from_vocab_and_merges((base / "vocab.json").string(), (base / "merges.txt").string());
    if (has("encoder.json") && has("vocab.bpe"))
      return from_vocab_and_merges((base / "encoder.json").string(), (base / "vocab.bpe").string());
    attnscope::detail::throw_io_error("text::ByteLevelBpeTokenizer::from_folder", folder,
                                      "no tokenizer found (looked for tokenizer.json, vocab.json + merges.txt, "
                                      "encoder.json + vocab.bpe)");
  }

  /// Token ids of UTF-8 text. Throws attnscope::invalid_argument naming the byte offset of the first ill-formed UTF-8
  /// sequence. No BOS/EOS is added (tokenizer.json's post_processor is not applied).
  std::vector<int> encode(std::string_view utf8_text, const EncodeOptions& options = {}) const {
    if (const auto bad = first_invalid_utf8_offset(utf8_text))
      attnscope::detail::throw_invalid_argument("text::ByteLevelBpeTokenizer::encode", "invalid UTF-8 at byte offset ",
                                                *bad, " (byte 0x", hex_byte(utf8_text[*bad]), ")");
    EncodeState state(*this);
    state.ids.reserve(utf8_text.size() / 3 + 1);
    if (!options.parse_special_tokens || added_tokens_.empty()) {
      encode_ordinary(utf8_text, state);
      return std::move(state.ids);
    }
    // Leftmost-longest matching of the added tokens; the text between them is encoded as ordinary text.
    std::size_t segment_start = 0, position = 0;
    while (position < utf8_text.size()) {
      const AddedToken* match = nullptr;
      for (const std::size_t index : added_by_first_byte_[static_cast<unsigned char>(utf8_text[position])]) {
        const AddedToken& candidate = added_tokens_[index];
        if (utf8_text.compare(position, candidate.content.size(), candidate.content) == 0) {
          match = &candidate;
          break;  // the lists are sorted longest first
        }
      }
      if (match == nullptr) {
        ++position;
        continue;
      }
      std::size_t segment_end = position;
      if (match->left_strip)
        while (segment_end > segment_start && is_ascii_space(utf8_text[segment_end - 1])) --segment_end;
      encode_ordinary(utf8_text.substr(segment_start, segment_end - segment_start), state);
      state.ids.push_back(match->id);
      position += match->content.size();
      if (match->right_strip)
        while (position < utf8_text.size() && is_ascii_space(utf8_text[position])) ++position;
      segment_start = position;
    }
    encode_ordinary(utf8_text.substr(segment_start), state);
    return std::move(state.ids);
  }

  /// The text of token ids: each token's bytes, concatenated (a prefix of a multi-byte character may end the result
  /// when the ids were cut). Throws attnscope::invalid_argument for an id outside the vocabulary.
  std::string decode(const std::vector<int>& ids) const {
    std::string text;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const int id = ids[i];
      if (id < 0 || id >= vocab_size() || !present_[static_cast<std::size_t>(id)])
        attnscope::detail::throw_invalid_argument("text::ByteLevelBpeTokenizer::decode", "ids[", i, "] = ", id,
                                                  " is not in the vocabulary (size ", vocab_size(), ")");
      text += token_bytes_[static_cast<std::size_t>(id)];
    }
    return text;
  }

  /// Largest token id + 1, added tokens included.
  int vocab_size() const { return static_cast<int>(token_bytes_.size()); }

  /// The (first) regex of the pre-tokenizer; "" when the text is not split (ByteLevel with use_regex false alone).
  const std::string& pre_tokenizer_pattern() const {
    for (const auto& stage : stages_)
      if (stage.regex) return stage.regex->pattern();
    return empty_string();
  }
  /// Every regex of the pre-tokenizer, in the order they are applied.
  std::vector<std::string> pre_tokenizer_patterns() const {
    std::vector<std::string> patterns;
    for (const auto& stage : stages_)
      if (stage.regex) patterns.push_back(stage.regex->pattern());
    return patterns;
  }

  /// Id of a token: an added token by its content, else a vocabulary token by its string in the vocabulary file
  /// (the byte-level form, e.g. "Ġthe" for " the"); std::nullopt when there is none.
  std::optional<int> token_id(std::string_view token) const {
    for (const AddedToken& added : added_tokens_)
      if (added.content == token) return added.id;
    const auto found = id_of_token_string_.find(std::string(token));
    if (found == id_of_token_string_.end()) return std::nullopt;
    return found->second;
  }
  /// The raw bytes of a token (its content for added tokens). Throws invalid_argument for an id outside the vocabulary.
  std::string token_bytes(int id) const { return decode({id}); }
  /// The added tokens (special or not), in id order.
  const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }
  /// tokenizer.json's normalizer that is accepted but not applied ("NFC"), or "" for none.
  const std::string& assumed_normalizer() const { return assumed_normalizer_; }

 private:
  struct EncodeState {
    explicit EncodeState(const ByteLevelBpeTokenizer& tokenizer) {
      for (const auto& stage : tokenizer.stages_)
        regex_scratch.push_back(stage.regex ? std::optional<Regex::Scratch>(stage.regex->make_scratch()) : std::nullopt);
    }
    std::vector<int> ids;
    std::vector<std::optional<Regex::Scratch>> regex_scratch;
    std::vector<std::string_view> pieces, next_pieces;
    std::deque<std::string> prefixed_pieces;  // pieces that got a prefix space (a deque keeps views valid)
    std::string word;
    detail::BpeMergeScratch merge_scratch;
  };

  ByteLevelBpeTokenizer() = default;

  static bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
  static std::string hex_byte(char c) {
    const char* digits = "0123456789ABCDEF";
    const auto byte = static_cast<unsigned char>(c);
    return {digits[byte >> 4], digits[byte & 15]};
  }
  static const std::string& empty_string() {
    static const std::string empty;
    return empty;
  }

  // Pre-tokenizes `text` (no added tokens in it) and appends the BPE tokens of every piece.
  void encode_ordinary(std::string_view text, EncodeState& state) const {
    if (text.empty()) return;
    state.pieces.assign(1, text);
    for (std::size_t s = 0; s < stages_.size(); ++s) {
      const auto& stage = stages_[s];
      state.next_pieces.clear();
      for (std::string_view piece : state.pieces) {
        if (stage.add_prefix_space && (piece.empty() || piece.front() != ' ')) {
          state.prefixed_pieces.push_back(" " + std::string(piece));
          piece = state.prefixed_pieces.back();
        }
        if (stage.regex)
          stage.regex->split_isolated(piece, state.next_pieces, *state.regex_scratch[s]);
        else
          state.next_pieces.push_back(piece);
      }
      state.pieces.swap(state.next_pieces);
    }
    for (const std::string_view piece : state.pieces) encode_piece(piece, state);
    state.prefixed_pieces.clear();
  }

  // BPE of one pre-tokenized piece, through the word cache.
  void encode_piece(std::string_view piece, EncodeState& state) const {
    if (piece.empty()) return;
    if (piece.size() == 1) {
      state.ids.push_back(merges_.byte_token_id[static_cast<unsigned char>(piece[0])]);
      return;
    }
    state.word.assign(piece.data(), piece.size());
    if (ignore_merges_) {  // tokenizer.json "ignore_merges": a piece that is a whole token is that token
      const auto found = id_of_bytes_.find(state.word);
      if (found != id_of_bytes_.end()) {
        state.ids.push_back(found->second);
        return;
      }
    }
    if (cache_.append(state.word, state.ids)) return;
    const std::size_t first = state.ids.size();
    detail::merge_word(merges_, piece, state.ids, state.merge_scratch);
    cache_.insert(state.word, state.ids.data() + first, state.ids.size() - first);
  }

  // Fills the id tables from a JSON object token string -> id.
  void set_vocabulary(const nlohmann::json& vocab, const std::string& file, const char* function) {
    if (!vocab.is_object())
      attnscope::detail::throw_io_error(function, file, "the vocabulary is not a JSON object of token -> id");
    int largest = -1;
    for (auto entry = vocab.begin(); entry != vocab.end(); ++entry) {
      if (!entry.value().is_number_integer() || entry.value().get<std::int64_t>() < 0 ||
          entry.value().get<std::int64_t>() > max_token_id)
        attnscope::detail::throw_io_error(function, file, "token ", detail::quoted_excerpt(entry.key()),
                                          " has id ", entry.value().dump(), " (expected an integer in [0, ",
                                          max_token_id, "])");
      largest = std::max(largest, entry.value().get<int>());
    }
    resize_ids(largest + 1);
    id_of_token_string_.reserve(vocab.size());
    for (auto entry = vocab.begin(); entry != vocab.end(); ++entry) {
      const int id = entry.value().get<int>();
      const auto index = static_cast<std::size_t>(id);
      if (present_[index])
        attnscope::detail::throw_io_error(function, file, "duplicate id ", id, ": tokens ",
                                          detail::quoted_excerpt(token_strings_[index]), " and ",
                                          detail::quoted_excerpt(entry.key()));
      present_[index] = 1;
      token_strings_[index] = entry.key();
      // A string outside the byte alphabet decodes to its own UTF-8 bytes (as Hugging Face's ByteLevel decoder does).
      token_bytes_[index] = byte_level_to_bytes(entry.key()).value_or(entry.key());
      id_of_token_string_.emplace(entry.key(), id);
    }
    for (int byte = 0; byte < 256; ++byte) {
      const auto found = id_of_token_string_.find(bytes_to_byte_level(std::string(1, static_cast<char>(byte))));
      merges_.byte_token_id[static_cast<std::size_t>(byte)] = found == id_of_token_string_.end() ? -1 : found->second;
      // Bytes that can occur in UTF-8 text (all but C0, C1, F5..FF) must have a token.
      const bool occurs_in_utf8 = byte < 0xC0 || (byte >= 0xC2 && byte <= 0xF4);
      if (occurs_in_utf8 && merges_.byte_token_id[static_cast<std::size_t>(byte)] < 0)
        attnscope::detail::throw_io_error(function, file, "not supported: not a byte-level vocabulary (no token for byte 0x",
                                          hex_byte(static_cast<char>(byte)), ", byte-level string '",
                                          bytes_to_byte_level(std::string(1, static_cast<char>(byte))), "')");
    }
  }

  void resize_ids(int size) {
    token_bytes_.resize(static_cast<std::size_t>(size));
    token_strings_.resize(static_cast<std::size_t>(size));
    present_.resize(static_cast<std::size_t>(size), 0);
  }

  // Builds the merge table; `where` names the position in errors ("line " for merges.txt, "merges[" for JSON).
  void set_merges(const std::vector<std::pair<std::string, std::string>>& merges, const std::string& file,
                  const char* function, const char* where) {
    const auto locate = [&](std::size_t index) {
      return std::string(where) + std::to_string(where[0] == 'l' ? index + 1 : index) + (where[0] == 'l' ? "" : "]");
    };
    merges_.merges.reserve(merges.size());
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      const auto& [left, right] = merges[rank];
      const auto id_of = [&](const std::string& token) {
        const auto found = id_of_token_string_.find(token);
        if (found == id_of_token_string_.end())
          attnscope::detail::throw_io_error(function, file, locate(rank), ": merge ", detail::quoted_excerpt(left + " " + right),
                                            " refers to ", detail::quoted_excerpt(token),
                                            ", which is not in the vocabulary");
        return found->second;
      };
      const int left_id = id_of(left), right_id = id_of(right), merged_id = id_of(left + right);
      // A repeated merge keeps its first (lowest) rank.
      merges_.merges.emplace(detail::BpeMergeTable::key(left_id, right_id), detail::BpeMerge{static_cast<int>(rank), merged_id});
    }
  }

  // vocab.json + merges.txt: "<|...|>" vocabulary tokens that no merge forms are added tokens.
  void add_unmerged_special_tokens() {
    std::vector<char> formed(token_bytes_.size(), 0);
    for (const auto& entry : merges_.merges) formed[static_cast<std::size_t>(entry.second.merged_id)] = 1;
    for (std::size_t id = 0; id < token_strings_.size(); ++id) {
      const std::string& token = token_strings_[id];
      if (present_[id] && !formed[id] && token.size() > 4 && token.compare(0, 2, "<|") == 0 &&
          token.compare(token.size() - 2, 2, "|>") == 0)
        added_tokens_.push_back({token, static_cast<int>(id), true, false, false});
    }
    index_added_tokens();
  }

  void index_added_tokens() {
    std::sort(added_tokens_.begin(), added_tokens_.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
    for (auto& list : added_by_first_byte_) list.clear();
    for (std::size_t i = 0; i < added_tokens_.size(); ++i)
      added_by_first_byte_[static_cast<unsigned char>(added_tokens_[i].content[0])].push_back(i);
    for (auto& list : added_by_first_byte_)
      std::stable_sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
        return added_tokens_[a].content.size() > added_tokens_[b].content.size();
      });
  }

  void load_tokenizer_json(const nlohmann::json& root, const std::string& file, const char* function) {
    const auto unsupported = [&](const std::string& what) {
      attnscope::detail::throw_io_error(function, file, "not supported: ", what,
                                        " (only byte-level BPE tokenizers are supported)");
    };
    const auto corrupt = [&](const std::string& what) { attnscope::detail::throw_io_error(function, file, what); };
    const auto type_of = [](const nlohmann::json& object) -> std::string {
      const auto found = object.find("type");
      return found != object.end() && found->is_string() ? found->get<std::string>() : std::string("<no type>");
    };
    const auto flag = [](const nlohmann::json& object, const char* key, bool fallback) {
      const auto found = object.find(key);
      return found != object.end() && found->is_boolean() ? found->get<bool>() : fallback;
    };
    if (!root.is_object()) corrupt("the top level is not a JSON object");
    const auto model_entry = root.find("model");
    if (model_entry == root.end() || !model_entry->is_object()) corrupt("no \"model\" object");
    const nlohmann::json& model = *model_entry;
    const std::string model_type = model.contains("type") ? type_of(model) : std::string("BPE");
    if (model_type != "BPE") unsupported("model type '" + model_type + "'");
    if (flag(model, "byte_fallback", false))
      unsupported("a BPE model with byte_fallback (SentencePiece-style, as in Llama-2)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      const auto found = model.find(key);
      if (found != model.end() && !found->is_null() && !(found->is_string() && found->get<std::string>().empty()))
        unsupported(std::string("a BPE model with ") + key + " " + found->dump());
    }
    if (const auto dropout = model.find("dropout");
        dropout != model.end() && !dropout->is_null() && !(dropout->is_number() && dropout->get<double>() == 0.0))
      unsupported("BPE dropout " + dropout->dump());
    ignore_merges_ = flag(model, "ignore_merges", false);

    // Normalizer: none, an empty Sequence, or NFC (accepted, not applied).
    if (const auto normalizer = root.find("normalizer"); normalizer != root.end() && !normalizer->is_null()) {
      const std::string type = type_of(*normalizer);
      const bool empty_sequence = type == "Sequence" && normalizer->contains("normalizers") &&
                                  (*normalizer)["normalizers"].is_array() && (*normalizer)["normalizers"].empty();
      if (type == "NFC")
        assumed_normalizer_ = "NFC";
      else if (!empty_sequence)
        unsupported("normalizer '" + type + "' " + detail::quoted_excerpt(normalizer->dump()));
    }

    // Pre-tokenizer: ByteLevel, or a Sequence of Split (Isolated) and ByteLevel.
    const auto pre_tokenizer = root.find("pre_tokenizer");
    if (pre_tokenizer == root.end() || pre_tokenizer->is_null())
      unsupported("no pre-tokenizer (a byte-level BPE has a ByteLevel pre-tokenizer)");
    std::vector<const nlohmann::json*> steps;
    if (type_of(*pre_tokenizer) == "Sequence") {
      const auto list = pre_tokenizer->find("pretokenizers");
      if (list == pre_tokenizer->end() || !list->is_array()) corrupt("a Sequence pre-tokenizer without \"pretokenizers\"");
      for (const auto& step : *list) steps.push_back(&step);
    } else {
      steps.push_back(&*pre_tokenizer);
    }
    bool byte_level = false;
    for (const nlohmann::json* step : steps) {
      if (!step->is_object()) corrupt("a pre-tokenizer that is not a JSON object");
      const std::string type = type_of(*step);
      if (type == "ByteLevel") {
        byte_level = true;
        detail::PreTokenizerStage stage;
        stage.add_prefix_space = flag(*step, "add_prefix_space", false);
        if (flag(*step, "use_regex", true)) stage.regex.emplace(gpt2_pre_tokenizer_pattern);
        if (stage.add_prefix_space || stage.regex) stages_.push_back(std::move(stage));
      } else if (type == "Split") {
        const auto behavior = step->find("behavior");
        const std::string behavior_name = behavior != step->end() && behavior->is_string() ? behavior->get<std::string>() : "?";
        if (behavior_name != "Isolated") unsupported("Split pre-tokenizer behavior '" + behavior_name + "'");
        if (flag(*step, "invert", false)) unsupported("Split pre-tokenizer with invert true");
        const auto pattern = step->find("pattern");
        if (pattern == step->end() || !pattern->is_object()) corrupt("a Split pre-tokenizer without a \"pattern\" object");
        std::string regex_text;
        if (pattern->contains("Regex") && (*pattern)["Regex"].is_string())
          regex_text = (*pattern)["Regex"].get<std::string>();
        else if (pattern->contains("String") && (*pattern)["String"].is_string())
          regex_text = "\\Q" + (*pattern)["String"].get<std::string>() + "\\E";  // a literal
        else
          corrupt("a Split pattern that is neither {\"Regex\": ...} nor {\"String\": ...}");
        detail::PreTokenizerStage stage;
        try {
          stage.regex.emplace(regex_text);
        } catch (const attnscope::invalid_argument& error) {
          unsupported(std::string("a Split regex PCRE2 cannot compile: ") + error.what());
        }
        stages_.push_back(std::move(stage));
      } else {
        unsupported("pre-tokenizer '" + type + "'" +
                    (type == "Metaspace" ? std::string(" (SentencePiece-style, as in Llama-2 and Mistral-7B v0.1)") : ""));
      }
    }
    if (!byte_level) unsupported("no ByteLevel pre-tokenizer");

    const auto vocab = model.find("vocab");
    if (vocab == model.end()) corrupt("the model has no \"vocab\"");
    set_vocabulary(*vocab, file, function);
    const auto merges = model.find("merges");
    if (merges == model.end() || !merges->is_array()) corrupt("the model has no \"merges\" array");
    std::vector<std::pair<std::string, std::string>> merge_pairs;
    merge_pairs.reserve(merges->size());
    for (std::size_t i = 0; i < merges->size(); ++i) {
      const nlohmann::json& merge = (*merges)[i];
      if (merge.is_string()) {  // "left right"
        const std::string text = merge.get<std::string>();
        const std::size_t space = text.find(' ');
        if (space == std::string::npos || space == 0 || space + 1 == text.size() || text.find(' ', space + 1) != std::string::npos)
          corrupt("merges[" + std::to_string(i) + "]: expected two tokens separated by one space, found " +
                  detail::quoted_excerpt(text));
        merge_pairs.emplace_back(text.substr(0, space), text.substr(space + 1));
      } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {  // [left, right]
        merge_pairs.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      } else {
        corrupt("merges[" + std::to_string(i) + "] is neither \"left right\" nor [left, right]: " +
                detail::quoted_excerpt(merge.dump()));
      }
    }
    set_merges(merge_pairs, file, function, "merges[");
    if (ignore_merges_) {
      id_of_bytes_.reserve(token_bytes_.size());
      for (std::size_t id = 0; id < token_bytes_.size(); ++id)
        if (present_[id]) id_of_bytes_.emplace(token_bytes_[id], static_cast<int>(id));
    }

    // Added tokens: [{"id", "content", "lstrip", "rstrip", "special", ...}].
    if (const auto added = root.find("added_tokens"); added != root.end() && !added->is_null()) {
      if (!added->is_array()) corrupt("\"added_tokens\" is not an array");
      int largest = vocab_size() - 1;
      for (const auto& entry : *added) {
        if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_integer() ||
            !entry.contains("content") || !entry["content"].is_string() || entry["content"].get<std::string>().empty())
          corrupt("an added token without an integer \"id\" and a non-empty \"content\": " + detail::quoted_excerpt(entry.dump()));
        const std::int64_t id = entry["id"].get<std::int64_t>();
        if (id < 0 || id > max_token_id)
          corrupt("added token " + detail::quoted_excerpt(entry["content"].get<std::string>()) + " has id " +
                  std::to_string(id) + " (expected an integer in [0, " + std::to_string(max_token_id) + "])");
        largest = std::max(largest, static_cast<int>(id));
      }
      resize_ids(largest + 1);
      std::vector<char> seen(token_bytes_.size(), 0);
      for (const auto& entry : *added) {
        AddedToken token;
        token.id = entry["id"].get<int>();
        token.content = entry["content"].get<std::string>();
        token.special = flag(entry, "special", true);
        token.left_strip = flag(entry, "lstrip", false);
        token.right_strip = flag(entry, "rstrip", false);
        const auto index = static_cast<std::size_t>(token.id);
        if (seen[index])
          corrupt("duplicate added-token id " + std::to_string(token.id) + ": " + detail::quoted_excerpt(token_bytes_[index]) +
                  " and " + detail::quoted_excerpt(token.content));
        seen[index] = 1;
        // An added token may reuse a vocabulary id (GPT-2's "<|endoftext|>"); its content is what it decodes to.
        present_[index] = 1;
        token_bytes_[index] = token.content;
        if (token_strings_[index].empty()) token_strings_[index] = token.content;
        added_tokens_.push_back(std::move(token));
      }
    }
    index_added_tokens();
  }

  std::vector<std::string> token_bytes_;    // id -> raw bytes ("" for an unused id)
  std::vector<std::string> token_strings_;  // id -> string as in the file (byte-level form)
  std::vector<char> present_;               // id -> 1 when the id has a token
  std::unordered_map<std::string, int> id_of_token_string_;
  std::unordered_map<std::string, int> id_of_bytes_;  // only for ignore_merges
  detail::BpeMergeTable merges_;
  bool ignore_merges_ = false;
  std::vector<AddedToken> added_tokens_;
  std::array<std::vector<std::size_t>, 256> added_by_first_byte_;
  std::vector<detail::PreTokenizerStage> stages_;
  std::string assumed_normalizer_;
  detail::WordCache cache_;
};

}  // namespace attnscope::text
