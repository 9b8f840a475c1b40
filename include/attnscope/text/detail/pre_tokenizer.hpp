// attnscope/text/detail/pre_tokenizer.hpp — the pre-tokenizer of a byte-level BPE tokenizer (internal to
// ByteLevelBpeTokenizer): stages applied in order to every piece of text, each optionally prefixing a space and
// optionally splitting with a regex (behaviour "Isolated": matches and the gaps between them are pieces).
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attnscope/text/regex.hpp"

namespace attnscope::text::detail {

/// One step of the pre-tokenizer: optionally prefix a space to each piece that lacks one, then optionally split each
/// piece with a regex.
struct PreTokenizerStage {
  bool add_prefix_space = false;
  std::optional<Regex> regex;
};

/// The buffers of one pre-tokenization call (per-stage regex scratch, the pieces), reused across calls of one encode.
struct PreTokenizerScratch {
  explicit PreTokenizerScratch(const std::vector<PreTokenizerStage>& stages) {
    regex.reserve(stages.size());
    for (const auto& stage : stages)
      regex.push_back(stage.regex ? std::optional<Regex::Scratch>(stage.regex->make_scratch()) : std::nullopt);
  }
  std::vector<std::optional<Regex::Scratch>> regex;
  std::vector<std::string_view> pieces, next_pieces;
  std::deque<std::string> prefixed_pieces;  // pieces that got a prefix space (a deque keeps views valid)
};

/// Splits `text` (non-empty) by every stage in order; the pieces are left in scratch.pieces and stay valid until the
/// next call with the same scratch.
inline void pre_tokenize(const std::vector<PreTokenizerStage>& stages, std::string_view text,
                         PreTokenizerScratch& scratch) {
  scratch.prefixed_pieces.clear();
  scratch.pieces.assign(1, text);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const auto& stage = stages[s];
    scratch.next_pieces.clear();
    for (std::string_view piece : scratch.pieces) {
      if (stage.add_prefix_space && (piece.empty() || piece.front() != ' ')) {
        scratch.prefixed_pieces.push_back(" " + std::string(piece));
        piece = scratch.prefixed_pieces.back();
      }
      if (stage.regex)
        stage.regex->split_isolated(piece, scratch.next_pieces, *scratch.regex[s]);
      else
        scratch.next_pieces.push_back(piece);
    }
    scratch.pieces.swap(scratch.next_pieces);
  }
}

}  // namespace attnscope::text::detail
