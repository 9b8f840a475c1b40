// attnscope/text/regex.hpp — a compiled PCRE2 pattern (UTF mode, Unicode properties for \s \w \d and POSIX classes,
// JIT-compiled when the PCRE2 build supports it) and the "Isolated" split that pre-tokenizers use. Needs libpcre2-8
// (link attnscope::text).
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

  /// Appends to `pieces` the non-empty parts of text[begin, end) in order, cut the way Hugging Face's Split
  /// pre-tokenizer with behaviour "Isolated" cuts: every match is a piece, and so is every gap between matches.
  /// Empty matches cut nothing. `text` must be well-formed UTF-8 (checked by the caller; PCRE2's own check is skipped)
  /// and `begin`/`end` on character boundaries. Throws attnscope::invalid_argument when PCRE2 fails (e.g. a resource
  /// limit), naming the byte offset.
  void split_isolated(std::string_view text, std::vector<std::string_view>& pieces) const {
    Scratch scratch = make_scratch();
    split_isolated(text, pieces, scratch);
  }

  /// Per-call match state (match data; for JIT a match context with a JIT stack that can grow to 64 MiB, since long
  /// runs of whitespace backtrack through lookaheads like \s+(?!\S)). Make one per thread and reuse it.
  struct Scratch {
    std::unique_ptr<pcre2_match_data, detail::Pcre2MatchDataDeleter> match_data;
    std::unique_ptr<pcre2_match_context, detail::Pcre2MatchContextDeleter> context;
    std::unique_ptr<pcre2_jit_stack, detail::Pcre2JitStackDeleter> stack;
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
    split(text, pieces, scratch, Keep::all);
  }

  /// Which parts of a split are pieces: all (Hugging Face's Split behaviour "Isolated"), only the matches ("Removed"
  /// with invert: the gaps are the removed delimiters), or only the gaps ("Removed": the matches are).
  enum class Keep { all, matches, gaps };

  /// split_isolated keeping only the parts `keep` names.
  void split(std::string_view text, std::vector<std::string_view>& pieces, Scratch& scratch, Keep keep) const {
    const bool keep_matches = keep != Keep::gaps, keep_gaps = keep != Keep::matches;
    std::size_t position = 0;
    std::size_t gap_start = 0;
    while (position <= text.size()) {
      const int result = pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), position,
                                     PCRE2_NO_UTF_CHECK, scratch.match_data.get(), scratch.context.get());
      if (result == PCRE2_ERROR_NOMATCH) break;
      if (result < 0)
        attnscope::detail::throw_invalid_argument("text::Regex::split_isolated", "matching '", pattern_,
                                                  "' failed at byte offset ", position, ": ",
                                                  detail::pcre2_error_text(result));
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.match_data.get());
      const std::size_t match_begin = ovector[0], match_end = ovector[1];
      if (match_end == match_begin) {  // empty match: step over one character
        if (match_end >= text.size()) break;
        position = match_end + 1;
        while (position < text.size() && (static_cast<unsigned char>(text[position]) & 0xC0) == 0x80) ++position;
        continue;
      }
      if (keep_gaps && match_begin > gap_start) pieces.push_back(text.substr(gap_start, match_begin - gap_start));
      if (keep_matches) pieces.push_back(text.substr(match_begin, match_end - match_begin));
      gap_start = position = match_end;
    }
    if (keep_gaps && gap_start < text.size()) pieces.push_back(text.substr(gap_start));
  }

 private:
  std::string pattern_;
  std::shared_ptr<pcre2_code> code_;
  bool jit_ = false;
};

}  // namespace attnscope::text
