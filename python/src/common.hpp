// Shared machinery of the Python bindings: turning numpy arrays into row-major Eigen maps without copying,
// batch (leading) dimensions, the causal/mask arguments, results handed to numpy without copying, and the
// normalization-map argument. Every binding translation unit includes this header.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <attnscope/core.hpp>
#include <attnscope/normalize/maps.hpp>

namespace attnscope::stream {
struct RowStatistics;
}

namespace attnscope_python {

namespace py = pybind11;
using attnscope::Index;
using attnscope::Mask;
using attnscope::RowMatrix;
using attnscope::Vector;
using attnscope::Visibility;

/// A C-contiguous numpy array of T; `ensure` returns the same object (no copy) when the input already is one.
template <class T>
using CArray = py::array_t<T, py::array::c_style | py::array::forcecast>;

using Shape = std::vector<py::ssize_t>;

/// A file or folder argument: str, bytes or os.PathLike (pathlib.Path), through pybind11's std::filesystem caster.
using PathArgument = std::filesystem::path;

/// ValueError with the message "attnscope.<function>: <text>" (the C++ errors read "attnscope::<function>: ...").
[[noreturn]] inline void throw_value_error(const std::string& function, const std::string& text) {
  throw py::value_error("attnscope." + function + ": " + text);
}

inline std::string shape_text(const Shape& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

/// TypeError with the message "attnscope.<function>: <text>": an argument of the wrong kind (object, string or
/// complex arrays, tensors that cannot be read).
[[noreturn]] inline void throw_type_error(const std::string& function, const std::string& text) {
  throw py::type_error("attnscope." + function + ": " + text);
}

/// A torch.Tensor as something numpy can read without copying where possible: a tensor that requires grad is read
/// through .detach() (a view of the same storage, no copy), a bfloat16 tensor through .float() (numpy has no
/// bfloat16; every bfloat16 value is exact in float32; one copy). Other objects are returned unchanged. A tensor
/// on another device than the CPU is a TypeError saying .cpu().
inline py::object readable_tensor(const py::handle& object, const std::string& function, const char* name) {
  py::object source = py::reinterpret_borrow<py::object>(object);
  const py::object type = py::type::of(object);
  if (!py::hasattr(type, "__module__") || type.attr("__module__").cast<std::string>().rfind("torch", 0) != 0 ||
      !py::hasattr(object, "detach") || !py::hasattr(object, "requires_grad") || !py::hasattr(object, "dtype"))
    return source;
  const std::string device = py::str(source.attr("device")).cast<std::string>();
  if (device != "cpu")
    throw_type_error(function, std::string(name) + " is a tensor on " + device + "; move it with .detach().cpu()");
  if (source.attr("requires_grad").cast<bool>()) source = source.attr("detach")();
  if (py::str(source.attr("dtype")).cast<std::string>() == "torch.bfloat16") source = source.attr("float")();
  return source;
}

/// Any array-like (numpy array, list, a CPU torch tensor through __array__) as a numpy array, dtype kept. Object,
/// string, bytes, complex, datetime and structured arrays are a TypeError (numpy would turn them into numbers
/// silently or fail inside the conversion); so is an object numpy cannot read, with numpy's reason.
inline py::array as_array(const py::handle& object, const std::string& function, const char* name) {
  const py::object source = readable_tensor(object, function, name);
  py::array array = py::array::ensure(source);
  if (!array) {  // ensure() cleared numpy's error: ask numpy again for its reason
    std::string reason = "not an array-like of numbers";
    try {
      py::module_::import("numpy").attr("asarray")(source);
    } catch (const py::error_already_set& error) {
      reason += " (" + std::string(error.what()) + ")";
    }
    if (reason.find(".detach()") == std::string::npos && py::hasattr(source, "requires_grad"))
      reason += "; for a tensor, pass t.detach()";
    throw_type_error(function, std::string(name) + " is " + reason);
  }
  const char kind = array.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b') {
    const char* what = kind == 'c' ? "complex" : kind == 'O' ? "object" : (kind == 'U' || kind == 'S') ? "string"
                                                                                                        : "non-numeric";
    throw_type_error(function, std::string(name) + " is a " + what + " array (dtype " +
                                   py::str(array.dtype()).cast<std::string>() +
                                   "); expected real numbers (float, int or bool)" +
                                   (kind == 'c' ? ": pass the real part (a.real) or the magnitude (abs(a)) explicitly"
                                                : ""));
  }
  return array;
}

/// float32 input is computed in float32; every other dtype (float64, integers, bool, float16) in float64.
inline bool is_float32(const py::array& array) { return array.dtype().is(py::dtype::of<float>()); }

/// Runs body(float{}) or body(double{}) by the dtype of `array`.
template <class Body>
py::object dispatch(const py::array& array, Body&& body) {
  if (is_float32(array)) return body(float{});
  return body(double{});
}

/// Rows over the last axis: shape [..., rows, cols] is `slices` matrices of rows × cols; a 1-D array is one row.
struct Layout {
  Shape shape;
  Index slices = 1, rows = 1, cols = 0;
  Index total_rows() const { return slices * rows; }
  /// shape[:-1]: the shape of one value per row.
  Shape row_shape() const { return Shape(shape.begin(), shape.end() - 1); }
};

inline Layout row_layout(const py::array& array, const std::string& function, const char* name) {
  Layout layout;
  layout.shape.assign(array.shape(), array.shape() + array.ndim());
  if (array.ndim() < 1) throw_value_error(function, std::string(name) + " must have at least one axis (keys), got a scalar");
  layout.cols = layout.shape.back();
  if (array.ndim() >= 2) {
    layout.rows = layout.shape[layout.shape.size() - 2];
    for (std::size_t i = 0; i + 2 < layout.shape.size(); ++i) layout.slices *= layout.shape[i];
  }
  return layout;
}

/// A C-contiguous array of T viewed as slices of row-major matrices. Reads the caller's memory when it already is
/// C-contiguous of dtype T; otherwise numpy converts it once (a strided view, another dtype).
template <class T>
struct Rows {
  CArray<T> array;
  Layout layout;
  using ConstMap = Eigen::Map<const RowMatrix<T>>;
  const T* data() const { return array.data(); }
  /// Every row of every slice as one (slices·rows) × cols matrix.
  ConstMap all() const { return ConstMap(data(), layout.total_rows(), layout.cols); }
  /// The rows × cols matrix of slice s.
  ConstMap slice(Index s) const { return ConstMap(data() + s * layout.rows * layout.cols, layout.rows, layout.cols); }
};

template <class T>
Rows<T> as_rows(const py::handle& object, const std::string& function, const char* name) {
  const py::array array = as_array(object, function, name);
  Rows<T> rows{CArray<T>::ensure(array), {}};
  if (!rows.array) throw py::error_already_set();
  rows.layout = row_layout(rows.array, function, name);
  return rows;
}

/// A second operand converted to T that must have the shape of the first.
template <class T>
Rows<T> as_rows_like(const py::handle& object, const Layout& like, const std::string& function, const char* name,
                     const char* like_name) {
  Rows<T> rows = as_rows<T>(object, function, name);
  if (rows.layout.shape != like.shape)
    throw_value_error(function, std::string(name) + " has shape " + shape_text(rows.layout.shape) + " but " +
                                    like_name + " has shape " + shape_text(like.shape));
  return rows;
}

/// The causal / mask arguments: all keys, causal with an offset, or boolean masks (one shared by every slice, of
/// shape [rows, cols], or one per slice: the full shape of the input).
struct VisibilitySpec {
  enum class Kind { all, causal, mask };
  Kind kind = Kind::all;
  Index offset = 0;
  std::vector<Mask> masks;
  bool is_all() const { return kind == Kind::all; }
  Visibility at(Index slice) const {
    if (kind == Kind::causal) return Visibility(attnscope::Causal{offset});
    if (kind == Kind::mask) return Visibility(masks.size() == 1 ? masks[0] : masks[static_cast<std::size_t>(slice)]);
    return Visibility();
  }
};

/// The OpenMP version (_OPENMP, a date such as 201511) the module was compiled with; 0 without OpenMP.
inline int openmp_version() {
#ifdef _OPENMP
  return _OPENMP;
#else
  return 0;
#endif
}

/// A `threads` argument (0 = OpenMP's default): negative counts, and more than one thread in a module built without
/// OpenMP (where it would be ignored), are a ValueError naming the function.
inline int checked_threads(int threads, const std::string& function) {
  if (threads < 0) throw_value_error(function, "threads must be >= 0, got " + std::to_string(threads));
  if (threads > 1 && openmp_version() == 0)
    throw_value_error(function, "threads=" + std::to_string(threads) + " needs OpenMP, and this module was built "
                                "without it (attnscope.openmp == 0); rebuild with OpenMP (-fopenmp) or pass threads=1");
  return threads;
}

/// The `causal` and `causal_offset` keywords of a binding as the one object make_visibility reads.
inline py::object causal_argument(const py::object& causal, std::optional<Index> causal_offset) {
  return py::make_tuple(causal, causal_offset ? py::object(py::int_(*causal_offset)) : py::object(py::none()));
}

/// True for Python's and numpy's booleans (an int, even 0 or 1, is not one).
inline bool is_boolean(const py::handle& object) {
  return py::isinstance<py::bool_>(object) || py::isinstance(object, py::module_::import("numpy").attr("bool_"));
}

/// `causal` is a bool; `causal_offset` k (with causal=True) lets query i see keys 0..i+k. causal=True without an
/// offset on a non-square input is refused: top-left (k = 0) and bottom-right (k = cols - rows) alignment differ.
inline VisibilitySpec make_visibility(const py::object& causal, const py::object& mask, const Layout& layout,
                                      const std::string& function) {
  VisibilitySpec spec;
  py::object flag = causal, offset = py::none();
  if (py::isinstance<py::tuple>(causal)) {
    const py::tuple pair = py::reinterpret_borrow<py::tuple>(causal);
    flag = pair[0];
    offset = pair[1];
  }
  bool is_causal = false;
  if (!flag.is_none()) {
    if (!is_boolean(flag)) {
      const std::string text = py::repr(flag).cast<std::string>();
      throw_type_error(function, "causal must be True or False, got " + text +
                                     (py::isinstance<py::int_>(flag)
                                          ? "; an offset is its own keyword: causal=True, causal_offset=" + text
                                          : std::string()));
    }
    is_causal = flag.cast<bool>();
  }
  if (!offset.is_none()) {
    if (!is_causal)
      throw_value_error(function, "causal_offset=" + py::repr(offset).cast<std::string>() + " needs causal=True");
    spec.offset = offset.cast<Index>();
  } else if (is_causal && layout.rows != layout.cols) {
    const std::string rows = std::to_string(layout.rows), cols = std::to_string(layout.cols);
    throw_value_error(function,
                      "causal=True on " + rows + " queries x " + cols + " keys is ambiguous: top-left alignment "
                      "(query i sees keys 0..i, as torch.tril and is_causal) is causal_offset=0, bottom-right "
                      "alignment (the queries are the last " + rows + " positions, as with a KV cache) is "
                      "causal_offset=" + std::to_string(layout.cols - layout.rows) + "; pass causal_offset");
  }
  if (is_causal) spec.kind = VisibilitySpec::Kind::causal;
  if (mask.is_none()) return spec;
  if (is_causal) throw_value_error(function, "pass either causal or mask, not both");
  const CArray<bool> values = CArray<bool>::ensure(as_array(mask, function, "mask"));
  if (!values) throw py::error_already_set();
  const Shape shape(values.shape(), values.shape() + values.ndim());
  const Shape matrix_shape = layout.shape.size() >= 2 ? Shape{layout.rows, layout.cols} : Shape{layout.cols};
  const bool shared = shape == matrix_shape;
  if (!shared && shape != layout.shape)
    throw_value_error(function, "mask has shape " + shape_text(shape) + "; expected " + shape_text(matrix_shape) +
                                    " (shared by every matrix) or the logits' shape " + shape_text(layout.shape));
  spec.kind = VisibilitySpec::Kind::mask;
  const Index count = shared ? 1 : layout.slices;
  const bool* data = values.data();
  for (Index s = 0; s < count; ++s)
    spec.masks.push_back(Eigen::Map<const Mask>(data + s * layout.rows * layout.cols, layout.rows, layout.cols));
  return spec;
}

/// A numpy array owning an Eigen matrix or vector (moved, not copied): freed when numpy frees the array.
template <class Matrix>
py::array take_as_array(Matrix&& matrix, const Shape& shape) {
  using Plain = std::decay_t<Matrix>;
  using Scalar = typename Plain::Scalar;
  auto* owned = new Plain(std::forward<Matrix>(matrix));
  py::capsule owner(owned, [](void* pointer) { delete static_cast<Plain*>(pointer); });
  return py::array_t<Scalar>(shape, owned->data(), owner);
}

template <class T>
py::array empty_like_result(const Shape& shape) {
  return py::array_t<T>(shape);
}

/// Runs fn(slice, visibility) -> RowMatrix or Vector over the rows: once over every row (slice = -1) when all keys are
/// visible or there is a single matrix, otherwise once per slice (causal and masks refer to the last two axes). The GIL
/// is released meanwhile. A matrix result has shape input.shape[:-1] + (its columns,), a vector input.shape[:-1].
template <class Fn>
py::array map_slices(const Layout& layout, const VisibilitySpec& visibility, Fn&& fn) {
  using Result = std::decay_t<decltype(fn(Index(-1), Visibility()))>;
  constexpr bool per_row = Result::ColsAtCompileTime == 1;
  Result out;
  {
    py::gil_scoped_release release;
    if (visibility.is_all() || layout.slices == 1) {
      out = fn(Index(-1), visibility.at(0));
    } else {
      for (Index s = 0; s < layout.slices; ++s) {
        Result part = fn(s, visibility.at(s));
        if constexpr (per_row) {
          if (s == 0) out.resize(layout.total_rows());
          out.segment(s * layout.rows, layout.rows) = part;
        } else {
          if (s == 0) out.resize(layout.total_rows(), part.cols());
          out.middleRows(s * layout.rows, layout.rows) = part;
        }
      }
    }
  }
  Shape shape = layout.row_shape();
  if constexpr (!per_row) shape.push_back(out.cols());
  return take_as_array(std::move(out), shape);
}

/// A C++ struct result as an object of the typed class attnscope.results.<type>: a dataclass of the struct's fields
/// (same names as the C++ members) with a repr, to_dict() and to_pandas().
inline py::object make_result(const char* type, const py::dict& fields) {
  return py::module_::import("attnscope.results").attr(type)(**fields);
}

/// A 2-D C-contiguous matrix argument (embeddings, a head's attention, ...), without copy when possible.
template <class T>
Eigen::Map<const RowMatrix<T>> matrix_of(const CArray<T>& array, const std::string& function, const char* name) {
  if (array.ndim() == 1) return Eigen::Map<const RowMatrix<T>>(array.data(), 1, array.shape(0));
  if (array.ndim() != 2)
    throw_value_error(function, std::string(name) + " must be 2-D, got " + std::to_string(array.ndim()) + " axes");
  return Eigen::Map<const RowMatrix<T>>(array.data(), array.shape(0), array.shape(1));
}

template <class T>
CArray<T> carray(const py::handle& object, const std::string& function, const char* name) {
  CArray<T> array = CArray<T>::ensure(as_array(object, function, name));
  if (!array) throw py::error_already_set();
  return array;
}

/// The `map` argument: a NormalizationMap object (SoftmaxMap(...), ...) or its text ("softmax", "temperature:2",
/// "entmax:1.5", ...; parse_normalization_map).
inline attnscope::NormalizationMap to_map(const py::handle& object) {
  if (py::isinstance<py::str>(object)) return attnscope::parse_normalization_map(object.cast<std::string>());
  return object.cast<attnscope::NormalizationMap>();
}

/// A 1-D numpy array owning an Eigen vector (moved).
template <class V>
py::array vector_array(V vector) {
  const py::ssize_t size = vector.size();
  return take_as_array(std::move(vector), Shape{size});
}

/// A 2-D numpy array owning a row-major matrix (moved); column-major matrices are converted once.
template <class M>
py::array matrix_array(M matrix) {
  const Shape shape{static_cast<py::ssize_t>(matrix.rows()), static_cast<py::ssize_t>(matrix.cols())};
  return take_as_array(RowMatrix<typename M::Scalar>(std::move(matrix)), shape);
}

/// call(view, visibility) -> RowMatrix<T> or Vector<T> over the rows of `input` (dtype kept: float32 or float64),
/// with the causal/mask arguments; see map_slices for the result's shape.
template <class Call>
py::object rowwise(const char* function, const char* name, const py::object& input, const py::object& causal,
                   const py::object& mask, Call&& call) {
  const py::array array = as_array(input, function, name);
  return dispatch(array, [&](auto tag) -> py::object {
    using T = decltype(tag);
    const Rows<T> rows = as_rows<T>(array, function, name);
    const VisibilitySpec visibility = make_visibility(causal, mask, rows.layout, function);
    return map_slices(rows.layout, visibility,
                      [&](Index s, const Visibility& v) { return call(s < 0 ? rows.all() : rows.slice(s), v); });
  });
}

/// The visibility of logits in which -inf entries are masked keys (PyTorch's convention: masked_fill(-inf)), on top
/// of the causal/mask arguments; `spec` unchanged when no visible entry is -inf. A row with no visible finite logit
/// is a ValueError naming it.
template <class T>
VisibilitySpec mask_minus_infinity(const Rows<T>& rows, VisibilitySpec spec, const std::string& function,
                                   const char* name) {
  const Layout& layout = rows.layout;
  bool any = false;
  const T* data = rows.data();
  const Index total = layout.total_rows() * layout.cols;
  for (Index i = 0; i < total && !any; ++i) any = data[i] == -std::numeric_limits<T>::infinity();
  if (!any) return spec;
  VisibilitySpec masked;
  masked.kind = VisibilitySpec::Kind::mask;
  for (Index s = 0; s < layout.slices; ++s) {
    Mask m = spec.at(s).to_mask(layout.rows, layout.cols);
    const auto values = rows.slice(s);
    for (Index i = 0; i < layout.rows; ++i) {
      bool finite = false;
      for (Index j = 0; j < layout.cols; ++j) {
        if (values(i, j) == -std::numeric_limits<T>::infinity()) m(i, j) = false;
        finite = finite || m(i, j);
      }
      if (!finite)
        throw_value_error(function, std::string(name) + " row " + std::to_string(i) +
                                        (layout.slices > 1 ? " of matrix " + std::to_string(s) : std::string()) +
                                        " has no finite logit (every key is -inf or masked)");
    }
    masked.masks.push_back(std::move(m));
  }
  return masked;
}

/// rowwise with the argument named "logits" first (the maps); -inf logits are masked keys (mask_minus_infinity).
template <class Call>
py::object rowwise_matrix(const char* function, const py::object& logits, const py::object& causal,
                          const py::object& mask, Call&& call, const char* name = "logits") {
  const py::array array = as_array(logits, function, name);
  return dispatch(array, [&](auto tag) -> py::object {
    using T = decltype(tag);
    const Rows<T> rows = as_rows<T>(array, function, name);
    const VisibilitySpec visibility =
        mask_minus_infinity(rows, make_visibility(causal, mask, rows.layout, function), function, name);
    return map_slices(rows.layout, visibility,
                      [&](Index s, const Visibility& v) { return call(s < 0 ? rows.all() : rows.slice(s), v); });
  });
}

/// call(a, b, visibility) over the rows of two operands of one shape (the second converted to the first's dtype).
template <class Call>
py::object rowwise_pair(const char* function, const char* first_name, const char* second_name,
                        const py::object& first, const py::object& second, const py::object& causal,
                        const py::object& mask, Call&& call) {
  const py::array array = as_array(first, function, first_name);
  return dispatch(array, [&](auto tag) -> py::object {
    using T = decltype(tag);
    const Rows<T> a = as_rows<T>(array, function, first_name);
    const Rows<T> b = as_rows_like<T>(second, a.layout, function, second_name, first_name);
    const VisibilitySpec visibility = make_visibility(causal, mask, a.layout, function);
    return map_slices(a.layout, visibility, [&](Index s, const Visibility& v) {
      return call(s < 0 ? a.all() : a.slice(s), s < 0 ? b.all() : b.slice(s), v);
    });
  });
}

/// Struct results with per-row fields (EntropySplit, ...): fn(slice, visibility) runs once over every row
/// (slice = -1: all keys visible or a single matrix) or once per slice; `field` concatenates one member over the
/// slices into an array of shape input.shape[:-1] (vectors) or input.shape[:-1] + (cols,) (matrices).
template <class Struct>
struct SlicedResults {
  using value_type = Struct;
  std::vector<Struct> parts;
  Layout layout;

  template <class Member>
  py::array field(Member Struct::*member) const {
    using Value = std::decay_t<Member>;
    Shape shape = layout.row_shape();
    Value out;
    if (parts.size() == 1) {
      out = parts[0].*member;
    } else {
      const Index rows = layout.rows;
      if constexpr (Value::ColsAtCompileTime == 1) {
        out.resize(layout.total_rows());
        for (std::size_t s = 0; s < parts.size(); ++s) out.segment(Index(s) * rows, rows) = parts[s].*member;
      } else {
        out.resize(layout.total_rows(), (parts[0].*member).cols());
        for (std::size_t s = 0; s < parts.size(); ++s) out.middleRows(Index(s) * rows, rows) = parts[s].*member;
      }
    }
    if constexpr (Value::ColsAtCompileTime != 1) shape.push_back(out.cols());
    return take_as_array(std::move(out), shape);
  }
};

template <class Fn>
auto run_sliced(const Layout& layout, const VisibilitySpec& visibility, Fn&& fn) {
  using Struct = std::decay_t<decltype(fn(Index(-1), Visibility()))>;
  SlicedResults<Struct> results{{}, layout};
  py::gil_scoped_release release;
  if (visibility.is_all() || layout.slices == 1) {
    results.parts.push_back(fn(Index(-1), visibility.at(0)));
  } else {
    for (Index s = 0; s < layout.slices; ++s) results.parts.push_back(fn(s, visibility.at(s)));
  }
  return results;
}

/// Heads (H, rows, cols) (or one rows x cols head) as the std::vector of matrices the C++ functions take (one copy,
/// since they take owning matrices); the dtype is kept.
template <class T>
std::vector<RowMatrix<T>> head_list(const py::array& heads, const char* function) {
  const CArray<T> array = carray<T>(heads, function, "heads");
  if (array.ndim() == 2) return {RowMatrix<T>(matrix_of(array, function, "heads"))};
  if (array.ndim() != 3) throw_value_error(function, "heads must have shape (heads, rows, cols)");
  std::vector<RowMatrix<T>> out;
  const Index rows = array.shape(1), cols = array.shape(2);
  for (Index h = 0; h < array.shape(0); ++h)
    out.emplace_back(Eigen::Map<const RowMatrix<T>>(array.data() + h * rows * cols, rows, cols));
  return out;
}

inline VisibilitySpec matrix_visibility(const py::object& causal, const py::object& mask, Index rows, Index cols,
                                 const char* function) {
  Layout layout;
  layout.shape = {rows, cols};
  layout.rows = rows;
  layout.cols = cols;
  return make_visibility(causal, mask, layout, function);
}

void bind_normalize(py::module_& m);
void bind_composition(py::module_& m);
void bind_capacity(py::module_& m);
void bind_logits(py::module_& m);
void bind_io(py::module_& m);
void bind_model(py::module_& m);
void bind_generate(py::module_& m);
void bind_stream(py::module_& m);
void bind_analysis(py::module_& m);

/// Row statistics of one head as an object of per-row arrays (stream.cpp).
py::object row_statistics_object(const attnscope::stream::RowStatistics& statistics);
/// Row statistics of every layer and head ([layer][head]) as an object of arrays (layers, heads, L[, K]).
py::object stacked_row_statistics(const std::vector<std::vector<attnscope::stream::RowStatistics>>& statistics);

}  // namespace attnscope_python
