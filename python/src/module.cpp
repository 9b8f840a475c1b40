// The extension module attnscope._attnscope: exception translation and the submodules (one translation unit each).
#include <attnscope/core/error.hpp>

#include "common.hpp"

using namespace pybind11::literals;

namespace {

// Test hook: the address the bindings read for `array` (equal to array.ctypes.data when no copy is made).
std::uintptr_t input_address(const pybind11::object& array) {
  using namespace attnscope_python;
  const py::array converted = as_array(array, "_input_address", "array");
  return reinterpret_cast<std::uintptr_t>(dispatch(converted, [&](auto tag) -> py::object {
                                            using T = decltype(tag);
                                            const Rows<T> rows = as_rows<T>(converted, "_input_address", "array");
                                            return py::int_(reinterpret_cast<std::uintptr_t>(rows.data()));
                                          }).cast<std::uintptr_t>());
}

}  // namespace

PYBIND11_MODULE(_attnscope, m) {
  namespace py = pybind11;
  m.doc() = "attnscope: exact, fast analysis of attention (normalization maps, Jacobian norms, sink/content\n"
            "channels, capacity and logit tools, NPY/NPZ/safetensors IO, llama2.c and Hugging Face models).";
  m.attr("__version__") = "0.1.0";
  // The OpenMP version the module was built with (0: none; threads= above 1 is then refused).
  m.attr("openmp") = attnscope_python::openmp_version();
  // attnscope::invalid_argument -> ValueError, attnscope::io_error -> OSError, with the C++ message unchanged.
  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) std::rethrow_exception(pointer);
    } catch (const attnscope::io_error& error) {
      PyErr_SetString(PyExc_OSError, error.what());
    } catch (const attnscope::invalid_argument& error) {
      PyErr_SetString(PyExc_ValueError, error.what());
    }
  });
  m.def("_input_address", &input_address, "array"_a,
        "Test hook: the address of the memory the bindings read for `array` (array.ctypes.data when no copy).");
  attnscope_python::bind_normalize(m);
  attnscope_python::bind_composition(m);
  attnscope_python::bind_capacity(m);
  attnscope_python::bind_logits(m);
  attnscope_python::bind_io(m);
  attnscope_python::bind_model(m);
  attnscope_python::bind_generate(m);  // Transformer.generate with per-step statistics (generate.cpp)
  attnscope_python::bind_stream(m);
  attnscope_python::bind_analysis(m);
}
