// Bindings of the normalize module (namespace attnscope): the normalization maps, their JVP/VJP and dense Jacobians,
// the exact spectral norms and their bounds, row_entropy and the map descriptions.
#include <cmath>
#include <limits>

#include <attnscope/normalize.hpp>

#include "common.hpp"

namespace attnscope_python {

using namespace pybind11::literals;

namespace {

const char* const visibility_doc = R"(
    causal: False (every key) or True (row i sees keys 0..i); applies to the last two axes (rows = queries, columns
        = keys) of every matrix of the batch. causal_offset: with causal=True, row i sees keys 0..i+k. causal=True
        on rows != cols needs causal_offset (0: top-left alignment, cols - rows: bottom-right, the queries are the
        last positions); without it the call is refused, never guessed.
    mask: optional boolean array, True = visible; shape (rows, cols) shared by every matrix, or the logits' shape.
        Masked entries come out exactly 0 and do not count in n. Not together with causal.)";

std::string doc(const std::string& head, const std::string& tail = "") { return head + visibility_doc + tail; }

const char* const matrix_result = R"(

Input: logits of shape (..., rows, cols) or (cols,), float32 or float64 (other dtypes are converted to float64
once; C-contiguous float32/float64 input is read in place, without a copy). Applied row-wise over the last axis.
Returns: a new array of the logits' shape and dtype. The GIL is released during the computation.
Raises ValueError (attnscope::invalid_argument) on empty input, NaN/Inf at a visible position, bad parameters,
a mask of the wrong shape or a row with every key masked.)";

const char* const vector_result = R"(

Input: shape (..., rows, cols) or (cols,), float32 or float64 (others converted to float64; C-contiguous input is
read without a copy). Returns: one value per row, an array of shape input.shape[:-1] and the input's dtype.
The GIL is released during the computation. Raises ValueError (attnscope::invalid_argument) on bad input.)";

}  // namespace

/// Raises attnscope::invalid_argument (ValueError) for a row of `rows` whose visible weights do not sum to 1
/// within 2u + k·2^-24 (u = unit roundoff of T, k = visible keys; the rule of the report's row check). Negative
/// and non-finite weights are left to row_entropy, which names them.
template <class Derived>
void check_rows_are_distributions(const Eigen::MatrixBase<Derived>& rows, const Visibility& visibility) {
  using T = typename Derived::Scalar;
  const Index cols = rows.cols();
  for (Index i = 0; i < rows.rows(); ++i) {
    double sum = 0;
    Index visible = 0;
    for (Index j = 0; j < cols; ++j)
      if (visibility.visible(i, j, cols)) {
        sum += static_cast<double>(rows(i, j));
        ++visible;
      }
    if (!std::isfinite(sum)) continue;  // row_entropy names the non-finite weight
    const double tolerance = static_cast<double>(std::numeric_limits<T>::epsilon()) + double(visible) * std::ldexp(1.0, -24);
    if (std::abs(sum - 1) > tolerance)
      attnscope::detail::throw_invalid_argument("row_entropy", "row ", i, " sums to ", sum,
                                                ", not 1 (tolerance ", tolerance,
                                                "): not a distribution; normalize it first (e.g. softmax)");
  }
}

void bind_normalize(py::module_& m) {
  using namespace attnscope;

  py::enum_<SelfAdjustVariant>(m, "SelfAdjustVariant", "Variant of Self-Adjust Softmax (sa_softmax).")
      .value("basic", SelfAdjustVariant::basic)
      .value("normalized", SelfAdjustVariant::normalized);

  // Map descriptions: value types; each also accepted as its text form wherever a map is expected.
  py::class_<SoftmaxMap>(m, "SoftmaxMap", "softmax(z/T), T > 0.")
      .def(py::init([](double temperature) { return SoftmaxMap{temperature}; }), "temperature"_a = 1.0)
      .def_readwrite("temperature", &SoftmaxMap::temperature)
      .def("__repr__", [](const SoftmaxMap& map) { return "SoftmaxMap('" + to_string(NormalizationMap(map)) + "')"; });
  py::class_<SparsemaxMap>(m, "SparsemaxMap", "sparsemax (2-entmax).")
      .def(py::init<>())
      .def("__repr__", [](const SparsemaxMap&) { return std::string("SparsemaxMap()"); });
  py::class_<Entmax15Map>(m, "Entmax15Map", "exact 1.5-entmax.")
      .def(py::init<>())
      .def("__repr__", [](const Entmax15Map&) { return std::string("Entmax15Map()"); });
  py::class_<EntmaxBisectMap>(m, "EntmaxBisectMap", "alpha-entmax by bisection, alpha > 1.")
      .def(py::init([](double alpha) { return EntmaxBisectMap{alpha}; }), "alpha"_a = 1.5)
      .def_readwrite("alpha", &EntmaxBisectMap::alpha)
      .def("__repr__", [](const EntmaxBisectMap& map) { return "EntmaxBisectMap(alpha=" + std::to_string(map.alpha) + ")"; });
  py::class_<ScalableSoftmaxMap>(m, "ScalableSoftmaxMap", "Scalable-Softmax softmax((s log n) z), s > 0.")
      .def(py::init([](double s) { return ScalableSoftmaxMap{s}; }), "s"_a = 1.0)
      .def_readwrite("s", &ScalableSoftmaxMap::s)
      .def("__repr__", [](const ScalableSoftmaxMap& map) { return "ScalableSoftmaxMap(s=" + std::to_string(map.s) + ")"; });
  py::class_<SelfAdjustSoftmaxMap>(m, "SelfAdjustSoftmaxMap", "Self-Adjust Softmax (rows are not distributions).")
      .def(py::init([](SelfAdjustVariant variant) { return SelfAdjustSoftmaxMap{variant}; }),
           "variant"_a = SelfAdjustVariant::basic)
      .def_readwrite("variant", &SelfAdjustSoftmaxMap::variant)
      .def("__repr__", [](const SelfAdjustSoftmaxMap& map) {
        return "SelfAdjustSoftmaxMap('" + to_string(NormalizationMap(map)) + "')";
      });
  py::class_<SinkSoftmaxMap>(m, "SinkSoftmaxMap", "softmax with an extra sink logit k (k = 0: off-by-one softmax).")
      .def(py::init([](double sink_logit) { return SinkSoftmaxMap{sink_logit}; }), "sink_logit"_a = 0.0)
      .def_readwrite("sink_logit", &SinkSoftmaxMap::sink_logit)
      .def("__repr__", [](const SinkSoftmaxMap& map) { return "SinkSoftmaxMap(sink_logit=" + std::to_string(map.sink_logit) + ")"; });

  m.def("parse_normalization_map", &parse_normalization_map, "text"_a,
        "Parses 'softmax', 'temperature:T', 'ssmax:S', 'sparsemax', 'entmax15', 'entmax:ALPHA', 'sa_softmax',\n"
        "'sa_softmax_normalized', 'sink', 'sink:LOGIT' into a map object. Raises ValueError on unknown names,\n"
        "bad numbers, T <= 0, S <= 0, ALPHA <= 1.");
  m.def("to_string", [](const py::object& map) { return to_string(to_map(map)); }, "map"_a,
        "The canonical text of a map (parse_normalization_map(to_string(m)) gives m back).");

  // ---- the maps ------------------------------------------------------------------------------------------------
  m.def(
      "softmax",
      [](const py::object& logits, double temperature, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_matrix("softmax", logits, causal, mask, [&](const auto& z, const Visibility& v) {
          using T = typename std::decay_t<decltype(z)>::Scalar;
          return attnscope::softmax(z, static_cast<T>(temperature), v);
        });
      },
      "logits"_a, "temperature"_a = 1.0, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("softmax(logits / temperature) of every row over its visible keys (SIMD kernel).\n\n"
          "    temperature: T > 0.",
          matrix_result)
          .c_str());
  m.def(
      "sparsemax",
      [](const py::object& logits, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_matrix("sparsemax", logits, causal, mask,
                              [&](const auto& z, const Visibility& v) { return attnscope::sparsemax(z, v); });
      },
      "logits"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("sparsemax: the Euclidean projection of each row onto the simplex (Martins & Astudillo 2016), expected\n"
          "O(n) per row.\n",
          matrix_result)
          .c_str());
  m.def(
      "entmax15",
      [](const py::object& logits, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_matrix("entmax15", logits, causal, mask,
                              [&](const auto& z, const Visibility& v) { return attnscope::entmax15(z, v); });
      },
      "logits"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("exact 1.5-entmax (Peters et al. 2019): p_i = [z_i/2 - tau]_+^2, sum p = 1.\n", matrix_result).c_str());
  m.def(
      "entmax_bisect",
      [](const py::object& logits, double alpha, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_matrix("entmax_bisect", logits, causal, mask, [&](const auto& z, const Visibility& v) {
          using T = typename std::decay_t<decltype(z)>::Scalar;
          return attnscope::entmax_bisect(z, static_cast<T>(alpha), v);
        });
      },
      "logits"_a, "alpha"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("alpha-entmax by bisection (deep-spin EntmaxBisectFunction), rows renormalized.\n\n    alpha: > 1.",
          matrix_result)
          .c_str());
  m.def(
      "ssmax",
      [](const py::object& logits, double s, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_matrix("ssmax", logits, causal, mask, [&](const auto& z, const Visibility& v) {
          using T = typename std::decay_t<decltype(z)>::Scalar;
          return attnscope::ssmax(z, static_cast<T>(s), v);
        });
      },
      "logits"_a, "s"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("Scalable-Softmax: softmax((s log n) z), n = visible keys of the row (Nakanishi 2025).\n\n    s: > 0.",
          matrix_result)
          .c_str());
  m.def(
      "sa_softmax",
      [](const py::object& logits, SelfAdjustVariant variant, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_matrix("sa_softmax", logits, causal, mask,
                              [&](const auto& z, const Visibility& v) { return attnscope::sa_softmax(z, variant, v); });
      },
      "logits"_a, "variant"_a = SelfAdjustVariant::basic,
      "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("Self-Adjust Softmax (Zheng et al. 2025): basic z * softmax(z); normalized (z - a)/(b - a) * softmax(z).\n"
          "Rows are not distributions.\n\n    variant: SelfAdjustVariant.basic or .normalized.",
          matrix_result)
          .c_str());
  m.def(
      "softmax_with_sink",
      [](const py::object& logits, double sink_logit, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_matrix("softmax_with_sink", logits, causal, mask, [&](const auto& z, const Visibility& v) {
          using T = typename std::decay_t<decltype(z)>::Scalar;
          return attnscope::softmax_with_sink(z, static_cast<T>(sink_logit), v);
        });
      },
      "logits"_a, "sink_logit"_a = 0.0, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("p_i = e^{z_i} / (e^k + sum_j e^{z_j}) (k = sink_logit; k = 0 is the off-by-one softmax). Rows sum to < 1.",
          matrix_result)
          .c_str());
  m.def(
      "normalize",
      [](const py::object& logits, const py::function& function, const py::function& derivative,
         const py::object& causal_flag, const py::object& mask, std::optional<Index> causal_offset) -> py::object {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const py::array array = as_array(logits, "normalize", "logits");
        return dispatch(array, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const Rows<T> rows = as_rows<T>(array, "normalize", "logits");
          const VisibilitySpec visibility = make_visibility(causal, mask, rows.layout, "normalize");
          // F and F' are Python callables: the GIL stays held (the C++ map calls F serially).
          auto map = make_generalized_map([&](T z) { return function(z).template cast<T>(); },
                                          [&](T z) { return derivative(z).template cast<T>(); });
          RowMatrix<T> out(rows.layout.total_rows(), rows.layout.cols);
          for (Index s = 0; s < (visibility.is_all() ? 1 : rows.layout.slices); ++s) {
            if (visibility.is_all())
              out = attnscope::normalize(rows.all(), map, visibility.at(0));
            else
              out.middleRows(s * rows.layout.rows, rows.layout.rows) =
                  attnscope::normalize(rows.slice(s), map, visibility.at(s));
          }
          return take_as_array(std::move(out), rows.layout.shape);
        });
      },
      "logits"_a, "function"_a, "derivative"_a,
      "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("Generalized normalization alpha_i = F(z_i) / sum_j F(z_j) for a user F > 0 (arXiv:2508.17821 Eq. 3).\n\n"
          "    function: F, a Python callable float -> float (called once per visible entry, serially, with the GIL\n"
          "        held: slow; use it for experiments).\n"
          "    derivative: F' (used by the Jacobians in C++; accepted here for the same signature).",
          matrix_result)
          .c_str());
  m.def(
      "apply_map",
      [](const py::object& map, const py::object& logits, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        const NormalizationMap parsed = to_map(map);
        return rowwise_matrix("apply_map", logits, causal, mask,
                              [&](const auto& z, const Visibility& v) { return attnscope::apply_map(parsed, z, v); });
      },
      "map"_a, "logits"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("Runs a map given as an object (SoftmaxMap(0.5), ...) or text ('temperature:0.5', 'entmax:1.5', ...);\n"
          "bit for bit the named function.",
          matrix_result)
          .c_str());

  // ---- Jacobians -----------------------------------------------------------------------------------------------
  m.def(
      "jacobian_vector_product",
      [](const py::object& logits, const py::object& map, const py::object& tangent, const py::object& causal_flag,
         const py::object& mask, std::optional<Index> causal_offset) {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const NormalizationMap parsed = to_map(map);
        return rowwise_pair("jacobian_vector_product", "logits", "tangent", logits, tangent, causal, mask,
                            [&](const auto& z, const auto& v, const Visibility& vis) {
                              return attnscope::jacobian_vector_product(z, parsed, v, vis);
                            });
      },
      "logits"_a, "map"_a, "tangent"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("Row i = J_i v_i, J_i the Jacobian of the map at row i over its visible keys; O(n) per row.\n\n"
          "    map: a map object or its text ('softmax', 'sparsemax', 'entmax:1.3', ...).\n"
          "    tangent: same shape as logits (converted to the logits' dtype).",
          matrix_result)
          .c_str());
  m.def(
      "vector_jacobian_product",
      [](const py::object& logits, const py::object& map, const py::object& cotangent, const py::object& causal_flag,
         const py::object& mask, std::optional<Index> causal_offset) {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const NormalizationMap parsed = to_map(map);
        return rowwise_pair("vector_jacobian_product", "logits", "cotangent", logits, cotangent, causal, mask,
                            [&](const auto& z, const auto& g, const Visibility& vis) {
                              return attnscope::vector_jacobian_product(z, parsed, g, vis);
                            });
      },
      "logits"_a, "map"_a, "cotangent"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("Row i = J_i^T g_i (the backward pass); O(n) per row.\n\n"
          "    map: a map object or its text.\n    cotangent: same shape as logits.",
          matrix_result)
          .c_str());
  m.def(
      "jacobian",
      [](const py::object& logits_row, const py::object& map) -> py::object {
        const NormalizationMap parsed = to_map(map);
        const py::array array = as_array(logits_row, "jacobian", "logits_row");
        return dispatch(array, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const CArray<T> values = carray<T>(array, "jacobian", "logits_row");
          if (values.ndim() != 1) throw_value_error("jacobian", "logits_row must be 1-D (use jacobian(logits, row, map))");
          const Eigen::Map<const RowMatrix<T>> z(values.data(), 1, values.shape(0));
          RowMatrix<T> out;
          {
            py::gil_scoped_release release;
            out = attnscope::jacobian(z, parsed);
          }
          const Shape shape{out.rows(), out.cols()};
          return take_as_array(std::move(out), shape);
        });
      },
      "logits_row"_a, "map"_a,
      "Dense n x n Jacobian d map(z) / dz of one row z (1-D array of n logits), O(n^2). Returns an (n, n) array of\n"
      "the row's dtype.");
  m.def(
      "jacobian",
      [](const py::object& logits, Index row, const py::object& map, const py::object& causal_flag,
         const py::object& mask, std::optional<Index> causal_offset) -> py::object {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const NormalizationMap parsed = to_map(map);
        const py::array array = as_array(logits, "jacobian", "logits");
        return dispatch(array, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const CArray<T> values = carray<T>(array, "jacobian", "logits");
          const auto z = matrix_of(values, "jacobian", "logits");
          const Layout layout = row_layout(values, "jacobian", "logits");
          const VisibilitySpec visibility = make_visibility(causal, mask, layout, "jacobian");
          RowMatrix<T> out;
          {
            py::gil_scoped_release release;
            out = attnscope::jacobian(z, row, parsed, visibility.at(0));
          }
          const Shape shape{out.rows(), out.cols()};
          return take_as_array(std::move(out), shape);
        });
      },
      "logits"_a, "row"_a, "map"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "Dense cols x cols Jacobian of row `row` of a 2-D logits matrix (rows x cols), zero rows/columns at masked\n"
      "keys. causal/mask as in softmax. Raises ValueError when row is out of range.");
  m.def(
      "jacobian_spectral_norm",
      [](const py::object& logits, const py::object& map, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        const NormalizationMap parsed = to_map(map);
        return rowwise("jacobian_spectral_norm", "logits", logits, causal, mask,
                              [&](const auto& z, const Visibility& v) {
                                return attnscope::jacobian_spectral_norm(z, parsed, v);
                              });
      },
      "logits"_a, "map"_a = "softmax", "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("||J_i||_2 of every row: exact and O(n) per row for the symmetric maps (softmax with T, SSMax, sink\n"
          "softmax, sparsemax, entmax) by the secular equation; matrix-free Lanczos for SA-Softmax.\n\n"
          "    map: a map object or its text (default 'softmax').",
          vector_result)
          .c_str());

  // ---- spectral norms from probabilities -----------------------------------------------------------------------
  m.def(
      "softmax_jacobian_spectral_norm",
      [](const py::object& probabilities, double scale, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise("softmax_jacobian_spectral_norm", "probabilities", probabilities, causal, mask,
                              [&](const auto& p, const Visibility& v) {
                                using T = typename std::decay_t<decltype(p)>::Scalar;
                                return attnscope::softmax_jacobian_spectral_norm(p, static_cast<T>(scale), v);
                              });
      },
      "probabilities"_a, "scale"_a = 1.0, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("||scale (diag p - p p^T)||_2 of every row p (softmax output; scale = 1/T), exact, O(n).",
          vector_result)
          .c_str());
  m.def(
      "sink_softmax_jacobian_spectral_norm",
      [](const py::object& probabilities, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise("sink_softmax_jacobian_spectral_norm", "probabilities", probabilities, causal, mask,
                              [&](const auto& p, const Visibility& v) {
                                return attnscope::sink_softmax_jacobian_spectral_norm(p, v);
                              });
      },
      "probabilities"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("||diag p - p p^T||_2 for rows summing to <= 1 (softmax with a sink), exact.", vector_result).c_str());
  m.def(
      "entmax_jacobian_spectral_norm",
      [](const py::object& probabilities, double alpha, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise("entmax_jacobian_spectral_norm", "probabilities", probabilities, causal, mask,
                              [&](const auto& p, const Visibility& v) {
                                using T = typename std::decay_t<decltype(p)>::Scalar;
                                return attnscope::entmax_jacobian_spectral_norm(p, static_cast<T>(alpha), v);
                              });
      },
      "probabilities"_a, "alpha"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("||diag g - g g^T / sum g||_2, g = p^(2 - alpha) on the support (alpha-entmax output p).", vector_result)
          .c_str());
  m.def(
      "sparsemax_jacobian_spectral_norm",
      [](const py::object& probabilities, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise("sparsemax_jacobian_spectral_norm", "probabilities", probabilities, causal, mask,
                              [&](const auto& p, const Visibility& v) {
                                return attnscope::sparsemax_jacobian_spectral_norm(p, v);
                              });
      },
      "probabilities"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("1 if the sparsemax output row has >= 2 non-zeros, else 0.", vector_result).c_str());
  m.def(
      "softmax_jacobian_norm_bounds",
      [](const py::object& probabilities, double scale, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        py::object lower = rowwise("softmax_jacobian_norm_bounds", "probabilities", probabilities, causal, mask,
                                          [&](const auto& p, const Visibility& v) {
                                            using T = typename std::decay_t<decltype(p)>::Scalar;
                                            return attnscope::softmax_jacobian_norm_bounds(p, static_cast<T>(scale), v)
                                                .lower;
                                          });
        py::object upper = rowwise("softmax_jacobian_norm_bounds", "probabilities", probabilities, causal, mask,
                                          [&](const auto& p, const Visibility& v) {
                                            using T = typename std::decay_t<decltype(p)>::Scalar;
                                            return attnscope::softmax_jacobian_norm_bounds(p, static_cast<T>(scale), v)
                                                .upper;
                                          });
        py::dict fields;
        fields["lower"] = lower;
        fields["upper"] = upper;
        return make_result("JacobianNormBounds", fields);
      },
      "probabilities"_a, "scale"_a = 1.0, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("Cheap one-pass bounds of the softmax Jacobian norm: scale max(p_(2), max d_i) <= ||J||_2 <=\n"
          "scale min(p_(1), 2 max d_i). Returns an object with fields lower and upper (shape input.shape[:-1]).",
          vector_result)
          .c_str());
  m.def("corollary3_bound", [](double temperature) { return attnscope::corollary3_bound(temperature); },
        "temperature"_a,
        "min{1/(4T), sqrt 2} (arXiv:2508.17821 Cor. 3): the largest diagonal entry of J, NOT a bound on ||J||_2.");
  m.def("softmax_jacobian_norm_supremum",
        [](double temperature) { return attnscope::softmax_jacobian_norm_supremum(temperature); }, "temperature"_a,
        "1/(2T): the supremum of ||J||_2 of softmax(z/T) over all logit vectors (two tied top logits).");
  m.def(
      "row_entropy",
      [](const py::object& attention, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise("row_entropy", "attention", attention, causal, mask, [&](const auto& a, const Visibility& v) {
          check_rows_are_distributions(a, v);
          return attnscope::row_entropy(a, v);
        });
      },
      "attention"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      doc("Shannon entropy -sum A log A (nats, 0 log 0 = 0) of every row as given (not re-closed). Raises ValueError\n"
          "on a negative or non-finite visible weight, and on a row whose visible weights do not sum to 1 within\n"
          "2u + k*2^-24 (u = unit roundoff of the dtype, k = visible keys): the entropy of a non-distribution means\n"
          "nothing (normalize the row first).",
          vector_result)
          .c_str());
}

}  // namespace attnscope_python
