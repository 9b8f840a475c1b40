// attnscope/text/detail/unicode_normalization.hpp — Unicode normalization forms NFC, NFD, NFKC and NFKD (Unicode
// Standard Annex #15: full decomposition, canonical ordering by combining class, canonical composition; Hangul by
// the arithmetic of The Unicode Standard section 3.12), UTF-8 in and out, plus the two character classes added
// tokens need (White_Space, and the regex class \w). The data is in unicode_tables.hpp (generated), parsed into
// lookup tables on first use (thread-safe static initialisation).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attnscope/text/byte_level.hpp"
#include "attnscope/text/detail/unicode_tables.hpp"

namespace attnscope::text::detail {

enum class NormalizationForm { nfc, nfd, nfkc, nfkd };

/// The parsed Unicode tables.
struct UnicodeTables {
  std::vector<std::array<char32_t, 3>> combining_class_runs;  // first, last, class; sorted
  std::unordered_map<char32_t, std::pair<std::uint32_t, std::uint32_t>> canonical, compatibility;  // -> pool range
  std::vector<char32_t> pool;
  std::unordered_map<std::uint64_t, char32_t> composites;  // (first << 21 | second) -> composite
  std::vector<std::array<char32_t, 2>> word_ranges;        // sorted
};

/// Calls on_entry(const std::vector<char32_t>&) for each ";"-separated entry of ","-separated hexadecimal numbers.
template <class OnEntry>
void parse_unicode_table(const char* text, OnEntry&& on_entry) {
  std::vector<char32_t> fields;
  char32_t value = 0;
  bool has_digit = false;
  for (const char* p = text;; ++p) {
    const char c = *p;
    if (c == ',' || c == ';' || c == '\0') {
      if (has_digit) fields.push_back(value);
      value = 0;
      has_digit = false;
      if (c != ',' && !fields.empty()) {
        on_entry(fields);
        fields.clear();
      }
      if (c == '\0') return;
    } else {
      value = value * 16 + static_cast<char32_t>(c <= '9' ? c - '0' : c - 'A' + 10);
      has_digit = true;
    }
  }
}

inline const UnicodeTables& unicode_tables() {
  static const UnicodeTables tables = [] {
    namespace data = unicode_data;
    UnicodeTables t;
    parse_unicode_table(data::combining_classes,
                        [&](const std::vector<char32_t>& f) { t.combining_class_runs.push_back({f[0], f[1], f[2]}); });
    const auto decompositions = [&](const char* table, auto& map) {
      parse_unicode_table(table, [&](const std::vector<char32_t>& f) {
        map.emplace(f[0], std::make_pair(static_cast<std::uint32_t>(t.pool.size()), static_cast<std::uint32_t>(f.size() - 1)));
        t.pool.insert(t.pool.end(), f.begin() + 1, f.end());
      });
    };
    decompositions(data::canonical_decompositions, t.canonical);
    decompositions(data::compatibility_decompositions, t.compatibility);
    parse_unicode_table(data::primary_composites, [&](const std::vector<char32_t>& f) {
      t.composites.emplace((static_cast<std::uint64_t>(f[0]) << 21) | f[1], f[2]);
    });
    parse_unicode_table(data::word_ranges, [&](const std::vector<char32_t>& f) { t.word_ranges.push_back({f[0], f[1]}); });
    return t;
  }();
  return tables;
}

inline int combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const auto& runs = unicode_tables().combining_class_runs;
  const auto it = std::upper_bound(runs.begin(), runs.end(), cp,
                                   [](char32_t value, const std::array<char32_t, 3>& run) { return value < run[0]; });
  if (it == runs.begin()) return 0;
  const auto& run = *(it - 1);
  return cp <= run[1] ? static_cast<int>(run[2]) : 0;
}

/// Unicode White_Space (what Rust's char::is_whitespace and the regex \s of Hugging Face tokenizers accept).
inline bool is_white_space(char32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/// The regex class \w of Unicode regex engines: letters, marks, decimal and letter numbers, connector punctuation,
/// ZWNJ and ZWJ.
inline bool is_word_character(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || cp == '_';
  const auto& ranges = unicode_tables().word_ranges;
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                                   [](char32_t value, const std::array<char32_t, 2>& range) { return value < range[0]; });
  return it != ranges.begin() && cp <= (it - 1)->at(1);
}

/// Decodes the code point at text[i] (valid UTF-8) and advances i.
inline char32_t next_code_point(std::string_view text, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(text[k])); };
  const char32_t b0 = byte(i);
  if (b0 < 0x80) {
    i += 1;
    return b0;
  }
  if (b0 < 0xE0) {
    const char32_t cp = ((b0 & 0x1F) << 6) | (byte(i + 1) & 0x3F);
    i += 2;
    return cp;
  }
  if (b0 < 0xF0) {
    const char32_t cp = ((b0 & 0x0F) << 12) | ((byte(i + 1) & 0x3F) << 6) | (byte(i + 2) & 0x3F);
    i += 3;
    return cp;
  }
  const char32_t cp = ((b0 & 0x07) << 18) | ((byte(i + 1) & 0x3F) << 12) | ((byte(i + 2) & 0x3F) << 6) | (byte(i + 3) & 0x3F);
  i += 4;
  return cp;
}

/// The code point that ends text[0, end) (valid UTF-8, end > 0).
inline char32_t previous_code_point(std::string_view text, std::size_t end) {
  std::size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return next_code_point(text, start);
}

/// Where the run of white space that ends at text[end] starts (not before `floor`); valid UTF-8.
inline std::size_t white_space_run_start(std::string_view text, std::size_t end, std::size_t floor) {
  while (end > floor) {
    std::size_t previous = end - 1;
    while (previous > floor && (static_cast<unsigned char>(text[previous]) & 0xC0) == 0x80) --previous;
    std::size_t next = previous;
    if (!is_white_space(next_code_point(text, next))) break;
    end = previous;
  }
  return end;
}

/// Where the run of white space that starts at text[start] ends; valid UTF-8.
inline std::size_t white_space_run_end(std::string_view text, std::size_t start) {
  while (start < text.size()) {
    std::size_t next = start;
    if (!is_white_space(next_code_point(text, next))) break;
    start = next;
  }
  return start;
}

// Hangul syllable arithmetic (The Unicode Standard, section 3.12).
constexpr char32_t hangul_s_base = 0xAC00, hangul_l_base = 0x1100, hangul_v_base = 0x1161, hangul_t_base = 0x11A7;
constexpr char32_t hangul_l_count = 19, hangul_v_count = 21, hangul_t_count = 28;
constexpr char32_t hangul_n_count = hangul_v_count * hangul_t_count, hangul_s_count = hangul_l_count * hangul_n_count;

/// Normalizes valid UTF-8 text of one chunk (see normalize_utf8) into `out`.
inline void normalize_chunk(std::string_view text, NormalizationForm form, std::string& out,
                            std::vector<char32_t>& buffer) {
  const UnicodeTables& tables = unicode_tables();
  const bool compatibility = form == NormalizationForm::nfkc || form == NormalizationForm::nfkd;
  const bool compose = form == NormalizationForm::nfc || form == NormalizationForm::nfkc;
  buffer.clear();
  // 1. Full decomposition.
  for (std::size_t i = 0; i < text.size();) {
    const char32_t cp = next_code_point(text, i);
    if (cp >= hangul_s_base && cp < hangul_s_base + hangul_s_count) {
      const char32_t index = cp - hangul_s_base;
      buffer.push_back(hangul_l_base + index / hangul_n_count);
      buffer.push_back(hangul_v_base + (index % hangul_n_count) / hangul_t_count);
      if (index % hangul_t_count != 0) buffer.push_back(hangul_t_base + index % hangul_t_count);
      continue;
    }
    const std::pair<std::uint32_t, std::uint32_t>* range = nullptr;
    if (compatibility) {
      const auto found = tables.compatibility.find(cp);
      if (found != tables.compatibility.end()) range = &found->second;
    }
    if (range == nullptr) {
      const auto found = tables.canonical.find(cp);
      if (found != tables.canonical.end()) range = &found->second;
    }
    if (range == nullptr)
      buffer.push_back(cp);
    else
      buffer.insert(buffer.end(), tables.pool.begin() + range->first, tables.pool.begin() + range->first + range->second);
  }
  // 2. Canonical ordering: each run of non-starters is sorted stably by combining class.
  for (std::size_t i = 0; i < buffer.size();) {
    if (combining_class(buffer[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < buffer.size() && combining_class(buffer[end]) != 0) ++end;
    std::stable_sort(buffer.begin() + static_cast<std::ptrdiff_t>(i), buffer.begin() + static_cast<std::ptrdiff_t>(end),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = end;
  }
  // 3. Canonical composition: a character combines with the last starter unless a character between them is blocked
  // (has a combining class of 0 or not lower than its own).
  if (compose && !buffer.empty()) {
    std::size_t starter = 0;
    bool has_starter = combining_class(buffer[0]) == 0;
    int last_class = has_starter ? 0 : 256;
    std::size_t write = 1;
    for (std::size_t read = 1; read < buffer.size(); ++read) {
      const char32_t cp = buffer[read];
      const int cls = combining_class(cp);
      bool composed = false;
      if (has_starter && (last_class < cls || (last_class == 0 && write == starter + 1))) {
        const char32_t first = buffer[starter];
        char32_t composite = 0;
        if (first >= hangul_l_base && first < hangul_l_base + hangul_l_count && cp >= hangul_v_base &&
            cp < hangul_v_base + hangul_v_count && write == starter + 1) {
          composite = hangul_s_base + ((first - hangul_l_base) * hangul_v_count + (cp - hangul_v_base)) * hangul_t_count;
        } else if (first >= hangul_s_base && first < hangul_s_base + hangul_s_count &&
                   (first - hangul_s_base) % hangul_t_count == 0 && cp > hangul_t_base &&
                   cp < hangul_t_base + hangul_t_count && write == starter + 1) {
          composite = first + (cp - hangul_t_base);
        } else {
          const auto found = tables.composites.find((static_cast<std::uint64_t>(first) << 21) | cp);
          if (found != tables.composites.end()) composite = found->second;
        }
        if (composite != 0) {
          buffer[starter] = composite;
          composed = true;
        }
      }
      if (composed) continue;
      if (cls == 0) {
        starter = write;
        has_starter = true;
        last_class = 0;
      } else {
        last_class = cls;
      }
      buffer[write++] = cp;
    }
    buffer.resize(write);
  }
  for (const char32_t cp : buffer) append_utf8(out, cp);
}

/// The normalization form `form` of valid UTF-8 text. ASCII characters are stable under every form and never
/// combine with what precedes them, so the text is cut before ASCII characters and only the chunks holding
/// non-ASCII characters (with the one ASCII character before them, which may combine with a following mark) are
/// normalized; ASCII text is copied as it is.
inline std::string normalize_utf8(std::string_view text, NormalizationForm form) {
  std::string out;
  out.reserve(text.size());
  std::vector<char32_t> buffer;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t j = i;
    while (j < text.size() && static_cast<unsigned char>(text[j]) < 0x80) ++j;
    if (j == text.size()) {
      out.append(text.substr(i));
      break;
    }
    const std::size_t chunk_start = j > i ? j - 1 : i;
    out.append(text.substr(i, chunk_start - i));
    std::size_t k = j;
    while (k < text.size() && static_cast<unsigned char>(text[k]) >= 0x80) ++k;
    normalize_chunk(text.substr(chunk_start, k - chunk_start), form, out, buffer);
    i = k;
  }
  return out;
}

}  // namespace attnscope::text::detail
