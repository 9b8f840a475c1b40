// attnscope/core/parallel.hpp — optional OpenMP row loops. Each row is computed independently by the same
// code, so results are bitwise identical for any number of threads. Without OpenMP the loop is serial.
#pragma once

#include "attnscope/core/types.hpp"

namespace attnscope::detail {

/// Calls body(row) for row in [0, rows); parallel over rows when compiled with OpenMP and rows*cost is large.
template <class Body>
void for_each_row(Index rows, Index work_per_row, Body&& body) {
#if defined(_OPENMP)
  if (rows > 1 && rows * work_per_row >= (Index{1} << 15)) {
#pragma omp parallel for schedule(static)
    for (Index row = 0; row < rows; ++row) body(row);
    return;
  }
#else
  (void)work_per_row;
#endif
  for (Index row = 0; row < rows; ++row) body(row);
}

}  // namespace attnscope::detail
