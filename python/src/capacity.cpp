// Bindings of attnscope::capacity ("Limitations of Normalization in Attention", arXiv:2508.17821): vanishing
// attention, representation distance, separability, gradient sensitivity and exact Jacobian norms, KS / Wilcoxon
// tests and the critical top-N, power-law fits. Statistics are float64 whatever the input dtype (as in C++).
#include <attnscope/capacity.hpp>

#include "common.hpp"

namespace attnscope_python {

using namespace pybind11::literals;
namespace capacity = attnscope::capacity;

namespace {

/// One query's weights (a 1-D array, or a 1 x L / L x 1 matrix), read as float64.
Eigen::Map<const Vector<double>> weights_of(const CArray<double>& array, const char* function) {
  if (array.ndim() > 2 || (array.ndim() == 2 && array.shape(0) != 1 && array.shape(1) != 1))
    throw_value_error(function, "weights must be a vector of L weights");
  return Eigen::Map<const Vector<double>>(array.data(), array.size());
}

capacity::DistanceReading reading_of(const std::string& name) {
  if (name == "sum_of_norms") return capacity::DistanceReading::sum_of_norms;
  if (name == "norm_of_sum") return capacity::DistanceReading::norm_of_sum;
  throw_value_error("capacity", "reading must be 'sum_of_norms' or 'norm_of_sum', got '" + name + "'");
}

capacity::Boundary boundary_of(const std::string& name) {
  if (name == "strict") return capacity::Boundary::strict;
  if (name == "inclusive") return capacity::Boundary::inclusive;
  throw_value_error("capacity", "boundary must be 'strict' or 'inclusive', got '" + name + "'");
}

capacity::KsMethod ks_method_of(const std::string& name) {
  if (name == "automatic") return capacity::KsMethod::automatic;
  if (name == "exact") return capacity::KsMethod::exact;
  if (name == "asymptotic") return capacity::KsMethod::asymptotic;
  throw_value_error("capacity", "method must be 'automatic', 'exact' or 'asymptotic', got '" + name + "'");
}

/// Runs body(weights, embeddings) with the embeddings (L x d) read in place in their own dtype.
template <class Body>
py::object with_weights_and_embeddings(const py::object& weights, const py::object& embeddings, const char* function,
                                       Body&& body) {
  const CArray<double> w = carray<double>(weights, function, "weights");
  const auto weight_vector = weights_of(w, function);
  const py::array x = as_array(embeddings, function, "embeddings");
  return dispatch(x, [&](auto tag) -> py::object {
    using T = decltype(tag);
    const CArray<T> values = carray<T>(x, function, "embeddings");
    const auto matrix = matrix_of(values, function, "embeddings");
    return body(weight_vector, matrix);
  });
}

py::object separability_object(const capacity::Separability& s) {
  py::dict fields;
  fields["distinguishable"] = s.distinguishable;
  fields["selected"] = s.selected;
  fields["fraction"] = s.fraction;
  fields["radius"] = s.radius;
  return make_result("Separability", fields);
}

const char* const selection_doc = R"(

weights: one query's attention over L tokens (1-D, float64; others converted). embeddings: L x d (float32 or
float64, read in place when C-contiguous). selected: token indices (the top-N set I_N). Raises ValueError on bad
input.)";

std::string with(const char* head, const char* tail) { return std::string(head) + tail; }

}  // namespace

void bind_capacity(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "capacity", "attnscope::capacity: limits of normalization in attention (arXiv:2508.17821); float64 statistics.");

  // ---- selection, vanishing attention ----------------------------------------------------------------------------
  m.def(
      "top_n",
      [](const py::object& weights, Index count) {
        const CArray<double> w = carray<double>(weights, "capacity.top_n", "weights");
        return capacity::top_n(weights_of(w, "capacity.top_n"), count);
      },
      "weights"_a, "count"_a, "Indices of the N largest weights, largest first (ties to the lower index).");
  m.def(
      "context_vector",
      [](const py::object& weights, const py::object& embeddings, const std::vector<Index>& selected) {
        return with_weights_and_embeddings(weights, embeddings, "capacity.context_vector",
                                           [&](const auto& w, const auto& x) -> py::object {
                                             return vector_array(capacity::context_vector(w, x, selected));
                                           });
      },
      "weights"_a, "embeddings"_a, "selected"_a,
      with("s = sum_{i in I_N} alpha_i x_i (Eq. 6); float64 array of length d.", selection_doc).c_str());
  m.def(
      "lemma1_constants",
      [](double minimum, double maximum) {
        const capacity::WeightConstants c = capacity::lemma1_constants(minimum, maximum);
        py::dict fields;
        fields["lower"] = c.lower;
        fields["upper"] = c.upper;
        return make_result("Lemma1Constants", fields);
      },
      "min_F"_a, "max_F"_a, "Lemma 1: C1/L <= alpha_i <= C2/L with C1 = min F / max F (lower), C2 = max F / min F (upper).");
  m.def(
      "softmax_weight_bounds",
      [](double norm_query, double norm_key, double temperature, Index length) {
        const capacity::WeightBounds b = capacity::softmax_weight_bounds(norm_query, norm_key, temperature, length);
        py::dict fields;
        fields["lower"] = b.lower;
        fields["upper"] = b.upper;
        return make_result("WeightBounds", fields);
      },
      "norm_q"_a, "norm_k"_a, "temperature"_a, "length"_a,
      "Cor. 1: (1/L) e^{-2 Delta/T} <= alpha_i <= (1/L) e^{2 Delta/T}, Delta = ||q|| max ||k||; fields lower, upper.");
  m.def(
      "weight_summary",
      [](const py::object& weights, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        const CArray<double> w = carray<double>(weights, "capacity.weight_summary", "weights");
        const auto matrix = matrix_of(w, "capacity.weight_summary", "weights");
        const VisibilitySpec vis =
            matrix_visibility(causal, mask, matrix.rows(), matrix.cols(), "capacity.weight_summary");
        capacity::WeightSummary s;
        {
          py::gil_scoped_release release;
          s = capacity::weight_summary(matrix, vis.at(0));
        }
        py::dict fields;
        fields["max_weight"] = s.max_weight;
        fields["mean_row_max"] = s.mean_row_max;
        fields["mean_weight"] = s.mean_weight;
        fields["mean_row_max_times_length"] = s.mean_row_max_times_length;
        return make_result("WeightSummary", fields);
      },
      "weights"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "Vanishing attention of a head (rows x cols weights): max_weight, mean_row_max, mean_weight and\n"
      "mean_row_max_times_length (Theta(1) under Lemma 1).");

  // ---- representation distance -------------------------------------------------------------------------------------
  m.def(
      "representation_distance",
      [](const py::object& weights, const py::object& embeddings, const std::vector<Index>& selected,
         const std::string& reading) {
        const auto parsed = reading_of(reading);
        return with_weights_and_embeddings(weights, embeddings, "capacity.representation_distance",
                                           [&](const auto& w, const auto& x) -> py::object {
                                             return py::float_(capacity::representation_distance(w, x, selected, parsed));
                                           });
      },
      "weights"_a, "embeddings"_a, "selected"_a, "reading"_a = "sum_of_norms",
      with("Eq. 7 distance d~ in the chosen reading ('sum_of_norms' [derived, default] or 'norm_of_sum').",
           selection_doc)
          .c_str());
  m.def(
      "top_n_distance",
      [](const py::object& weights, const py::object& embeddings, Index count, const std::string& reading) {
        const auto parsed = reading_of(reading);
        return with_weights_and_embeddings(weights, embeddings, "capacity.top_n_distance",
                                           [&](const auto& w, const auto& x) -> py::object {
                                             return py::float_(capacity::top_n_distance(w, x, count, parsed));
                                           });
      },
      "weights"_a, "embeddings"_a, "count"_a, "reading"_a = "sum_of_norms",
      with("Eq. 7 with I_N = top_n(weights, count).", selection_doc).c_str());
  m.def(
      "expected_distance_monte_carlo",
      [](const py::object& weights, const py::object& embeddings, Index count, Index samples, std::uint64_t seed,
         const std::string& reading) {
        const auto parsed = reading_of(reading);
        return with_weights_and_embeddings(
            weights, embeddings, "capacity.expected_distance_monte_carlo", [&](const auto& w, const auto& x) -> py::object {
              return py::float_(capacity::expected_distance_monte_carlo(w, x, count, samples, seed, parsed));
            });
      },
      "weights"_a, "embeddings"_a, "count"_a, "samples"_a, "seed"_a, "reading"_a = "sum_of_norms",
      with("E[d~] over uniformly random N-subsets (Eq. 8), deterministic for a seed.", selection_doc).c_str());
  m.def(
      "expected_distance_main_sum",
      [](const py::object& weights, const py::object& embeddings, Index count, const std::string& variant) {
        if (variant != "a" && variant != "b") throw_value_error("capacity.expected_distance_main_sum", "variant must be 'a' or 'b'");
        const auto parsed = variant == "a" ? capacity::MainSum::a : capacity::MainSum::b;
        return with_weights_and_embeddings(weights, embeddings, "capacity.expected_distance_main_sum",
                                           [&](const auto& w, const auto& x) -> py::object {
                                             return py::float_(capacity::expected_distance_main_sum(w, x, count, parsed));
                                           });
      },
      "weights"_a, "embeddings"_a, "count"_a, "variant"_a = "a",
      with("Theorem 1.2 main sum [derived] ('a' or 'b').", selection_doc).c_str());
  m.def(
      "distance_upper_bound",
      [](const py::object& weights, const py::object& embeddings, const std::vector<Index>& selected) {
        return with_weights_and_embeddings(weights, embeddings, "capacity.distance_upper_bound",
                                           [&](const auto& w, const auto& x) -> py::object {
                                             return py::float_(capacity::distance_upper_bound(w, x, selected));
                                           });
      },
      "weights"_a, "embeddings"_a, "selected"_a, with("Theorem 1.1 d_max [derived coefficients].", selection_doc).c_str());

  // ---- separability -----------------------------------------------------------------------------------------------
  m.def(
      "separability",
      [](const py::object& weights, const py::object& embeddings, const std::vector<Index>& selected,
         const std::string& boundary) {
        const auto parsed = boundary_of(boundary);
        return with_weights_and_embeddings(weights, embeddings, "capacity.separability",
                                           [&](const auto& w, const auto& x) -> py::object {
                                             return separability_object(capacity::separability(w, x, selected, parsed));
                                           });
      },
      "weights"_a, "embeddings"_a, "selected"_a, "boundary"_a = "strict",
      with("Geometric separability (paper section 3.2): r = min over non-selected ||s - alpha_i x_i||; fields\n"
           "distinguishable (N_s), selected (N), fraction (N_s/N), radius (r).",
           selection_doc)
          .c_str());
  m.def(
      "separability_at_radius",
      [](const py::object& weights, const py::object& embeddings, const std::vector<Index>& selected, double radius) {
        return with_weights_and_embeddings(weights, embeddings, "capacity.separability_at_radius",
                                           [&](const auto& w, const auto& x) -> py::object {
                                             return separability_object(
                                                 capacity::separability_at_radius(w, x, selected, radius));
                                           });
      },
      "weights"_a, "embeddings"_a, "selected"_a, "radius"_a,
      with("Definition (10) [derived] at a given radius r; fields as separability.", selection_doc).c_str());
  m.def(
      "project_to_sphere",
      [](const py::object& embeddings, double radius) {
        const py::array x = as_array(embeddings, "capacity.project_to_sphere", "embeddings");
        return dispatch(x, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const CArray<T> values = carray<T>(x, "capacity.project_to_sphere", "embeddings");
          return matrix_array(
              capacity::project_to_sphere(matrix_of(values, "capacity.project_to_sphere", "embeddings"),
                                          static_cast<T>(radius)));
        });
      },
      "embeddings"_a, "radius"_a = 1.0, "x_i <- M x_i / ||x_i|| (Assumption 1); L x d, dtype kept.");
  m.def(
      "min_pairwise_distance",
      [](const py::object& embeddings) {
        const py::array x = as_array(embeddings, "capacity.min_pairwise_distance", "embeddings");
        return dispatch(x, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const CArray<T> values = carray<T>(x, "capacity.min_pairwise_distance", "embeddings");
          return py::float_(
              capacity::min_pairwise_distance(matrix_of(values, "capacity.min_pairwise_distance", "embeddings")));
        });
      },
      "embeddings"_a, "delta = min_{i != j} ||x_i - x_j|| (Assumption 2).");
  m.def(
      "theorem2_bounds",
      [](const py::object& weights, const py::object& embeddings, const std::vector<Index>& selected,
         double sphere_radius, double separation, double radius) {
        return with_weights_and_embeddings(
            weights, embeddings, "capacity.theorem2_bounds", [&](const auto& w, const auto& x) -> py::object {
              capacity::Theorem2Bounds b = capacity::theorem2_bounds(w, x, selected, sphere_radius, separation, radius);
              py::dict fields;
              fields["spread"] = vector_array(std::move(b.spread));
              fields["lower"] = b.lower;
              fields["upper"] = b.upper;
              return make_result("Theorem2Bounds", fields);
            });
      },
      "weights"_a, "embeddings"_a, "selected"_a, "M"_a, "delta"_a, "r"_a,
      with("Theorem 2 [derived]: spread (xi_i), lower and upper bounds of N_s/N.", selection_doc).c_str());
  m.def("multihead_coverage", &capacity::multihead_coverage, "p"_a, "heads"_a, "1 - (1 - p)^H (Discussion).");
  m.def(
      "separability_rows",
      [](const py::object& attention, const py::object& values, const std::vector<Index>& counts,
         const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset, const std::string& boundary, double sphere_radius,
         bool clamp_short_rows) -> py::object {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const char* function = "capacity.separability_rows";
        capacity::SeparabilityOptions options;
        options.boundary = boundary_of(boundary);
        options.sphere_radius = sphere_radius;
        options.short_rows = clamp_short_rows ? capacity::ShortRows::clamp_n : capacity::ShortRows::skip;
        const py::array a = as_array(attention, function, "attention");
        return dispatch(a, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const CArray<T> weights = carray<T>(a, function, "attention");
          const CArray<T> vectors = carray<T>(values, function, "values");
          const auto attention_matrix = matrix_of(weights, function, "attention");
          const auto value_matrix = matrix_of(vectors, function, "values");
          const VisibilitySpec vis =
              matrix_visibility(causal, mask, attention_matrix.rows(), attention_matrix.cols(), function);
          std::vector<capacity::SeparabilityRows> rows;
          {
            py::gil_scoped_release release;
            rows = capacity::separability_rows_for_counts(attention_matrix, value_matrix, counts, vis.at(0), options);
          }
          py::list out;
          for (const auto& r : rows) {
            py::dict fields;
            fields["rows"] = r.rows;
            fields["fraction"] = py::array(py::cast(r.fraction));
            fields["lower"] = py::array(py::cast(r.lower));
            fields["upper"] = py::array(py::cast(r.upper));
            fields["mean_fraction"] = r.mean_fraction;
            fields["mean_lower"] = r.mean_lower;
            fields["mean_upper"] = r.mean_upper;
            fields["separation"] = r.separation;
            out.append(make_result("SeparabilityRow", fields));
          }
          return out;
        });
      },
      "attention"_a, "values"_a, "counts"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "boundary"_a = "strict",
      "sphere_radius"_a = 1.0, "clamp_short_rows"_a = false,
      "Alg. 4 for one head: attention rows (L_q x L_k) over value vectors (L_k x d, projected to the sphere); for each\n"
      "N in counts an object with per-row fraction (N_s/N), Theorem 2 lower/upper, their means (mean_fraction, ...),\n"
      "the rows used and separation (delta). Rows with <= N visible keys are skipped (clamp_short_rows: N_eff = n-1).");

  // ---- gradient sensitivity and exact Jacobian norms ----------------------------------------------------------------
  m.def(
      "lemma2_jacobian_bound",
      [](const std::vector<double>& values, const std::vector<double>& derivatives) {
        const capacity::Lemma2Bound b = capacity::lemma2_jacobian_bound(
            Eigen::Map<const Vector<double>>(values.data(), Index(values.size())),
            Eigen::Map<const Vector<double>>(derivatives.data(), Index(derivatives.size())));
        py::dict fields;
        fields["tight"] = b.tight;
        fields["loose"] = b.loose;
        return make_result("Lemma2JacobianBound", fields);
      },
      "F_values"_a, "F_derivatives"_a, "Lemma 2 [derived]: fields tight and loose bounds of ||grad alpha||.");
  m.def(
      "finite_difference_jacobian_norm",
      [](const std::vector<double>& logits, const std::vector<double>& direction, double temperature, double step) {
        return capacity::finite_difference_jacobian_norm(
            Eigen::Map<const Vector<double>>(logits.data(), Index(logits.size())),
            Eigen::Map<const Vector<double>>(direction.data(), Index(direction.size())), temperature, step);
      },
      "logits"_a, "direction"_a, "temperature"_a, "step"_a,
      "Alg. 5 for one row: ||softmax((l + eps v)/T) - softmax(l/T)||_2 / eps with v normalized.");
  m.def(
      "finite_difference_jacobian_norm_mean",
      [](const py::object& logits, double temperature, double step, std::uint64_t seed, const py::object& causal_flag,
         const py::object& mask, std::optional<Index> causal_offset) {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const CArray<double> l = carray<double>(logits, "capacity.finite_difference_jacobian_norm_mean", "logits");
        const auto matrix = matrix_of(l, "capacity.finite_difference_jacobian_norm_mean", "logits");
        const VisibilitySpec vis = matrix_visibility(causal, mask, matrix.rows(), matrix.cols(),
                                                     "capacity.finite_difference_jacobian_norm_mean");
        py::gil_scoped_release release;
        return capacity::finite_difference_jacobian_norm_mean(matrix, temperature, step, seed, vis.at(0));
      },
      "logits"_a, "temperature"_a, "step"_a, "seed"_a,
      "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "One head (rows x cols logits): mean over query rows of the Alg. 5 estimate with a Gaussian unit direction.");
  m.def(
      "gradient_sensitivity",
      [](const py::object& heads, double temperature, double step, std::uint64_t seed, const py::object& causal_flag,
         const py::object& mask, std::optional<Index> causal_offset) {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const CArray<double> array = carray<double>(heads, "capacity.gradient_sensitivity", "heads");
        const auto list = head_list<double>(array, "capacity.gradient_sensitivity");
        const VisibilitySpec vis =
            matrix_visibility(causal, mask, list[0].rows(), list[0].cols(), "capacity.gradient_sensitivity");
        capacity::GradientSensitivity g;
        {
          py::gil_scoped_release release;
          g = capacity::gradient_sensitivity(list, temperature, step, seed, vis.at(0));
        }
        py::dict fields;
        fields["value"] = g.value;
        fields["head"] = g.head;
        fields["per_head"] = py::array(py::cast(g.per_head));
        return make_result("GradientSensitivity", fields);
      },
      "heads"_a, "temperature"_a, "step"_a, "seed"_a,
      "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "g(T, eps) = max over heads (H, rows, cols) of the per-head mean finite-difference norm; fields value, head,\n"
      "per_head.");
  m.def(
      "exact_jacobian_norm",
      [](const py::object& heads, double temperature, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        const py::array array = as_array(heads, "capacity.exact_jacobian_norm", "heads");
        return dispatch(array, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const auto list = head_list<T>(array, "capacity.exact_jacobian_norm");
          const VisibilitySpec vis =
              matrix_visibility(causal, mask, list[0].rows(), list[0].cols(), "capacity.exact_jacobian_norm");
          capacity::ExactJacobianNorm e;
          {
            py::gil_scoped_release release;
            e = capacity::exact_jacobian_norm(list, temperature, vis.at(0));
          }
          py::dict fields;
          fields["max_of_head_means"] = e.max_of_head_means;
          fields["max_over_rows"] = e.max_over_rows;
          fields["per_head_mean"] = py::array(py::cast(e.per_head_mean));
          return make_result("ExactJacobianNorm", fields);
        });
      },
      "heads"_a, "temperature"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "Exact ||(1/T)(diag alpha - alpha alpha^T)||_2 of softmax(logits/T) per row of heads (H, rows, cols) of\n"
      "logits: max_of_head_means, max_over_rows, per_head_mean.");
  m.def("two_logit_jacobian_norm", &capacity::two_logit_jacobian_norm, "gap"_a, "temperature"_a,
        "[derived] ||J||_2 of softmax(z/T) for two logits with gap g: 1/(2T cosh^2(g/(2T))).");
  m.def(
      "top_two_gaps",
      [](const py::object& logits, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        const CArray<double> l = carray<double>(logits, "capacity.top_two_gaps", "logits");
        const auto matrix = matrix_of(l, "capacity.top_two_gaps", "logits");
        const VisibilitySpec vis = matrix_visibility(causal, mask, matrix.rows(), matrix.cols(), "capacity.top_two_gaps");
        return py::array(py::cast(capacity::top_two_gaps(matrix, vis.at(0))));
      },
      "logits"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "Per query row l_(1) - l_(2) over the visible keys (inf for one visible key); float64 array.");

  // ---- tests: KS, Wilcoxon, critical N, power laws --------------------------------------------------------------
  m.def(
      "ks_2samp",
      [](const std::vector<double>& a, const std::vector<double>& b, const std::string& method) {
        const capacity::KsResult r = capacity::ks_2samp(a, b, ks_method_of(method));
        py::dict fields;
        fields["statistic"] = r.statistic;
        fields["p_value"] = r.p_value;
        fields["exact"] = r.exact;
        return make_result("KsTest", fields);
      },
      "a"_a, "b"_a, "method"_a = "automatic",
      "Two-sample Kolmogorov-Smirnov test (scipy ks_2samp): statistic D, two-sided p_value, exact.\n"
      "method: 'automatic' (exact when m n <= 1e7), 'exact', 'asymptotic'.");
  m.def("kolmogorov_survival", &capacity::kolmogorov_survival, "lambda_"_a, "Q(lambda) = 2 sum (-1)^{k-1} e^{-2k^2 lambda^2}.");
  m.def("kolmogorov_critical_value", &capacity::kolmogorov_critical_value, "level"_a, "c with Q(c) = level.");
  m.def(
      "critical_top_n",
      [](const std::vector<Index>& grid, const std::vector<std::vector<double>>& true_samples,
         const std::vector<std::vector<double>>& expected_samples, double level, const std::string& method) {
        const capacity::CriticalTopN r =
            capacity::critical_top_n(grid, true_samples, expected_samples, level, ks_method_of(method));
        py::dict fields;
        fields["critical_n"] = r.critical_n;
        fields["statistics"] = r.statistics;
        fields["p_values"] = r.p_values;
        return make_result("CriticalTopN", fields);
      },
      "n_grid"_a, "true_samples"_a, "expected_samples"_a, "level"_a, "method"_a = "automatic",
      "Alg. 3: the first N of the grid whose KS p-value > level (-1 if none), with statistics and p_values.");
  m.def("default_critical_n_grid", &capacity::default_critical_n_grid, "length"_a,
        "[derived] 1 .. ceil(L/4) in steps of max(1, L/128).");
  m.def("critical_n_slope", &capacity::critical_n_slope, "lengths"_a, "critical_n"_a,
        "Least-squares slope through the origin over entries with critical N >= 0.");
  m.def(
      "wilcoxon_signed_rank",
      [](const std::vector<double>& a, const std::vector<double>& b, const std::string& method) {
        capacity::WilcoxonMethod parsed = capacity::WilcoxonMethod::automatic;
        if (method == "exact")
          parsed = capacity::WilcoxonMethod::exact;
        else if (method == "normal")
          parsed = capacity::WilcoxonMethod::normal;
        else if (method != "automatic")
          throw_value_error("capacity.wilcoxon_signed_rank", "method must be 'automatic', 'exact' or 'normal'");
        const capacity::WilcoxonResult r = capacity::wilcoxon_signed_rank(a, b, parsed);
        py::dict fields;
        fields["statistic"] = r.statistic;
        fields["positive_rank_sum"] = r.positive_rank_sum;
        fields["nonzero"] = r.nonzero;
        fields["p_value"] = r.p_value;
        fields["exact"] = r.exact;
        return make_result("WilcoxonTest", fields);
      },
      "a"_a, "b"_a, "method"_a = "automatic",
      "Paired two-sided Wilcoxon signed-rank test (scipy wilcoxon, zero_method='wilcox', correction=False).");
  m.def(
      "fit_power_law",
      [](const std::vector<double>& x, const std::vector<double>& y) {
        const capacity::PowerLawFit f = capacity::fit_power_law(x, y);
        py::dict fields;
        fields["exponent"] = f.exponent;
        fields["prefactor"] = f.prefactor;
        fields["r_squared"] = f.r_squared;
        return make_result("PowerLawFit", fields);
      },
      "x"_a, "y"_a, "y ~ c x^b by least squares in log-log: exponent b, prefactor c, r_squared.");
}

}  // namespace attnscope_python
