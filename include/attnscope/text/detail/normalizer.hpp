// attnscope/text/detail/normalizer.hpp — the normalizer of a tokenizer (internal to the BPE tokenizer): the steps of
// Hugging Face tokenizers' normalizers that decoder models use, applied in order to each piece of text between added
// tokens. NFC, NFD, NFKC, NFKD (unicode_normalization.hpp); Prepend (Llama-2's "▁" before a non-empty piece);
// Replace of a literal string (Llama-2's " " -> "▁"); Strip of Unicode white space at either end.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "attnscope/text/detail/unicode_normalization.hpp"

namespace attnscope::text::detail {

struct NormalizerStep {
  enum class Kind { unicode_form, prepend, replace, strip } kind = Kind::prepend;
  NormalizationForm form = NormalizationForm::nfc;  // unicode_form
  std::string text;                                  // prepend: the prefix; replace: the literal searched for
  std::string replacement;                           // replace
  bool strip_left = false, strip_right = false;      // strip
};

/// Applies `steps` in order to valid UTF-8 text.
inline std::string apply_normalizer(const std::vector<NormalizerStep>& steps, std::string_view text) {
  std::string current(text);
  for (const NormalizerStep& step : steps) {
    switch (step.kind) {
      case NormalizerStep::Kind::unicode_form:
        current = normalize_utf8(current, step.form);
        break;
      case NormalizerStep::Kind::prepend:
        if (!current.empty()) current.insert(0, step.text);
        break;
      case NormalizerStep::Kind::replace: {
        if (step.text.empty() || current.find(step.text) == std::string::npos) break;
        std::string replaced;
        replaced.reserve(current.size() + current.size() / 4);
        std::size_t start = 0;
        for (std::size_t found; (found = current.find(step.text, start)) != std::string::npos;
             start = found + step.text.size()) {
          replaced.append(current, start, found - start);
          replaced += step.replacement;
        }
        replaced.append(current, start, std::string::npos);
        current.swap(replaced);
        break;
      }
      case NormalizerStep::Kind::strip: {
        const std::size_t begin = step.strip_left ? white_space_run_end(current, 0) : 0;
        const std::size_t end = step.strip_right ? white_space_run_start(current, current.size(), begin) : current.size();
        current = current.substr(begin, end - begin);
        break;
      }
    }
  }
  return current;
}

}  // namespace attnscope::text::detail
