// attnscope/kernels/row_loop.hpp — row loops shared by the row-wise maps: an exception-safe parallel loop and the
// gathering of a row's visible entries into contiguous storage.
#pragma once

#include <cstddef>
#include <exception>
#include <vector>

#include "attnscope/core/parallel.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::detail {

/// detail::for_each_row (OpenMP when enabled, identical results for any thread count) where body(row) may throw:
/// exceptions never cross the parallel region; after the loop the one thrown by the lowest row is rethrown.
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

/// Copies the entries of row `row` (pointer `values` to its first column) that are visible into `gathered`.
template <class Scalar>
void gather_visible(const Scalar* values, Index row, Index cols, const Visibility& visibility,
                    std::vector<Scalar>& gathered) {
  gathered.clear();
  gathered.reserve(static_cast<std::size_t>(cols));
  for (Index j = 0; j < cols; ++j)
    if (visibility.visible(row, j, cols)) gathered.push_back(values[j]);
}

}  // namespace attnscope::detail
