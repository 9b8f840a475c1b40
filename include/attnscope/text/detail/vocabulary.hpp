// attnscope/text/detail/vocabulary.hpp — the vocabulary of a BPE tokenizer (internal to the BPE tokenizer): id <->
// token tables, the merge table, the added tokens, and the symbols a word starts from. Byte-level vocabularies
// (GPT-2's alphabet) start from each byte's token; character vocabularies (SentencePiece-style) from each character's
// token, else (byte_fallback) the tokens <0xNN> of its UTF-8 bytes, else the unknown token. Filled from
// already-parsed file contents (detail/tokenizer_files.hpp); knows no file format.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/text/bpe_merge.hpp"
#include "attnscope/text/byte_level.hpp"
#include "attnscope/text/detail/processors.hpp"
#include "attnscope/text/detail/unicode_normalization.hpp"
#include "attnscope/text/tokenizer_types.hpp"

namespace attnscope::text::detail {

/// A short, printable excerpt of a string for error messages.
inline std::string quoted_excerpt(std::string_view text) {
  constexpr std::size_t limit = 60;
  return "'" + std::string(text.substr(0, limit)) + (text.size() > limit ? "...'" : "'");
}

/// Two upper-case hexadecimal digits of a byte.
inline std::string hex_byte(char c) {
  const char* digits = "0123456789ABCDEF";
  const auto byte = static_cast<unsigned char>(c);
  return {digits[byte >> 4], digits[byte & 15]};
}

/// One merge and its position in the file: the line number of merges.txt or the index in tokenizer.json's array.
struct MergeEntry {
  std::string left, right;
  std::size_t position;
};
enum class MergeSource { text_lines, json_array };

/// Where errors point: the function that loads and the file it reads.
struct LoadContext {
  const char* function;
  const std::string& file;
  [[noreturn]] void fail(const std::string& message) const {
    attnscope::detail::throw_io_error(function, file, message);
  }
};

/// Token tables, merges and added tokens of one tokenizer.
class BpeVocabulary {
 public:
  /// Fills the id tables from (token string, id) entries whose ids lie in [0, max_token_id]. byte_level: the strings
  /// are in GPT-2's byte alphabet, and every byte that can occur in UTF-8 text must have a token; otherwise the
  /// strings are text (SentencePiece's "▁" for a space) and <0xNN> strings are byte tokens. io_error for a duplicate
  /// id or a byte-level vocabulary without a token for such a byte.
  void set_tokens(const std::vector<std::pair<std::string, int>>& entries, const LoadContext& where,
                  bool byte_level = true) {
    byte_level_ = byte_level;
    model_token_count_ = static_cast<int>(entries.size());
    int largest = -1;
    for (const auto& entry : entries) largest = std::max(largest, entry.second);
    resize_ids(largest + 1);
    id_of_token_string_.reserve(entries.size());
    for (const auto& [token, id] : entries) {
      const auto index = static_cast<std::size_t>(id);
      if (present_[index])
        where.fail(attnscope::detail::concat("duplicate id ", id, ": tokens ", quoted_excerpt(token_strings_[index]),
                                             " and ", quoted_excerpt(token)));
      present_[index] = 1;
      token_strings_[index] = token;
      // A string outside the byte alphabet decodes to its own UTF-8 bytes (as Hugging Face's ByteLevel decoder does).
      token_bytes_[index] = byte_level ? byte_level_to_bytes(token).value_or(token) : token;
      id_of_token_string_.emplace(token, id);
      if (!byte_level) {
        std::size_t end = 0;
        if (!token.empty() && !first_invalid_utf8_offset(token)) {
          const char32_t cp = next_code_point(token, end);
          if (end == token.size()) {
            id_of_character_.emplace(cp, id);
            if (cp < 128) ascii_id_[cp] = id;
          }
        }
        if (const auto byte = byte_fallback_value(token)) byte_fallback_id_[*byte] = id;
      }
    }
    if (!byte_level) return;
    merges_.every_byte_has_token = true;
    for (int byte = 0; byte < 256; ++byte) {
      const auto found = id_of_token_string_.find(bytes_to_byte_level(std::string(1, static_cast<char>(byte))));
      merges_.byte_token_id[static_cast<std::size_t>(byte)] = found == id_of_token_string_.end() ? -1 : found->second;
      merges_.every_byte_has_token = merges_.every_byte_has_token && found != id_of_token_string_.end();
      // Bytes that can occur in UTF-8 text (all but C0, C1, F5..FF) must have a token, except the lead bytes F1..F4
      // of code points U+40000 and above, which some vocabularies trained on real text lack (StarCoder2's and
      // Refact's lack F1): like Hugging Face's BPE without an unk_token, encoding then drops such a byte.
      const bool occurs_in_utf8 = byte < 0xC0 || (byte >= 0xC2 && byte <= 0xF0);
      if (occurs_in_utf8 && merges_.byte_token_id[static_cast<std::size_t>(byte)] < 0)
        where.fail(attnscope::detail::concat("not supported: not a byte-level vocabulary (no token for byte 0x",
                                             hex_byte(static_cast<char>(byte)), ", byte-level string '",
                                             bytes_to_byte_level(std::string(1, static_cast<char>(byte))), "')"));
    }
  }

  /// Builds the merge table (rank = index in `merges`); errors name each merge's position in its file.
  void set_merges(const std::vector<MergeEntry>& merges, MergeSource source, const LoadContext& where) {
    const auto locate = [&](std::size_t index) {
      const std::string position = std::to_string(merges[index].position);
      return source == MergeSource::text_lines ? "line " + position : "merges[" + position + "]";
    };
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      const std::string& left = merges[rank].left;
      const std::string& right = merges[rank].right;
      const auto id_of = [&](const std::string& token) {
        const auto found = id_of_token_string_.find(token);
        if (found == id_of_token_string_.end())
          where.fail(locate(rank) + ": merge " + quoted_excerpt(left + " " + right) + " refers to " +
                     quoted_excerpt(token) + ", which is not in the vocabulary");
        return found->second;
      };
      const int left_id = id_of(left), right_id = id_of(right), merged_id = id_of(left + right);
      if (merge_operand_.size() < token_bytes_.size()) merge_operand_.resize(token_bytes_.size(), 0);
      merge_operand_[static_cast<std::size_t>(left_id)] = merge_operand_[static_cast<std::size_t>(right_id)] = 1;
      merges_.insert(left_id, right_id, BpeMerge{static_cast<int>(rank), merged_id});  // a repeat keeps its first rank
    }
  }

  /// Character vocabularies: byte_fallback (characters outside the vocabulary become their <0xNN> tokens), the
  /// unknown token's id (-1: none; characters that have no token are then dropped, as Hugging Face does) and whether
  /// consecutive unknown characters fuse into one unknown token.
  void set_unknown_handling(bool byte_fallback, int unknown_id, bool fuse_unknown) {
    byte_fallback_ = byte_fallback;
    unknown_id_ = unknown_id;
    fuse_unknown_ = fuse_unknown;
    prepare_cuts();
  }

  /// Character vocabularies: whether a long word may be cut where no token contains the two characters on either
  /// side (see cut_allowed): true when no merge takes a byte-fallback token or the unknown token as an operand.
  bool cuts_allowed() const { return cuts_allowed_; }
  /// Whether no vocabulary token contains the characters `left` then `right` side by side. BPE merges only form
  /// vocabulary tokens, so no merge ever joins symbols across such a boundary, and the word's two sides merge
  /// independently (each in the same order as in the whole word).
  /// Also false between two characters without tokens when unknown characters fuse (they would become one unknown).
  bool cut_allowed(char32_t left, char32_t right) const {
    if (inner_pairs_.count((static_cast<std::uint64_t>(left) << 21) | right) != 0) return false;
    return !(fuse_unknown_ && unknown_id_ >= 0) || has_character(left) || has_character(right);
  }
  bool has_character(char32_t cp) const {
    return (cp < 128 && ascii_id_[cp] >= 0) || id_of_character_.count(cp) != 0;
  }
  bool byte_level() const { return byte_level_; }

  /// Character vocabularies: adds the starting symbols of `word` (valid UTF-8) to `scratch`; false when there are none.
  bool character_symbols(std::string_view word, BpeMergeScratch& scratch) const {
    begin_symbols(scratch);
    bool last_unknown = false;
    for (std::size_t i = 0; i < word.size();) {
      const std::size_t start = i;
      const char32_t cp = next_code_point(word, i);
      if (cp < 128 && ascii_id_[cp] >= 0) {
        add_symbol(scratch, ascii_id_[cp]);
        last_unknown = false;
        continue;
      }
      if (const auto found = id_of_character_.find(cp); found != id_of_character_.end()) {
        add_symbol(scratch, found->second);
        last_unknown = false;
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (std::size_t k = start; k < i; ++k) all = all && byte_fallback_id_[static_cast<unsigned char>(word[k])] >= 0;
        if (all) {
          for (std::size_t k = start; k < i; ++k) add_symbol(scratch, byte_fallback_id_[static_cast<unsigned char>(word[k])]);
          last_unknown = false;
          continue;
        }
      }
      if (unknown_id_ >= 0 && !(fuse_unknown_ && last_unknown)) add_symbol(scratch, unknown_id_);
      last_unknown = unknown_id_ >= 0;
    }
    return !scratch.symbols.empty();
  }

  void prepare_cuts() {
    cuts_allowed_ = false;
    inner_pairs_.clear();
    if (byte_level_) return;
    const auto operand = [&](int id) {
      return id >= 0 && static_cast<std::size_t>(id) < merge_operand_.size() && merge_operand_[static_cast<std::size_t>(id)];
    };
    for (const int id : byte_fallback_id_)
      if (operand(id)) return;
    if (operand(unknown_id_)) return;
    for (std::size_t id = 0; id < token_strings_.size(); ++id) {
      const std::string& token = token_strings_[id];
      if (!present_[id] || token.size() < 2 || first_invalid_utf8_offset(token)) continue;
      std::size_t i = 0;
      char32_t previous = next_code_point(token, i);
      while (i < token.size()) {
        const char32_t current = next_code_point(token, i);
        inner_pairs_.insert((static_cast<std::uint64_t>(previous) << 21) | current);
        previous = current;
      }
    }
    cuts_allowed_ = true;
  }

  /// vocab.json + merges.txt: "<|...|>" vocabulary tokens that no merge forms are added tokens.
  void add_unmerged_special_tokens() {
    std::vector<char> formed(token_bytes_.size(), 0);
    merges_.for_each([&](const BpeMerge& merge) { formed[static_cast<std::size_t>(merge.merged_id)] = 1; });
    for (std::size_t id = 0; id < token_strings_.size(); ++id) {
      const std::string& token = token_strings_[id];
      if (present_[id] && !formed[id] && token.size() > 4 && token.compare(0, 2, "<|") == 0 &&
          token.compare(token.size() - 2, 2, "|>") == 0)
        added_tokens_.push_back({token, static_cast<int>(id), true, false, false, false, false});
    }
    index_added_tokens();
  }

  /// tokenizer.json's added tokens (non-empty contents), with the ids Hugging Face gives them (below). An added token
  /// may reuse a vocabulary id (GPT-2's "<|endoftext|>"): its content is then what the id decodes to.
  void add_tokens(std::vector<AddedToken> tokens, const LoadContext& where) {
    // Ids as Hugging Face tokenizers assigns them when it loads a tokenizer.json (the file's ids are only checked
    // there): an added token whose content is a vocabulary token takes that token's id; a content seen before is
    // skipped; any other takes the next id after the largest added id, or the vocabulary's size when that is larger.
    // Files saved by Hugging Face hold these ids already.
    {
      std::vector<AddedToken> assigned;
      std::unordered_map<std::string, int> added_ids;
      int largest_added = -1;
      for (AddedToken& token : tokens) {
        if (added_ids.count(token.content)) continue;
        if (const auto found = id_of_token_string_.find(token.content); found != id_of_token_string_.end())
          token.id = found->second;
        else
          token.id = assigned.empty() ? model_token_count_
                     : largest_added >= model_token_count_ || model_token_count_ == 0 ? largest_added + 1
                                                                                       : model_token_count_;
        if (token.id > max_token_id)
          where.fail("added token " + quoted_excerpt(token.content) + " gets id " + std::to_string(token.id) +
                     " (at most " + std::to_string(max_token_id) + ")");
        largest_added = std::max(largest_added, token.id);
        added_ids.emplace(token.content, token.id);
        assigned.push_back(std::move(token));
      }
      tokens.swap(assigned);
    }
    int largest = vocab_size() - 1;
    for (const AddedToken& token : tokens) largest = std::max(largest, token.id);
    resize_ids(largest + 1);
    std::vector<char> seen(token_bytes_.size(), 0);
    for (AddedToken& token : tokens) {
      const auto index = static_cast<std::size_t>(token.id);
      if (seen[index])
        where.fail("duplicate added-token id " + std::to_string(token.id) + ": " + quoted_excerpt(token_bytes_[index]) +
                   " and " + quoted_excerpt(token.content));
      seen[index] = 1;
      present_[index] = 1;
      // Decoded as Hugging Face's ByteLevel decoder does: through the byte alphabet when every character is in it.
      token_bytes_[index] = byte_level_ ? byte_level_to_bytes(token.content).value_or(token.content) : token.content;
      if (token_strings_[index].empty()) token_strings_[index] = token.content;
      added_tokens_.push_back(std::move(token));
    }
    index_added_tokens();
  }

  /// tokenizer.json "ignore_merges": a pre-tokenized piece that is a whole token becomes that token (whole_token).
  void enable_whole_tokens() {
    ignore_merges_ = true;
    id_of_bytes_.reserve(token_bytes_.size());
    for (std::size_t id = 0; id < token_bytes_.size(); ++id)
      if (present_[id]) id_of_bytes_.emplace(token_bytes_[id], static_cast<int>(id));
  }
  bool ignores_merges() const { return ignore_merges_; }
  /// With ignore_merges, the id of the token whose bytes are `bytes` (held in `key`, reused storage), else -1.
  int whole_token(std::string_view bytes, std::string& key) const {
    key.assign(bytes.data(), bytes.size());
    const auto found = id_of_bytes_.find(key);
    return found == id_of_bytes_.end() ? -1 : found->second;
  }

  const BpeMergeTable& merges() const { return merges_; }
  int vocab_size() const { return static_cast<int>(token_bytes_.size()); }
  const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }
  /// The string of a token as in its file (byte-level form, or SentencePiece's), "" for an unused id.
  const std::string& token_string(int id) const { return token_strings_[static_cast<std::size_t>(id)]; }
  /// What a character vocabulary's decoder gets for a token: a normalized added token's normalized content (as
  /// Hugging Face decodes it: Llama-2's "<s>" is "▁<s>"), else token_string(id).
  const std::string& decoder_input(int id) const {
    const auto found = decoder_inputs_.find(id);
    return found == decoder_inputs_.end() ? token_string(id) : found->second;
  }
  void set_decoder_input(int id, std::string text) { decoder_inputs_[id] = std::move(text); }
  /// Whether an id has a token.
  bool has_id(int id) const { return id >= 0 && id < vocab_size() && present_[static_cast<std::size_t>(id)]; }

  /// Id of an added token by its content, else of a vocabulary token by its byte-level string; -1 when none.
  int token_id(std::string_view token) const {
    for (const AddedToken& added : added_tokens_)
      if (added.content == token) return added.id;
    const auto found = id_of_token_string_.find(std::string(token));
    return found == id_of_token_string_.end() ? -1 : found->second;
  }

  /// Each token's bytes, concatenated; invalid_argument naming `function` for an id outside the vocabulary.
  std::string decode(const std::vector<int>& ids, const char* function) const {
    std::string text;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const int id = ids[i];
      if (id < 0 || id >= vocab_size() || !present_[static_cast<std::size_t>(id)])
        attnscope::detail::throw_invalid_argument(function, "ids[", i, "] = ", id, " is not in the vocabulary (size ",
                                                  vocab_size(), ")");
      text += token_bytes_[static_cast<std::size_t>(id)];
    }
    return text;
  }

 private:
  void resize_ids(int size) {
    token_bytes_.resize(static_cast<std::size_t>(size));
    token_strings_.resize(static_cast<std::size_t>(size));
    present_.resize(static_cast<std::size_t>(size), 0);
  }

  void index_added_tokens() {
    std::sort(added_tokens_.begin(), added_tokens_.end(),
              [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  }

  std::vector<std::string> token_bytes_;    // id -> raw bytes ("" for an unused id)
  std::vector<std::string> token_strings_;  // id -> string as in the file (byte-level form)
  std::vector<char> present_;               // id -> 1 when the id has a token
  std::unordered_map<std::string, int> id_of_token_string_;
  std::unordered_map<std::string, int> id_of_bytes_;  // only for ignore_merges
  BpeMergeTable merges_;
  bool ignore_merges_ = false;
  std::vector<AddedToken> added_tokens_;
  bool byte_level_ = true;
  int model_token_count_ = 0;  // entries of the model's vocabulary
  std::unordered_map<int, std::string> decoder_inputs_;
  std::vector<char> merge_operand_;                 // id -> 1 when some merge takes it as its left or right token
  std::unordered_set<std::uint64_t> inner_pairs_;  // character vocabularies: adjacent character pairs inside tokens
  bool cuts_allowed_ = false;
  std::unordered_map<char32_t, int> id_of_character_;  // character vocabularies: one-character tokens
  std::array<int, 256> byte_fallback_id_ = filled_with_minus_one();
  std::array<int, 256> ascii_id_ = filled_with_minus_one();  // one-character tokens of ASCII characters (first 128)
  bool byte_fallback_ = false, fuse_unknown_ = false;
  int unknown_id_ = -1;

  static std::array<int, 256> filled_with_minus_one() {
    std::array<int, 256> values{};
    values.fill(-1);
    return values;
  }
};

}  // namespace attnscope::text::detail
