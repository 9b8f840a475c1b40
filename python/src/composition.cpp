// Bindings of attnscope::composition ("Attention Rows as Compositional Data", arXiv:2608.14712): CoDA transforms,
// the sink/content channels and their exact entropy / Aitchison / JS splits, verdict flips and head scores.
#include <attnscope/composition.hpp>

#include "common.hpp"

namespace attnscope_python {

using namespace pybind11::literals;
namespace composition = attnscope::composition;

namespace {

composition::SinkSet sink_set(const py::object& sinks) {
  if (sinks.is_none()) return composition::SinkSet();
  return composition::SinkSet(sinks.cast<std::vector<Index>>());
}

composition::IlrSign ilr_sign(const std::string& sign) {
  if (sign == "scikit_bio") return composition::IlrSign::scikit_bio;
  if (sign == "r_compositions") return composition::IlrSign::r_compositions;
  throw_value_error("ilr", "sign must be 'scikit_bio' or 'r_compositions', got '" + sign + "'");
}

composition::Metric metric_of(const std::string& name, const char* function) {
  if (name == "cosine") return composition::Metric::cosine;
  if (name == "js" || name == "jensen_shannon") return composition::Metric::jensen_shannon;
  if (name == "aitchison") return composition::Metric::aitchison;
  if (name == "entropy") return composition::Metric::entropy;
  throw_value_error(function, "metric must be 'cosine', 'js', 'aitchison' or 'entropy', got '" + name + "'");
}

/// Struct-valued splits of one attention operand (second = None) or of two of one shape: call(a, b, visibility) per
/// slice (b = a for one operand), then fields(results, dict) names the per-row fields of the returned result.
template <class Call, class Fields>
py::object split(const char* result_type, const char* function, const char* first_name, const char* second_name,
                 const py::object& first, const py::object& second, const py::object& causal, const py::object& mask,
                 Call&& call, Fields&& fields) {
  const py::array array = as_array(first, function, first_name);
  return dispatch(array, [&](auto tag) -> py::object {
    using T = decltype(tag);
    const Rows<T> a = as_rows<T>(array, function, first_name);
    const Rows<T> b = second.is_none() ? a : as_rows_like<T>(second, a.layout, function, second_name, first_name);
    const VisibilitySpec visibility = make_visibility(causal, mask, a.layout, function);
    const auto results = run_sliced(a.layout, visibility, [&](Index s, const Visibility& v) {
      return call(s < 0 ? a.all() : a.slice(s), s < 0 ? b.all() : b.slice(s), v);
    });
    py::dict out;
    fields(results, out);
    return make_result(result_type, out);
  });
}

/// The struct type of a SlicedResults (for member pointers in the generic field lambdas).
template <class Results>
using SplitOf = typename std::decay_t<Results>::value_type;

const char* const rows_doc = R"(

Rows over the last axis of (..., rows, cols) or (cols,), float32 or float64 (others converted to float64; C-contiguous
input is read without a copy); causal / mask refer to the last two axes (see attnscope.softmax). Results have the
input's dtype; the GIL is released. Raises ValueError (attnscope::invalid_argument) on bad input.)";

const char* const attention_doc = R"(

attention: rows that are distributions over their visible keys (>= 0, summing to 1 within `tolerance`; closed
before use), shape (..., rows, cols). sinks: the sink columns (default [0]). Results: arrays of shape
attention.shape[:-1] per field, the input's dtype; the GIL is released. Raises ValueError on bad rows (negative, not
summing to 1, sink mass 1, ...).)";

std::string with(const char* head, const char* tail) { return std::string(head) + tail; }

}  // namespace

void bind_composition(py::module_& parent) {
  py::module_ m = parent.def_submodule("composition", "attnscope::composition: attention rows as compositional data "
                                                      "(arXiv:2608.14712).");

  // ---- CoDA core: one matrix in, one matrix out ------------------------------------------------------------------
#define ATTNSCOPE_UNARY(name, text)                                                                                 \
  m.def(                                                                                                           \
      #name,                                                                                                       \
      [](const py::object& x, const py::object& causal_flag, const py::object& mask,                                 \
         std::optional<Index> causal_offset) {                                                                       \
        const py::object causal = causal_argument(causal_flag, causal_offset);                                       \
        return rowwise_matrix(#name, x, causal, mask,                                                              \
                              [&](const auto& rows, const Visibility& v) { return composition::name(rows, v); }, \
                              "x");                                                                                \
      },                                                                                                           \
      "x"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(), with(text, rows_doc).c_str())
  ATTNSCOPE_UNARY(closure, "Closure C(x) = x / sum x over each row's visible parts (skbio closure).");
  ATTNSCOPE_UNARY(clr, "Centred log-ratio clr(x) = ln x - mean(ln x) (Aitchison 1986); parts must be > 0.");
  ATTNSCOPE_UNARY(clr_from_logits, "clr(softmax(z)) = z - mean(z), computed from logits (no logs).");
  ATTNSCOPE_UNARY(clr_inv, "Inverse clr: C(exp(z - max z)).");
#undef ATTNSCOPE_UNARY

#define ATTNSCOPE_ILR(name, text)                                                                                    \
  m.def(                                                                                                            \
      #name,                                                                                                        \
      [](const py::object& x, const py::object& causal_flag, const py::object& mask,                                 \
         std::optional<Index> causal_offset, const std::string& sign) {                                              \
        const py::object causal = causal_argument(causal_flag, causal_offset);                                       \
        const composition::IlrSign parsed = ilr_sign(sign);                                                         \
        return rowwise_matrix(                                                                                      \
            #name, x, causal, mask,                                                                                 \
            [&](const auto& rows, const Visibility& v) { return composition::name(rows, v, parsed); }, "x");        \
      },                                                                                                            \
      "x"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),                              \
      "sign"_a = "scikit_bio", with(text, rows_doc).c_str())
  ATTNSCOPE_ILR(ilr, "Isometric log-ratio coordinates (Egozcue 2003), O(D) per row; (..., D) -> (..., D - 1) with all\n"
                     "keys visible (masked rows: left-aligned, zeros after). sign: 'scikit_bio' (default) or\n"
                     "'r_compositions' (= minus).");
  ATTNSCOPE_ILR(ilr_from_logits, "ilr(softmax(z)) from logits (z for ln x, no logs).");
  ATTNSCOPE_ILR(ilr_inv, "Inverse ilr: (..., D - 1) coordinates -> (..., D) compositions.");
#undef ATTNSCOPE_ILR

  m.def("ilr_basis",
        [](Index parts, const std::string& sign) {
          return matrix_array(composition::ilr_basis<double>(parts, ilr_sign(sign)));
        },
        "parts"_a, "sign"_a = "scikit_bio", "The explicit (D-1) x D ilr basis (float64). Raises ValueError for D < 2.");
  m.def(
      "alr",
      [](const py::object& x, Index reference, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_matrix("alr", x, causal, mask,
                              [&](const auto& rows, const Visibility& v) { return composition::alr(rows, reference, v); },
                              "x");
      },
      "x"_a, "reference"_a = 0, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      with("Additive log-ratio ln(x_j / x_ref), j != ref: (..., D) -> (..., D - 1).", rows_doc).c_str());
  m.def(
      "alr_inv",
      [](const py::object& values, Index reference, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_matrix(
            "alr_inv", values, causal, mask,
            [&](const auto& rows, const Visibility& v) { return composition::alr_inv(rows, reference, v); }, "values");
      },
      "values"_a, "reference"_a = 0, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      with("Inverse alr: C(exp(y) with 0 at the reference).", rows_doc).c_str());
  m.def(
      "power",
      [](const py::object& x, double alpha, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_matrix("power", x, causal, mask, [&](const auto& rows, const Visibility& v) {
          using T = typename std::decay_t<decltype(rows)>::Scalar;
          return composition::power(rows, static_cast<T>(alpha), v);
        }, "x");
      },
      "x"_a, "alpha"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      with("Powering C(x^alpha) (computed in logs).", rows_doc).c_str());
  m.def(
      "multiplicative_replacement",
      [](const py::object& x, double delta, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_matrix("multiplicative_replacement", x, causal, mask, [&](const auto& rows, const Visibility& v) {
          using T = typename std::decay_t<decltype(rows)>::Scalar;
          return composition::multiplicative_replacement(rows, static_cast<T>(delta), v);
        }, "x");
      },
      "x"_a, "delta"_a = 0.0, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      with("Zeros -> delta (default 1/D^2), other parts scaled by (1 - z delta) (Martin-Fernandez 2003).", rows_doc)
          .c_str());

#define ATTNSCOPE_BINARY_MATRIX(name, text)                                                                        \
  m.def(                                                                                                          \
      #name,                                                                                                      \
      [](const py::object& x, const py::object& y, const py::object& causal_flag, const py::object& mask,            \
         std::optional<Index> causal_offset) {                                                                       \
        const py::object causal = causal_argument(causal_flag, causal_offset);                                       \
        return rowwise_pair(                                                                                      \
            #name, "x", "y", x, y, causal, mask,                                                                  \
            [&](const auto& a, const auto& b, const Visibility& v) { return composition::name(a, b, v); });       \
      },                                                                                                          \
      "x"_a, "y"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),                       \
      with(text, rows_doc).c_str())
  ATTNSCOPE_BINARY_MATRIX(perturb, "Perturbation C(x * y), row by row (y has x's shape).");
  ATTNSCOPE_BINARY_MATRIX(perturb_inv, "Inverse perturbation C(x / y).");
#undef ATTNSCOPE_BINARY_MATRIX

  m.def(
      "inner",
      [](const py::object& x, const py::object& y, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_pair("inner", "x", "y", x, y, causal, mask, [&](const auto& a, const auto& b,
                                                                              const Visibility& v) {
          return composition::inner(a, b, v);
        });
      },
      "x"_a, "y"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      with("Aitchison inner product <clr x, clr y> per row pair; shape x.shape[:-1].", rows_doc).c_str());
  m.def(
      "aitchison_distance",
      [](const py::object& x, const py::object& y, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_pair("aitchison_distance", "x", "y", x, y, causal, mask,
                                   [&](const auto& a, const auto& b, const Visibility& v) {
                                     return composition::aitchison_distance(a, b, v);
                                   });
      },
      "x"_a, "y"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      with("Aitchison distance ||clr x - clr y|| per row pair (parts > 0); shape x.shape[:-1].", rows_doc).c_str());
  m.def(
      "aitchison_distance_from_logits",
      [](const py::object& x, const py::object& y, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_pair("aitchison_distance_from_logits", "logits_x", "logits_y", x, y, causal, mask,
                                   [&](const auto& a, const auto& b, const Visibility& v) {
                                     return composition::aitchison_distance_from_logits(a, b, v);
                                   });
      },
      "logits_x"_a, "logits_y"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      with("Aitchison distance of softmax(z) and softmax(z') from the logits (exact with underflow).", rows_doc)
          .c_str());

  // ---- sink and content channels -------------------------------------------------------------------------------
  const double tolerance = composition::detail::default_row_sum_tolerance;
  m.def(
      "split_sink",
      [](const py::object& attention, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset, const py::object& sinks,
         double tol) {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const composition::SinkSet set = sink_set(sinks);
        return split(
            "SinkSplit", "composition.split_sink", "attention", "", attention, py::none(), causal, mask,
            [&](const auto& a, const auto&, const Visibility& v) { return composition::split_sink(a, v, set, tol); },
            [](const auto& results, py::dict& fields) {
              using Split = SplitOf<decltype(results)>;
              fields["sink_mass"] = results.field(&Split::sink_mass);
              fields["content"] = results.field(&Split::content);
            });
      },
      "attention"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "sinks"_a = py::none(), "tolerance"_a = tolerance,
      with("Splits each row a = (s, (1 - s) c): fields sink_mass (shape [...]) and content (the content composition\n"
           "c = C(a_j, j not in S), the attention's shape, 0 at sinks and masked keys).",
           attention_doc)
          .c_str());
  m.def(
      "entropy_split",
      [](const py::object& attention, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset, const py::object& sinks,
         double tol) {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const composition::SinkSet set = sink_set(sinks);
        return split(
            "EntropySplit", "composition.entropy_split", "attention", "", attention, py::none(), causal, mask,
            [&](const auto& a, const auto&, const Visibility& v) { return composition::entropy_split(a, v, set, tol); },
            [](const auto& results, py::dict& fields) {
              using Split = SplitOf<decltype(results)>;
              fields["entropy"] = results.field(&Split::entropy);
              fields["sink_mass"] = results.field(&Split::sink_mass);
              fields["binary"] = results.field(&Split::binary);
              fields["within_sink"] = results.field(&Split::within_sink);
              fields["content_entropy"] = results.field(&Split::content_entropy);
              fields["content_term"] = results.field(&Split::content_term);
              // sink_term() = binary + sink_mass * within_sink, as the C++ member function
              fields["sink_term"] = fields["binary"].attr("__add__")(fields["sink_mass"].attr("__mul__")(fields["within_sink"]));
            });
      },
      "attention"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "sinks"_a = py::none(), "tolerance"_a = tolerance,
      with("Exact entropy split H(a) = H_b(s) + s H(a_S/s) + (1 - s) H(c) (Shannon grouping). Fields: entropy,\n"
           "sink_mass, binary (H_b(s)), within_sink, content_entropy (H(c), the drop convention), content_term\n"
           "((1 - s) H(c)) and sink_term (binary + sink_mass * within_sink).",
           attention_doc)
          .c_str());

#define ATTNSCOPE_SINK_VECTOR(name, argument, text)                                                              \
  m.def(                                                                                                        \
      #name,                                                                                                    \
      [](const py::object& input, const py::object& causal_flag, const py::object& mask,                             \
         std::optional<Index> causal_offset, const py::object& sinks) {                                              \
        const py::object causal = causal_argument(causal_flag, causal_offset);                                       \
        const composition::SinkSet set = sink_set(sinks);                                                       \
        return rowwise("composition." #name, argument, input, causal, mask,                              \
                              [&](const auto& a, const Visibility& v) { return composition::name(a, v, set); }); \
      },                                                                                                        \
      py::arg(argument), "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),                  \
      "sinks"_a = py::none(),                                                                                        \
      with(text, attention_doc).c_str())
  ATTNSCOPE_SINK_VECTOR(sink_balance, "attention",
                        "Balance b_S = sqrt(|S||C|/(|S|+|C|)) ln(g(a_S)/g(a_C)) per row (parts > 0).");
  ATTNSCOPE_SINK_VECTOR(sink_balance_from_logits, "logits", "Sink balance from the logits (exact with underflow).");
#undef ATTNSCOPE_SINK_VECTOR
  m.def(
      "sink_share_of_entropy",
      [](const py::object& attention, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset, const py::object& sinks,
         double tol) {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const composition::SinkSet set = sink_set(sinks);
        return rowwise("composition.sink_share_of_entropy", "attention", attention, causal, mask,
                              [&](const auto& a, const Visibility& v) {
                                return composition::sink_share_of_entropy(a, v, set, tol);
                              });
      },
      "attention"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "sinks"_a = py::none(), "tolerance"_a = tolerance,
      with("(H_b(s) + s H_S) / H(a) per row (0 where H(a) = 0).", attention_doc).c_str());

#define ATTNSCOPE_PAIR_SPLIT(name, first, second, text)                                                          \
  m.def(                                                                                                        \
      #name,                                                                                                    \
      [](const py::object& x, const py::object& y, const py::object& causal_flag, const py::object& mask,            \
         std::optional<Index> causal_offset,                                                                         \
         const py::object& sinks) {                                                                                  \
        const py::object causal = causal_argument(causal_flag, causal_offset);                                       \
        const composition::SinkSet set = sink_set(sinks);                                                       \
        return split(                                                                                           \
            "AitchisonSplit", "composition." #name, first, second, x, y, causal, mask,                               \
            [&](const auto& a, const auto& b, const Visibility& v) { return composition::name(a, b, v, set); }, \
            [](const auto& results, py::dict& fields) {                                                         \
              using Split = SplitOf<decltype(results)>;                                                         \
              fields["distance_squared"] = results.field(&Split::distance_squared);                             \
              fields["sink_term"] = results.field(&Split::sink_term);                                           \
              fields["within_sink_term"] = results.field(&Split::within_sink_term);                             \
              fields["content_term"] = results.field(&Split::content_term);                                     \
            });                                                                                                 \
      },                                                                                                        \
      py::arg(first), py::arg(second), "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),    \
      "sinks"_a = py::none(),                                                                                        \
      with(text, attention_doc).c_str())
  ATTNSCOPE_PAIR_SPLIT(aitchison_split, "a", "b",
                       "Orthogonal split d_A(a, b)^2 = (b_S(a) - b_S(b))^2 + d_A(a_S, b_S)^2 + d_A(c, c')^2 (parts\n"
                       "> 0). Fields distance_squared, sink_term, within_sink_term, content_term.");
  ATTNSCOPE_PAIR_SPLIT(aitchison_split_from_logits, "logits_a", "logits_b",
                       "aitchison_split of softmax(z), softmax(z') computed from the logits (exact with underflow).");
#undef ATTNSCOPE_PAIR_SPLIT

  m.def(
      "jensen_shannon",
      [](const py::object& a, const py::object& b, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset, double tol) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_pair("composition.jensen_shannon", "a", "b", a, b, causal, mask,
                                   [&](const auto& x, const auto& y, const Visibility& v) {
                                     return composition::jensen_shannon(x, y, v, tol);
                                   });
      },
      "a"_a, "b"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "tolerance"_a = tolerance,
      with("Jensen-Shannon divergence (nats) per row pair.", attention_doc).c_str());
  m.def(
      "cosine",
      [](const py::object& a, const py::object& b, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset, double tol) {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        return rowwise_pair("composition.cosine", "a", "b", a, b, causal, mask,
                                   [&](const auto& x, const auto& y, const Visibility& v) {
                                     return composition::cosine(x, y, v, tol);
                                   });
      },
      "a"_a, "b"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "tolerance"_a = tolerance,
      with("Cosine similarity per row pair.", attention_doc).c_str());
  m.def(
      "js_split",
      [](const py::object& x, const py::object& y, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset,
         const py::object& sinks, double tol) {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const composition::SinkSet set = sink_set(sinks);
        return split(
            "JsSplit", "composition.js_split", "a", "b", x, y, causal, mask,
            [&](const auto& a, const auto& b, const Visibility& v) { return composition::js_split(a, b, v, set, tol); },
            [](const auto& results, py::dict& fields) {
              using Split = SplitOf<decltype(results)>;
              fields["divergence"] = results.field(&Split::divergence);
              fields["sink_term"] = results.field(&Split::sink_term);
              fields["within_sink_term"] = results.field(&Split::within_sink_term);
              fields["content_term"] = results.field(&Split::content_term);
              fields["content_divergence"] = results.field(&Split::content_divergence);
            });
      },
      "a"_a, "b"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "sinks"_a = py::none(), "tolerance"_a = tolerance,
      with("Exact split JS = JS_b(s, s') + s_bar JS_wS(...) + (1 - s_bar) JS_w(c, c'). Fields divergence, sink_term,\n"
           "within_sink_term, content_term, content_divergence (JS(c, c')).",
           attention_doc)
          .c_str());
  m.def(
      "cosine_conventions",
      [](const py::object& x, const py::object& y, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset,
         const py::object& sinks, double tol) {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const composition::SinkSet set = sink_set(sinks);
        return split(
            "CosineConventions", "composition.cosine_conventions", "a", "b", x, y, causal, mask,
            [&](const auto& a, const auto& b, const Visibility& v) {
              return composition::cosine_conventions(a, b, v, set, tol);
            },
            [](const auto& results, py::dict& fields) {
              using Split = SplitOf<decltype(results)>;
              fields["keep"] = results.field(&Split::keep);
              fields["drop"] = results.field(&Split::drop);
            });
      },
      "a"_a, "b"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "sinks"_a = py::none(), "tolerance"_a = tolerance,
      with("Cosine under both conventions: keep = cos(a, b), drop = cos(c, c').", attention_doc).c_str());

  // ---- per-head summaries, verdict flips -------------------------------------------------------------------------
  m.def(
      "argmax_mass_sink",
      [](const py::object& attention, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset, double tol) -> py::object {
        const py::object causal = causal_argument(causal_flag, causal_offset);
        const py::array array = as_array(attention, "composition.argmax_mass_sink", "attention");
        return dispatch(array, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const CArray<T> values = carray<T>(array, "composition.argmax_mass_sink", "attention");
          const auto a = matrix_of(values, "composition.argmax_mass_sink", "attention");
          const VisibilitySpec vis = matrix_visibility(causal, mask, a.rows(), a.cols(), "composition.argmax_mass_sink");
          return py::cast(composition::argmax_mass_sink(a, vis.at(0), tol).columns());
        });
      },
      "attention"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "tolerance"_a = tolerance,
      "The column with the largest total weight among columns visible in every row (one head, 2-D); returns the\n"
      "sink columns as a list of ints (pass as sinks=...).");
  m.def(
      "channel_summary",
      [](const py::object& attention, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset, const py::object& sinks,
         double tol) -> py::object {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const composition::SinkSet set = sink_set(sinks);
        const py::array array = as_array(attention, "composition.channel_summary", "attention");
        return dispatch(array, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const CArray<T> values = carray<T>(array, "composition.channel_summary", "attention");
          const auto a = matrix_of(values, "composition.channel_summary", "attention");
          const VisibilitySpec vis = matrix_visibility(causal, mask, a.rows(), a.cols(), "composition.channel_summary");
          composition::ChannelSummary summary;
          {
            py::gil_scoped_release release;
            summary = composition::channel_summary(a, vis.at(0), set, tol);
          }
          py::dict fields;
          fields["mean_sink_mass"] = summary.mean_sink_mass;
          fields["mean_entropy"] = summary.mean_entropy;
          fields["mean_content_entropy"] = summary.mean_content_entropy;
          fields["sink_share_of_entropy"] = summary.sink_share_of_entropy;
          return make_result("ChannelSummary", fields);
        });
      },
      "attention"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "sinks"_a = py::none(), "tolerance"_a = tolerance,
      "One head (2-D attention): mean_sink_mass, mean_entropy (keep), mean_content_entropy (drop) and\n"
      "sink_share_of_entropy (ratio of sums), as floats.");
  m.def(
      "head_scores",
      [](const py::object& heads, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset, const py::object& sinks,
         double tol) -> py::object {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const composition::SinkSet set = sink_set(sinks);
        const py::array array = as_array(heads, "composition.head_scores", "heads");
        return dispatch(array, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const auto list = head_list<T>(array, "composition.head_scores");
          const VisibilitySpec vis =
              matrix_visibility(causal, mask, list[0].rows(), list[0].cols(), "composition.head_scores");
          composition::HeadScores scores;
          {
            py::gil_scoped_release release;
            scores = composition::head_scores(list, vis.at(0), set, tol);
          }
          py::dict fields;
          fields["sink_mass"] = vector_array(std::move(scores.sink_mass));
          fields["content_entropy"] = vector_array(std::move(scores.content_entropy));
          fields["raw_entropy"] = vector_array(std::move(scores.raw_entropy));
          fields["content_redundancy"] = vector_array(std::move(scores.content_redundancy));
          return make_result("HeadScores", fields);
        });
      },
      "heads"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "sinks"_a = py::none(), "tolerance"_a = tolerance,
      "Per-head channel scores of heads (H, rows, cols), H >= 2: sink_mass (mean s), content_entropy (mean H(c)),\n"
      "raw_entropy (mean H(a)), content_redundancy; float64 arrays of length H.");
  m.def(
      "pair_metric_matrices",
      [](const py::object& heads, const std::string& metric, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset,
         const py::object& sinks, double tol) -> py::object {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const composition::SinkSet set = sink_set(sinks);
        const composition::Metric parsed = metric_of(metric, "composition.pair_metric_matrices");
        const py::array array = as_array(heads, "composition.pair_metric_matrices", "heads");
        return dispatch(array, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const auto list = head_list<T>(array, "composition.pair_metric_matrices");
          const VisibilitySpec vis =
              matrix_visibility(causal, mask, list[0].rows(), list[0].cols(), "composition.pair_metric_matrices");
          composition::ConventionMatrices matrices;
          {
            py::gil_scoped_release release;
            matrices = composition::pair_metric_matrices(list, parsed, vis.at(0), set, tol);
          }
          py::dict fields;
          fields["keep"] = matrix_array(std::move(matrices.keep));
          fields["drop"] = matrix_array(std::move(matrices.drop));
          return make_result("PairMetricMatrices", fields);
        });
      },
      "heads"_a, "metric"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "sinks"_a = py::none(),
      "tolerance"_a = tolerance,
      "H x H matrices (float64) of the row-averaged metric ('cosine', 'js', 'aitchison') between heads (H, rows, cols)\n"
      "under the keep and drop conventions: fields keep, drop.");
  m.def(
      "flip_rate",
      [](const py::object& heads, const std::string& metric, const py::object& causal_flag, const py::object& mask,
         std::optional<Index> causal_offset,
         const std::string& sampler, double tie_tolerance, Index samples, std::uint64_t seed, const py::object& sinks,
         double tol) -> py::object {
           const py::object causal = causal_argument(causal_flag, causal_offset);
        const composition::SinkSet set = sink_set(sinks);
        const composition::Metric parsed = metric_of(metric, "composition.flip_rate");
        composition::FlipOptions options;
        if (sampler == "triples")
          options.sampler = composition::Sampler::triples;
        else if (sampler == "pairs_of_pairs")
          options.sampler = composition::Sampler::pairs_of_pairs;
        else
          throw_value_error("composition.flip_rate", "sampler must be 'triples' or 'pairs_of_pairs'");
        options.tie_tolerance = tie_tolerance;
        options.samples = samples;
        options.seed = seed;
        const py::array array = as_array(heads, "composition.flip_rate", "heads");
        return dispatch(array, [&](auto tag) -> py::object {
          using T = decltype(tag);
          const auto list = head_list<T>(array, "composition.flip_rate");
          const VisibilitySpec vis =
              matrix_visibility(causal, mask, list[0].rows(), list[0].cols(), "composition.flip_rate");
          composition::FlipResult result;
          {
            py::gil_scoped_release release;
            result = composition::flip_rate(list, parsed, vis.at(0), options, set, tol);
          }
          py::dict fields;
          fields["units"] = result.units;
          fields["ties"] = result.ties;
          fields["flips"] = result.flips;
          fields["rate"] = result.rate();
          return make_result("FlipRate", fields);
        });
      },
      "heads"_a, "metric"_a, "causal"_a = false, "mask"_a = py::none(), "causal_offset"_a = py::none(),
      "sampler"_a = "triples",
      "tie_tolerance"_a = 1e-12, "samples"_a = 0, "seed"_a = 0, "sinks"_a = py::none(), "tolerance"_a = tolerance,
      "Verdict flip rate between the keep and drop conventions over heads (H >= 3, shape (H, rows, cols)):\n"
      "units, ties, flips and rate = flips / (units - ties). samples = 0 enumerates every unit.");
}

}  // namespace attnscope_python
