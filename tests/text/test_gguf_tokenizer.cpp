// Tokenizers from GGUF metadata (text/gguf_tokenizer.hpp) on llama.cpp's vocabulary-only files
// (fixtures/real/ggml-vocab-*.gguf): the ids of the Hugging Face tokenizer each file was converted from, as listed in
// llama.cpp's .inp/.out files beside them (written by its convert_hf_to_gguf_update.py with transformers'
// tokenizer.encode(text, add_special_tokens=False)); Llama-2's GGUF vocabulary gives the ids of its tokenizer.model
// on book paragraphs; unsupported models and pre-tokenizers, and inconsistent metadata, are refused by name.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnscope/io/gguf.hpp"
#include "attnscope/text/gguf_tokenizer.hpp"
#include "support/catch.hpp"
#include "text/text_test_support.hpp"

namespace {

using attnscope::testing::read_text_file;
using attnscope::testing::text_fixture;
using attnscope::text::ByteLevelBpeTokenizer;
using attnscope::text::GgufTokenizerMetadata;

struct GgufVocabCase {
  std::string text;
  std::vector<int> ids;
};

// llama.cpp's test strings (separated by "\n__ggml_vocab_test__\n") and the reference ids (one line per string).
std::vector<GgufVocabCase> gguf_vocab_cases(const std::string& name) {
  const std::string inputs = read_text_file(text_fixture("real/ggml-vocab-" + name + ".gguf.inp"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<GgufVocabCase> cases;
  for (std::size_t start = 0, end; (end = inputs.find(separator, start)) != std::string::npos;
       start = end + separator.size())
    cases.push_back({inputs.substr(start, end - start), {}});
  std::istringstream lines(read_text_file(text_fixture("real/ggml-vocab-" + name + ".gguf.out")));
  std::string line;
  for (auto& c : cases) {
    REQUIRE(std::getline(lines, line));
    std::istringstream ids(line);
    for (int id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

void check_gguf_vocab(const std::string& name, std::size_t expected_cases) {
  const ByteLevelBpeTokenizer tokenizer = attnscope::text::gguf_tokenizer(text_fixture("real/ggml-vocab-" + name + ".gguf"));
  const std::vector<GgufVocabCase> cases = gguf_vocab_cases(name);
  REQUIRE(cases.size() == expected_cases);
  attnscope::text::EncodeOptions hf_encode;  // transformers' encode(text, add_special_tokens=False)
  hf_encode.parse_special_tokens = true;
  std::size_t nonempty = 0;
  for (const GgufVocabCase& c : cases) {
    INFO(name << ": '" << c.text << "'");
    CHECK(tokenizer.encode(c.text, hf_encode) == c.ids);
    nonempty += !c.ids.empty();
  }
  CHECK(nonempty + 1 >= expected_cases);
}

// The GGUF tokenizer metadata llama.cpp's convert_hf_to_gguf.py writes for a byte-level tokenizer.json (get_vocab_base
// and gguf-py's SpecialVocab): every id's token ("[PAD<id>]" where the vocabulary has none), token type control for
// special added tokens and user-defined for the other added tokens, the merges as "left right", and BOS/EOS with
// add_bos_token/add_eos_token from the post-processor's template.
GgufTokenizerMetadata converted_gguf_metadata(const nlohmann::json& json, const std::string& pre) {
  GgufTokenizerMetadata metadata;
  metadata.source = "converted tokenizer.json (tokenizer.ggml.pre " + pre + ")";
  metadata.model = "gpt2";
  metadata.pre = pre;
  std::vector<std::pair<std::string, int>> entries;
  for (const auto& [token, id] : json["model"]["vocab"].items()) entries.emplace_back(token, id.get<int>());
  std::vector<std::int64_t> types;
  for (const auto& added : json["added_tokens"]) {
    entries.emplace_back(added["content"].get<std::string>(), added["id"].get<int>());
    types.resize(std::max<std::size_t>(types.size(), added["id"].get<std::size_t>() + 1), 1);
    types[added["id"].get<std::size_t>()] = added["special"].get<bool>() ? 3 : 4;
  }
  int count = 0;
  for (const auto& entry : entries) count = std::max(count, entry.second + 1);
  metadata.tokens.assign(count, "");
  for (const auto& [token, id] : entries) metadata.tokens[id] = token;
  types.resize(count, 1);
  for (int id = 0; id < count; ++id)
    if (metadata.tokens[id].empty()) {
      metadata.tokens[id] = "[PAD" + std::to_string(id) + "]";
      types[id] = 5;  // unused
    }
  metadata.token_types = types;
  for (const auto& merge : json["model"]["merges"])
    metadata.merges.push_back(merge.is_string() ? merge.get<std::string>()
                                                : merge[0].get<std::string>() + " " + merge[1].get<std::string>());
  metadata.add_bos = false;
  metadata.add_eos = false;
  const nlohmann::json& processor = json["post_processor"];
  const auto read_template = [&](const nlohmann::json& step) {
    if (step["type"] != "TemplateProcessing") return;
    const nlohmann::json& single = step["single"];
    const auto id_of = [&](const nlohmann::json& item) {
      return step["special_tokens"][item["SpecialToken"]["id"].get<std::string>()]["ids"][0].get<std::int64_t>();
    };
    if (single.front().contains("SpecialToken")) {
      metadata.add_bos = true;
      metadata.bos_id = id_of(single.front());
    }
    if (single.back().contains("SpecialToken")) {
      metadata.add_eos = true;
      metadata.eos_id = id_of(single.back());
    }
  };
  if (processor.is_object()) {
    if (processor["type"] == "Sequence")
      for (const auto& step : processor["processors"]) read_template(step);
    else
      read_template(processor);
  }
  return metadata;
}

}  // namespace

TEST_CASE("GGUF tokenizer: each supported tokenizer.ggml.pre gives the ids of the Hugging Face pre-tokenizer it names",
          "[text][gguf][real_tokenizers]") {
  // Every tokenizer of tokenizer_variants.json with a "gguf_pre" (GPT-NeoX-20B's real tokenizer.json, and its vocabulary
  // under the pre-tokenizers of Llama 3, OLMo 2, Qwen2 and SmolLM) converted to GGUF metadata as llama.cpp's converter does,
  // against the reference ids of the tokenizer.json itself (npm tokenizers 0.23.2): every edge case in all four modes,
  // five book paragraphs, and the 1000-paragraph chunk.
  const nlohmann::json variants = attnscope::testing::read_json_value(text_fixture("tokenizer_variants.json"))["tokenizers"];
  const nlohmann::json reference = attnscope::testing::read_json_value(text_fixture("reference_ids.json"));
  const std::vector<std::string> paragraphs = attnscope::testing::book_paragraphs();
  std::vector<std::string> pres;
  std::size_t encodings = 0;
  for (std::size_t v = 0; v < variants.size(); ++v) {
    if (!variants[v].contains("gguf_pre")) continue;
    const std::string pre = variants[v]["gguf_pre"].get<std::string>();
    const nlohmann::json& result = reference["results"][v];
    REQUIRE(result["tokenizer"] == variants[v]["name"]);
    INFO("tokenizer " << variants[v]["name"].get<std::string>() << " as GGUF with tokenizer.ggml.pre " << pre);
    const ByteLevelBpeTokenizer tokenizer = ByteLevelBpeTokenizer::from_gguf_metadata(
        converted_gguf_metadata(attnscope::testing::tokenizer_variant_json(variants[v]), pre));
    pres.push_back(pre);
    for (const auto& edge : result["edge_cases"]) {
      INFO("edge case '" << edge["name"].get<std::string>() << "'");
      for (const auto& mode : edge["modes"]) {
        const attnscope::text::EncodeOptions options{mode["parse_special_tokens"].get<bool>(),
                                                     mode["add_special_tokens"].get<bool>()};
        INFO("parse_special_tokens " << options.parse_special_tokens << ", add_special_tokens "
                                     << options.add_special_tokens);
        CHECK(tokenizer.encode(edge["text"].get<std::string>(), options) == mode["ids"].get<std::vector<int>>());
        ++encodings;
      }
    }
    for (const auto& paragraph : result["paragraphs"]) {
      const std::string& text = paragraphs.at(paragraph["paragraph"].get<std::size_t>());
      CHECK(tokenizer.encode(text) == paragraph["ids"].get<std::vector<int>>());
      CHECK(tokenizer.encode(text, {true, true}) == paragraph["hf_default_ids"].get<std::vector<int>>());
      encodings += 2;
    }
    const nlohmann::json& chunk = result["chunk"];
    const std::vector<int> chunk_ids = tokenizer.encode(attnscope::testing::reference_chunk_text(chunk, paragraphs));
    CHECK(chunk_ids.size() == chunk["count"].get<std::size_t>());
    CHECK(attnscope::testing::fnv1a64_hex(chunk_ids) == chunk["fnv1a64"].get<std::string>());
    ++encodings;
  }
  CHECK(pres == std::vector<std::string>{"mpt", "llama-bpe", "dbrx", "qwen2", "smollm"});
  CHECK(encodings == 5 * (20 * 4 + 5 * 2 + 1));
}

TEST_CASE("GGUF tokenizer: a byte-level vocabulary without the token of a 4-byte lead byte drops that byte",
          "[text][gguf]") {
  // StarCoder2's and Refact's vocabularies have no token for byte 0xF1 (byte-level string "ñ"). GPT-NeoX-20B's
  // tokenizer.json without "ñ" and the tokens and merges containing it gives, with npm tokenizers 0.23.2, for
  // "a\U00040000b" (U+40000 = F1 80 80 80): [66, 211, 211, 211, 67] ("a", three times byte 0x80, "b") and for
  // "\U00040000" alone [211, 211, 211].
  nlohmann::json json = attnscope::testing::read_json_value(text_fixture("real/gpt_neox_20b.tokenizer.json"));
  const std::string dropped = "\xC3\xB1";  // "ñ"
  nlohmann::json vocab = nlohmann::json::object(), merges = nlohmann::json::array();
  for (const auto& [token, id] : json["model"]["vocab"].items())
    if (token.find(dropped) == std::string::npos) vocab[token] = id;
  for (const auto& merge : json["model"]["merges"])
    if (merge.get<std::string>().find(dropped) == std::string::npos) merges.push_back(merge);
  json["model"]["vocab"] = vocab;
  json["model"]["merges"] = merges;
  const ByteLevelBpeTokenizer tokenizer = ByteLevelBpeTokenizer::from_gguf_metadata(converted_gguf_metadata(json, "mpt"));
  CHECK(tokenizer.encode("a\xF1\x80\x80\x80" "b") == std::vector<int>{66, 211, 211, 211, 67});
  CHECK(tokenizer.encode("\xF1\x80\x80\x80") == std::vector<int>{211, 211, 211});
  // a missing token for a byte below F1 is still refused: such a vocabulary is not byte-level
  json["model"]["vocab"].erase("a");
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_gguf_metadata(converted_gguf_metadata(json, "mpt")),
                    Catch::Matchers::Contains("no token for byte 0x61"));
}

TEST_CASE("GGUF tokenizer: llama.cpp's Llama-2 (SentencePiece) vocabulary gives Hugging Face's ids",
          "[text][gguf]") {
  const attnscope::io::GgufFile file(text_fixture("real/ggml-vocab-llama-spm.gguf"));
  const GgufTokenizerMetadata metadata = attnscope::text::gguf_tokenizer_metadata(file);
  CHECK(metadata.model == "llama");
  CHECK(metadata.tokens.size() == 32000);
  CHECK(metadata.scores.size() == 32000);
  CHECK(metadata.bos_id == 1);
  CHECK(metadata.eos_id == 2);
  check_gguf_vocab("llama-spm", 46);
  // BOS through add_bos_token (the file says true, as Llama-2's tokenizer does)
  const ByteLevelBpeTokenizer tokenizer = ByteLevelBpeTokenizer::from_gguf_metadata(metadata);
  CHECK(tokenizer.encode("Hello world", {false, true}) == std::vector<int>{1, 15043, 3186});
  CHECK(tokenizer.decode(tokenizer.encode("Hello world\n  two spaces")) == "Hello world\n  two spaces");
}

TEST_CASE("GGUF tokenizer: Llama-2's GGUF vocabulary equals its tokenizer.model on book paragraphs", "[text][gguf]") {
  const ByteLevelBpeTokenizer from_gguf =
      attnscope::text::gguf_tokenizer(text_fixture("real/ggml-vocab-llama-spm.gguf"));
  const ByteLevelBpeTokenizer from_model =
      ByteLevelBpeTokenizer::from_sentencepiece_model(text_fixture("real/llama2.tokenizer.model"));
  // 300 pieces of the book of whole lines, each at least 1000 bytes
  const std::string book = read_text_file(attnscope::testing::data_file("war_and_peace.txt"));
  std::size_t compared = 0, tokens = 0, start = 0;
  while (compared < 300) {
    std::size_t end = book.find('\n', start + 1000);
    REQUIRE(end != std::string::npos);
    const std::string piece = book.substr(start, end + 1 - start);
    start = end + 1;
    const std::vector<int> ids = from_model.encode(piece, {false, true});
    CHECK(from_gguf.encode(piece, {false, true}) == ids);
    tokens += ids.size();
    ++compared;
  }
  CHECK(compared == 300);
  CHECK(tokens > 60000);
}

TEST_CASE("GGUF tokenizer: llama.cpp's GPT-2 (byte-level BPE) vocabulary gives Hugging Face's ids", "[text][gguf]") {
  const attnscope::io::GgufFile file(text_fixture("real/ggml-vocab-gpt-2.gguf"));
  const GgufTokenizerMetadata metadata = attnscope::text::gguf_tokenizer_metadata(file);
  CHECK(metadata.model == "gpt2");
  CHECK(metadata.pre == "gpt-2");
  CHECK(metadata.tokens.size() == 50257);
  CHECK(metadata.merges.size() == 50000);
  check_gguf_vocab("gpt-2", 46);
  // the special token is an added token: one id when special tokens are parsed, ordinary text otherwise
  const ByteLevelBpeTokenizer tokenizer = ByteLevelBpeTokenizer::from_gguf_metadata(metadata);
  CHECK(tokenizer.encode("a<|endoftext|>", {true, false}) == std::vector<int>{64, 50256});
  CHECK(tokenizer.encode("a<|endoftext|>", {false, false}).size() > 2);
  CHECK(tokenizer.decode(tokenizer.encode("Hello  world 🚀")) == "Hello  world 🚀");
}

TEST_CASE("GGUF tokenizer: llama.cpp's MPT (GPT-NeoX) and StarCoder2 vocabularies give Hugging Face's ids",
          "[text][gguf]") {
  // mpt: GPT-NeoX-20B's tokenizer (also Pythia's), NFC and GPT-2's regex, with 23 user-defined tokens of runs of spaces
  // and 155 "[PAD<id>]" placeholders up to the model's 50432 embedding rows; starcoder (as smollm and refact): each
  // digit apart, then GPT-2's regex.
  const GgufTokenizerMetadata mpt =
      attnscope::text::gguf_tokenizer_metadata(attnscope::io::GgufFile(text_fixture("real/ggml-vocab-mpt.gguf")));
  CHECK(mpt.pre == "mpt");
  CHECK(mpt.tokens.size() == 50432);
  check_gguf_vocab("mpt", 46);
  const GgufTokenizerMetadata starcoder =
      attnscope::text::gguf_tokenizer_metadata(attnscope::io::GgufFile(text_fixture("real/ggml-vocab-starcoder.gguf")));
  CHECK(starcoder.pre == "starcoder");
  CHECK(starcoder.tokens.size() == 49152);
  check_gguf_vocab("starcoder", 46);

  const ByteLevelBpeTokenizer from_gguf = ByteLevelBpeTokenizer::from_gguf_metadata(mpt);
  CHECK(from_gguf.normalizer_name() == "NFC");
  // the placeholders are not added tokens: "[PAD50300]" is ordinary text
  CHECK(from_gguf.encode("[PAD50300]", {true, false}).size() > 1);
  CHECK(from_gguf.added_tokens().size() == 2 + 23);
  // the GGUF vocabulary and GPT-NeoX-20B's tokenizer.json agree on 300 pieces of the book
  const ByteLevelBpeTokenizer from_json =
      ByteLevelBpeTokenizer::from_tokenizer_json(text_fixture("real/gpt_neox_20b.tokenizer.json"));
  const std::string book = read_text_file(attnscope::testing::data_file("war_and_peace.txt"));
  std::size_t compared = 0, tokens = 0, start = 0;
  for (; compared < 300; ++compared) {
    const std::size_t end = book.find('\n', start + 1000);
    REQUIRE(end != std::string::npos);
    const std::string piece = book.substr(start, end + 1 - start);
    start = end + 1;
    const std::vector<int> ids = from_json.encode(piece);
    CHECK(from_gguf.encode(piece) == ids);
    tokens += ids.size();
  }
  CHECK(tokens > 60000);
}

TEST_CASE("GGUF tokenizer: unsupported or inconsistent metadata is refused by name", "[text][gguf]") {
  using Catch::Matchers::Contains;
  GgufTokenizerMetadata metadata;
  metadata.source = "model.gguf";
  metadata.model = "llama";
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_gguf_metadata(metadata),
                    Contains("model.gguf") && Contains("tokenizer.ggml.tokens is missing"));
  // "▁a" is the one merge (the piece with the best score formed from two pieces)
  metadata.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a"};
  metadata.scores = {0, 0, 0, -3, -4, -5};
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_gguf_metadata(metadata),
                    Contains("tokenizer.ggml.scores has 6 entries for 7 tokens"));
  metadata.scores.push_back(-1);
  metadata.token_types = {2, 3, 3, 1, 1, 1};
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_gguf_metadata(metadata),
                    Contains("tokenizer.ggml.token_type has 6 entries for 7 tokens"));
  metadata.token_types.push_back(1);
  metadata.bos_id = 7;
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_gguf_metadata(metadata),
                    Contains("tokenizer.ggml.add_bos_token") && Contains("(7)"));
  metadata.bos_id = 1;
  CHECK(ByteLevelBpeTokenizer::from_gguf_metadata(metadata).encode("a b", {false, true}) ==
        std::vector<int>{1, 6, 3, 5});
  metadata.add_space_prefix = false;
  CHECK(ByteLevelBpeTokenizer::from_gguf_metadata(metadata).encode("a b") == std::vector<int>{4, 3, 5});  // "a▁b": no merge applies
  metadata.model = "bert";
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_gguf_metadata(metadata),
                    Contains("not supported: tokenizer.ggml.model 'bert' (supported: gpt2, llama)"));
  metadata.model = "gpt2";
  metadata.pre = "falcon";
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_gguf_metadata(metadata),
                    Contains("not supported: tokenizer.ggml.pre 'falcon'") && Contains("llama-bpe") && Contains("qwen2"));
  metadata.pre = "";
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_gguf_metadata(metadata), Contains("tokenizer.ggml.pre is missing"));
  metadata.pre = "gpt-2";
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_gguf_metadata(metadata), Contains("tokenizer.ggml.merges is missing"));
  metadata.merges = {"a  b"};
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_gguf_metadata(metadata), Contains("tokenizer.ggml.merges[0]"));
  // a GGUF file without the tokenizer keys: the reader names the file and the key
  const std::string path = attnscope::testing::text_scratch_dir("gguf_tokenizer") + "/no_tokenizer.gguf";
  attnscope::io::GgufValue architecture;
  architecture.type = attnscope::io::GgufType::string;
  architecture.text = "llama";
  std::ofstream(path, std::ios::binary) << attnscope::io::serialize_gguf({{"general.architecture", architecture}}, {});
  CHECK_THROWS_WITH(attnscope::text::gguf_tokenizer(path), Contains("no_tokenizer.gguf") && Contains("tokenizer.ggml.model"));
}
