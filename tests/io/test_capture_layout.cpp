// Tests of io/capture_layout.hpp: the names of the layout (built and parsed), stack_heads, the layout version written
// with the arrays (safetensors metadata, NPZ array) and checked when read (unknown versions, malformed entries,
// unversioned files = version 1), and the Q/K layers rowstats reads.
#include <string>
#include <vector>

#include "attnscope/io/array_file.hpp"
#include "attnscope/io/capture_layout.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/safetensors.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {

std::string layout_test_path(const std::string& name) { return std::string(ATTNSCOPE_BINARY_DIR) + "/" + name; }

}  // namespace

TEST_CASE("capture layout names are built and parsed by one pair of functions") {
  namespace io = attnscope::io;
  CHECK(io::layer_array_name(0, io::capture_part::attention) == "layer0.attention");
  CHECK(io::layer_array_name(12, "entropy") == "layer12.entropy");
  for (const attnscope::Index layer : {0, 3, 10, 123456}) {
    for (const char* part : {io::capture_part::q, io::capture_part::scores, "top8_mass", "a.b"}) {
      const auto parsed = io::parse_layer_array_name(io::layer_array_name(layer, part));
      REQUIRE(parsed);
      CHECK(parsed->layer == layer);
      CHECK(parsed->part == part);
    }
  }
  for (const char* name : {"layer.q", "layer0", "layer0.", "layerx.q", "Layer0.q", "attention", "layer-1.q", "xlayer0.q"})
    CHECK_FALSE(io::parse_layer_array_name(name));
}

TEST_CASE("stack_heads stacks equal-shaped heads in order and refuses mismatches") {
  namespace io = attnscope::io;
  std::vector<attnscope::RowMatrix<float>> heads;
  for (int h = 0; h < 3; ++h) heads.push_back(attnscope::RowMatrix<float>::Constant(2, 4, static_cast<float>(h)));
  heads[1](1, 3) = 7;
  const io::Array stacked = io::stack_heads(heads);
  CHECK(stacked.dtype() == io::DType::float32);
  CHECK(stacked.shape() == std::vector<std::int64_t>{3, 2, 4});
  for (int h = 0; h < 3; ++h) CHECK(stacked.slice_matrix<float>({h}) == heads[static_cast<std::size_t>(h)]);
  CHECK(io::stack_heads(std::vector<attnscope::RowMatrix<double>>{attnscope::RowMatrix<double>::Ones(1, 1)}).dtype() ==
        io::DType::float64);
  heads[2].resize(2, 3);
  CHECK(attnscope::testing::error_message([&] { io::stack_heads(heads); }) ==
        "attnscope::stack_heads: head 2 is 2x3, head 0 is 2x4");
  CHECK(attnscope::testing::error_message([] { io::stack_heads(std::vector<attnscope::RowMatrix<float>>{}); }) ==
        "attnscope::stack_heads: no heads to stack");
}

TEST_CASE("write_capture_file records the layout version and capture_file_layout_version checks it") {
  namespace io = attnscope::io;
  using attnscope::testing::error_message;
  const io::NamedArrays arrays{{io::layer_array_name(0, io::capture_part::attention),
                                io::Array::from_vector(std::vector<float>(4, 0.5f), {1, 2, 2})}};
  const std::string npz = layout_test_path("test_capture_layout.npz");
  const std::string tensors = layout_test_path("test_capture_layout.safetensors");
  io::write_capture_file(npz, arrays);
  io::write_capture_file(tensors, arrays, {{"model", "m"}});
  {
    const io::ArrayFile file(npz);
    CHECK(io::capture_file_layout_version(file) == io::capture_layout_version);
    CHECK(file.at(io::capture_layout_key).to_array().to_vector<std::int32_t>() ==
          std::vector<std::int32_t>{io::capture_layout_version});
  }
  {
    const io::ArrayFile file(tensors);
    CHECK(io::capture_file_layout_version(file) == io::capture_layout_version);
    CHECK(file.metadata().at(io::capture_layout_key) == std::to_string(io::capture_layout_version));
    CHECK(file.metadata().at("model") == "m");
    CHECK_FALSE(file.contains(io::capture_layout_key));
  }
  // Unversioned files are version 1.
  io::write_npz(npz, arrays);
  CHECK(io::capture_file_layout_version(io::ArrayFile(npz)) == 1);
  // Unknown and malformed versions.
  const auto version_error = [&](const io::NamedArrays& written, const std::map<std::string, std::string>& metadata,
                                 bool as_safetensors) {
    if (as_safetensors) io::write_safetensors(tensors, written, metadata);
    else io::write_npz(npz, written);
    return error_message<attnscope::io_error>([&] { io::capture_file_layout_version(io::ArrayFile(as_safetensors ? tensors : npz)); });
  };
  auto with = [&](io::Array version) {
    io::NamedArrays out = arrays;
    out.emplace_back(io::capture_layout_key, std::move(version));
    return out;
  };
  const std::string newer = std::to_string(io::capture_layout_version + 1);
  CHECK(version_error(arrays, {{io::capture_layout_key, newer}}, true) ==
        "attnscope::capture_file_layout_version: " + tensors + ": has capture layout version " + newer + " (" +
            io::capture_layout_key + " metadata entry); this attnscope reads versions 1 to " +
            std::to_string(io::capture_layout_version) + " (written by a newer attnscope?)");
  // a version-1 file (written before learned sinks and routing existed) still reads
  CHECK(version_error(arrays, {{io::capture_layout_key, "1"}}, true).empty());
  CHECK(version_error(arrays, {{io::capture_layout_key, "0"}}, true).find("has capture layout version 0") !=
        std::string::npos);
  CHECK(version_error(arrays, {{io::capture_layout_key, "1.5"}}, true).find("= '1.5' in its metadata") !=
        std::string::npos);
  CHECK(version_error(with(io::Array::from_vector(std::vector<std::int64_t>{9}, {1})), {}, false)
            .find("has capture layout version 9 (" + std::string(io::capture_layout_key) + " array)") != std::string::npos);
  CHECK(version_error(with(io::Array::from_vector(std::vector<float>{1}, {1})), {}, false)
            .find("of dtype float32 and shape [1]; expected one int32") != std::string::npos);
  CHECK(version_error(with(io::Array::from_vector(std::vector<std::int32_t>{1, 1}, {2})), {}, false)
            .find("shape [2]") != std::string::npos);
  // The name is reserved, the extension chooses the format.
  CHECK(error_message([&] { io::write_capture_file(npz, with(io::Array::from_vector(std::vector<std::int32_t>{1}, {1}))); })
            .find("is reserved") != std::string::npos);
  CHECK(error_message([&] { io::write_capture_file(layout_test_path("capture.bin"), arrays); })
            .find("must end in .npz or .safetensors") != std::string::npos);
}

TEST_CASE("query_key_layers finds the capture's per-layer q and k, or bare q and k") {
  namespace io = attnscope::io;
  using attnscope::testing::error_message;
  const io::Array heads = io::Array::from_vector(std::vector<float>(2 * 3 * 4, 0.25f), {2, 3, 4});
  const std::string path = layout_test_path("test_query_key_layers.npz");
  io::write_capture_file(path, {{"layer1.q", heads}, {"layer1.k", heads}, {"layer0.k", heads}, {"layer0.q", heads},
                                {"layer0.attention", heads}});
  {
    const io::ArrayFile file(path);
    const auto layers = io::query_key_layers(file);
    REQUIRE(layers.size() == 2);
    CHECK(layers[0].layer == 0);
    CHECK(layers[0].q->name() == "layer0.q");
    CHECK(layers[1].k->name() == "layer1.k");
  }
  io::write_npz(path, {{"q", heads}, {"k", heads}});
  {
    const io::ArrayFile file(path);
    const auto layers = io::query_key_layers(file);
    REQUIRE(layers.size() == 1);
    CHECK(layers[0].q->name() == "q");
  }
  io::write_npz(path, {{"layer3.q", heads}});
  CHECK(error_message<attnscope::io_error>([&] { io::query_key_layers(io::ArrayFile(path)); }) ==
        "attnscope::query_key_layers: " + path + ": has layer3.q but no layer3.k");
  io::write_npz(path, {{"q", heads}});
  CHECK(error_message<attnscope::io_error>([&] { io::query_key_layers(io::ArrayFile(path)); })
            .find("holds neither layer0.q / layer0.k") != std::string::npos);
}
