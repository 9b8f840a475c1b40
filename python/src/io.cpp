#include "common.hpp"
namespace attnscope_python {
void bind_io(py::module_& m) { (void)m; }
}
