// Bindings of attnscope::logits ("Dense Local Dependencies Induce Attention-Logit Explosion", arXiv:2505.15548):
// masks, band targets, rank tools and closed forms, attention kernels, the rank-d fitting lab, bf16/fp16 emulation
// and monitors. Matrices are computed in float64 (float32 for the rounding emulation), as the C++ functions do.
#include <attnscope/logits.hpp>

#include "common.hpp"

namespace attnscope_python {

using namespace pybind11::literals;
namespace logits = attnscope::logits;

namespace {

using MatrixMap = Eigen::Map<const RowMatrix<double>>;

/// A 2-D float64 matrix argument (read in place when it already is C-contiguous float64).
struct MatrixArgument {
  CArray<double> array;
  MatrixMap matrix;
  MatrixArgument(const py::object& object, const char* function, const char* name)
      : array(carray<double>(object, function, name)), matrix(matrix_of(array, function, name)) {}
};

py::array mask_array(const attnscope::Mask& mask) {
  return take_as_array(RowMatrix<bool>(mask.matrix()), Shape{mask.rows(), mask.cols()});
}

py::array stacked(const std::vector<RowMatrix<double>>& matrices) {
  if (matrices.empty()) return py::array_t<double>(Shape{0});
  const Index rows = matrices[0].rows(), cols = matrices[0].cols();
  py::array_t<double> out(Shape{static_cast<py::ssize_t>(matrices.size()), rows, cols});
  for (std::size_t h = 0; h < matrices.size(); ++h)
    std::copy(matrices[h].data(), matrices[h].data() + rows * cols, out.mutable_data() + h * rows * cols);
  return out;
}

py::dict fit_log(const std::vector<logits::FitStep>& log) {
  py::dict columns;
#define ATTNSCOPE_COLUMN(field)                                                                  \
  {                                                                                              \
    std::vector<double> values;                                                                  \
    for (const auto& step : log) values.push_back(static_cast<double>(step.field));             \
    columns[#field] = py::array(py::cast(values));                                               \
  }
  ATTNSCOPE_COLUMN(step)
  ATTNSCOPE_COLUMN(loss)
  ATTNSCOPE_COLUMN(kl)
  ATTNSCOPE_COLUMN(in_band_mass)
  ATTNSCOPE_COLUMN(top_band_accuracy)
  ATTNSCOPE_COLUMN(max_visible_logit)
  ATTNSCOPE_COLUMN(max_masked_logit)
  ATTNSCOPE_COLUMN(max_query_norm)
  ATTNSCOPE_COLUMN(max_key_norm)
  ATTNSCOPE_COLUMN(logit_norm_bound)
  ATTNSCOPE_COLUMN(gradient_norm)
  ATTNSCOPE_COLUMN(fp16_overflow_count)
  ATTNSCOPE_COLUMN(logit_rounding_error)
#undef ATTNSCOPE_COLUMN
  std::vector<std::vector<double>> head_max, head_weight;
  for (const auto& step : log) {
    head_max.push_back(step.head_max_visible_logit);
    head_weight.push_back(step.head_weight);
  }
  columns["head_max_visible_logit"] = py::array(py::cast(head_max));
  columns["head_weight"] = py::array(py::cast(head_weight));
  return columns;
}

py::object fit_result(const logits::FitResult<double>& fit) {
  py::dict fields;
  fields["queries"] = stacked(fit.queries);
  fields["keys"] = stacked(fit.keys);
  fields["query_weights"] = stacked(fit.query_weights);
  fields["key_weights"] = stacked(fit.key_weights);
  fields["inputs"] = matrix_array(RowMatrix<double>(fit.inputs));
  fields["logits"] = stacked(fit.logits);
  fields["attention"] = stacked(fit.attention);
  fields["model_attention"] = matrix_array(RowMatrix<double>(fit.model_attention));
  fields["log"] = fit_log(fit.log);
  py::list parameters;
  for (const auto& parameter : fit.parameters) parameters.append(matrix_array(RowMatrix<double>(parameter)));
  fields["parameters"] = parameters;
  fields["reached_target"] = fit.reached_target;
  fields["diverged"] = fit.diverged;
  return make_result("FitResult", fields);
}

}  // namespace

void bind_logits(py::module_& parent) {
  py::module_ m = parent.def_submodule("logits", "attnscope::logits: the logit-explosion lab (arXiv:2505.15548).");

  // ---- masks and targets ---------------------------------------------------------------------------------------------
  m.def("causal_mask", [](Index n) { return mask_array(logits::causal_mask(n)); }, "n"_a,
        "Boolean (n, n) mask, True where j <= i.");
  m.def("sliding_window_mask", [](Index n, Index span) { return mask_array(logits::sliding_window_mask(n, span)); },
        "n"_a, "span"_a, "Keys max(0, i - span) .. i (flash-attention window_size = (span, 0)); bool (n, n).");
  m.def("kept_key_columns", &logits::kept_key_columns, "n"_a, "keep_fraction"_a, "seed"_a,
        "[derived] max(1, round(n keep)) kept columns, column 0 always; list of bools.");
  m.def("column_drop_mask",
        [](Index n, double sparsity, std::uint64_t seed) { return mask_array(logits::column_drop_mask(n, sparsity, seed)); },
        "n"_a, "sparsity"_a, "seed"_a, "causal AND the columns kept by kept_key_columns(n, 1 - sparsity, seed).");
  m.def(
      "head_layout",
      [](Index heads, Index full_heads, Index n, Index span) {
        const std::vector<attnscope::Mask> masks = logits::head_layout(heads, full_heads, n, span);
        py::array_t<bool> out(Shape{static_cast<py::ssize_t>(masks.size()), n, n});
        for (std::size_t h = 0; h < masks.size(); ++h)
          std::copy(masks[h].data(), masks[h].data() + n * n, out.mutable_data() + h * n * n);
        return out;
      },
      "heads"_a, "full_heads"_a, "n"_a, "span"_a,
      "LS-attention layout: (heads, n, n) bool masks, heads 0..full_heads-1 causal, the rest sliding windows.");
  m.def("causal_band_target", [](Index n, Index w, double eps) { return matrix_array(logits::causal_band_target(n, w, eps)); },
        "n"_a, "w"_a, "eps"_a = 0.0, "P_ij = 1/w_i for i - w < j <= i (eps > 0: floored); float64 (n, n).");
  m.def(
      "floored_target",
      [](const py::object& target, double eps, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        const MatrixArgument p(target, "logits.floored_target", "target");
        const VisibilitySpec vis = matrix_visibility(causal, mask, p.matrix.rows(), p.matrix.cols(), "logits.floored_target");
        return matrix_array(logits::floored_target(p.matrix, eps, vis.at(0)));
      },
      "target"_a, "eps"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "(1 - eps) P + eps/|visible(i)| on visible keys, 0 elsewhere.");
  m.def("bidirectional_band_target", [](Index n, Index k) { return matrix_array(logits::bidirectional_band_target(n, k)); },
        "n"_a, "k"_a, "Uniform over |i - j| <= k.");
  m.def("column_sparse_target",
        [](Index n, Index w, double keep, std::uint64_t seed) {
          return matrix_array(logits::column_sparse_target(n, w, keep, seed));
        },
        "n"_a, "w"_a, "keep"_a, "seed"_a, "Uniform over the w nearest kept keys j <= i.");
  m.def("band_indicator", [](Index n, Index w) { return matrix_array(logits::band_indicator(n, w)); }, "n"_a, "w"_a,
        "B_ij = 1[0 <= i - j < w].");
  m.def("symmetric_band_indicator", [](Index n, Index k) { return matrix_array(logits::symmetric_band_indicator(n, k)); },
        "n"_a, "k"_a, "B_ij = 1[|i - j| <= k].");

  // ---- rank and spectrum -------------------------------------------------------------------------------------------
  m.def("singular_values",
        [](const py::object& matrix) {
          const MatrixArgument a(matrix, "logits.singular_values", "matrix");
          Vector<double> sigma;
          {
            py::gil_scoped_release release;
            sigma = logits::singular_values(a.matrix);
          }
          return vector_array(std::move(sigma));
        },
        "matrix"_a, "Singular values, descending (float64; Eigen BDCSVD).");
#define ATTNSCOPE_MATRIX_SCALAR(name, text)                                 \
  m.def(                                                                   \
      #name,                                                               \
      [](const py::object& matrix) {                                       \
        const MatrixArgument a(matrix, "logits." #name, "matrix");         \
        py::gil_scoped_release release;                                    \
        return logits::name(a.matrix);                                     \
      },                                                                   \
      "matrix"_a, text)
  ATTNSCOPE_MATRIX_SCALAR(spectral_norm, "sigma_1 (exact, by SVD).");
  ATTNSCOPE_MATRIX_SCALAR(stable_rank, "||M||_F^2 / ||M||_2^2.");
  ATTNSCOPE_MATRIX_SCALAR(entropy_effective_rank, "exp(-sum p log p), p = sigma / sum sigma (Roy & Vetterli 2007).");
  ATTNSCOPE_MATRIX_SCALAR(causal_stable_rank, "stable_rank(causal_part(S)): future entries count as 0.");
#undef ATTNSCOPE_MATRIX_SCALAR
  m.def("numerical_rank",
        [](const py::object& matrix, double tolerance) {
          const MatrixArgument a(matrix, "logits.numerical_rank", "matrix");
          py::gil_scoped_release release;
          return logits::numerical_rank(a.matrix, tolerance);
        },
        "matrix"_a, "tolerance"_a = -1.0, "#{sigma_k > tol}; tol < 0: sigma_1 max(rows, cols) 2^-52 (numpy).");
  m.def("eckart_young_residual",
        [](const py::object& matrix, Index rank) {
          const MatrixArgument a(matrix, "logits.eckart_young_residual", "matrix");
          py::gil_scoped_release release;
          return logits::eckart_young_residual(a.matrix, rank);
        },
        "matrix"_a, "rank"_a, "min over rank-r X of ||M - X||_F^2 = sum_{k > r} sigma_k^2.");
  m.def("stable_rank_from_singular_values", &logits::stable_rank_from_singular_values, "sigma"_a,
        "sum sigma_k^2 / sigma_1^2 from singular values sorted descending.");
  m.def("entropy_effective_rank_from_singular_values", &logits::entropy_effective_rank_from_singular_values, "sigma"_a,
        "exp(H(sigma / sum sigma)) from singular values sorted descending.");
  m.def("causal_part",
        [](const py::object& scores) {
          const MatrixArgument a(scores, "logits.causal_part", "scores");
          return matrix_array(logits::causal_part(a.matrix));
        },
        "scores"_a, "Entries j <= i kept, future entries set to 0 (whatever they hold, -inf included).");

  // ---- closed forms ------------------------------------------------------------------------------------------------
  m.def("band_frobenius_norm_squared", &logits::band_frobenius_norm_squared, "n"_a, "w"_a, "n w - w(w-1)/2.");
  m.def("band_stable_rank_lower_bound", &logits::band_stable_rank_lower_bound, "n"_a, "w"_a, "n/w - (w-1)/(2w) (F4).");
  m.def("band_eckart_young_lower_bound", &logits::band_eckart_young_lower_bound, "n"_a, "w"_a, "rank"_a,
        "max(0, n w - w(w-1)/2 - r w^2) (F4).");
  m.def("symmetric_band_frobenius_norm_squared", &logits::symmetric_band_frobenius_norm_squared, "n"_a, "k"_a,
        "n(2k+1) - k(k+1).");
  m.def("symmetric_band_stable_rank_lower_bound", &logits::symmetric_band_stable_rank_lower_bound, "n"_a, "k"_a,
        "||B||_F^2 / min(2k+1, n)^2.");
  m.def("completion_rank_lower_bound", &logits::completion_rank_lower_bound, "n"_a, "w"_a,
        "max(0, w floor(n/(2w)) - 1) (F3).");
  m.def("logit_gap_lower_bound", &logits::logit_gap_lower_bound, "out_of_band_keys"_a, "in_band_keys"_a,
        "out_of_band_mass"_a, "log((1 - eps) m / (eps w)) (F2).");
  m.def(
      "logit_gap_rows",
      [](const py::object& scores, const py::object& band_target, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        const MatrixArgument s(scores, "logits.logit_gap_rows", "logits");
        const MatrixArgument p(band_target, "logits.logit_gap_rows", "band_target");
        const VisibilitySpec vis =
            matrix_visibility(causal, mask, s.matrix.rows(), s.matrix.cols(), "logits.logit_gap_rows");
        const auto rows = logits::logit_gap_rows(s.matrix, p.matrix, vis.at(0));
        std::vector<Index> row;
        std::vector<double> gap, mass, bound;
        for (const auto& r : rows) {
          row.push_back(r.row);
          gap.push_back(r.gap);
          mass.push_back(r.out_of_band_mass);
          bound.push_back(r.lower_bound);
        }
        py::dict fields;
        fields["row"] = py::array(py::cast(row));
        fields["gap"] = py::array(py::cast(gap));
        fields["out_of_band_mass"] = py::array(py::cast(mass));
        fields["lower_bound"] = py::array(py::cast(bound));
        return make_result("LogitGapRows", fields);
      },
      "logits"_a, "band_target"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "Per row with in- and out-of-band visible keys: row, gap (max band S - min out S), out_of_band_mass, lower_bound\n"
      "(F2); arrays.");

  // ---- attention kernels -----------------------------------------------------------------------------------------
  m.def("scaled_logits",
        [](const py::object& queries, const py::object& keys, double scale) {
          const MatrixArgument q(queries, "logits.scaled_logits", "queries");
          const MatrixArgument k(keys, "logits.scaled_logits", "keys");
          RowMatrix<double> s;
          {
            py::gil_scoped_release release;
            s = logits::scaled_logits(q.matrix, k.matrix, scale);
          }
          return matrix_array(std::move(s));
        },
        "queries"_a, "keys"_a, "scale"_a, "S = scale Q K^T (float64; Q n x d, K m x d).");
  m.def(
      "attention_backward",
      [](const py::object& attention, const py::object& gradient, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        const MatrixArgument a(attention, "logits.attention_backward", "attention");
        const MatrixArgument g(gradient, "logits.attention_backward", "attention_gradient");
        const VisibilitySpec vis =
            matrix_visibility(causal, mask, a.matrix.rows(), a.matrix.cols(), "logits.attention_backward");
        return matrix_array(logits::attention_backward(a.matrix, g.matrix, vis.at(0)));
      },
      "attention"_a, "attention_gradient"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "Softmax VJP dS = A o (dA - rowsum(dA o A)) on visible keys, 0 elsewhere.");

  // ---- fitting -----------------------------------------------------------------------------------------------------
  py::enum_<logits::FitLoss>(m, "FitLoss")
      .value("cross_entropy", logits::FitLoss::cross_entropy)
      .value("kl_divergence", logits::FitLoss::kl_divergence)
      .value("mse_probabilities", logits::FitLoss::mse_probabilities);
  py::enum_<logits::Parametrization>(m, "Parametrization")
      .value("free", logits::Parametrization::free)
      .value("projected", logits::Parametrization::projected);
  py::enum_<logits::RoundingFormat>(m, "RoundingFormat")
      .value("none", logits::RoundingFormat::none)
      .value("bfloat16", logits::RoundingFormat::bfloat16)
      .value("float16", logits::RoundingFormat::float16);
  py::enum_<logits::RoundingTarget>(m, "RoundingTarget")
      .value("logits", logits::RoundingTarget::logits)
      .value("probabilities", logits::RoundingTarget::probabilities)
      .value("both", logits::RoundingTarget::both);
  py::class_<logits::AdamOptions>(m, "AdamOptions", "Adam (Kingma & Ba 2015) with bias correction.")
      .def(py::init<>())
      .def_readwrite("learning_rate", &logits::AdamOptions::learning_rate)
      .def_readwrite("beta1", &logits::AdamOptions::beta1)
      .def_readwrite("beta2", &logits::AdamOptions::beta2)
      .def_readwrite("epsilon", &logits::AdamOptions::epsilon);
  py::class_<logits::PrecisionOptions>(m, "PrecisionOptions", "bf16/fp16 rounding inside the fit.")
      .def(py::init<>())
      .def_readwrite("format", &logits::PrecisionOptions::format)
      .def_readwrite("applies_to", &logits::PrecisionOptions::applies_to);
  py::class_<logits::FitOptions>(m, "FitOptions",
                                 "Options of fit_qk / fit_heads (defaults = the reference runs of theory/logits.md).")
      .def(py::init<>())
      .def_readwrite("head_dim", &logits::FitOptions::head_dim)
      .def_readwrite("loss", &logits::FitOptions::loss)
      .def_readwrite("target_floor", &logits::FitOptions::target_floor)
      .def_readwrite("parametrization", &logits::FitOptions::parametrization)
      .def_readwrite("model_dim", &logits::FitOptions::model_dim)
      .def_readwrite("adam", &logits::FitOptions::adam)
      .def_readwrite("steps", &logits::FitOptions::steps)
      .def_readwrite("init_std", &logits::FitOptions::init_std)
      .def_readwrite("gradient_clip", &logits::FitOptions::gradient_clip)
      .def_readwrite("seed", &logits::FitOptions::seed)
      .def_readwrite("stop_at_in_band_mass", &logits::FitOptions::stop_at_in_band_mass)
      .def_readwrite("precision", &logits::FitOptions::precision)
      .def_readwrite("learn_head_weights", &logits::FitOptions::learn_head_weights);
  const char* const fit_doc =
      "Result fields: queries, keys, logits, attention (heads, n, .) arrays; query_weights, key_weights, inputs\n"
      "(projected only); model_attention (n, n); log: dict of per-step arrays (step, loss, kl, in_band_mass,\n"
      "top_band_accuracy, max_visible_logit, ..., head_weight); parameters; reached_target; diverged. float64.";
  m.def(
      "fit_qk",
      [](const py::object& target, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset, const logits::FitOptions& options) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        const MatrixArgument p(target, "logits.fit_qk", "target");
        const VisibilitySpec vis = matrix_visibility(causal, mask, p.matrix.rows(), p.matrix.cols(), "logits.fit_qk");
        logits::FitResult<double> fit;
        {
          py::gil_scoped_release release;
          fit = logits::fit_qk(p.matrix, vis.at(0), options);
        }
        return fit_result(fit);
      },
      "target"_a, "causal"_a = true, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "options"_a = logits::FitOptions(),
      (std::string("Fits one rank-d head S = Q K^T / sqrt(d) to a target attention (n x n rows of distributions)\n"
                   "with Adam. ") + fit_doc).c_str());
  m.def(
      "fit_heads",
      [](const py::object& target, const py::object& masks, const logits::FitOptions& options) {
        const MatrixArgument p(target, "logits.fit_heads", "target");
        const CArray<bool> m_array = carray<bool>(masks, "logits.fit_heads", "masks");
        if (m_array.ndim() != 3) throw_value_error("logits.fit_heads", "masks must have shape (heads, n, n)");
        std::vector<Visibility> heads;
        const Index rows = m_array.shape(1), cols = m_array.shape(2);
        for (Index h = 0; h < m_array.shape(0); ++h)
          heads.emplace_back(attnscope::Mask(Eigen::Map<const attnscope::Mask>(m_array.data() + h * rows * cols, rows, cols)));
        logits::FitResult<double> fit;
        {
          py::gil_scoped_release release;
          fit = logits::fit_heads(p.matrix, heads, options);
        }
        return fit_result(fit);
      },
      "target"_a, "masks"_a, "options"_a = logits::FitOptions(),
      (std::string("Fits a mixture of heads, each with its boolean mask (heads, n, n), e.g. head_layout(...). ") +
       fit_doc).c_str());

  // ---- precision and monitors ----------------------------------------------------------------------------------------
  m.def("round_to_bf16",
        [](const py::object& matrix) {
          const CArray<float> a = carray<float>(matrix, "logits.round_to_bf16", "matrix");
          return matrix_array(logits::round_to_bf16(matrix_of(a, "logits.round_to_bf16", "matrix")));
        },
        "matrix"_a, "Element-wise float32 -> bfloat16 -> float32, round to nearest even (float32 result).");
  m.def("round_to_fp16",
        [](const py::object& matrix) {
          const CArray<float> a = carray<float>(matrix, "logits.round_to_fp16", "matrix");
          return matrix_array(logits::round_to_fp16(matrix_of(a, "logits.round_to_fp16", "matrix")));
        },
        "matrix"_a, "Element-wise float32 -> float16 -> float32 (overflow -> inf; float32 result).");
  m.def("fp16_overflow_count",
        [](const py::object& matrix) {
          const CArray<float> a = carray<float>(matrix, "logits.fp16_overflow_count", "matrix");
          return logits::fp16_overflow_count(matrix_of(a, "logits.fp16_overflow_count", "matrix"));
        },
        "matrix"_a, "Number of finite entries with |x| > 65504.");
  m.def(
      "rounding_error",
      [](const py::object& matrix, logits::RoundingFormat format) {
        const CArray<float> a = carray<float>(matrix, "logits.rounding_error", "matrix");
        const logits::RoundingError e = logits::rounding_error(matrix_of(a, "logits.rounding_error", "matrix"), format);
        py::dict fields;
        fields["max_absolute"] = e.max_absolute;
        fields["max_relative"] = e.max_relative;
        fields["overflow_count"] = e.overflow_count;
        return make_result("RoundingError", fields);
      },
      "matrix"_a, "format"_a, "max_absolute, max_relative rounding error and overflow_count of a float32 matrix.");
  m.def(
      "visible_logit_extremes",
      [](const py::object& scores, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        const MatrixArgument s(scores, "logits.visible_logit_extremes", "scores");
        const VisibilitySpec vis =
            matrix_visibility(causal, mask, s.matrix.rows(), s.matrix.cols(), "logits.visible_logit_extremes");
        const logits::LogitExtremes e = logits::visible_logit_extremes(s.matrix, vis.at(0));
        py::dict fields;
        fields["max_logit"] = e.max_logit;
        fields["max_abs_logit"] = e.max_abs_logit;
        return make_result("LogitExtremes", fields);
      },
      "scores"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "Signed max and max |S| over visible entries (masked entries may hold -inf).");
  py::class_<logits::RollingMedianSpikeDetector>(m, "RollingMedianSpikeDetector",
                                                 "Loss-spike detector: loss > median(previous <= window) + margin.")
      .def(py::init<Index, double, Index>(), "window"_a = 201, "margin"_a = 0.1, "min_history"_a = 10)
      .def("observe", &logits::RollingMedianSpikeDetector::observe, "loss"_a, "True when the loss is a spike.")
      .def("spikes", &logits::RollingMedianSpikeDetector::spikes, "Observation indices (0-based) flagged as spikes.");
}

}  // namespace attnscope_python
