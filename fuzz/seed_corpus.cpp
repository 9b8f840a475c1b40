// Writes the fuzzers' seed corpus: <dir>/npy (NPY of every dtype, order and a few ranks; NPZ stored and deflated),
// <dir>/safetensors (every dtype, with and without metadata) and <dir>/llama2c (tiny v0/v1/v2 checkpoints, shared
// and unshared classifier). Usage: fuzz_seed_corpus DIR
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io.hpp"

using namespace attnscope;

namespace {

io::Array random_array(io::DType dtype, std::vector<std::int64_t> shape, Random& random) {
  std::uint64_t count = 1;
  for (auto d : shape) count *= static_cast<std::uint64_t>(d);
  std::vector<unsigned char> bytes(count * io::dtype_size(dtype));
  for (auto& b : bytes) b = static_cast<unsigned char>(dtype == io::DType::boolean ? random.below(2) : random.below(256));
  if (dtype == io::DType::float32 || dtype == io::DType::float64)  // finite values
    for (std::uint64_t i = 0; i < count; ++i) {
      const double value = random.normal();
      if (dtype == io::DType::float32) {
        const float f = static_cast<float>(value);
        std::memcpy(bytes.data() + 4 * i, &f, 4);
      } else {
        std::memcpy(bytes.data() + 8 * i, &value, 8);
      }
    }
  return io::Array(dtype, std::move(shape), std::move(bytes));
}

void fill(io::LlamaWeights& w, Random& random) {
  auto normal = [&](auto& m) {
    for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(0.5 * random.normal());
  };
  normal(w.token_embedding);
  normal(w.rms_final);
  for (auto& layer : w.layers)
    for (auto* m : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w1, &layer.w2, &layer.w3}) normal(*m);
  for (auto& layer : w.layers) {
    normal(layer.rms_attention);
    normal(layer.rms_ffn);
  }
  if (w.config.shared_classifier) w.classifier = w.token_embedding;
  else normal(w.classifier);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  for (const char* sub : {"npy", "safetensors", "llama2c"}) std::filesystem::create_directories(dir + "/" + sub);
  Random random(1);
  const io::DType npy_dtypes[] = {io::DType::float32, io::DType::float64, io::DType::int32,
                                  io::DType::int64,   io::DType::boolean, io::DType::float16};
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {3}, {2, 3}, {2, 1, 3}, {0, 4}};
  int file = 0;
  io::NamedArrays all;
  for (io::DType dtype : npy_dtypes)
    for (const auto& shape : shapes) {
      const io::Array array = random_array(dtype, shape, random);
      io::write_npy(dir + "/npy/seed" + std::to_string(file) + ".npy", array, file % 2 == 1);
      all.emplace_back("a" + std::to_string(file++), array);
    }
  io::write_npz(dir + "/npy/stored.npz", io::NamedArrays(all.begin(), all.begin() + 4), io::Compression::stored);
  io::write_npz(dir + "/npy/deflated.npz", io::NamedArrays(all.begin() + 4, all.begin() + 8));
  for (int i = 0; i < 4; ++i) {
    io::NamedArrays tensors;
    for (int t = 0; t < 3; ++t) {
      const auto dtype = static_cast<io::DType>((3 * i + t) % 7);
      tensors.emplace_back("t" + std::to_string(t), random_array(dtype, shapes[static_cast<std::size_t>(t + i) % 5], random));
    }
    std::map<std::string, std::string> metadata;
    if (i % 2 == 0) metadata["format"] = "pt";
    io::write_safetensors(dir + "/safetensors/seed" + std::to_string(i) + ".safetensors", tensors, metadata);
  }
  for (int version : {0, 1, 2})
    for (bool shared : {true, false}) {
      io::LlamaWeights w;
      w.config = {8, 12, 1, 2, 1, 6, 3, shared};
      io::detail::llama_allocate(w);
      fill(w, random);
      io::write_llama2c(dir + "/llama2c/v" + std::to_string(version) + (shared ? "_shared" : "_unshared") + ".bin", w,
                        version, 4);
    }
  std::printf("seed corpus written to %s\n", dir.c_str());
  return 0;
}
