// Format detection by content (io::detect_file_format): every format the readers know, written by the library's own
// writers, is recognised whatever its extension; a torch.save archive, another ZIP, text and unknown bytes are told
// apart; a llama2.c header must be plausible; missing paths throw naming the path.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "attnscope/io.hpp"
#include "attnscope/io/detect_format.hpp"
#include "io/io_test_support.hpp"
#include "support/catch.hpp"
#include "support/zip_archive.hpp"

namespace {

using attnscope::io::FileFormat;

std::string detect_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("attnscope_detect_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

attnscope::io::Array detect_sample_array() {
  return attnscope::io::Array::from_vector(std::vector<float>{0.25f, 0.75f, 1.0f, 0.0f}, {2, 2});
}

}  // namespace

TEST_CASE("detect_file_format recognises each format by content, whatever the extension") {
  namespace io = attnscope::io;
  std::vector<std::string> written;
  auto path = [&](const std::string& name) {
    written.push_back(detect_path(name));
    return written.back();
  };
  // NPY, also renamed .bin / .txt / no extension.
  for (const std::string name : {"a.npy", "a_npy.bin", "a_npy.txt", "a_npy"}) {
    const std::string file = path(name);
    io::write_npy(file, detect_sample_array());
    CHECK(io::detect_file_format(file) == FileFormat::npy);
  }
  // NPZ, stored and deflated, and under a .safetensors name.
  const std::string npz = path("b.npz"), npz_deflated = path("b_deflated.npz"), npz_renamed = path("b.safetensors");
  io::write_npz(npz, {{"attention", detect_sample_array()}, {"v", detect_sample_array()}}, io::Compression::stored);
  io::write_npz(npz_deflated, {{"attention", detect_sample_array()}}, io::Compression::deflated);
  io::write_npz(npz_renamed, {{"attention", detect_sample_array()}}, io::Compression::stored);
  CHECK(io::detect_file_format(npz) == FileFormat::npz);
  CHECK(io::detect_file_format(npz_deflated) == FileFormat::npz);
  CHECK(io::detect_file_format(npz_renamed) == FileFormat::npz);
  // safetensors, also renamed .npz.
  const std::string safetensors = path("c.safetensors"), safetensors_renamed = path("c.npz");
  io::write_safetensors(safetensors, {{"attention", detect_sample_array()}});
  io::write_safetensors(safetensors_renamed, {{"attention", detect_sample_array()}}, {{"map", "sink"}});
  CHECK(io::detect_file_format(safetensors) == FileFormat::safetensors);
  CHECK(io::detect_file_format(safetensors_renamed) == FileFormat::safetensors);
  // llama2.c checkpoints of every version, under any name.
  for (const int version : {0, 1, 2}) {
    const std::string file = path("model_v" + std::to_string(version) + ".npy");
    io::write_llama2c(file, attnscope::testing::random_llama_weights(attnscope::testing::small_llama_config(true), 3),
                      version, 4);
    CHECK(io::detect_file_format(file) == FileFormat::llama2c);
  }
  // torch.save archives (data.pkl under the archive's folder), another ZIP, text, CSV, unknown bytes, empty file.
  const std::string torch_file = path("t.pt"), torch_renamed = path("t.npy"), other_zip = path("other.zip");
  attnscope::testing::write_bytes(torch_file, attnscope::testing::torch_save_like_zip("t"));
  attnscope::testing::write_bytes(torch_renamed, attnscope::testing::torch_save_like_zip());
  attnscope::testing::write_bytes(other_zip, attnscope::testing::stored_zip({{"readme.md", "hello"}, {"x.npy", "abc"}}));
  CHECK(io::detect_file_format(torch_file) == FileFormat::torch_save);
  CHECK(io::detect_file_format(torch_renamed) == FileFormat::torch_save);
  CHECK(io::detect_file_format(other_zip) == FileFormat::zip);
  const std::string text = path("notes.npy"), csv = path("table.csv"), binary = path("noise.bin"), empty = path("e.npz");
  attnscope::testing::write_bytes(text, "Attention is all you need.\nNot an array.\n");
  attnscope::testing::write_bytes(csv, "layer,head,value\n0,0,0.5\n0,1,0.25\n");
  attnscope::testing::write_bytes(binary, std::string("\x01\x00\xff\xfe\x00\x00\x07", 7) + std::string(100, '\x03'));
  attnscope::testing::write_bytes(empty, "");
  CHECK(io::detect_file_format(text) == FileFormat::text);
  CHECK(io::detect_file_format(csv) == FileFormat::text);
  CHECK(io::detect_file_format(binary) == FileFormat::unknown);
  CHECK(io::detect_file_format(empty) == FileFormat::unknown);
  // Folders: a Hugging Face model folder has config.json.
  const std::string folder = path("hf_folder");
  std::filesystem::create_directories(folder);
  CHECK(io::detect_file_format(folder) == FileFormat::directory);
  attnscope::testing::write_bytes(folder + "/config.json", "{}");
  CHECK(io::detect_file_format(folder) == FileFormat::huggingface_folder);
  // A missing path throws naming it.
  CHECK_THROWS_AS(io::detect_file_format(path("missing.npy")), attnscope::io_error);
  CHECK_THROWS_WITH(io::detect_file_format(path("missing.npy")), Catch::Matchers::Contains("missing.npy"));
  for (const std::string& file : written) std::filesystem::remove_all(file);
}

TEST_CASE("detect_format_of_prefix: llama2.c headers must be plausible, safetensors lengths must fit the file") {
  namespace io = attnscope::io;
  // Seven int32 fields: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len.
  auto header = [](std::vector<std::int32_t> fields) {
    std::string bytes(fields.size() * 4, '\0');
    for (std::size_t i = 0; i < fields.size(); ++i) attnscope::testing::poke_int32(bytes, 4 * i, fields[i]);
    return bytes;
  };
  const std::string plausible = header({64, 172, 5, 8, 4, 512, 512});
  CHECK(io::detect_format_of_prefix(attnscope::testing::bytes_of(plausible), plausible.size(), 1 << 20) ==
        FileFormat::llama2c);
  const std::string negative_vocab = header({64, 172, 5, 8, 4, -512, 512});  // version 0: unshared classifier
  CHECK(io::detect_format_of_prefix(attnscope::testing::bytes_of(negative_vocab), negative_vocab.size(), 1 << 20) ==
        FileFormat::llama2c);
  // What an NPY header looks like when read as a llama2.c header: dim = 67324752, which must not pass as a model.
  const std::string absurd = header({67324752, 172, 5, 8, 4, 512, 512});
  CHECK(io::detect_format_of_prefix(attnscope::testing::bytes_of(absurd), absurd.size(), 1 << 20) != FileFormat::llama2c);
  const std::string indivisible = header({64, 172, 5, 7, 7, 512, 512});  // 64 % 7 != 0
  CHECK(io::detect_format_of_prefix(attnscope::testing::bytes_of(indivisible), indivisible.size(), 1 << 20) !=
        FileFormat::llama2c);
  // safetensors: header length 2 → "{}" fits a 10-byte file, not an 9-byte claim past the end.
  std::string safetensors("\x02\0\0\0\0\0\0\0{}", 10);
  CHECK(io::detect_format_of_prefix(attnscope::testing::bytes_of(safetensors), 10, 10) == FileFormat::safetensors);
  safetensors[0] = '\x40';
  CHECK(io::detect_format_of_prefix(attnscope::testing::bytes_of(safetensors), 10, 10) != FileFormat::safetensors);
  CHECK(std::string(io::file_format_name(FileFormat::torch_save)) == "PyTorch torch.save archive");
}
