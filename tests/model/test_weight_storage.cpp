// Weights kept in their stored format (model::WeightMatrix) and the one product with them (model/detail/linear.hpp):
// the exact widening of every float16 and bfloat16 value, views (transposed, blocks) against their float32 copies,
// the panel product against Eigen's one-call product bit for bit on every format and for 1 and 2 threads, the
// fixture folders converted to F32, F16 and BF16 loaded as views (no float32 copy) whose forward passes equal the
// forward of the widened weights, a non-finite stored weight named at first use, and the forward stopped after a
// layer without logits.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnscope/core/random.hpp"
#include "attnscope/io/huggingface.hpp"
#include "attnscope/io/safetensors.hpp"
#include "attnscope/kernels/gemm.hpp"
#include "attnscope/kernels/widen.hpp"
#include "attnscope/model/detail/linear.hpp"
#include "attnscope/model/huggingface.hpp"
#include "fixtures/hf_reference.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

namespace {

using attnscope::Index;
using attnscope::RowMatrix;
using attnscope::kernels::StoredFloat;
using attnscope::model::WeightMatrix;

/// The stored bytes of `values` in `format` (float32 values rounded to nearest even by Eigen's conversions).
std::vector<unsigned char> storage_bytes(const std::vector<float>& values, StoredFloat format) {
  std::vector<unsigned char> bytes(values.size() * attnscope::kernels::stored_float_size(format));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (format == StoredFloat::float32) {
      std::memcpy(bytes.data() + 4 * i, &values[i], 4);
    } else if (format == StoredFloat::float16) {
      const Eigen::half value(values[i]);
      std::memcpy(bytes.data() + 2 * i, &value, 2);
    } else {
      const Eigen::bfloat16 value(values[i]);
      std::memcpy(bytes.data() + 2 * i, &value, 2);
    }
  }
  return bytes;
}

/// A rows × cols view (or, `transposed`, the view of a cols × rows buffer transposed) of random normal values in
/// `format`, owning its buffer through the view's shared owner.
WeightMatrix random_weight_view(Index rows, Index cols, StoredFloat format, bool transposed, std::uint64_t seed) {
  attnscope::Random random(seed);
  std::vector<float> values(static_cast<std::size_t>(rows * cols));
  for (float& value : values) value = static_cast<float>(random.normal());
  auto bytes = std::make_shared<std::vector<unsigned char>>(storage_bytes(values, format));
  if (!transposed) return WeightMatrix::view(format, bytes->data(), rows, cols, bytes, "random");
  return WeightMatrix::view(format, bytes->data(), cols, rows, bytes, "random").transposed_view();
}

RowMatrix<float> random_activations(Index rows, Index cols, std::uint64_t seed) {
  attnscope::Random random(seed);
  RowMatrix<float> x(rows, cols);
  for (Index i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(random.normal());
  return x;
}

bool same_bits(const RowMatrix<float>& a, const RowMatrix<float>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(float) * std::size_t(a.size())) == 0;
}

/// Runs `body` with OpenMP limited to `threads` (no effect without OpenMP), restoring the previous maximum.
template <class Body>
auto with_threads(int threads, Body&& body) {
#if defined(_OPENMP)
  const int previous = omp_get_max_threads();
  omp_set_num_threads(threads);
  auto result = body();
  omp_set_num_threads(previous);
  return result;
#else
  (void)threads;
  return body();
#endif
}

const StoredFloat all_formats[] = {StoredFloat::float32, StoredFloat::float16, StoredFloat::bfloat16};

}  // namespace

TEST_CASE("widen: every float16 and bfloat16 bit pattern gives its exact float32 value", "[model][weights]") {
  // every pattern, then a few at an odd start; the storage is twice as long as the patterns because GCC, inlining
  // widen(), checks its float32 branch (4 bytes per element) against this buffer too
  const std::size_t pattern_count = 65536 + 5;
  std::vector<std::uint16_t> patterns(2 * pattern_count);
  for (std::size_t i = 0; i < pattern_count; ++i) patterns[i] = static_cast<std::uint16_t>(i * 40503u);
  for (std::size_t i = 0; i < 65536; ++i) patterns[i] = static_cast<std::uint16_t>(i);
  const auto* bytes = reinterpret_cast<const unsigned char*>(patterns.data());
  const Index count = static_cast<Index>(pattern_count);
  for (const StoredFloat format : {StoredFloat::float16, StoredFloat::bfloat16}) {
    std::vector<float> fast(pattern_count), reference(pattern_count);
    attnscope::kernels::widen(bytes, format, count, fast.data());
    attnscope::kernels::widen_reference(bytes, format, count, reference.data());
    // equal values, or both NaN (F16C quiets signalling NaNs, Eigen's scalar conversion may keep their payload)
    auto same = [](float a, float b) { return std::memcmp(&a, &b, 4) == 0 || (std::isnan(a) && std::isnan(b)); };
    for (std::size_t i = 0; i < fast.size(); ++i)
      if (!same(fast[i], reference[i])) FAIL("pattern " << patterns[i] << ": " << fast[i] << " != " << reference[i]);
    // an odd start and length: the vector loop and the scalar tail meet anywhere
    attnscope::kernels::widen(bytes + 2 * 3, format, 29, fast.data());
    for (std::size_t i = 0; i < 29; ++i) CHECK(same(fast[i], reference[i + 3]));
    for (std::size_t i = 0; i < 65536; ++i) {
      // independent definitions: bfloat16 = the upper half of a binary32; binary16 by its fields (IEEE 754 §3.4)
      const std::uint16_t bits = patterns[i];
      double expected;
      if (format == StoredFloat::bfloat16) {
        const std::uint32_t wide = std::uint32_t(bits) << 16;
        float value;
        std::memcpy(&value, &wide, 4);
        expected = value;
      } else {
        const int exponent = (bits >> 10) & 31, fraction = bits & 1023;
        const double sign = (bits >> 15) ? -1.0 : 1.0;
        expected = exponent == 0    ? sign * std::ldexp(fraction, -24)
                   : exponent == 31 ? (fraction ? std::nan("") : sign * INFINITY)
                                    : sign * std::ldexp(1024 + fraction, exponent - 25);
      }
      if (std::isnan(expected)) {
        CHECK(std::isnan(reference[i]));
      } else if (double(reference[i]) != expected || std::signbit(reference[i]) != std::signbit(expected)) {
        FAIL("pattern " << bits << ": " << reference[i] << " != " << expected);
      }
    }
  }
}

TEST_CASE("WeightMatrix: views, transposes and blocks read the stored values; owned copies are deep",
          "[model][weights]") {
  for (const StoredFloat format : all_formats) {
    const WeightMatrix view = random_weight_view(7, 5, format, false, 11);
    REQUIRE(view.is_view());
    CHECK(view.format() == format);
    const RowMatrix<float> dense = view.to_float32();
    CHECK(dense.allFinite());
    CHECK(view.transposed_view().to_float32() == RowMatrix<float>(dense.transpose()));
    CHECK(view.transposed_view().transposed_view().to_float32() == dense);
    CHECK(view.middle_rows(2, 3).to_float32() == dense.middleRows(2, 3));
    CHECK(view.middle_cols(1, 3).to_float32() == dense.middleCols(1, 3));
    CHECK(view.transposed_view().middle_cols(4, 2).to_float32() == RowMatrix<float>(dense.transpose().middleCols(4, 2)));
    CHECK(view.middle_cols(1, 3).transposed_view().middle_cols(2, 4).to_float32() ==
          RowMatrix<float>(dense.block(2, 1, 4, 3).transpose()));
    CHECK(view.row(3) == dense.row(3));
    CHECK(view(6, 4) == dense(6, 4));
    // the view's copies share the bytes: no copy of the stored matrix is made
    const WeightMatrix copy = view.middle_rows(1, 2);
    CHECK(copy.data() == view.data() + view.offset(1, 0) * attnscope::kernels::stored_float_size(format));
    CHECK_THROWS_AS(view.middle_rows(5, 3), attnscope::invalid_argument);
    CHECK_THROWS_AS(view.middle_cols(-1, 2), attnscope::invalid_argument);
  }
  WeightMatrix owned(RowMatrix<float>::Constant(2, 3, 1.5f));
  WeightMatrix copy = owned;
  copy.owned_float32()(0, 0) = -2;
  CHECK(owned(0, 0) == 1.5f);
  CHECK(!owned.is_view());
  CHECK(owned.transposed_view().rows() == 3);
  copy.resize(0, 0);
  CHECK(copy.size() == 0);
}

TEST_CASE("linear: the panel product equals Eigen's product of the widened weight within float32 rounding, and "
          "bit for bit for a row-major float32 weight on one thread",
          "[model][weights]") {
  std::uint64_t seed = 100;
  for (const StoredFloat format : all_formats)
    for (const bool transposed : {false, true})
      for (const Index out : {Index(5), Index(64), Index(200), Index(300), Index(701)})
        for (const Index depth : {Index(7), Index(96), Index(300)})
          for (const Index rows : {Index(1), Index(3), Index(130)}) {
            const WeightMatrix w = random_weight_view(out, depth, format, transposed, ++seed);
            const RowMatrix<float> x = random_activations(rows, depth, ++seed);
            const RowMatrix<float> dense = w.to_float32();
            const RowMatrix<float> expected = with_threads(1, [&] { return RowMatrix<float>(x * dense.transpose()); });
            // float32 accumulation over `depth` terms: |error| <= depth·u·Σ|x||w| (Higham, Accuracy and Stability
            // of Numerical Algorithms, 2nd ed., eq. 3.5), for both products: twice that between them
            const RowMatrix<float> bound =
                (x.cwiseAbs() * dense.cwiseAbs().transpose()).eval() * float(2 * depth * 6e-8) +
                RowMatrix<float>::Constant(rows, out, 1e-30f);
            INFO("format " << attnscope::kernels::stored_float_name(format) << ", transposed " << transposed << ", "
                           << rows << " x " << depth << " -> " << out);
            // (with the optional BLAS backend a float32 weight goes to cblas_sgemm instead: the bound only). On a
            // CPU with AVX2 and FMA every other product is attnscope's packed GEMM (kernels/gemm.hpp): then it has
            // the bits of that GEMM on the widened float32 weight, for any number of threads.
            const bool blas = format == StoredFloat::float32 && attnscope::model::detail::blas_backend;
            const bool packed = !blas && attnscope::kernels::gemm_avx2_available();
            const bool one_call = format == StoredFloat::float32 && !transposed && !blas && !packed;
            RowMatrix<float> packed_expected(rows, out);
            if (packed)
              attnscope::kernels::gemm_xwt<false>(
                  rows, x.data(), depth,
                  attnscope::kernels::StoredWeights{reinterpret_cast<const unsigned char*>(dense.data()),
                                                    StoredFloat::float32, out, depth, std::size_t(depth) * 4, false},
                  packed_expected.data(), out, {attnscope::kernels::GemmKernel::reference, 1});
            RowMatrix<float> first;
            for (const int threads : {1, 2}) {
              const RowMatrix<float> y =
                  with_threads(threads, [&] { return attnscope::model::detail::linear<float>(x, w); });
              if (one_call) CHECK(same_bits(y, with_threads(threads, [&] { return RowMatrix<float>(x * dense.transpose()); })));
              if (packed) CHECK(same_bits(y, packed_expected));
              CHECK(((y - expected).cwiseAbs().array() <= bound.array()).all());
              if (threads == 1) first = y;
              RowMatrix<float> accumulated = random_activations(rows, out, seed + 7);
              RowMatrix<float> expected_sum = accumulated;
              with_threads(1, [&] {
                expected_sum.noalias() += x * dense.transpose();
                return 0;
              });
              with_threads(threads, [&] {
                attnscope::model::detail::linear_add(accumulated, x, w);
                return 0;
              });
              CHECK(((accumulated - expected_sum).cwiseAbs().array() <= bound.array() + 1e-6f).all());
            }
          }
}

namespace {

/// A copy of fixture folder `name` whose float tensors are stored in `format` (values rounded to nearest even from
/// the fixture's own), under the build directory.
std::string fixture_in_format(const std::string& name, StoredFloat format) {
  namespace fs = std::filesystem;
  const fs::path target = fs::path(ATTNSCOPE_BINARY_DIR) / "model_test_folders" /
                          (name + "_" + attnscope::kernels::stored_float_name(format));
  fs::remove_all(target);
  fs::create_directories(target);
  const attnscope::io::DType dtype = format == StoredFloat::float32   ? attnscope::io::DType::float32
                                     : format == StoredFloat::float16 ? attnscope::io::DType::float16
                                                                      : attnscope::io::DType::bfloat16;
  for (const auto& entry : fs::directory_iterator(attnscope::testing::hf_fixture_folder(name))) {
    const fs::path file = entry.path();
    if (file.extension() != ".safetensors") {
      fs::copy_file(file, target / file.filename());
      continue;
    }
    attnscope::io::SafetensorsContents contents = attnscope::io::read_safetensors_contents(file.string());
    for (auto& [tensor_name, array] : contents.tensors) {
      const attnscope::io::DType stored = array.dtype();
      if (stored != attnscope::io::DType::float32 && stored != attnscope::io::DType::float16 &&
          stored != attnscope::io::DType::bfloat16)
        continue;
      const std::int64_t count = static_cast<std::int64_t>(array.bytes().size() / attnscope::io::dtype_size(stored));
      std::vector<float> values(static_cast<std::size_t>(count));
      attnscope::io::detail::convert_to_float32(array.bytes().data(), stored, count, file.string(), tensor_name,
                                                values.data());
      array = attnscope::io::Array(dtype, array.shape(), storage_bytes(values, format));
    }
    attnscope::io::write_safetensors((target / file.filename()).string(), contents.tensors, contents.metadata);
  }
  return target.string();
}

/// The same weights with every matrix replaced by its owned float32 copy: what a widening loader produces.
attnscope::model::TransformerWeights widened(attnscope::model::TransformerWeights weights) {
  auto widen = [](WeightMatrix& w) { w = WeightMatrix(w.to_float32()); };
  widen(weights.token_embedding);
  widen(weights.position_embedding);
  widen(weights.classifier);
  for (auto& layer : weights.layers)
    for (WeightMatrix* w : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w1, &layer.w2, &layer.w3}) widen(*w);
  return weights;
}

}  // namespace

TEST_CASE("fixture folders in F32, F16 and BF16 load as views in their format and run the forward pass of their "
          "widened weights bit for bit",
          "[model][weights][huggingface]") {
  const std::vector<int> tokens{3, 17, 2, 30, 9, 4, 11};
  for (const std::string name : {"gpt2", "llama", "qwen2"})
    for (const StoredFloat format : all_formats) {
      INFO(name << " in " << attnscope::kernels::stored_float_name(format));
      const std::string folder = fixture_in_format(name, format);
      const attnscope::model::Transformer stored = attnscope::model::load_huggingface_model(folder);
      const auto& weights = stored.weights();
      // No float32 copy: every matrix is a view of the mapped shard in the stored format.
      std::vector<const WeightMatrix*> matrices{&weights.token_embedding};
      if (weights.position_embedding.size() > 0) matrices.push_back(&weights.position_embedding);
      if (weights.classifier.size() > 0) matrices.push_back(&weights.classifier);
      for (const auto& layer : weights.layers)
        for (const WeightMatrix* w : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w1, &layer.w2, &layer.w3})
          if (w->size() > 0) matrices.push_back(w);
      for (const WeightMatrix* w : matrices) {
        CHECK(w->format() == format);
        // GPT-2's Conv1D weights in F32 are the exception, see below
        CHECK(w->is_view() == (name != "gpt2" || format != StoredFloat::float32 || w == matrices[0] || w == matrices[1]));
      }
      // GPT-2's Conv1D weights: transposed views, except F32 ones, kept in the row-major layout of the float32 forward
      CHECK(weights.layers[0].wq.transposed() == (name == "gpt2" && format != StoredFloat::float32));
      if (format == StoredFloat::float32 && name == "gpt2") CHECK(!weights.layers[0].wq.is_view());
      const attnscope::model::Transformer reference(widened(weights));
      attnscope::model::ForwardOptions options;
      options.capture = attnscope::model::CaptureOptions::everything();
      const auto theirs = with_threads(1, [&] { return reference.forward(tokens, options); });
      const double scale = 1 + theirs.logits.cwiseAbs().maxCoeff();
      for (const int threads : {1, 2}) {
        INFO(threads << " threads");
        const auto ours = with_threads(threads, [&] { return stored.forward(tokens, options); });
        const auto streamed = with_threads(threads, [&] { return stored.forward_row_statistics(tokens); });
        if (format == StoredFloat::float32 && threads == 1) {
          // an F32 folder: bit for bit the forward of the float32 weights
          CHECK(same_bits(ours.logits, theirs.logits));
          CHECK(same_bits(streamed.logits, theirs.logits));
          for (std::size_t l = 0; l < ours.layers.size(); ++l)
            for (std::size_t h = 0; h < ours.layers[l].q.size(); ++h)
              CHECK(same_bits(ours.layers[l].attention[h], theirs.layers[l].attention[h]));
        }
        // float32 rounding of a few layers' products: relative 1e-5 of the logits' scale
        CHECK((ours.logits - theirs.logits).cwiseAbs().maxCoeff() <= 1e-5 * scale);
        CHECK((streamed.logits - theirs.logits).cwiseAbs().maxCoeff() <= 1e-5 * scale);
      }
      // against the independent PyTorch reference of the original fixture: rounding the weights to F16/BF16 moves
      // the logits by about the weights' relative precision (2^-11, 2^-8) times a few layers' growth
      const attnscope::testing::HfReference original = attnscope::testing::read_hf_reference(name);
      const auto logits = stored.forward(std::vector<int>(original.tokens.begin(), original.tokens.end())).logits;
      const double relative = format == StoredFloat::bfloat16 ? 2e-2 : format == StoredFloat::float16 ? 3e-3 : 1e-4;
      const double gap = (logits.cast<double>() - original.logits).cwiseAbs().maxCoeff();
      INFO("largest logit gap " << gap);
      CHECK(gap <= relative * (1 + original.logits.cwiseAbs().maxCoeff()));
    }
}

TEST_CASE("a non-finite weight read in place is named at its first use", "[model][weights][errors]") {
  namespace fs = std::filesystem;
  const std::string folder = fixture_in_format("qwen2", StoredFloat::bfloat16);
  const attnscope::model::Transformer clean = attnscope::model::load_huggingface_model(folder);
  const std::string stored_name = clean.weights().layers[1].w2.name();
  // Overwrite element 5 of layers.1.mlp.down_proj.weight with a bfloat16 NaN in the shard.
  const std::string shard = folder + "/model.safetensors";
  {
    attnscope::io::SafetensorsContents contents = attnscope::io::read_safetensors_contents(shard);
    for (auto& [tensor_name, array] : contents.tensors)
      if (stored_name.rfind(tensor_name + " in ", 0) == 0) {
        std::vector<unsigned char> bytes = array.bytes();
        bytes[2 * 5] = 0xc0;
        bytes[2 * 5 + 1] = 0x7f;
        array = attnscope::io::Array(array.dtype(), array.shape(), bytes);
      }
    attnscope::io::write_safetensors(shard + ".new", contents.tensors, contents.metadata);
  }
  fs::rename(shard + ".new", shard);
  const attnscope::model::Transformer broken = attnscope::model::load_huggingface_model(folder);  // loads: lazy
  using Catch::Matchers::Contains;
  CHECK_THAT(attnscope::testing::error_message([&] { broken.forward({1, 2, 3}); }),
             Contains("attnscope::linear: weight 'model.layers.1.mlp.down_proj.weight in ") &&
                 Contains("holds the non-finite value nan at (0, 5)"));
}

TEST_CASE("the forward stops after options.last_layer, skips the logits on request and reports each layer",
          "[model][weights][streaming]") {
  const attnscope::model::Transformer model =
      attnscope::model::load_huggingface_model(attnscope::testing::hf_fixture_folder("llama"));
  const std::vector<int> tokens{1, 5, 9, 14, 3, 8};
  const auto full = model.forward_row_statistics(tokens);
  attnscope::model::ForwardOptions options;
  options.last_layer = 0;
  std::vector<std::pair<int, int>> progress;
  options.layer_progress = [&](int done, int total) { progress.emplace_back(done, total); };
  const auto first = model.forward_row_statistics(tokens, options);
  CHECK(first.logits.size() == 0);
  CHECK(progress == std::vector<std::pair<int, int>>{{1, 1}});
  REQUIRE(first.row_statistics[0].size() == full.row_statistics[0].size());
  for (std::size_t h = 0; h < full.row_statistics[0].size(); ++h)
    CHECK(first.row_statistics[0][h].entropy == full.row_statistics[0][h].entropy);
  for (std::size_t l = 1; l < first.row_statistics.size(); ++l) CHECK(first.row_statistics[l].empty());
  options = {};
  options.logits = false;
  const auto no_logits = model.forward(tokens, options);
  CHECK(no_logits.logits.size() == 0);
  options.last_layer = model.config().n_layers;
  CHECK_THROWS_AS(model.forward(tokens, options), attnscope::invalid_argument);
  options.last_layer = model.config().n_layers - 1;
  options.logits = true;
  CHECK(model.forward(tokens, options).logits == full.logits);
}
