// attnscope/text/detail/pre_tokenizer.hpp — the pre-tokenizer of a byte-level BPE tokenizer (internal to
// the BPE tokenizer): stages applied in order to every piece of text. A byte-level or Split stage optionally prefixes a
// space and optionally splits with a regex, with one of Hugging Face's Split behaviours (Regex::split). A
// Metaspace stage (SentencePiece-style) replaces every space by the replacement character ("▁"), prepends one
// according to its prepend scheme, and optionally splits before every replacement character (behaviour
// "MergedWithNext"), as Hugging Face tokenizers' Metaspace pre-tokenizer does.
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

/// When a Metaspace stage prepends its replacement to a piece that does not start with it: always, never, or only
/// to the piece that starts the text ("first": not after an added token).
enum class PrependScheme { always, first, never };

/// One step of the pre-tokenizer: optionally prefix a space to each piece that lacks one, then optionally split each
/// piece with a regex; or (metaspace) the Metaspace step.
struct PreTokenizerStage {
  bool add_prefix_space = false;
  std::optional<Regex> regex;
  SplitBehavior behavior = SplitBehavior::isolated;  // what the regex split does with the delimiters
  bool invert = false;                               // the gaps between matches are the delimiters
  bool metaspace = false;
  std::string replacement = "\xE2\x96\x81";  // metaspace: U+2581 "▁"
  PrependScheme prepend_scheme = PrependScheme::always;
  bool split = true;  // metaspace: split before every replacement character
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

/// The Metaspace step on one piece: its pieces are appended to `out` (owned copies kept in `owned`).
inline void metaspace_split(const PreTokenizerStage& stage, std::string_view piece, bool starts_text,
                            std::vector<std::string_view>& out, std::deque<std::string>& owned) {
  std::string replaced;
  replaced.reserve(piece.size() + stage.replacement.size());
  const std::string_view mark = stage.replacement;
  const bool starts_with_mark = piece.substr(0, 1) == " " || piece.substr(0, mark.size()) == mark;
  if (!starts_with_mark && (stage.prepend_scheme == PrependScheme::always ||
                            (stage.prepend_scheme == PrependScheme::first && starts_text)))
    replaced += stage.replacement;
  for (const char c : piece) {
    if (c == ' ')
      replaced += stage.replacement;
    else
      replaced += c;
  }
  owned.push_back(std::move(replaced));
  const std::string_view text = owned.back();
  if (!stage.split) {
    out.push_back(text);
    return;
  }
  std::size_t start = 0;
  for (std::size_t found = text.find(mark, 1); found != std::string_view::npos; found = text.find(mark, found + 1)) {
    if (found > start) out.push_back(text.substr(start, found - start));
    start = found;
  }
  if (start < text.size()) out.push_back(text.substr(start));
}

/// Splits `text` (non-empty) by every stage in order; the pieces are left in scratch.pieces and stay valid until the
/// next call with the same scratch. `starts_text`: the text is the start of the encoded text (for Metaspace's
/// prepend scheme "first").
inline void pre_tokenize(const std::vector<PreTokenizerStage>& stages, std::string_view text,
                         PreTokenizerScratch& scratch, bool starts_text = true) {
  scratch.prefixed_pieces.clear();
  scratch.pieces.assign(1, text);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const auto& stage = stages[s];
    scratch.next_pieces.clear();
    for (std::size_t p = 0; p < scratch.pieces.size(); ++p) {
      std::string_view piece = scratch.pieces[p];
      if (stage.metaspace) {
        metaspace_split(stage, piece, starts_text && p == 0, scratch.next_pieces, scratch.prefixed_pieces);
        continue;
      }
      if (stage.add_prefix_space && (piece.empty() || piece.front() != ' ')) {
        scratch.prefixed_pieces.push_back(" " + std::string(piece));
        piece = scratch.prefixed_pieces.back();
      }
      if (stage.regex)
        stage.regex->split(piece, scratch.next_pieces, *scratch.regex[s], stage.behavior, stage.invert);
      else
        scratch.next_pieces.push_back(piece);
    }
    scratch.pieces.swap(scratch.next_pieces);
  }
}

}  // namespace attnscope::text::detail
