// attnscope/text/detail/added_token_matcher.hpp — finding added tokens in text (internal to the BPE tokenizer), with
// the rules of Hugging Face tokenizers' AddedVocabulary: leftmost-longest matching; a single_word token counts only
// when no word character (\w) touches it on either side (otherwise the match is dropped and the search goes on
// after it); lstrip/rstrip tokens absorb the Unicode white space before/after them (lstrip not past the previous
// match). Special tokens can be left out of the search (then they are ordinary text).
#pragma once

#include <algorithm>
#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attnscope/text/detail/unicode_normalization.hpp"

namespace attnscope::text::detail {

/// What is searched for: the token's text (its content, or its normalized content for a normalized token) and id.
struct AddedTokenPattern {
  std::string text;
  int id = 0;
  bool special = false, left_strip = false, right_strip = false, single_word = false;
};

class AddedTokenMatcher {
 public:
  /// Replaces the patterns (empty texts are ignored).
  void set(std::vector<AddedTokenPattern> patterns) {
    patterns_.clear();
    for (auto& pattern : patterns)
      if (!pattern.text.empty()) patterns_.push_back(std::move(pattern));
    for (auto& list : by_first_byte_) list.clear();
    for (auto& next : next_byte_) next.reset();
    for (std::size_t i = 0; i < patterns_.size(); ++i) {
      const std::string& text = patterns_[i].text;
      by_first_byte_[static_cast<unsigned char>(text[0])].push_back(static_cast<std::uint32_t>(i));
      next_byte_[static_cast<unsigned char>(text[0])].set(text.size() == 1 ? 256 : static_cast<unsigned char>(text[1]));
    }
    for (auto& list : by_first_byte_)
      std::stable_sort(list.begin(), list.end(), [&](std::uint32_t a, std::uint32_t b) {
        return patterns_[a].text.size() > patterns_[b].text.size();
      });
  }
  bool empty() const { return patterns_.empty(); }
  /// True when some pattern would be searched for with this setting of match_special.
  bool searches(bool match_special) const {
    for (const auto& pattern : patterns_)
      if (match_special || !pattern.special) return true;
    return false;
  }

  /// Cuts `text` (valid UTF-8) into the stretches between added tokens and the tokens: calls on_text(stretch,
  /// offset of the stretch in text) for every non-empty stretch and on_token(id) for every token, in order.
  template <class OnText, class OnToken>
  void split(std::string_view text, bool match_special, OnText&& on_text, OnToken&& on_token) const {
    std::size_t done = 0;  // text[0, done) has been handed out
    std::size_t position = 0;
    while (position < text.size()) {
      // Quick rejection by the first two bytes (GPT-NeoX's 23 tokens of runs of spaces all start at every space).
      const std::bitset<257>& next = next_byte_[static_cast<unsigned char>(text[position])];
      if (!next[256] && (position + 1 == text.size() || !next[static_cast<unsigned char>(text[position + 1])])) {
        ++position;
        continue;
      }
      const AddedTokenPattern* match = nullptr;
      for (const std::uint32_t index : by_first_byte_[static_cast<unsigned char>(text[position])]) {
        const AddedTokenPattern& candidate = patterns_[index];
        if (candidate.special && !match_special) continue;
        if (text.compare(position, candidate.text.size(), candidate.text) == 0) {
          match = &candidate;
          break;  // longest first
        }
      }
      if (match == nullptr) {
        ++position;
        continue;
      }
      std::size_t start = position, stop = position + match->text.size();
      if (match->single_word) {
        const bool word_before = start > 0 && is_word_character(previous_code_point(text, start));
        std::size_t after = stop;
        const bool word_after = stop < text.size() && is_word_character(next_code_point(text, after));
        if (word_before || word_after) {
          position = stop;  // the match is dropped; the search goes on after it
          continue;
        }
      }
      if (match->left_strip) start = white_space_run_start(text, start, done);
      if (match->right_strip) stop = white_space_run_end(text, stop);
      if (start > done) on_text(text.substr(done, start - done), done);
      on_token(match->id);
      done = position = stop;
    }
    if (done < text.size()) on_text(text.substr(done), done);
  }

 private:
  std::vector<AddedTokenPattern> patterns_;
  std::array<std::vector<std::uint32_t>, 256> by_first_byte_;
  // For each first byte: the second bytes of the patterns starting with it, and bit 256 for a one-byte pattern.
  std::array<std::bitset<257>, 256> next_byte_;
};

}  // namespace attnscope::text::detail
