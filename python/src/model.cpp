#include "common.hpp"
namespace attnscope_python {
void bind_model(py::module_& m) { (void)m; }
}
