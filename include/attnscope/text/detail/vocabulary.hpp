// attnscope/text/detail/vocabulary.hpp — the vocabulary of a byte-level BPE tokenizer (internal to
// ByteLevelBpeTokenizer): id <-> token tables, the merge table with each byte's token, the added tokens indexed by
// their first byte, and decoding. Filled from already-parsed file contents (detail/tokenizer_files.hpp); knows no
// file format.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/text/bpe_merge.hpp"
#include "attnscope/text/byte_level.hpp"
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
  /// Fills the id tables from (token string in the byte-level form, id) entries whose ids lie in [0, max_token_id].
  /// io_error for a duplicate id or a vocabulary without a token for some byte that can occur in UTF-8 text.
  void set_tokens(const std::vector<std::pair<std::string, int>>& entries, const LoadContext& where) {
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
      token_bytes_[index] = byte_level_to_bytes(token).value_or(token);
      id_of_token_string_.emplace(token, id);
    }
    for (int byte = 0; byte < 256; ++byte) {
      const auto found = id_of_token_string_.find(bytes_to_byte_level(std::string(1, static_cast<char>(byte))));
      merges_.byte_token_id[static_cast<std::size_t>(byte)] = found == id_of_token_string_.end() ? -1 : found->second;
      // Bytes that can occur in UTF-8 text (all but C0, C1, F5..FF) must have a token.
      const bool occurs_in_utf8 = byte < 0xC0 || (byte >= 0xC2 && byte <= 0xF4);
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
      merges_.insert(left_id, right_id, BpeMerge{static_cast<int>(rank), merged_id});  // a repeat keeps its first rank
    }
  }

  /// vocab.json + merges.txt: "<|...|>" vocabulary tokens that no merge forms are added tokens.
  void add_unmerged_special_tokens() {
    std::vector<char> formed(token_bytes_.size(), 0);
    merges_.for_each([&](const BpeMerge& merge) { formed[static_cast<std::size_t>(merge.merged_id)] = 1; });
    for (std::size_t id = 0; id < token_strings_.size(); ++id) {
      const std::string& token = token_strings_[id];
      if (present_[id] && !formed[id] && token.size() > 4 && token.compare(0, 2, "<|") == 0 &&
          token.compare(token.size() - 2, 2, "|>") == 0)
        added_tokens_.push_back({token, static_cast<int>(id), true, false, false});
    }
    index_added_tokens();
  }

  /// tokenizer.json's added tokens (non-empty contents, ids in [0, max_token_id]). An added token may reuse a
  /// vocabulary id (GPT-2's "<|endoftext|>"): its content is then what the id decodes to. io_error for two added
  /// tokens with one id.
  void add_tokens(std::vector<AddedToken> tokens, const LoadContext& where) {
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
      token_bytes_[index] = token.content;
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
  /// Indices into added_tokens() of the tokens starting with `byte`, longest first.
  const std::vector<std::size_t>& added_tokens_starting_with(unsigned char byte) const {
    return added_by_first_byte_[byte];
  }

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
    for (auto& list : added_by_first_byte_) list.clear();
    for (std::size_t i = 0; i < added_tokens_.size(); ++i)
      added_by_first_byte_[static_cast<unsigned char>(added_tokens_[i].content[0])].push_back(i);
    for (auto& list : added_by_first_byte_)
      std::stable_sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
        return added_tokens_[a].content.size() > added_tokens_[b].content.size();
      });
  }

  std::vector<std::string> token_bytes_;    // id -> raw bytes ("" for an unused id)
  std::vector<std::string> token_strings_;  // id -> string as in the file (byte-level form)
  std::vector<char> present_;               // id -> 1 when the id has a token
  std::unordered_map<std::string, int> id_of_token_string_;
  std::unordered_map<std::string, int> id_of_bytes_;  // only for ignore_merges
  BpeMergeTable merges_;
  bool ignore_merges_ = false;
  std::vector<AddedToken> added_tokens_;
  std::array<std::vector<std::size_t>, 256> added_by_first_byte_;
};

}  // namespace attnscope::text::detail
