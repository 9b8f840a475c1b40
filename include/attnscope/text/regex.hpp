// attnscope/text/regex.hpp — a compiled PCRE2 pattern (UTF mode, Unicode properties for \s \w \d and POSIX classes,
// JIT-compiled when the PCRE2 build supports it) and the splits of Hugging Face's Split pre-tokenizer (every
// SplitDelimiterBehavior, with and without invert). Needs libpcre2-8 (link attnscope::text).
#pragma once

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"

namespace attnscope::text {
namespace detail {

/// PCRE2's text for an error code.
inline std::string pcre2_error_text(int error_code) {
  PCRE2_UCHAR buffer[256];
  const int length = pcre2_get_error_message(error_code, buffer, sizeof(buffer));
  if (length < 0) return "PCRE2 error " + std::to_string(error_code);
  return std::string(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(length));
}

struct Pcre2CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct Pcre2MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
struct Pcre2MatchContextDeleter {
  void operator()(pcre2_match_context* context) const { pcre2_match_context_free(context); }
};
struct Pcre2JitStackDeleter {
  void operator()(pcre2_jit_stack* stack) const { pcre2_jit_stack_free(stack); }
};

}  // namespace detail

/// What Hugging Face's Split pre-tokenizer does with the delimiters (the matches; with invert, the gaps between
/// them): drop them (removed), keep each as its own piece (isolated), join each to the content before it
/// (merged_with_previous) or after it (merged_with_next), or keep each run of them as one piece (contiguous).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

/// The PCRE2 pattern that matches `literal` and nothing else: ASCII punctuation escaped with a backslash, ASCII
/// control characters as \x{hh}, letters, digits and non-ASCII bytes as they are (PCRE2 spec: "a backslash followed
/// by a non-alphanumeric character matches that character"). An empty literal gives the empty pattern, which matches
/// the empty string everywhere.
inline std::string literal_regex(std::string_view literal) {
  static const char hex[] = "0123456789abcdef";
  std::string pattern;
  pattern.reserve(literal.size() * 2);
  for (const char c : literal) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x80 || (byte >= '0' && byte <= '9') || (byte >= 'a' && byte <= 'z') || (byte >= 'A' && byte <= 'Z')) {
      pattern += c;
    } else if (byte < 0x20 || byte == 0x7F) {
      pattern += "\\x{";
      pattern += hex[byte >> 4];
      pattern += hex[byte & 0xF];
      pattern += '}';
    } else {
      pattern += '\\';
      pattern += c;
    }
  }
  return pattern;
}

/// A compiled regular expression over UTF-8 text. Compiled once with PCRE2_UTF | PCRE2_UCP (so \s, \d, \w and
/// \p{L}, \p{N} follow the Unicode properties of the PCRE2 build) and JIT-compiled when available. The compiled code
/// is immutable and shared between copies; matching allocates its scratch per call, so one Regex may be used from
/// several threads at once.
class Regex {
 public:
  /// Compiles `pattern`. Throws attnscope::invalid_argument naming the pattern, PCRE2's message and the offset.
  explicit Regex(std::string pattern) : pattern_(std::move(pattern)) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C, &error_code, &error_offset,
                                     nullptr);
    if (code == nullptr)
      attnscope::detail::throw_invalid_argument("text::Regex", "cannot compile the pattern '", pattern_, "': ",
                                                detail::pcre2_error_text(error_code), " at offset ", error_offset);
    code_.reset(code, detail::Pcre2CodeDeleter{});
    jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;  // falls back to the interpreter when JIT is missing
  }

  const std::string& pattern() const { return pattern_; }
  /// True when the pattern runs JIT-compiled.
  bool jit_compiled() const { return jit_; }

  /// Appends to `pieces` the non-empty parts of `text` in order, cut the way Hugging Face's Split pre-tokenizer with
  /// behaviour "Isolated" cuts: every match is a piece, and so is every gap between matches (an empty match cuts the
  /// gap it falls in). `text` must be well-formed UTF-8 (checked by the caller; PCRE2's own check is skipped). Throws
  /// attnscope::invalid_argument when PCRE2 fails (e.g. a resource limit), naming the byte offset.
  void split_isolated(std::string_view text, std::vector<std::string_view>& pieces) const {
    Scratch scratch = make_scratch();
    split_isolated(text, pieces, scratch);
  }

  /// Per-call match state (match data; for JIT a match context with a JIT stack that can grow to 64 MiB, since long
  /// runs of whitespace backtrack through lookaheads like \s+(?!\S)) and the spans of one split. Make one per thread
  /// and reuse it.
  struct Scratch {
    std::unique_ptr<pcre2_match_data, detail::Pcre2MatchDataDeleter> match_data;
    std::unique_ptr<pcre2_match_context, detail::Pcre2MatchContextDeleter> context;
    std::unique_ptr<pcre2_jit_stack, detail::Pcre2JitStackDeleter> stack;
    std::vector<std::pair<std::size_t, std::size_t>> spans;  // [begin, end) byte offsets of the split's parts
  };

  /// Fresh match state for this pattern.
  Scratch make_scratch() const {
    Scratch scratch;
    scratch.match_data.reset(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
    if (!scratch.match_data) throw std::bad_alloc();
    if (!jit_) return scratch;
    scratch.context.reset(pcre2_match_context_create(nullptr));
    scratch.stack.reset(pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr));
    if (!scratch.context || !scratch.stack) throw std::bad_alloc();
    pcre2_jit_stack_assign(scratch.context.get(), nullptr, scratch.stack.get());
    return scratch;
  }

  /// split_isolated with caller-owned match state from make_scratch() of this Regex.
  void split_isolated(std::string_view text, std::vector<std::string_view>& pieces, Scratch& scratch) const {
    split(text, pieces, scratch, SplitBehavior::isolated, false);
  }

  /// Calls visit(begin, end, is_match) for the parts of `text` in order: the matches and the non-empty gaps between
  /// them, which together cover the text (Hugging Face tokenizers' Pattern::find_matches; one unmatched part
  /// [0, 0) for empty text). Matches are found from left to right as the Oniguruma iterator Hugging Face's Split
  /// uses finds them: the next search starts at the end of the previous match, and an empty match at the end of the
  /// previous match is skipped by searching again one character further on.
  template <class Visit>
  void for_each_part(std::string_view text, Scratch& scratch, Visit&& visit) const {
    if (text.empty()) {
      visit(std::size_t{0}, std::size_t{0}, false);
      return;
    }
    std::size_t search_from = 0, gap_start = 0;
    bool matched_before = false;
    std::size_t previous_match_end = 0;
    while (search_from <= text.size()) {
      const int result = pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), search_from,
                                     PCRE2_NO_UTF_CHECK, scratch.match_data.get(), scratch.context.get());
      if (result == PCRE2_ERROR_NOMATCH) break;
      if (result < 0)
        attnscope::detail::throw_invalid_argument("text::Regex::split", "matching '", pattern_,
                                                  "' failed at byte offset ", search_from, ": ",
                                                  detail::pcre2_error_text(result));
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.match_data.get());
      const std::size_t match_begin = ovector[0], match_end = ovector[1];
      if (match_begin == match_end && matched_before && previous_match_end == match_end) {
        search_from = next_character(text, search_from);
        continue;
      }
      if (match_begin != gap_start) visit(gap_start, match_begin, false);
      visit(match_begin, match_end, true);
      gap_start = search_from = previous_match_end = match_end;
      matched_before = true;
    }
    if (gap_start != text.size()) visit(gap_start, text.size(), false);
  }

  /// Appends to `pieces` the non-empty pieces of `text` that Hugging Face's Split pre-tokenizer gives with
  /// `behavior` and `invert` (tokenizers' NormalizedString::split over the parts of for_each_part; with `invert` the
  /// gaps are the delimiters and the matches the content).
  void split(std::string_view text, std::vector<std::string_view>& pieces, Scratch& scratch, SplitBehavior behavior,
             bool invert) const {
    auto& spans = scratch.spans;
    spans.clear();
    bool previous_delimiter = false;
    for_each_part(text, scratch, [&](std::size_t begin, std::size_t end, bool is_match) {
      const bool delimiter = is_match != invert;
      switch (behavior) {
        case SplitBehavior::removed:
          if (!delimiter) spans.emplace_back(begin, end);
          break;
        case SplitBehavior::isolated:
          spans.emplace_back(begin, end);
          break;
        case SplitBehavior::contiguous:  // runs of delimiters, and runs of content, become one piece each
          if (delimiter == previous_delimiter && !spans.empty())
            spans.back().second = end;
          else
            spans.emplace_back(begin, end);
          break;
        case SplitBehavior::merged_with_previous:  // a delimiter after content joins it
          if (delimiter && !previous_delimiter && !spans.empty())
            spans.back().second = end;
          else
            spans.emplace_back(begin, end);
          break;
        case SplitBehavior::merged_with_next:  // content after a delimiter joins it ([derived]: Hugging Face folds
                                                // from the end, merging a delimiter into the content after it)
          if (!delimiter && previous_delimiter && !spans.empty())
            spans.back().second = end;
          else
            spans.emplace_back(begin, end);
          break;
      }
      previous_delimiter = delimiter;
    });
    for (const auto& [begin, end] : spans)
      if (end > begin) pieces.push_back(text.substr(begin, end - begin));
  }
 private:
  // The offset after the UTF-8 character at `offset` (offset + 1 at the end of the text).
  static std::size_t next_character(std::string_view text, std::size_t offset) {
    ++offset;
    while (offset < text.size() && (static_cast<unsigned char>(text[offset]) & 0xC0) == 0x80) ++offset;
    return offset;
  }

  std::string pattern_;
  std::shared_ptr<pcre2_code> code_;
  bool jit_ = false;
};

}  // namespace attnscope::text
