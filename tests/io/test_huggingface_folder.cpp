// Tests of io::HuggingFaceFolder: single-file and sharded folders written with the safetensors writer read back
// exactly, F16/BF16 weights against known values, name prefixes, and every error class (missing or malformed
// config.json / index, missing or truncated shard, tensor absent from its shard, wrong dtype, shape mismatch).
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/huggingface.hpp"
#include "attnscope/io/safetensors.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

using namespace attnscope;
using attnscope_test::error_message;
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
