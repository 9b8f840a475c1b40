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
#include "attnscope/text/detail/pre_tokenizer.hpp"
#include "attnscope/text/detail/vocabulary.hpp"
#include "attnscope/text/tokenizer_types.hpp"

namespace attnscope::text::detail {

/// What a tokenizer is made of once its files are read.
struct TokenizerParts {
  BpeVocabulary vocabulary;
  std::vector<PreTokenizerStage> stages;
  std::string assumed_normalizer;  // tokenizer.json's normalizer accepted but not applied ("NFC"), or ""
};

/// Parses a JSON file; io_error naming the file and the byte position for malformed JSON.
template <class Json>
Json read_json_file(const std::string& path, const char* function) {
  const std::vector<unsigned char> bytes = io::read_file(path);
  try {
    return Json::parse(bytes.begin(), bytes.end());
  } catch (const typename Json::parse_error& error) {
    attnscope::detail::throw_io_error(function, path, "malformed JSON at byte ", error.byte, ": ", error.what());
  }
}

/// Fills the vocabulary from a JSON object token string -> id (ids integers in [0, max_token_id]).
template <class Json>
void set_vocabulary(BpeVocabulary& vocabulary, const Json& vocab, const LoadContext& where) {
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
  vocabulary.set_tokens(entries, where);
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
  parts.stages.push_back({false, Regex(gpt2_pre_tokenizer_pattern)});
  return parts;
}

/// The pre-tokenizer of tokenizer.json: ByteLevel, alone or in a Sequence after Split steps (behaviour "Isolated").
template <class Json>
std::vector<PreTokenizerStage> tokenizer_json_pre_tokenizer(const Json& root, const LoadContext& where) {
  const auto unsupported = [&](const std::string& what) {
    where.fail("not supported: " + what + " (only byte-level BPE tokenizers are supported)");
  };
  const auto type_of = [](const Json& object) -> std::string {
    const auto found = object.find("type");
    return found != object.end() && found->is_string() ? found->template get<std::string>() : std::string("<no type>");
  };
  const auto flag = [](const Json& object, const char* key, bool fallback) {
    const auto found = object.find(key);
    return found != object.end() && found->is_boolean() ? found->template get<bool>() : fallback;
  };
  const auto pre_tokenizer = root.find("pre_tokenizer");
  if (pre_tokenizer == root.end() || pre_tokenizer->is_null())
    unsupported("no pre-tokenizer (a byte-level BPE has a ByteLevel pre-tokenizer)");
  std::vector<const Json*> steps;
  if (type_of(*pre_tokenizer) == "Sequence") {
    const auto list = pre_tokenizer->find("pretokenizers");
    if (list == pre_tokenizer->end() || !list->is_array()) where.fail("a Sequence pre-tokenizer without \"pretokenizers\"");
    for (const auto& step : *list) steps.push_back(&step);
  } else {
    steps.push_back(&*pre_tokenizer);
  }
  std::vector<PreTokenizerStage> stages;
  bool byte_level = false;
  for (const Json* step : steps) {
    if (!step->is_object()) where.fail("a pre-tokenizer that is not a JSON object");
    const std::string type = type_of(*step);
    if (type == "ByteLevel") {
      byte_level = true;
      PreTokenizerStage stage;
      stage.add_prefix_space = flag(*step, "add_prefix_space", false);
      if (flag(*step, "use_regex", true)) stage.regex.emplace(gpt2_pre_tokenizer_pattern);
      if (stage.add_prefix_space || stage.regex) stages.push_back(std::move(stage));
    } else if (type == "Split") {
      const auto behavior = step->find("behavior");
      const std::string behavior_name =
          behavior != step->end() && behavior->is_string() ? behavior->template get<std::string>() : "?";
      if (behavior_name != "Isolated") unsupported("Split pre-tokenizer behavior '" + behavior_name + "'");
      if (flag(*step, "invert", false)) unsupported("Split pre-tokenizer with invert true");
      const auto pattern = step->find("pattern");
      if (pattern == step->end() || !pattern->is_object()) where.fail("a Split pre-tokenizer without a \"pattern\" object");
      std::string regex_text;
      if (pattern->contains("Regex") && (*pattern)["Regex"].is_string())
        regex_text = (*pattern)["Regex"].template get<std::string>();
      else if (pattern->contains("String") && (*pattern)["String"].is_string())
        regex_text = "\\Q" + (*pattern)["String"].template get<std::string>() + "\\E";  // a literal
      else
        where.fail("a Split pattern that is neither {\"Regex\": ...} nor {\"String\": ...}");
      PreTokenizerStage stage;
      try {
        stage.regex.emplace(regex_text);
      } catch (const attnscope::invalid_argument& error) {
        unsupported(std::string("a Split regex PCRE2 cannot compile: ") + error.what());
      }
      stages.push_back(std::move(stage));
    } else {
      unsupported("pre-tokenizer '" + type + "'" +
                  (type == "Metaspace" ? std::string(" (SentencePiece-style, as in Llama-2 and Mistral-7B v0.1)") : ""));
    }
  }
  if (!byte_level) unsupported("no ByteLevel pre-tokenizer");
  return stages;
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
    tokens.push_back(std::move(token));
  }
  return tokens;
}

/// A Hugging Face tokenizer.json whose model is BPE over GPT-2's byte alphabet with a ByteLevel pre-tokenizer.
/// Normalizer: none, an empty Sequence or NFC (accepted, not applied). Anything else throws io_error
/// "... not supported: ..." naming the file and what it found.
template <class Json>
TokenizerParts load_tokenizer_json(const std::string& path, const char* function) {
  const Json root = read_json_file<Json>(path, function);
  const LoadContext where{function, path};
  const auto unsupported = [&](const std::string& what) {
    where.fail("not supported: " + what + " (only byte-level BPE tokenizers are supported)");
  };
  const auto type_of = [](const Json& object) -> std::string {
    const auto found = object.find("type");
    return found != object.end() && found->is_string() ? found->template get<std::string>() : std::string("<no type>");
  };
  if (!root.is_object()) where.fail("the top level is not a JSON object");
  const auto model_entry = root.find("model");
  if (model_entry == root.end() || !model_entry->is_object()) where.fail("no \"model\" object");
  const Json& model = *model_entry;
  const std::string model_type = model.contains("type") ? type_of(model) : std::string("BPE");
  if (model_type != "BPE") unsupported("model type '" + model_type + "'");
  const auto byte_fallback = model.find("byte_fallback");
  if (byte_fallback != model.end() && byte_fallback->is_boolean() && byte_fallback->template get<bool>())
    unsupported("a BPE model with byte_fallback (SentencePiece-style, as in Llama-2)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto found = model.find(key);
    if (found != model.end() && !found->is_null() && !(found->is_string() && found->template get<std::string>().empty()))
      unsupported(std::string("a BPE model with ") + key + " " + found->dump());
  }
  if (const auto dropout = model.find("dropout"); dropout != model.end() && !dropout->is_null() &&
                                                   !(dropout->is_number() && dropout->template get<double>() == 0.0))
    unsupported("BPE dropout " + dropout->dump());
  const auto ignore_merges = model.find("ignore_merges");
  const bool whole_tokens = ignore_merges != model.end() && ignore_merges->is_boolean() &&
                            ignore_merges->template get<bool>();

  TokenizerParts parts;
  // Normalizer: none, an empty Sequence, or NFC (accepted, not applied).
  if (const auto normalizer = root.find("normalizer"); normalizer != root.end() && !normalizer->is_null()) {
    const std::string type = type_of(*normalizer);
    const bool empty_sequence = type == "Sequence" && normalizer->contains("normalizers") &&
                                (*normalizer)["normalizers"].is_array() && (*normalizer)["normalizers"].empty();
    if (type == "NFC")
      parts.assumed_normalizer = "NFC";
    else if (!empty_sequence)
      unsupported("normalizer '" + type + "' " + quoted_excerpt(normalizer->dump()));
  }
  parts.stages = tokenizer_json_pre_tokenizer(root, where);

  const auto vocab = model.find("vocab");
  if (vocab == model.end()) where.fail("the model has no \"vocab\"");
  set_vocabulary(parts.vocabulary, *vocab, where);
  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) where.fail("the model has no \"merges\" array");
  parts.vocabulary.set_merges(tokenizer_json_merges(*merges, where), MergeSource::json_array, where);
  if (whole_tokens) parts.vocabulary.enable_whole_tokens();

  std::vector<AddedToken> added_tokens;
  if (const auto added = root.find("added_tokens"); added != root.end() && !added->is_null())
    added_tokens = tokenizer_json_added_tokens(*added, where);
  parts.vocabulary.add_tokens(std::move(added_tokens), where);
  return parts;
}

}  // namespace attnscope::text::detail
