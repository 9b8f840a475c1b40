// attnscope/model/detail/step_statistics.hpp — the row statistics of a generation gathered step by step: each step's
// one-row stream::RowStatistics written into row `step` of the run's, then cut to the steps taken.
#pragma once

#include <Eigen/Core>

#include "attnscope/core/types.hpp"
#include "attnscope/stream/statistics_types.hpp"

namespace attnscope::model::detail {

// Row `row` of `all` (capacity rows, allocated at the first row) from the one row of `one`; an empty column stays empty.
template <class Matrix>
void put_step_row(Matrix& all, Index capacity, Index row, const Matrix& one) {
  if (one.rows() == 0) return;
  if (all.rows() != capacity || all.cols() != one.cols()) all.resize(capacity, one.cols());
  all.row(row) = one.row(0);
}

/// Writes the one-row statistics `one` into row `row` of `all`, which holds `capacity` rows.
inline void set_step_statistics(stream::RowStatistics& all, Index capacity, Index row,
                                const stream::RowStatistics& one) {
  put_step_row(all.max_scaled_logit, capacity, row, one.max_scaled_logit);
  put_step_row(all.log_partition, capacity, row, one.log_partition);
  put_step_row(all.entropy, capacity, row, one.entropy);
  put_step_row(all.sink_mass, capacity, row, one.sink_mass);
  put_step_row(all.max_weight, capacity, row, one.max_weight);
  put_step_row(all.jacobian_norm, capacity, row, one.jacobian_norm);
  put_step_row(all.top_k_mass, capacity, row, one.top_k_mass);
  put_step_row(all.visible_keys, capacity, row, one.visible_keys);
  put_step_row(all.learned_sink, capacity, row, one.learned_sink);
  put_step_row(all.entropy_with_sink, capacity, row, one.entropy_with_sink);
  all.top_k = one.top_k;
}

/// Keeps the first `rows` rows of every column of `all` (a generation that stopped early).
inline void keep_step_statistics(stream::RowStatistics& all, Index rows) {
  const auto keep = [rows](auto& column) {
    if (column.rows() > rows) column.conservativeResize(rows, column.cols());
  };
  keep(all.max_scaled_logit);
  keep(all.log_partition);
  keep(all.entropy);
  keep(all.sink_mass);
  keep(all.max_weight);
  keep(all.jacobian_norm);
  keep(all.top_k_mass);
  keep(all.visible_keys);
  keep(all.learned_sink);
  keep(all.entropy_with_sink);
}

}  // namespace attnscope::model::detail
