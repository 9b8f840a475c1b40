// Conversions between io::Array (the library's owned n-dimensional array) and numpy, shared by the io, model and
// analysis bindings (defined in io.cpp).
#pragma once

#include <attnscope/io/array.hpp>

#include "common.hpp"

namespace attnscope_python {

/// An io::Array as a numpy array that owns it (no copy); bfloat16 becomes float32.
py::array to_numpy(attnscope::io::Array array);

/// A numpy array (C order, any of the supported dtypes) as an io::Array (one copy of the bytes); ValueError
/// naming `function` for an unsupported dtype.
attnscope::io::Array from_numpy(const py::handle& object, const char* function);

}  // namespace attnscope_python
