// attnscope/text/detail/processors.hpp — what a tokenizer does around the model (internal to the BPE tokenizer): the
// post-processor (the ids added before and after a single sequence: TemplateProcessing, RobertaProcessing,
// BertProcessing; ByteLevel adds none) and the decoder steps of SentencePiece-style tokenizers (Replace,
// ByteFallback, Fuse, Strip, Metaspace, ByteLevel), with the semantics of Hugging Face tokenizers' decoders: each step
// maps the list of token strings to a new list, and the result is their concatenation.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/text/byte_level.hpp"
#include "attnscope/text/detail/pre_tokenizer.hpp"
#include "attnscope/text/detail/unicode_normalization.hpp"

namespace attnscope::text::detail {

/// The ids a post-processor puts around a single sequence (only with EncodeOptions::add_special_tokens).
struct PostProcessor {
  std::vector<int> prefix, suffix;
};

struct DecoderStep {
  enum class Kind { replace, byte_fallback, fuse, strip, metaspace, byte_level } kind = Kind::fuse;
  std::string pattern, content;  // replace: literal -> content; strip: content (one character); metaspace: pattern
  int start = 0, stop = 0;       // strip: how many `content` characters at most to remove from each end
  PrependScheme prepend_scheme = PrependScheme::always;  // metaspace
};

/// "<0xNN>" -> the byte NN, else none.
inline std::optional<unsigned char> byte_fallback_value(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return std::nullopt;
  int value = 0;
  for (std::size_t i = 3; i < 5; ++i) {
    const char c = token[i];
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + digit;
  }
  return static_cast<unsigned char>(value);
}

/// Runs the decoder steps over token strings; with no steps the tokens are joined with single spaces (as Hugging
/// Face tokenizers does without a decoder).
inline std::string run_decoder(const std::vector<DecoderStep>& steps, std::vector<std::string> tokens) {
  if (steps.empty()) {
    std::string joined;
    for (std::size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  for (const DecoderStep& step : steps) {
    switch (step.kind) {
      case DecoderStep::Kind::replace:
        for (std::string& token : tokens) {
          std::string out;
          std::size_t start = 0;
          for (std::size_t found; !step.pattern.empty() && (found = token.find(step.pattern, start)) != std::string::npos;
               start = found + step.pattern.size())
            out.append(token, start, found - start) += step.content;
          out.append(token, start, std::string::npos);
          token.swap(out);
        }
        break;
      case DecoderStep::Kind::byte_fallback: {
        // Runs of <0xNN> tokens become their bytes when those are UTF-8, else one U+FFFD per byte.
        std::vector<std::string> out;
        std::string bytes;
        std::size_t byte_count = 0;
        const auto flush = [&] {
          if (byte_count == 0) return;
          if (!first_invalid_utf8_offset(bytes)) {
            out.push_back(bytes);
          } else {
            for (std::size_t i = 0; i < byte_count; ++i) out.push_back("\xEF\xBF\xBD");
          }
          bytes.clear();
          byte_count = 0;
        };
        for (std::string& token : tokens) {
          if (const auto byte = byte_fallback_value(token)) {
            bytes += static_cast<char>(*byte);
            ++byte_count;
          } else {
            flush();
            out.push_back(std::move(token));
          }
        }
        flush();
        tokens.swap(out);
        break;
      }
      case DecoderStep::Kind::fuse: {
        std::string fused;
        for (const std::string& token : tokens) fused += token;
        tokens.assign(1, fused);
        break;
      }
      case DecoderStep::Kind::strip:
        for (std::string& token : tokens) {
          std::size_t begin = 0, end = token.size();
          for (int i = 0; i < step.start && token.compare(begin, step.content.size(), step.content) == 0 &&
                          begin + step.content.size() <= end;
               ++i)
            begin += step.content.size();
          for (int i = 0; i < step.stop && end >= begin + step.content.size() &&
                          token.compare(end - step.content.size(), step.content.size(), step.content) == 0;
               ++i)
            end -= step.content.size();
          token = token.substr(begin, end - begin);
        }
        break;
      case DecoderStep::Kind::metaspace:
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          std::string out;
          std::size_t start = 0;
          for (std::size_t found; (found = tokens[i].find(step.pattern, start)) != std::string::npos;
               start = found + step.pattern.size())
            out.append(tokens[i], start, found - start) += ' ';
          out.append(tokens[i], start, std::string::npos);
          if (i == 0 && step.prepend_scheme != PrependScheme::never && !out.empty() && out[0] == ' ') out.erase(0, 1);
          tokens[i].swap(out);
        }
        break;
      case DecoderStep::Kind::byte_level:
        for (std::string& token : tokens) token = byte_level_to_bytes(token).value_or(token);
        break;
    }
  }
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace attnscope::text::detail
