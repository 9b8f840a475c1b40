// Tokenizers from GGUF metadata (text/gguf_tokenizer.hpp) on llama.cpp's vocabulary-only files
// (fixtures/real/ggml-vocab-*.gguf): the ids of the Hugging Face tokenizer each file was converted from, as listed in
// llama.cpp's .inp/.out files beside them (written by its convert_hf_to_gguf_update.py with transformers'
// tokenizer.encode(text, add_special_tokens=False)); Llama-2's GGUF vocabulary gives the ids of its tokenizer.model
// on book paragraphs; unsupported models and pre-tokenizers, and inconsistent metadata, are refused by name.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

}  // namespace

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
  metadata.pre = "qwen2";
  CHECK_THROWS_WITH(ByteLevelBpeTokenizer::from_gguf_metadata(metadata),
                    Contains("not supported: tokenizer.ggml.pre 'qwen2'"));
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
