// Every error class of the text module: missing, malformed and inconsistent files (io_error naming the file and what is
// wrong), tokenizers that are not byte-level BPE ("not supported"), ill-formed UTF-8 (invalid_argument naming the byte
// offset), ids outside the vocabulary, and regexes PCRE2 cannot compile.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io/file.hpp"
#include "attnscope/text.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "text_test_support.hpp"

using namespace attnscope;
using attnscope::testing::text_fixture;
using attnscope::testing::text_scratch_dir;
using attnscope::testing::error_message;
using Catch::Matchers::Contains;
using text::ByteLevelBpeTokenizer;

namespace {

// A small but valid vocab.json / merges.txt pair: the 256 byte tokens (ids in byte order), "Ġt", "he", "Ġthe".
nlohmann::json errors_small_vocab() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int byte = 0; byte < 256; ++byte) vocab[text::bytes_to_byte_level(std::string(1, static_cast<char>(byte)))] = byte;
  vocab["Ġt"] = 256;
  vocab["he"] = 257;
  vocab["Ġthe"] = 258;
  return vocab;
}
const char* const errors_small_merges = "#version: 0.2\nĠ t\nh e\nĠt he\n";

// Writes vocab.json and merges.txt into a scratch folder and loads them; returns the io_error message ("" if none).
std::string errors_load_pair(const std::string& case_name, const std::string& vocab_text, const std::string& merges_text) {
  const std::string dir = text_scratch_dir("errors_" + case_name);
  io::write_file(dir + "/vocab.json", vocab_text);
  io::write_file(dir + "/merges.txt", merges_text);
  return error_message<io_error>([&] { ByteLevelBpeTokenizer::from_vocab_and_merges(dir + "/vocab.json", dir + "/merges.txt"); });
}

// The Llama-3-style fixture with one change applied, written to a scratch folder and loaded; the io_error message.
template <class Change>
std::string errors_load_changed_json(const std::string& case_name, Change&& change) {
  nlohmann::json json = attnscope::testing::read_json_value(text_fixture("tiny_llama3_style.tokenizer.json"));
  change(json);
  const std::string path = text_scratch_dir("errors_" + case_name) + "/tokenizer.json";
  io::write_file(path, json.dump());
  return error_message<io_error>([&] { ByteLevelBpeTokenizer::from_tokenizer_json(path); });
}

}  // namespace

TEST_CASE("text errors: the small vocab/merges pair used below is valid", "[text][errors]") {
  CHECK(errors_load_pair("valid", errors_small_vocab().dump(), errors_small_merges).empty());
}

TEST_CASE("text errors: missing files and folders name the path", "[text][errors]") {
  const std::string dir = text_scratch_dir("errors_missing");
  CHECK_THAT(error_message<io_error>([&] { ByteLevelBpeTokenizer::from_vocab_and_merges(dir + "/nope.json", dir + "/m.txt"); }),
             Contains("nope.json") && Contains("cannot open"));
  io::write_file(dir + "/vocab.json", errors_small_vocab().dump());
  CHECK_THAT(error_message<io_error>([&] { ByteLevelBpeTokenizer::from_vocab_and_merges(dir + "/vocab.json", dir + "/gone.txt"); }),
             Contains("gone.txt"));
  CHECK_THAT(error_message<io_error>([&] { ByteLevelBpeTokenizer::from_tokenizer_json(dir + "/tokenizer.json"); }),
             Contains("tokenizer.json") && Contains("cannot open"));
  // A folder with only vocab.json (no merges.txt): no tokenizer; the message names the folder and what was looked for.
  CHECK_THAT(error_message<io_error>([&] { ByteLevelBpeTokenizer::from_folder(dir); }),
             Contains("from_folder") && Contains(dir) && Contains("no tokenizer found") && Contains("merges.txt"));
  CHECK_THAT(error_message<io_error>([&] { ByteLevelBpeTokenizer::from_folder(dir + "/absent"); }),
             Contains("absent") && Contains("not a directory"));
}

TEST_CASE("text errors: malformed vocabulary JSON", "[text][errors]") {
  CHECK_THAT(errors_load_pair("malformed", "{\"a\": 1,", errors_small_merges),
             Contains("vocab.json") && Contains("malformed JSON"));
  CHECK_THAT(errors_load_pair("array", "[1, 2]", errors_small_merges), Contains("vocab.json") && Contains("not a JSON object"));
  nlohmann::json vocab = errors_small_vocab();
  vocab["bad"] = -3;
  CHECK_THAT(errors_load_pair("negative", vocab.dump(), errors_small_merges), Contains("'bad'") && Contains("-3"));
  vocab["bad"] = "7";
  CHECK_THAT(errors_load_pair("string_id", vocab.dump(), errors_small_merges), Contains("'bad'") && Contains("\"7\""));
  vocab["bad"] = 1.5;
  CHECK_THAT(errors_load_pair("fraction", vocab.dump(), errors_small_merges), Contains("'bad'") && Contains("1.5"));
  vocab["bad"] = 1 << 30;
  CHECK_THAT(errors_load_pair("huge", vocab.dump(), errors_small_merges), Contains("'bad'") && Contains("1073741824"));
}

TEST_CASE("text errors: a JSON number beyond the range of double is an io_error naming the file", "[text][errors]") {
  // nlohmann's parser reports such a number as out_of_range, not as a parse_error; both files of both formats
  CHECK_THAT(errors_load_pair("overflow_id", "{\"a\": 5.019e11627}", errors_small_merges),
             Contains("vocab.json") && Contains("unreadable JSON"));
  CHECK_THAT(errors_load_pair("overflow_negative", "{\"a\": -1e400}", errors_small_merges), Contains("vocab.json"));
  const std::string path = text_scratch_dir("errors_overflow_tokenizer_json") + "/tokenizer.json";
  io::write_file(path, "{\"model\": {\"type\": \"BPE\", \"dropout\": 1e999, \"vocab\": {}, \"merges\": []}}");
  CHECK_THAT(error_message<io_error>([&] { ByteLevelBpeTokenizer::from_tokenizer_json(path); }),
             Contains("tokenizer.json") && Contains("unreadable JSON"));
}

TEST_CASE("text errors: duplicate ids", "[text][errors]") {
  nlohmann::json vocab = errors_small_vocab();
  vocab["Ġthe"] = 257;  // the id of "he"
  const std::string message = errors_load_pair("duplicate", vocab.dump(), "Ġ t\nh e\n");
  CHECK_THAT(message, Contains("vocab.json") && Contains("duplicate id 257") && Contains("'he'") && Contains("'Ġthe'"));
}

TEST_CASE("text errors: merges referring to tokens not in the vocabulary, malformed merge lines", "[text][errors]") {
  const std::string vocab = errors_small_vocab().dump();
  CHECK_THAT(errors_load_pair("unknown_left", vocab, "Ġ t\nxyz e\n"),
             Contains("merges.txt") && Contains("line 2") && Contains("'xyz'") && Contains("not in the vocabulary"));
  CHECK_THAT(errors_load_pair("unknown_right", vocab, "#version: 0.2\nĠ t\n\nh xyz\n"),  // counts every line
             Contains("merges.txt") && Contains("line 4") && Contains("'xyz'") && Contains("not in the vocabulary"));
  // Both halves exist but their concatenation "Ġh" does not.
  CHECK_THAT(errors_load_pair("unknown_merged", vocab, "Ġ h\n"),
             Contains("merges.txt") && Contains("line 1") && Contains("'Ġh'") && Contains("not in the vocabulary"));
  CHECK_THAT(errors_load_pair("one_token", vocab, "#version: 0.2\nĠ t\nhe\n"),
             Contains("merges.txt") && Contains("line 3") && Contains("two tokens"));
  CHECK_THAT(errors_load_pair("three_tokens", vocab, "Ġ t h\n"), Contains("line 1") && Contains("two tokens"));
}

TEST_CASE("text errors: a vocabulary without GPT-2's byte tokens is not byte-level", "[text][errors]") {
  nlohmann::json vocab = errors_small_vocab();
  vocab.erase("Ġ");  // the space byte
  CHECK_THAT(errors_load_pair("no_space", vocab.dump(), "h e\n"),
             Contains("vocab.json") && Contains("not supported") && Contains("byte 0x20"));
}

TEST_CASE("text errors: corrupt tokenizer.json", "[text][errors]") {
  const std::string dir = text_scratch_dir("errors_tokenizer_json");
  io::write_file(dir + "/tokenizer.json", "{\"model\": {\"type\": \"BPE\", ");
  CHECK_THAT(error_message<io_error>([&] { ByteLevelBpeTokenizer::from_tokenizer_json(dir + "/tokenizer.json"); }),
             Contains("tokenizer.json") && Contains("malformed JSON"));
  // A folder holding a malformed tokenizer.json reports it (tokenizer.json decides when present).
  CHECK_THAT(error_message<io_error>([&] { ByteLevelBpeTokenizer::from_folder(dir); }), Contains("malformed JSON"));
  CHECK_THAT(errors_load_changed_json("no_model", [](nlohmann::json& j) { j.erase("model"); }), Contains("no \"model\""));
  CHECK_THAT(errors_load_changed_json("no_merges", [](nlohmann::json& j) { j["model"].erase("merges"); }),
             Contains("no \"merges\""));
  CHECK_THAT(errors_load_changed_json("bad_merge", [](nlohmann::json& j) { j["model"]["merges"][3] = 42; }),
             Contains("merges[3]"));
  CHECK_THAT(errors_load_changed_json("unknown_merge", [](nlohmann::json& j) { j["model"]["merges"][5] = {"q", "Ġzz"}; }),
             Contains("merges[5]") && Contains("'Ġzz'") && Contains("not in the vocabulary"));
  CHECK_THAT(errors_load_changed_json("duplicate_vocab_id", [](nlohmann::json& j) { j["model"]["vocab"]["zzz"] = 3; }),
             Contains("duplicate id 3"));
  // Added-token ids are assigned as Hugging Face assigns them on loading (a vocabulary token's id, else the next free
  // one), so two added tokens with one id in the file still get two ids.
  CHECK(errors_load_changed_json("duplicate_added_id",
                                 [](nlohmann::json& j) { j["added_tokens"][1]["id"] = j["added_tokens"][0]["id"]; })
            .empty());
  CHECK_THAT(errors_load_changed_json("added_without_content", [](nlohmann::json& j) { j["added_tokens"][2].erase("content"); }),
             Contains("added token without"));
  CHECK_THAT(errors_load_changed_json("split_without_pattern",
                                      [](nlohmann::json& j) { j["pre_tokenizer"]["pretokenizers"][0].erase("pattern"); }),
             Contains("without a \"pattern\""));
}

TEST_CASE("text errors: tokenizers of other kinds are 'not supported', naming what was found",
          "[text][errors]") {
  // SentencePiece Unigram (e.g. T5, ALBERT).
  CHECK_THAT(errors_load_changed_json("unigram", [](nlohmann::json& j) { j["model"] = {{"type", "Unigram"}, {"vocab", nlohmann::json::array()}}; }),
             Contains("tokenizer.json") && Contains("not supported") && Contains("model type 'Unigram'"));
  CHECK_THAT(errors_load_changed_json("wordpiece", [](nlohmann::json& j) { j["model"]["type"] = "WordPiece"; }),
             Contains("not supported") && Contains("'WordPiece'"));
  CHECK_THAT(errors_load_changed_json("byte_fallback", [](nlohmann::json& j) { j["model"]["byte_fallback"] = true; }),
             Contains("not supported") && Contains("byte_fallback"));
  CHECK_THAT(errors_load_changed_json("metaspace_scheme", [](nlohmann::json& j) {
               j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "sometimes"}};
             }),
             Contains("not supported") && Contains("prepend_scheme 'sometimes'"));
  CHECK_THAT(errors_load_changed_json("replace_regex", [](nlohmann::json& j) {
               j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}};
             }),
             Contains("not supported") && Contains("Replace normalizer") && Contains("String"));
  CHECK_THAT(errors_load_changed_json("post_processor", [](nlohmann::json& j) {
               j["post_processor"] = {{"type", "TemplateProcessing"},
                                      {"single", {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}}}},
                                      {"special_tokens", nlohmann::json::object()}};
             }),
             Contains("post_processor") && Contains("'<bos>'") && Contains("special_tokens"));
  CHECK_THAT(errors_load_changed_json("post_processor_id", [](nlohmann::json& j) {
               j["post_processor"] = {{"type", "RobertaProcessing"}, {"cls", {"<s>", 900000}}, {"sep", {"</s>", 2}}};
             }),
             Contains("post_processor") && Contains("900000") && Contains("not in the vocabulary"));
  CHECK_THAT(errors_load_changed_json("unk_token", [](nlohmann::json& j) {
               j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}};
               j["model"]["unk_token"] = "<nothing>";
             }),
             Contains("unk_token '<nothing>'") && Contains("not in the vocabulary"));
  CHECK_THAT(errors_load_changed_json("decoder", [](nlohmann::json& j) {
               j["pre_tokenizer"] = nullptr;
               j["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}};
             }),
             Contains("not supported") && Contains("decoder 'WordPiece'"));
  CHECK_THAT(errors_load_changed_json("digits", [](nlohmann::json& j) {  // after ByteLevel: on byte-mapped text
               j["pre_tokenizer"]["pretokenizers"].push_back({{"type", "Digits"}, {"individual_digits", true}});
             }),
             Contains("not supported") && Contains("a Digits pre-tokenizer after ByteLevel"));
  CHECK_THAT(errors_load_changed_json("punctuation", [](nlohmann::json& j) {
               j["pre_tokenizer"]["pretokenizers"].push_back({{"type", "Punctuation"}, {"behavior", "Contiguous"}});
             }),
             Contains("not supported") && Contains("pre-tokenizer 'Punctuation'"));
  CHECK_THAT(errors_load_changed_json("lowercase", [](nlohmann::json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }),
             Contains("not supported") && Contains("normalizer 'Lowercase'"));
  CHECK_THAT(errors_load_changed_json("unknown_split_behavior", [](nlohmann::json& j) {
               j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithBoth";
             }),
             Contains("a Split pre-tokenizer with behavior 'MergedWithBoth'"));
  CHECK_THAT(errors_load_changed_json("bad_regex", [](nlohmann::json& j) {
               j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
             }),
             Contains("not supported") && Contains("PCRE2 cannot compile") && Contains("(unclosed"));
  CHECK_THAT(errors_load_changed_json("suffix", [](nlohmann::json& j) { j["model"]["end_of_word_suffix"] = "</w>"; }),
             Contains("not supported") && Contains("end_of_word_suffix"));
  CHECK_THAT(errors_load_changed_json("dropout", [](nlohmann::json& j) { j["model"]["dropout"] = 0.1; }),
             Contains("not supported") && Contains("dropout"));
  // The accepted variants load: an empty normalizer Sequence, NFC, dropout 0.
  CHECK(errors_load_changed_json("empty_sequence", [](nlohmann::json& j) {
          j["normalizer"] = {{"type", "Sequence"}, {"normalizers", nlohmann::json::array()}};
          j["model"]["dropout"] = 0.0;
        }).empty());
  nlohmann::json json = attnscope::testing::read_json_value(text_fixture("tiny_llama3_style.tokenizer.json"));
  json["normalizer"] = {{"type", "NFC"}};
  const std::string path = text_scratch_dir("errors_nfc") + "/tokenizer.json";
  io::write_file(path, json.dump());
  CHECK(ByteLevelBpeTokenizer::from_tokenizer_json(path).normalizer_name() == "NFC");
  CHECK(ByteLevelBpeTokenizer::from_tokenizer_json(text_fixture("tiny_llama3_style.tokenizer.json")).normalizer_name().empty());
}

TEST_CASE("text errors: ill-formed UTF-8 names the byte offset", "[text][errors]") {
  const auto& tokenizer = attnscope::testing::gpt2_tokenizer();
  const auto message_for = [&](const std::string& input) {
    return error_message([&] { tokenizer.encode(input); });
  };
  CHECK_THAT(message_for("abc\x80"), Contains("encode") && Contains("invalid UTF-8 at byte offset 3") && Contains("0x80"));
  CHECK_THAT(message_for("ok \xC0\xAF"), Contains("byte offset 3") && Contains("0xC0"));           // overlong '/'
  CHECK_THAT(message_for("x\xE0\x80\xAF"), Contains("byte offset 1"));                             // overlong 3-byte
  CHECK_THAT(message_for("\xED\xA0\x80 surrogate"), Contains("byte offset 0") && Contains("0xED"));  // U+D800
  CHECK_THAT(message_for("end \xE6\x97"), Contains("byte offset 4"));                              // truncated 東
  CHECK_THAT(message_for("\xF4\x90\x80\x80"), Contains("byte offset 0"));                          // U+110000
  CHECK_THAT(message_for("a\xF8\x88\x80\x80\x80"), Contains("byte offset 1") && Contains("0xF8"));  // 5-byte form
  CHECK_THAT(message_for(std::string("nul\0ok\xFF", 7)), Contains("byte offset 6"));  // NUL is valid, 0xFF is not
  CHECK(text::first_invalid_utf8_offset("東京 👋 \xF4\x8F\xBF\xBF") == std::nullopt);  // U+10FFFF is valid
  // The same check guards the added-token path.
  CHECK_THAT(error_message([&] { tokenizer.encode("<|endoftext|>\xC3", {true}); }), Contains("byte offset 13"));
}

TEST_CASE("text errors: decode rejects ids outside the vocabulary", "[text][errors]") {
  const auto& tokenizer = attnscope::testing::gpt2_tokenizer();
  CHECK_THAT(error_message([&] { tokenizer.decode({464, 50257}); }),
             Contains("decode") && Contains("ids[1] = 50257") && Contains("50257"));
  CHECK_THAT(error_message([&] { tokenizer.decode({-1}); }), Contains("ids[0] = -1"));
  CHECK_THAT(error_message([&] { tokenizer.token_bytes(1 << 20); }), Contains("not in the vocabulary"));
  // An id below vocab_size() that has no token (a hole in the vocabulary's ids).
  nlohmann::json json = attnscope::testing::read_json_value(text_fixture("tiny_llama3_style.tokenizer.json"));
  json["model"]["vocab"]["qqqq"] = 400;
  const std::string path = text_scratch_dir("errors_hole") + "/tokenizer.json";
  io::write_file(path, json.dump());
  const auto with_hole = ByteLevelBpeTokenizer::from_tokenizer_json(path);
  CHECK(with_hole.vocab_size() == 401);
  CHECK(with_hole.decode({400}) == "qqqq");
  CHECK_THAT(error_message([&] { with_hole.decode({399}); }), Contains("ids[0] = 399"));
}

TEST_CASE("text errors: a regex PCRE2 cannot compile", "[text][errors]") {
  CHECK_THAT(error_message([] { text::Regex("a(b"); }), Contains("text::Regex") && Contains("'a(b'") && Contains("offset"));
  CHECK_THAT(error_message([] { text::Regex("\\p{NoSuchProperty}"); }), Contains("NoSuchProperty"));
}
