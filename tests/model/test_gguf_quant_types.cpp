// The codebook and ternary ggml types (IQ4_NL, IQ4_XS, MXFP4, TQ1_0, TQ2_0, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
// IQ1_S, IQ1_M; kernels/dequantize_iq.hpp) as model weights: WeightMatrix views of the gguf-py-checked fixture blocks
// read, slice and multiply like their dequantized values, and a GGUF model whose weight matrices have these types
// loads and gives the logits of the same model with those matrices stored as F32 copies of their values.
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/gguf.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/model/detail/linear.hpp"
#include "attnscope/model/gguf.hpp"
#include "fixtures/gguf_fixtures.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::io::GgmlType;
using attnscope::kernels::StoredFloat;
using attnscope::model::WeightMatrix;
using attnscope::testing::error_message;
using attnscope::testing::gguf_fixture;
using Catch::Matchers::Contains;

const StoredFloat codebook_formats[] = {StoredFloat::iq4_nl,  StoredFloat::iq4_xs, StoredFloat::mxfp4,
                                        StoredFloat::tq1_0,   StoredFloat::tq2_0,  StoredFloat::iq2_xxs,
                                        StoredFloat::iq2_xs,  StoredFloat::iq2_s,  StoredFloat::iq3_xxs,
                                        StoredFloat::iq3_s,   StoredFloat::iq1_s,  StoredFloat::iq1_m};

/// `rows` × `cols` of random blocks of `format` whose scale is small: the fp16 d (or IQ1_M's four nibbles, MXFP4's
/// E8M0 byte) set to about 0.01 / (the largest level of the format), so that the weights are O(0.01)–O(0.1).
std::string random_weight_bytes(StoredFloat format, Index rows, Index cols, std::mt19937_64& random) {
  const auto& info = attnscope::kernels::stored_format_info(format);
  const Index blocks = rows * cols / info.block_elements;
  std::string bytes(static_cast<std::size_t>(blocks) * info.block_bytes, '\0');
  std::uniform_int_distribution<int> byte(0, 255);
  for (char& c : bytes) c = static_cast<char>(byte(random));
  for (Index b = 0; b < blocks; ++b) {
    unsigned char* block = reinterpret_cast<unsigned char*>(&bytes[static_cast<std::size_t>(b) * info.block_bytes]);
    const float d = format == StoredFloat::iq4_nl || format == StoredFloat::iq4_xs ? 1e-4f
                    : format == StoredFloat::tq1_0 || format == StoredFloat::tq2_0 ? 0.02f
                                                                                  : 2e-3f;
    const Eigen::half h(d * (1 + 0.5f * float(b % 3)));
    std::uint16_t bits;
    std::memcpy(&bits, &h, 2);
    if (format == StoredFloat::mxfp4) {
      block[0] = 120;  // 2^(120 − 127): levels up to 6 · 2⁻⁷
    } else if (format == StoredFloat::iq1_m) {
      for (int k = 0; k < 4; ++k) block[49 + 2 * k] = static_cast<unsigned char>((block[49 + 2 * k] & 0x0f) |
                                                                                  (((bits >> (4 * k)) & 15) << 4));
    } else {
      const std::size_t at = format == StoredFloat::tq1_0 ? 52 : format == StoredFloat::tq2_0 ? 64 : 0;
      std::memcpy(block + at, &bits, 2);
    }
  }
  return bytes;
}

}  // namespace

TEST_CASE("GGUF: codebook and ternary WeightMatrix views read, slice and multiply like their dequantized values",
          "[model][gguf][weights]") {
  const auto file = std::make_shared<attnscope::io::GgufFile>(gguf_fixture("quant_blocks.gguf"));
  const auto reference = attnscope::io::read_npz(gguf_fixture("quant_blocks_reference.npz"));
  for (const StoredFloat format : codebook_formats) {
    const std::string name = std::string("random.") + attnscope::kernels::stored_float_name(format);
    INFO(name);
    const WeightMatrix w = WeightMatrix::view(format, file->tensor(name).data, 3, 512, file, name);
    const RowMatrix<float> expected = reference.at(name).to_matrix<float>();
    CHECK(w.to_float32() == expected);
    CHECK(w.middle_cols(256, 256).to_float32() == expected.rightCols(256));
    CHECK(w.middle_rows(1, 2).to_float32() == expected.bottomRows(2));
    // the panel product: equal to the product with the dequantized values to float32 rounding; MXFP4's random
    // E8M0 bytes include 254 and 255, whose largest values overflow to ±inf, which the product refuses by name
    RowMatrix<float> x(4, 512);
    attnscope::Random random(11);
    for (Index i = 0; i < x.size(); ++i) x.data()[i] = float(random.normal());
    if (!expected.allFinite()) {
      CHECK_THAT(error_message([&] { (void)attnscope::model::detail::linear<float>(x, w); }),
                 Contains(name) && Contains("non-finite"));
      continue;
    }
    const RowMatrix<float> y = attnscope::model::detail::linear<float>(x, w);
    for (Index r = 0; r < 3; ++r) {
      const Eigen::VectorXd exact = x.cast<double>() * expected.row(r).cast<double>().transpose();
      const double scale =
          (x.cast<double>().cwiseAbs() * expected.row(r).cast<double>().cwiseAbs().transpose()).maxCoeff();
      CHECK((y.col(r).cast<double>() - exact).cwiseAbs().maxCoeff() <= 1e-6 * scale);
    }
  }
}

TEST_CASE("GGUF: a model with codebook and ternary weight matrices gives the logits of its F32 copy", "[model][gguf]") {
  // llama_q4k_f16.gguf: one llama layer of width 256 (attn_q, attn_k, attn_v, ffn_gate, ffn_up read 256-wide rows;
  // attn_output and ffn_down 32-wide ones); its matrices replaced by random blocks of the new types
  const attnscope::io::GgufFile base(gguf_fixture("llama_q4k_f16.gguf"));
  const std::map<std::string, StoredFloat> types_a = {
      {"blk.0.attn_q.weight", StoredFloat::iq2_xxs}, {"blk.0.attn_k.weight", StoredFloat::iq3_s},
      {"blk.0.attn_v.weight", StoredFloat::iq4_xs},  {"blk.0.ffn_gate.weight", StoredFloat::tq1_0},
      {"blk.0.ffn_up.weight", StoredFloat::iq1_m},   {"blk.0.attn_output.weight", StoredFloat::mxfp4},
      {"blk.0.ffn_down.weight", StoredFloat::iq4_nl}};
  const std::map<std::string, StoredFloat> types_b = {
      {"blk.0.attn_q.weight", StoredFloat::iq2_xs},   {"blk.0.attn_k.weight", StoredFloat::iq3_xxs},
      {"blk.0.attn_v.weight", StoredFloat::iq2_s},    {"blk.0.ffn_gate.weight", StoredFloat::tq2_0},
      {"blk.0.ffn_up.weight", StoredFloat::iq1_s},    {"blk.0.attn_output.weight", StoredFloat::iq4_nl},
      {"blk.0.ffn_down.weight", StoredFloat::mxfp4}};
  std::mt19937_64 random(2026);
  for (const auto* types : {&types_a, &types_b}) {
    std::vector<attnscope::io::GgufTensorBytes> quantized, copy;
    for (const attnscope::io::GgufTensor& t : base.tensors()) {
      std::string bytes(reinterpret_cast<const char*>(t.data), t.byte_count);
      const auto found = types->find(t.name);
      if (found == types->end()) {
        quantized.push_back({t.name, t.dims, t.type, bytes});
        copy.push_back({t.name, t.dims, t.type, bytes});
        continue;
      }
      const Index rows = Index(t.row_count()), cols = Index(t.row_length());
      const StoredFloat format = found->second;
      const std::string blocks = random_weight_bytes(format, rows, cols, random);
      const GgmlType type = GgmlType(attnscope::kernels::stored_format_info(format).ggml_type);
      quantized.push_back({t.name, t.dims, type, blocks});
      std::string floats(static_cast<std::size_t>(rows * cols) * 4, '\0');
      attnscope::kernels::widen_reference(reinterpret_cast<const unsigned char*>(blocks.data()), format, rows * cols,
                                          reinterpret_cast<float*>(&floats[0]));
      copy.push_back({t.name, t.dims, GgmlType::f32, floats});
    }
    const std::string stem = std::string(ATTNSCOPE_BINARY_DIR) + "/gguf_codebook_" + (types == &types_a ? "a" : "b");
    attnscope::io::write_file(stem + ".gguf", attnscope::io::serialize_gguf(base.metadata(), quantized));
    attnscope::io::write_file(stem + "_f32.gguf", attnscope::io::serialize_gguf(base.metadata(), copy));
    const auto model = attnscope::model::load_gguf_model(stem + ".gguf");
    const auto reference = attnscope::model::load_gguf_model(stem + "_f32.gguf");
    const std::vector<int> tokens = {1, 5, 9, 33, 2, 60, 17, 17, 4, 40};
    const RowMatrix<float> logits = model.forward(tokens).logits, expected = reference.forward(tokens).logits;
    REQUIRE(expected.allFinite());
    const double scale = expected.cwiseAbs().maxCoeff();
    CHECK(scale > 0.1);
    CHECK((logits - expected).cwiseAbs().maxCoeff() <= 1e-5 * scale);
  }
}
