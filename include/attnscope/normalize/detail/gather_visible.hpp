// attnscope/normalize/detail/gather_visible.hpp — the visible entries of one row copied into contiguous storage, for
// the row loops of the maps whose visibility is not a prefix of each row (the row kernels read contiguous rows).
#pragma once

#include <cstddef>
#include <vector>

#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"

namespace attnscope::detail {

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
