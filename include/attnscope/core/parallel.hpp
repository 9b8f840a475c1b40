// attnscope/core/parallel.hpp — optional OpenMP row loops. Each row is computed independently by the same
// code, so results are bitwise identical for any number of threads. Without OpenMP the loop is serial.
#pragma once

#include <cstddef>
#include <exception>
#include <vector>

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

/// for_each_row where body(row) may throw: exceptions never cross the parallel region; after the loop the one thrown
/// by the lowest row is rethrown.
template <class Body>
void for_each_row_rethrowing(Index rows, Index work_per_row, Body&& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(rows));
  for_each_row(rows, work_per_row, [&](Index row) {
    try {
      body(row);
    } catch (...) {
      errors[static_cast<std::size_t>(row)] = std::current_exception();
    }
  });
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

}  // namespace attnscope::detail
