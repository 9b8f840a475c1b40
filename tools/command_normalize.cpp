// tools/command_normalize.cpp — `attnscope normalize`: apply a normalization
// map to every row of an NPY array. Documented in docs/cli.md.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnscope/io/npy.hpp"
#include "attnscope/normalize/maps.hpp"
#include "commands.hpp"
#include "input_format.hpp"

namespace attnscope::cli {
namespace {

constexpr const char* normalize_usage =
    R"(usage: attnscope normalize --map NAME[:PARAM] IN.npy -o OUT.npy

Applies a normalization map to every row (last axis) of an NPY array of any rank >= 1 (recognised by its content;
a scalar is an error, exit code 1). Entries equal to -inf are
treated as masked (weight exactly 0); NaN or +inf entries, and rows with every entry masked, are errors.
float32 input gives float32 output; float64 and integer input give float64.

Options:
  --map NAME    softmax, temperature:T, ssmax:S, sparsemax, entmax15, entmax:ALPHA, sa_softmax,
                sa_softmax_normalized, sink, sink:LOGIT
  -o, --out FILE  output .npy
  --threads N   OpenMP threads (default 1; 0 = OpenMP default)
  --help        this text
)";

template <class Scalar>
io::Array normalize_rows(const attnscope::NormalizationMap& map, const io::Array& input) {
  const auto& shape = input.shape();
  const std::int64_t cols = shape.back();
  const std::int64_t rows = cols == 0 ? 0 : input.element_count() / cols;
  if (rows == 0 || cols == 0)
    attnscope::detail::throw_invalid_argument("normalize", "empty array of shape ", io::detail::shape_string(shape));
  const std::vector<Scalar> values = input.to_vector<Scalar>();
  const Eigen::Map<const RowMatrix<Scalar>> logits(values.data(), rows, cols);
  attnscope::Mask mask(rows, cols);
  bool masked = false;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      mask(i, j) = !(std::isinf(logits(i, j)) && logits(i, j) < 0);
      masked = masked || !mask(i, j);
    }
  const attnscope::Visibility visibility = masked ? attnscope::Visibility(mask) : attnscope::Visibility();
  const RowMatrix<Scalar> weights = attnscope::apply_map(map, logits, visibility);
  return io::Array::from_vector(std::vector<Scalar>(weights.data(), weights.data() + weights.size()), shape);
}

int command_normalize(int argc, char** argv) {
  Arguments arguments;
  arguments.value_option("map").value_option("out", "-o");
  if (parse_subcommand(arguments, argc, argv, normalize_usage)) return 0;
  if (arguments.positional().size() != 1) throw usage_error("expected exactly one input .npy file");
  const std::string map_text = arguments.require("map");
  std::optional<attnscope::NormalizationMap> parsed_map;
  try {
    parsed_map = attnscope::parse_normalization_map(map_text);
  } catch (const attnscope::invalid_argument& error) {  // a bad option value is a usage error
    throw usage_error(std::string("--map: ") + error.what());
  }
  const attnscope::NormalizationMap map = *parsed_map;
  const std::string out = arguments.require("out");
  check_output_options(arguments, {"out"});
  const std::string path = arguments.positional()[0];
  require_input_format("normalize", path, {io::FileFormat::npy}, "an NPY array");
  const io::Array input = io::read_npy(path);
  if (input.rank() == 0)  // a data error (exit 1), not a usage error
    attnscope::detail::throw_invalid_argument("normalize", path, " holds a scalar; need an array of rank >= 1");
  io::Array output;
  try {
    output = input.dtype() == io::DType::float32 ? normalize_rows<float>(map, input) : normalize_rows<double>(map, input);
  } catch (const attnscope::invalid_argument& error) {  // a non-finite logit, a row with every key masked: name the file
    attnscope::detail::throw_invalid_argument("normalize", path, ": ", error.what());
  }
  io::write_npy(out, output, false, temporary_files());
  return 0;
}

}  // namespace

const Command& normalize_command() {
  static const Command command{"normalize", "apply a normalization map row-wise to an NPY array", normalize_usage,
                               command_normalize};
  return command;
}

}  // namespace attnscope::cli
