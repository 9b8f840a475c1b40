// attnscope/text/detail/tokenizer_files.hpp — the tokenizer files (internal to ByteLevelBpeTokenizer): vocab.json
// (token string -> id), merges.txt ("left right" per line) and Hugging Face's tokenizer.json (model, normalizer,
// pre-tokenizer, added tokens), read into TokenizerParts. Every problem is an io_error naming the loading function
// and the file. The JSON readers are templates on the JSON type (nlohmann::json in ByteLevelBpeTokenizer) so that
// a translation unit compiles the JSON parser only when it loads a tokenizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/text/detail/added_token_matcher.hpp"
#include "attnscope/text/detail/normalizer.hpp"
#include "attnscope/text/detail/pre_tokenizer.hpp"
#include "attnscope/text/detail/processors.hpp"
#include "attnscope/text/detail/vocabulary.hpp"
#include "attnscope/text/tokenizer_types.hpp"

namespace attnscope::text::detail {

/// What a tokenizer is made of once its files are read.
struct TokenizerParts {
  BpeVocabulary vocabulary;
  std::vector<NormalizerStep> normalizer;
  std::string normalizer_name;  // the normalizer's step types, e.g. "NFC" or "Prepend,Replace"; "" for none
  std::vector<PreTokenizerStage> stages;
  AddedTokenMatcher raw_added, normalized_added;  // added tokens searched in the raw / the normalized text
  PostProcessor post_processor;
  std::vector<DecoderStep> decoder;  // character vocabularies only
};

/// Builds the two added-token matchers: non-normalized tokens are searched in the raw text, normalized ones (their
/// contents normalized by the tokenizer's normalizer) in the normalized text.
inline void build_added_token_matchers(TokenizerParts& parts) {
  std::vector<AddedTokenPattern> raw, normalized;
  for (const AddedToken& token : parts.vocabulary.added_tokens()) {
    AddedTokenPattern pattern{token.content, token.id, token.special, token.left_strip, token.right_strip,
                              token.single_word};
    if (token.normalized) {
      pattern.text = apply_normalizer(parts.normalizer, token.content);
      if (!parts.normalizer.empty()) parts.vocabulary.set_decoder_input(token.id, pattern.text);
      normalized.push_back(std::move(pattern));
    } else {
      raw.push_back(std::move(pattern));
    }
  }
  parts.raw_added.set(std::move(raw));
  parts.normalized_added.set(std::move(normalized));
}

/// The merges of tokenizer.json's model: "left right" strings or [left, right] pairs; positions are array indices.
template <class Json>
std::vector<MergeEntry> tokenizer_json_merges(const Json& merges, const LoadContext& where) {
  std::vector<MergeEntry> merge_pairs;
  merge_pairs.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const Json& merge = merges[i];
    if (merge.is_string()) {  // "left right"
      const std::string text = merge.template get<std::string>();
      const std::size_t space = text.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == text.size() || text.find(' ', space + 1) != std::string::npos)
        where.fail("merges[" + std::to_string(i) + "]: expected two tokens separated by one space, found " +
                   quoted_excerpt(text));
      merge_pairs.push_back({text.substr(0, space), text.substr(space + 1), i});
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {  // [left, right]
      merge_pairs.push_back({merge[0].template get<std::string>(), merge[1].template get<std::string>(), i});
    } else {
      where.fail("merges[" + std::to_string(i) + "] is neither \"left right\" nor [left, right]: " +
                 quoted_excerpt(merge.dump()));
    }
  }
  return merge_pairs;
}

/// tokenizer.json's "added_tokens": [{"id", "content", "lstrip", "rstrip", "special", ...}].
template <class Json>
std::vector<AddedToken> tokenizer_json_added_tokens(const Json& added, const LoadContext& where) {
  const auto flag = [](const Json& object, const char* key, bool fallback) {
    const auto found = object.find(key);
    return found != object.end() && found->is_boolean() ? found->template get<bool>() : fallback;
  };
  if (!added.is_array()) where.fail("\"added_tokens\" is not an array");
  std::vector<AddedToken> tokens;
  for (const auto& entry : added) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_integer() || !entry.contains("content") ||
        !entry["content"].is_string() || entry["content"].template get<std::string>().empty())
      where.fail("an added token without an integer \"id\" and a non-empty \"content\": " + quoted_excerpt(entry.dump()));
    const std::int64_t id = entry["id"].template get<std::int64_t>();
    if (id < 0 || id > max_token_id)
      where.fail("added token " + quoted_excerpt(entry["content"].template get<std::string>()) + " has id " +
                 std::to_string(id) + " (expected an integer in [0, " + std::to_string(max_token_id) + "])");
    AddedToken token;
    token.id = static_cast<int>(id);
    token.content = entry["content"].template get<std::string>();
    token.special = flag(entry, "special", true);
    token.left_strip = flag(entry, "lstrip", false);
    token.right_strip = flag(entry, "rstrip", false);
    token.single_word = flag(entry, "single_word", false);
    token.normalized = flag(entry, "normalized", true);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

/// Parses a JSON file; io_error naming the file and the byte position for malformed JSON, and naming the file for
/// JSON the parser cannot represent (a number beyond the range of double, e.g. 5e1000: out_of_range).
template <class Json>
Json read_json_file(const std::string& path, const char* function) {
  const std::vector<unsigned char> bytes = io::read_file(path);
  try {
    return Json::parse(bytes.begin(), bytes.end());
  } catch (const typename Json::parse_error& error) {
    attnscope::detail::throw_io_error(function, path, "malformed JSON at byte ", error.byte, ": ", error.what());
  } catch (const typename Json::exception& error) {
    attnscope::detail::throw_io_error(function, path, "unreadable JSON: ", error.what());
  }
}

/// Fills the vocabulary from a JSON object token string -> id (ids integers in [0, max_token_id]).
template <class Json>
void set_vocabulary(BpeVocabulary& vocabulary, const Json& vocab, const LoadContext& where, bool byte_level = true) {
  if (!vocab.is_object()) where.fail("the vocabulary is not a JSON object of token -> id");
  std::vector<std::pair<std::string, int>> entries;
  entries.reserve(vocab.size());
  for (auto entry = vocab.begin(); entry != vocab.end(); ++entry) {
    if (!entry.value().is_number_integer() || entry.value().template get<std::int64_t>() < 0 ||
        entry.value().template get<std::int64_t>() > max_token_id)
      where.fail(attnscope::detail::concat("token ", quoted_excerpt(entry.key()), " has id ", entry.value().dump(),
                                           " (expected an integer in [0, ", max_token_id, "])"));
    entries.emplace_back(entry.key(), entry.value().template get<int>());
  }
  vocabulary.set_tokens(entries, where, byte_level);
}

/// The merges of a merges.txt (or vocab.bpe): one "left right" per line, after an optional "#version" first line;
/// empty lines are skipped. Positions are line numbers.
inline std::vector<MergeEntry> parse_merges_text(std::string_view text, const LoadContext& where) {
  std::vector<MergeEntry> merges;
  std::size_t line_start = 0, line_number = 0;
  while (line_start < text.size()) {
    std::size_t line_end = text.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = text.size();
    std::string_view line = text.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_number == 1 && line.substr(0, 8) == "#version")) continue;
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      where.fail(attnscope::detail::concat("line ", line_number, ": expected two tokens separated by one space, found ",
                                           quoted_excerpt(line)));
    merges.push_back({std::string(line.substr(0, space)), std::string(line.substr(space + 1)), line_number});
  }
  return merges;
}

/// GPT-2's files: vocab.json (or encoder.json) and merges.txt (or vocab.bpe); GPT-2's pre-tokenizer regex;
/// vocabulary tokens "<|...|>" that no merge forms are added tokens.
template <class Json>
TokenizerParts load_vocab_and_merges(const std::string& vocab_json_path, const std::string& merges_txt_path,
                                     const char* function) {
  TokenizerParts parts;
  set_vocabulary(parts.vocabulary, read_json_file<Json>(vocab_json_path, function),
                 LoadContext{function, vocab_json_path});
  const std::vector<unsigned char> bytes = io::read_file(merges_txt_path);
  const LoadContext merges_file{function, merges_txt_path};
  parts.vocabulary.set_merges(
      parse_merges_text(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), merges_file),
      MergeSource::text_lines, merges_file);
  parts.vocabulary.add_unmerged_special_tokens();
  PreTokenizerStage stage;
  stage.regex.emplace(gpt2_pre_tokenizer_pattern);
  parts.stages.push_back(std::move(stage));
  build_added_token_matchers(parts);
  return parts;
}

/// Helpers for reading tokenizer.json objects.
template <class Json>
struct JsonFields {
  static std::string type_of(const Json& object) {
    const auto found = object.find("type");
    return found != object.end() && found->is_string() ? found->template get<std::string>() : std::string("<no type>");
  }
  static bool flag(const Json& object, const char* key, bool fallback) {
    const auto found = object.find(key);
    return found != object.end() && found->is_boolean() ? found->template get<bool>() : fallback;
  }
  static std::string string(const Json& object, const char* key, const std::string& fallback) {
    const auto found = object.find(key);
    return found != object.end() && found->is_string() ? found->template get<std::string>() : fallback;
  }
  /// The steps of a component that may be a Sequence (under `list_key`) or a single step.
  static std::vector<const Json*> steps(const Json& component, const char* list_key, const LoadContext& where) {
    std::vector<const Json*> result;
    if (type_of(component) == "Sequence") {
      const auto list = component.find(list_key);
      if (list == component.end() || !list->is_array())
        where.fail(std::string("a Sequence without \"") + list_key + "\": " + quoted_excerpt(component.dump()));
      for (const auto& step : *list) {
        if (!step.is_object()) where.fail("a step that is not a JSON object: " + quoted_excerpt(step.dump()));
        for (const Json* inner : steps(step, list_key, where)) result.push_back(inner);
      }
    } else {
      result.push_back(&component);
    }
    return result;
  }
  /// The literal of a {"String": ...} pattern; a {"Regex": ...} pattern or another shape is not supported.
  static std::string literal_pattern(const Json& step, const char* what, const LoadContext& where) {
    const auto pattern = step.find("pattern");
    if (pattern == step.end() || !pattern->is_object() || !pattern->contains("String") || !(*pattern)["String"].is_string())
      where.fail(std::string("not supported: ") + what + " with a pattern other than {\"String\": ...}: " +
                 quoted_excerpt(step.dump()));
    return (*pattern)["String"].template get<std::string>();
  }
  static PrependScheme prepend_scheme(const Json& step, const LoadContext& where) {
    const auto scheme = step.find("prepend_scheme");
    if (scheme == step.end() || scheme->is_null())  // older files: add_prefix_space
      return flag(step, "add_prefix_space", true) ? PrependScheme::always : PrependScheme::never;
    const std::string name = scheme->is_string() ? scheme->template get<std::string>() : scheme->dump();
    if (name == "always") return PrependScheme::always;
    if (name == "first") return PrependScheme::first;
    if (name == "never") return PrependScheme::never;
    where.fail("not supported: Metaspace prepend_scheme " + quoted_excerpt(name));
  }
};

/// The pre-tokenizer of tokenizer.json: ByteLevel, Split (every behaviour, either invert), Digits and
/// Metaspace steps, alone or in a Sequence; none at all is allowed for a SentencePiece-style BPE (the normalizer then inserts the "▁").
template <class Json>
std::vector<PreTokenizerStage> tokenizer_json_pre_tokenizer(const Json& root, const LoadContext& where,
                                                            bool& byte_level) {
  using F = JsonFields<Json>;
  const auto unsupported = [&](const std::string& what) { where.fail("not supported: " + what); };
  byte_level = false;
  std::vector<PreTokenizerStage> stages;
  const auto pre_tokenizer = root.find("pre_tokenizer");
  if (pre_tokenizer == root.end() || pre_tokenizer->is_null()) return stages;
  if (!pre_tokenizer->is_object()) where.fail("a pre-tokenizer that is not a JSON object");
  for (const Json* step : F::steps(*pre_tokenizer, "pretokenizers", where)) {
    const std::string type = F::type_of(*step);
    if (type == "ByteLevel") {
      byte_level = true;
      PreTokenizerStage stage;
      stage.add_prefix_space = F::flag(*step, "add_prefix_space", false);
      if (F::flag(*step, "use_regex", true)) stage.regex.emplace(gpt2_pre_tokenizer_pattern);
      if (stage.add_prefix_space || stage.regex) stages.push_back(std::move(stage));
    } else if (type == "Split") {
      const std::string behavior = F::string(*step, "behavior", "<no behavior>");
      PreTokenizerStage stage;
      stage.invert = F::flag(*step, "invert", false);
      if (behavior == "Removed")
        stage.behavior = SplitBehavior::removed;
      else if (behavior == "Isolated")
        stage.behavior = SplitBehavior::isolated;
      else if (behavior == "MergedWithPrevious")
        stage.behavior = SplitBehavior::merged_with_previous;
      else if (behavior == "MergedWithNext")
        stage.behavior = SplitBehavior::merged_with_next;
      else if (behavior == "Contiguous")
        stage.behavior = SplitBehavior::contiguous;
      else
        where.fail("a Split pre-tokenizer with behavior " + quoted_excerpt(behavior) +
                   " (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)");
      const auto pattern = step->find("pattern");
      if (pattern == step->end() || !pattern->is_object()) where.fail("a Split pre-tokenizer without a \"pattern\" object");
      std::string regex_text;
      if (pattern->contains("Regex") && (*pattern)["Regex"].is_string())
        regex_text = (*pattern)["Regex"].template get<std::string>();
      else if (pattern->contains("String") && (*pattern)["String"].is_string())
        regex_text = literal_regex((*pattern)["String"].template get<std::string>());
      else
        where.fail("a Split pattern that is neither {\"Regex\": ...} nor {\"String\": ...}");
      try {
        stage.regex.emplace(regex_text);
      } catch (const attnscope::invalid_argument& error) {
        unsupported(std::string("a Split regex PCRE2 cannot compile: ") + error.what());
      }
      stages.push_back(std::move(stage));
    } else if (type == "Digits") {  // numbers (Unicode category N) apart: each digit alone, or each run of them
      // After ByteLevel, Hugging Face looks for digits in the byte-mapped text (where bytes such as 0xB2 are "²");
      // here the stages see the text itself.
      if (byte_level) unsupported("a Digits pre-tokenizer after ByteLevel");
      PreTokenizerStage stage;
      stage.regex.emplace(F::flag(*step, "individual_digits", false) ? "\\p{N}" : "\\p{N}+");
      stages.push_back(std::move(stage));
    } else if (type == "Metaspace") {
      PreTokenizerStage stage;
      stage.metaspace = true;
      stage.replacement = F::string(*step, "replacement", F::string(*step, "str_rep", "\xE2\x96\x81"));
      if (stage.replacement.empty()) where.fail("a Metaspace pre-tokenizer with an empty replacement");
      stage.prepend_scheme = F::prepend_scheme(*step, where);
      stage.split = F::flag(*step, "split", true);
      stages.push_back(std::move(stage));
    } else {
      unsupported("pre-tokenizer '" + type + "'");
    }
  }
  return stages;
}

/// The normalizer of tokenizer.json: NFC, NFD, NFKC, NFKD, Prepend, Replace (of a literal) and Strip, alone or in a
/// Sequence. `name` gets a short description ("NFC", "Prepend,Replace", ...).
template <class Json>
std::vector<NormalizerStep> tokenizer_json_normalizer(const Json& root, const LoadContext& where, std::string& name) {
  using F = JsonFields<Json>;
  std::vector<NormalizerStep> steps;
  name.clear();
  const auto normalizer = root.find("normalizer");
  if (normalizer == root.end() || normalizer->is_null()) return steps;
  if (!normalizer->is_object()) where.fail("a normalizer that is not a JSON object");
  for (const Json* step : F::steps(*normalizer, "normalizers", where)) {
    const std::string type = F::type_of(*step);
    NormalizerStep parsed;
    if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
      parsed.kind = NormalizerStep::Kind::unicode_form;
      parsed.form = type == "NFC"    ? NormalizationForm::nfc
                    : type == "NFD"  ? NormalizationForm::nfd
                    : type == "NFKC" ? NormalizationForm::nfkc
                                     : NormalizationForm::nfkd;
    } else if (type == "Prepend") {
      parsed.kind = NormalizerStep::Kind::prepend;
      parsed.text = F::string(*step, "prepend", "");
    } else if (type == "Replace") {
      parsed.kind = NormalizerStep::Kind::replace;
      parsed.text = F::literal_pattern(*step, "a Replace normalizer", where);
      parsed.replacement = F::string(*step, "content", "");
    } else if (type == "Strip") {
      parsed.kind = NormalizerStep::Kind::strip;
      parsed.strip_left = F::flag(*step, "strip_left", true);
      parsed.strip_right = F::flag(*step, "strip_right", true);
    } else {
      where.fail("not supported: normalizer '" + type + "' " + quoted_excerpt(step->dump()));
    }
    name += (name.empty() ? "" : ",") + type;
    steps.push_back(std::move(parsed));
  }
  return steps;
}

/// The post-processor of tokenizer.json: TemplateProcessing (its "single" template), RobertaProcessing and
/// BertProcessing (cls ... sep), ByteLevel (adds nothing), alone or in a Sequence.
template <class Json>
PostProcessor tokenizer_json_post_processor(const Json& root, const BpeVocabulary& vocabulary, const LoadContext& where) {
  using F = JsonFields<Json>;
  PostProcessor result;
  const auto processor = root.find("post_processor");
  if (processor == root.end() || processor->is_null()) return result;
  if (!processor->is_object()) where.fail("a post_processor that is not a JSON object");
  const auto checked_id = [&](const Json& value, const std::string& what) {
    if (!value.is_number_integer() || !vocabulary.has_id(value.template get<int>()))
      where.fail("post_processor: " + what + " has id " + value.dump() + ", which is not in the vocabulary");
    return value.template get<int>();
  };
  for (const Json* step : F::steps(*processor, "processors", where)) {
    const std::string type = F::type_of(*step);
    if (type == "ByteLevel") continue;
    if (type == "RobertaProcessing" || type == "BertProcessing") {
      for (const char* key : {"cls", "sep"}) {
        const auto pair = step->find(key);
        if (pair == step->end() || !pair->is_array() || pair->size() != 2)
          where.fail(std::string("post_processor ") + type + " without a [token, id] \"" + key + "\"");
        const int id = checked_id((*pair)[1], std::string(key) + " " + (*pair)[0].dump());
        (std::string(key) == "cls" ? result.prefix : result.suffix).push_back(id);
      }
    } else if (type == "TemplateProcessing") {
      const auto single = step->find("single");
      if (single == step->end() || !single->is_array()) where.fail("post_processor TemplateProcessing without \"single\"");
      const auto special = step->find("special_tokens");
      bool after_sequence = false;
      for (const auto& item : *single) {
        if (item.contains("Sequence")) {
          after_sequence = true;
          continue;
        }
        if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id"))
          where.fail("post_processor TemplateProcessing: an item of \"single\" that is neither Sequence nor "
                     "SpecialToken: " + quoted_excerpt(item.dump()));
        const std::string name = item["SpecialToken"]["id"].template get<std::string>();
        if (special == step->end() || !special->contains(name) || !(*special)[name].contains("ids") ||
            !(*special)[name]["ids"].is_array())
          where.fail("post_processor TemplateProcessing: special token " + quoted_excerpt(name) +
                     " has no entry with \"ids\" in \"special_tokens\"");
        for (const auto& id : (*special)[name]["ids"])
          (after_sequence ? result.suffix : result.prefix).push_back(checked_id(id, "special token " + name));
      }
    } else {
      where.fail("not supported: post_processor '" + type + "'");
    }
  }
  return result;
}

/// The decoder of tokenizer.json for character vocabularies: Replace, ByteFallback, Fuse, Strip, Metaspace,
/// ByteLevel, alone or in a Sequence. (Byte-level vocabularies decode to their tokens' bytes whatever it says.)
template <class Json>
std::vector<DecoderStep> tokenizer_json_decoder(const Json& root, const LoadContext& where) {
  using F = JsonFields<Json>;
  std::vector<DecoderStep> steps;
  const auto decoder = root.find("decoder");
  if (decoder == root.end() || decoder->is_null()) return steps;
  if (!decoder->is_object()) where.fail("a decoder that is not a JSON object");
  for (const Json* step : F::steps(*decoder, "decoders", where)) {
    const std::string type = F::type_of(*step);
    DecoderStep parsed;
    if (type == "Replace") {
      parsed.kind = DecoderStep::Kind::replace;
      parsed.pattern = F::literal_pattern(*step, "a Replace decoder", where);
      parsed.content = F::string(*step, "content", "");
    } else if (type == "ByteFallback") {
      parsed.kind = DecoderStep::Kind::byte_fallback;
    } else if (type == "Fuse") {
      parsed.kind = DecoderStep::Kind::fuse;
    } else if (type == "Strip") {
      parsed.kind = DecoderStep::Kind::strip;
      parsed.content = F::string(*step, "content", " ");
      const auto count = [&](const char* key) {
        const auto found = step->find(key);
        return found != step->end() && found->is_number_integer() ? found->template get<int>() : 0;
      };
      parsed.start = count("start");
      parsed.stop = count("stop");
    } else if (type == "Metaspace") {
      parsed.kind = DecoderStep::Kind::metaspace;
      parsed.pattern = F::string(*step, "replacement", "\xE2\x96\x81");
      parsed.prepend_scheme = F::prepend_scheme(*step, where);
    } else if (type == "ByteLevel") {
      parsed.kind = DecoderStep::Kind::byte_level;
    } else {
      where.fail("not supported: decoder '" + type + "'");
    }
    steps.push_back(std::move(parsed));
  }
  return steps;
}

/// A Hugging Face tokenizer.json whose model is BPE: byte-level (a ByteLevel pre-tokenizer) or SentencePiece-style
/// (characters, byte_fallback, unk_token). Anything else throws io_error "... not supported: ..." naming the file and
/// what it found.
template <class Json>
TokenizerParts load_tokenizer_json(const std::string& path, const char* function) {
  using F = JsonFields<Json>;
  const Json root = read_json_file<Json>(path, function);
  const LoadContext where{function, path};
  const auto unsupported = [&](const std::string& what) { where.fail("not supported: " + what); };
  if (!root.is_object()) where.fail("the top level is not a JSON object");
  const auto model_entry = root.find("model");
  if (model_entry == root.end() || !model_entry->is_object()) where.fail("no \"model\" object");
  const Json& model = *model_entry;
  const std::string model_type = model.contains("type") ? F::type_of(model) : std::string("BPE");
  if (model_type != "BPE") unsupported("model type '" + model_type + "' (only BPE models are supported)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto found = model.find(key);
    if (found != model.end() && !found->is_null() && !(found->is_string() && found->template get<std::string>().empty()))
      unsupported(std::string("a BPE model with ") + key + " " + found->dump());
  }
  if (const auto dropout = model.find("dropout"); dropout != model.end() && !dropout->is_null() &&
                                                   !(dropout->is_number() && dropout->template get<double>() == 0.0))
    unsupported("BPE dropout " + dropout->dump());

  TokenizerParts parts;
  parts.normalizer = tokenizer_json_normalizer(root, where, parts.normalizer_name);
  bool byte_level = false;
  parts.stages = tokenizer_json_pre_tokenizer(root, where, byte_level);
  const bool byte_fallback = F::flag(model, "byte_fallback", false);
  if (byte_level && byte_fallback) unsupported("a BPE model with both a ByteLevel pre-tokenizer and byte_fallback");

  const auto vocab = model.find("vocab");
  if (vocab == model.end()) where.fail("the model has no \"vocab\"");
  set_vocabulary(parts.vocabulary, *vocab, where, byte_level);
  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) where.fail("the model has no \"merges\" array");
  parts.vocabulary.set_merges(tokenizer_json_merges(*merges, where), MergeSource::json_array, where);
  if (F::flag(model, "ignore_merges", false)) parts.vocabulary.enable_whole_tokens();
  if (!byte_level) {
    int unknown_id = -1;
    const std::string unknown = F::string(model, "unk_token", "");
    if (!unknown.empty()) {
      const auto found = vocab->find(unknown);
      if (found == vocab->end()) where.fail("unk_token " + quoted_excerpt(unknown) + " is not in the vocabulary");
      unknown_id = found->template get<int>();
    }
    parts.vocabulary.set_unknown_handling(byte_fallback, unknown_id, F::flag(model, "fuse_unk", false));
    parts.decoder = tokenizer_json_decoder(root, where);
  }

  std::vector<AddedToken> added_tokens;
  if (const auto added = root.find("added_tokens"); added != root.end() && !added->is_null())
    added_tokens = tokenizer_json_added_tokens(*added, where);
  parts.vocabulary.add_tokens(std::move(added_tokens), where);
  build_added_token_matchers(parts);
  parts.post_processor = tokenizer_json_post_processor(root, parts.vocabulary, where);
  return parts;
}

}  // namespace attnscope::text::detail
