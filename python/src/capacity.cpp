#include "common.hpp"
namespace attnscope_python {
void bind_capacity(py::module_& m) { (void)m; }
}
