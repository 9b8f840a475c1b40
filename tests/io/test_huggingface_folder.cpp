// Tests of io::HuggingFaceFolder: single-file and sharded folders written with the safetensors writer read back
// exactly, F16/BF16 weights against known values, name prefixes, and every error class (missing or malformed
// config.json / index, missing or truncated shard, tensor absent from its shard, wrong dtype, shape mismatch);
// then the committed fixtures of tests/fixtures/hf (written by an independent Python script): their weights as
// the configuration describes them, the embedding rows as Python converted them, and the broken folders.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/huggingface.hpp"
#include "attnscope/io/safetensors.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

using namespace attnscope;
using attnscope::testing::error_message;
using Catch::Matchers::Contains;

namespace {

/// A fresh empty folder under the temporary directory.
std::string hf_fresh_folder(const std::string& name) {
  const std::filesystem::path folder = std::filesystem::temp_directory_path() / ("attnscope_hf_" + name);
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  return folder.string();
}

std::string hf_path(const std::string& folder, const std::string& file) {
  return (std::filesystem::path(folder) / file).string();
}

RowMatrix<float> hf_random_matrix(Random& random, Index rows, Index cols) {
  RowMatrix<float> matrix(rows, cols);
  for (Index i = 0; i < matrix.size(); ++i) matrix.data()[i] = static_cast<float>(random.normal());
  return matrix;
}

io::Array hf_bits_array(io::DType dtype, const std::vector<std::uint16_t>& bits, std::vector<std::int64_t> shape) {
  std::vector<unsigned char> bytes(bits.size() * 2);
  std::memcpy(bytes.data(), bits.data(), bytes.size());
  return io::Array(dtype, std::move(shape), std::move(bytes));
}

const char* const hf_config = R"({"model_type": "gpt2", "n_embd": 4, "n_layer": 1})";

/// A sharded folder: shard 1 holds the embedding (F32) and an F16 matrix, shard 2 a BF16 vector and an I32 tensor.
struct HfShardedFolder {
  std::string folder;
  RowMatrix<float> embedding;
};

HfShardedFolder hf_write_sharded(const std::string& name) {
  HfShardedFolder out{hf_fresh_folder(name), RowMatrix<float>()};
  Random random(5);
  out.embedding = hf_random_matrix(random, 3, 4);
  io::write_file(hf_path(out.folder, "config.json"), R"({"model_type": "llama", "hidden_size": 4})");
  // F16: 1.5, -2, 0.333251953125, 65504; BF16: 1.5, -2, 3.140625.
  io::write_safetensors(hf_path(out.folder, "model-00001-of-00002.safetensors"),
                        {{"model.embed_tokens.weight", io::Array::from(out.embedding)},
                         {"model.layers.0.self_attn.q_proj.weight",
                          hf_bits_array(io::DType::float16, {0x3E00, 0xC000, 0x3555, 0x7BFF}, {2, 2})}},
                        {{"format", "pt"}});
  io::write_safetensors(hf_path(out.folder, "model-00002-of-00002.safetensors"),
                        {{"model.norm.weight", hf_bits_array(io::DType::bfloat16, {0x3FC0, 0xC000, 0x4049}, {3})},
                         {"lm_head.weight", io::Array::from_vector(std::vector<std::int32_t>{1, 2, 3, 4}, {2, 2})}});
  io::write_file(hf_path(out.folder, "model.safetensors.index.json"),
                 R"({"metadata": {"total_size": 66}, "weight_map": {
                       "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                       "model.layers.0.self_attn.q_proj.weight": "model-00001-of-00002.safetensors",
                       "model.norm.weight": "model-00002-of-00002.safetensors",
                       "lm_head.weight": "model-00002-of-00002.safetensors"}})");
  return out;
}

}  // namespace

TEST_CASE("HuggingFaceFolder: a single model.safetensors reads back exactly, with or without the prefix",
          "[io][huggingface]") {
  const std::string folder = hf_fresh_folder("single");
  Random random(11);
  const RowMatrix<float> embedding = hf_random_matrix(random, 5, 4), attention = hf_random_matrix(random, 4, 12);
  const RowMatrix<float> bias = hf_random_matrix(random, 1, 12);
  io::write_file(hf_path(folder, "config.json"), hf_config);
  io::write_safetensors(hf_path(folder, "model.safetensors"),
                        {{"transformer.wte.weight", io::Array::from(embedding)},
                         {"transformer.h.0.attn.c_attn.weight", io::Array::from(attention)},
                         {"transformer.h.0.attn.c_attn.bias", io::Array::from_vector(
                                                                   std::vector<float>(bias.data(), bias.data() + 12), {12})},
                         {"h.0.attn.bias", io::Array::from_vector(std::vector<float>(16, 1.0f), {1, 1, 4, 4})}});
  const io::HuggingFaceFolder model(folder);
  CHECK(model.folder() == folder);
  CHECK(model.config().at("model_type") == "gpt2");
  CHECK(model.config().at("n_embd") == 4);
  CHECK(model.tensor_names() == std::vector<std::string>{"h.0.attn.bias", "transformer.h.0.attn.c_attn.bias",
                                                         "transformer.h.0.attn.c_attn.weight", "transformer.wte.weight"});
  CHECK(model.matrix_float32("wte.weight", 5, 4) == embedding);
  CHECK(model.matrix_float32("transformer.wte.weight", 5, 4) == embedding);
  CHECK(model.matrix_float32("h.0.attn.c_attn.weight", 4, 12) == attention);
  CHECK(model.vector_float32("h.0.attn.c_attn.bias", 12) == bias.row(0).transpose());
  CHECK(model.values_float32("h.0.attn.bias", {1, 1, 4, 4}) == std::vector<float>(16, 1.0f));
  CHECK(model.resolve_name("h.0.attn.c_attn.weight") == "transformer.h.0.attn.c_attn.weight");
  CHECK(model.resolve_name("h.0.attn.bias") == "h.0.attn.bias");                   // exact name first
  CHECK(model.resolve_name("transformer.h.0.attn.bias") == "h.0.attn.bias");       // prefix stripped
  CHECK(model.resolve_name("model.wte.weight") == "transformer.wte.weight");       // the other prefix
  CHECK(model.has_tensor("wte.weight"));
  CHECK_FALSE(model.has_tensor("wpe.weight"));
  const io::HuggingFaceTensor& stored = model.tensor("wte.weight");
  CHECK(stored.name == "transformer.wte.weight");
  CHECK(stored.file == hf_path(folder, "model.safetensors"));
  CHECK(stored.dtype == io::DType::float32);
  CHECK(stored.shape == std::vector<std::int64_t>{5, 4});
  CHECK(stored.byte_count == 80);
  CHECK(std::memcmp(stored.data, embedding.data(), 80) == 0);
  std::filesystem::remove_all(folder);
}

TEST_CASE("HuggingFaceFolder: sharded folders, F16 and BF16 weights converted to float32", "[io][huggingface]") {
  const HfShardedFolder sharded = hf_write_sharded("sharded");
  const io::HuggingFaceFolder model(sharded.folder);
  CHECK(model.tensor_names().size() == 4);
  CHECK(model.matrix_float32("embed_tokens.weight", 3, 4) == sharded.embedding);
  RowMatrix<float> expected_half(2, 2);
  expected_half << 1.5f, -2.0f, 0.333251953125f, 65504.0f;
  CHECK(model.matrix_float32("layers.0.self_attn.q_proj.weight", 2, 2) == expected_half);
  CHECK(model.tensor("layers.0.self_attn.q_proj.weight").dtype == io::DType::float16);
  Vector<float> expected_bfloat(3);
  expected_bfloat << 1.5f, -2.0f, 3.140625f;
  CHECK(model.vector_float32("norm.weight", 3) == expected_bfloat);
  CHECK(model.tensor("norm.weight").file == hf_path(sharded.folder, "model-00002-of-00002.safetensors"));
  CHECK(model.tensor("embed_tokens.weight").file == hf_path(sharded.folder, "model-00001-of-00002.safetensors"));
  // Moving the folder keeps the views valid.
  io::HuggingFaceFolder moved = io::HuggingFaceFolder(sharded.folder);
  const io::HuggingFaceFolder target = std::move(moved);
  CHECK(target.matrix_float32("embed_tokens.weight", 3, 4) == sharded.embedding);
  std::filesystem::remove_all(sharded.folder);
}

TEST_CASE("HuggingFaceFolder: every error names the file and the tensor", "[io][huggingface][errors]") {
  auto folder_error = [](const std::string& folder) {
    return error_message<io_error>([&] { io::HuggingFaceFolder{folder}; });
  };
  SECTION("folder, config.json and weights file") {
    const std::string folder = hf_fresh_folder("errors_config");
    CHECK_THAT(folder_error(hf_path(folder, "absent")), Contains("absent: is not a directory"));
    CHECK_THAT(folder_error(folder), Contains(hf_path(folder, "config.json")) && Contains("missing"));
    io::write_file(hf_path(folder, "config.json"), R"({"model_type": )");
    CHECK_THAT(folder_error(folder), Contains(hf_path(folder, "config.json")) && Contains("malformed JSON"));
    io::write_file(hf_path(folder, "config.json"), "[1, 2]");
    CHECK_THAT(folder_error(folder), Contains("config.json: is not a JSON object"));
    io::write_file(hf_path(folder, "config.json"), hf_config);
    CHECK_THAT(folder_error(folder), Contains("holds neither model.safetensors nor model.safetensors.index.json"));
    std::filesystem::remove_all(folder);
  }
  SECTION("index and shards") {
    const HfShardedFolder sharded = hf_write_sharded("errors_shards");
    const std::string index = hf_path(sharded.folder, "model.safetensors.index.json");
    const std::string shard2 = hf_path(sharded.folder, "model-00002-of-00002.safetensors");
    const std::string shard2_bytes = io::serialize_safetensors(
        {{"model.norm.weight", hf_bits_array(io::DType::bfloat16, {0x3FC0, 0xC000, 0x4049}, {3})},
         {"lm_head.weight", io::Array::from_vector(std::vector<std::int32_t>{1, 2, 3, 4}, {2, 2})}});
    REQUIRE(io::read_file(shard2).size() == shard2_bytes.size());
    REQUIRE(folder_error(sharded.folder).empty());

    io::write_file(shard2, shard2_bytes.substr(0, shard2_bytes.size() - 3));  // truncated in lm_head.weight's bytes
    CHECK_THAT(folder_error(sharded.folder), Contains(shard2) && Contains("tensor 'lm_head.weight'") &&
                                                 Contains("outside the"));
    io::write_file(shard2, shard2_bytes.substr(0, 20));  // truncated in the header
    CHECK_THAT(folder_error(sharded.folder), Contains(shard2) && Contains("truncated"));
    std::filesystem::remove(shard2);
    CHECK_THAT(folder_error(sharded.folder), Contains(shard2) && Contains("missing") && Contains("tensor '"));
    io::write_safetensors(shard2, {{"model.norm.weight", hf_bits_array(io::DType::bfloat16, {1, 2, 3}, {3})}});
    CHECK_THAT(folder_error(sharded.folder),
               Contains(shard2) && Contains("tensor 'lm_head.weight' is listed in model.safetensors.index.json but absent"));
    io::write_file(shard2, shard2_bytes);
    REQUIRE(folder_error(sharded.folder).empty());

    io::write_file(index, R"({"weight_map": )");
    CHECK_THAT(folder_error(sharded.folder), Contains(index) && Contains("malformed JSON"));
    io::write_file(index, R"({"metadata": {}})");
    CHECK_THAT(folder_error(sharded.folder), Contains(index) && Contains("no \"weight_map\" object"));
    io::write_file(index, R"({"weight_map": {"a": 3}})");
    CHECK_THAT(folder_error(sharded.folder), Contains(index) && Contains("weight_map entry 'a'"));
    io::write_file(index, R"({"weight_map": {"a": "../model-00002-of-00002.safetensors"}})");
    CHECK_THAT(folder_error(sharded.folder), Contains(index) && Contains("tensor 'a'") && Contains("not a plain file name"));
    std::filesystem::remove_all(sharded.folder);
  }
  SECTION("lookups, dtypes and shapes") {
    const HfShardedFolder sharded = hf_write_sharded("errors_tensors");
    const io::HuggingFaceFolder model(sharded.folder);
    const std::string shard1 = hf_path(sharded.folder, "model-00001-of-00002.safetensors");
    const std::string shard2 = hf_path(sharded.folder, "model-00002-of-00002.safetensors");
    CHECK_THAT(error_message<io_error>([&] { model.tensor("layers.9.mlp.up_proj.weight"); }),
               Contains(sharded.folder) && Contains("no tensor 'layers.9.mlp.up_proj.weight'"));
    CHECK_THAT(error_message<io_error>([&] { model.resolve_name("wte.weight"); }), Contains("no tensor 'wte.weight'"));
    CHECK_THAT(error_message<io_error>([&] { model.matrix_float32("lm_head.weight", 2, 2); }),
               Contains(shard2) && Contains("tensor 'lm_head.weight' has dtype int32"));
    CHECK_THAT(error_message<io_error>([&] { model.matrix_float32("embed_tokens.weight", 4, 3); }),
               Contains(shard1) && Contains("tensor 'model.embed_tokens.weight' has shape [3, 4] but [4, 3] was expected"));
    CHECK_THAT(error_message<io_error>([&] { model.vector_float32("norm.weight", 4); }),
               Contains(shard2) && Contains("shape [3] but [4] was expected"));
    CHECK_THAT(error_message<io_error>([&] { model.vector_float32("embed_tokens.weight", 12); }),
               Contains("shape [3, 4] but [12] was expected"));
    CHECK_THAT(error_message<io_error>([&] { model.values_float32("norm.weight", {1, 3}); }),
               Contains("shape [3] but [1, 3] was expected"));
    std::filesystem::remove_all(sharded.folder);
  }
}

namespace {

/// The tensor names and shapes a Llama/Qwen2 configuration implies (with the `model.` prefix).
std::map<std::string, std::vector<std::int64_t>> hf_llama_family_shapes(const nlohmann::json& config, bool biases) {
  const std::int64_t hidden = config.at("hidden_size"), inner = config.at("intermediate_size");
  const std::int64_t heads = config.at("num_attention_heads"), kv_heads = config.at("num_key_value_heads");
  const std::int64_t head_dim = hidden / heads, vocab = config.at("vocab_size");
  std::map<std::string, std::vector<std::int64_t>> shapes = {{"model.embed_tokens.weight", {vocab, hidden}},
                                                             {"model.norm.weight", {hidden}}};
  if (!config.at("tie_word_embeddings").get<bool>()) shapes["lm_head.weight"] = {vocab, hidden};
  for (int layer = 0; layer < config.at("num_hidden_layers").get<int>(); ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    shapes[p + "input_layernorm.weight"] = {hidden};
    shapes[p + "post_attention_layernorm.weight"] = {hidden};
    shapes[p + "self_attn.q_proj.weight"] = {heads * head_dim, hidden};
    shapes[p + "self_attn.k_proj.weight"] = {kv_heads * head_dim, hidden};
    shapes[p + "self_attn.v_proj.weight"] = {kv_heads * head_dim, hidden};
    shapes[p + "self_attn.o_proj.weight"] = {hidden, heads * head_dim};
    if (biases) {
      shapes[p + "self_attn.q_proj.bias"] = {heads * head_dim};
      shapes[p + "self_attn.k_proj.bias"] = {kv_heads * head_dim};
      shapes[p + "self_attn.v_proj.bias"] = {kv_heads * head_dim};
    }
    shapes[p + "mlp.gate_proj.weight"] = {inner, hidden};
    shapes[p + "mlp.up_proj.weight"] = {inner, hidden};
    shapes[p + "mlp.down_proj.weight"] = {hidden, inner};
  }
  return shapes;
}

/// The tensor names and shapes a GPT-2 configuration implies, buffers included.
std::map<std::string, std::vector<std::int64_t>> hf_gpt2_shapes(const nlohmann::json& config) {
  const std::int64_t d = config.at("n_embd"), positions = config.at("n_positions"), vocab = config.at("vocab_size");
  std::map<std::string, std::vector<std::int64_t>> shapes = {{"transformer.wte.weight", {vocab, d}},
                                                             {"transformer.wpe.weight", {positions, d}},
                                                             {"transformer.ln_f.weight", {d}},
                                                             {"transformer.ln_f.bias", {d}}};
  for (int layer = 0; layer < config.at("n_layer").get<int>(); ++layer) {
    const std::string p = "transformer.h." + std::to_string(layer) + ".";
    for (const char* norm : {"ln_1.", "ln_2."}) shapes[p + norm + "weight"] = shapes[p + norm + "bias"] = {d};
    shapes[p + "attn.c_attn.weight"] = {d, 3 * d};  // Conv1D: [in, out]
    shapes[p + "attn.c_attn.bias"] = {3 * d};
    shapes[p + "attn.c_proj.weight"] = {d, d};
    shapes[p + "attn.c_proj.bias"] = {d};
    shapes[p + "mlp.c_fc.weight"] = {d, 4 * d};
    shapes[p + "mlp.c_fc.bias"] = {4 * d};
    shapes[p + "mlp.c_proj.weight"] = {4 * d, d};
    shapes[p + "mlp.c_proj.bias"] = {d};
    shapes[p + "attn.bias"] = {1, 1, positions, positions};
    shapes[p + "attn.masked_bias"] = {};
  }
  return shapes;
}

}  // namespace

TEST_CASE("HuggingFaceFolder: the committed fixtures hold what their configuration describes", "[io][huggingface]") {
  struct Case {
    const char* name;
    io::DType dtype;
    std::size_t shard_count;
  };
  for (const Case& fixture : {Case{"gpt2", io::DType::float32, 1}, Case{"llama", io::DType::bfloat16, 2},
                              Case{"qwen2", io::DType::float16, 1}}) {
    INFO(fixture.name);
    const io::HuggingFaceFolder model(attnscope::testing::hf_fixture_folder(fixture.name));
    const nlohmann::json& config = model.config();
    CHECK(config.at("model_type") == fixture.name);
    const auto shapes = std::string(fixture.name) == "gpt2"
                            ? hf_gpt2_shapes(config)
                            : hf_llama_family_shapes(config, std::string(fixture.name) == "qwen2");
    std::vector<std::string> expected_names;
    for (const auto& entry : shapes) expected_names.push_back(entry.first);
    CHECK(model.tensor_names() == expected_names);
    std::map<std::string, int> files;
    for (const auto& [name, shape] : shapes) {
      const io::HuggingFaceTensor& stored = model.tensor(name);
      CHECK(stored.shape == shape);
      if (name.find("attn.bias") == std::string::npos && name.find("masked_bias") == std::string::npos)
        CHECK(stored.dtype == fixture.dtype);
      ++files[stored.file];
    }
    CHECK(files.size() == fixture.shard_count);
    // The embedding rows converted to float32 here equal Python's float64 conversion of the stored values.
    const attnscope::testing::HfReference reference = attnscope::testing::read_hf_reference(fixture.name);
    const std::string embedding = std::string(fixture.name) == "gpt2" ? "wte.weight" : "embed_tokens.weight";
    const Index vocab = config.at("vocab_size"), hidden = reference.embedding_rows.cols();
    const RowMatrix<float> table = model.matrix_float32(embedding, vocab, hidden);
    CHECK(table.topRows(2).cast<double>() == reference.embedding_rows);
    // The reference itself: tokens in the vocabulary, logits [L, vocab], causal attention rows summing to 1.
    const Index length = static_cast<Index>(reference.tokens.size());
    CHECK(length == 35);
    for (std::int64_t token : reference.tokens) CHECK((token >= 0 && token < vocab));
    CHECK(reference.logits.rows() == length);
    CHECK(reference.logits.cols() == vocab);
    CHECK(reference.attention.size() == 2);
    for (const auto& layer : reference.attention) {
      CHECK(layer.size() == 4);
      for (const RowMatrix<double>& head : layer) {
        CHECK(head.rows() == length);
        CHECK(head.cols() == length);
        CHECK((head.rowwise().sum().array() - 1.0).abs().maxCoeff() < 1e-12);
        CHECK(head.triangularView<Eigen::StrictlyUpper>().toDenseMatrix().cwiseAbs().maxCoeff() == 0.0);
      }
    }
    CHECK(attnscope::testing::hf_logits_error(reference.logits, reference.logits) == 0.0);
    RowMatrix<double> perturbed = reference.logits;
    perturbed(3, 7) += 2e-4 * reference.logits.row(3).cwiseAbs().maxCoeff();
    CHECK(attnscope::testing::hf_logits_error(perturbed, reference.logits) > attnscope::testing::hf_logits_relative_tolerance);
    perturbed(3, 7) = std::nan("");
    CHECK(attnscope::testing::hf_logits_error(perturbed, reference.logits) == std::numeric_limits<double>::infinity());
  }
}

TEST_CASE("HuggingFaceFolder: the committed broken folders give io_errors naming file and tensor",
          "[io][huggingface][errors]") {
  using attnscope::testing::hf_fixture_folder;
  auto open_error = [](const std::string& name) {
    return error_message<io_error>([&] { io::HuggingFaceFolder{hf_fixture_folder(name)}; });
  };
  const std::string shard2 = "model-00002-of-00002.safetensors";
  CHECK_THAT(open_error("bad/missing_config"), Contains("config.json: missing"));
  CHECK_THAT(open_error("bad/malformed_config"), Contains("config.json: malformed JSON"));
  CHECK_THAT(open_error("bad/missing_shard"), Contains(shard2) && Contains("is missing") && Contains("tensor '"));
  CHECK_THAT(open_error("bad/truncated_shard"),
             Contains(shard2) && Contains("tensor 'lm_head.weight'") && Contains("truncated file?"));
  CHECK_THAT(open_error("bad/tensor_absent_from_shard"),
             Contains("model-00001-of-00002.safetensors") && Contains("tensor 'model.norm.weight' is listed"));
  for (const char* well_formed : {"bad/wrong_dtype", "bad/shape_mismatch", "bad/unknown_model_type", "bad/missing_tensor"})
    CHECK(open_error(well_formed).empty());
  const io::HuggingFaceFolder wrong_dtype(hf_fixture_folder("bad/wrong_dtype"));
  CHECK_THAT(error_message<io_error>([&] { wrong_dtype.matrix_float32("layers.0.self_attn.q_proj.weight", 8, 8); }),
             Contains("model-00002-of-00002.safetensors") && Contains("q_proj.weight' has dtype int32"));
  const io::HuggingFaceFolder shape_mismatch(hf_fixture_folder("bad/shape_mismatch"));
  CHECK_THAT(error_message<io_error>([&] { shape_mismatch.matrix_float32("layers.0.self_attn.q_proj.weight", 8, 8); }),
             Contains("q_proj.weight' has shape [8, 6] but [8, 8] was expected"));
  CHECK(io::HuggingFaceFolder(hf_fixture_folder("bad/unknown_model_type")).config().at("model_type") == "mamba");
  const io::HuggingFaceFolder missing_tensor(hf_fixture_folder("bad/missing_tensor"));
  CHECK_FALSE(missing_tensor.has_tensor("layers.0.mlp.up_proj.weight"));
  CHECK_THAT(error_message<io_error>([&] { missing_tensor.tensor("layers.0.mlp.up_proj.weight"); }),
             Contains("bad/missing_tensor") && Contains("no tensor 'layers.0.mlp.up_proj.weight'"));
}
