// attnscope/kernels/row_reductions.hpp — the softmax hot loops on one contiguous row, one header per job: max (with a
// fused finiteness check) and the one-pass min/max/sum (row_extrema.hpp), exp-and-sum (exp_sum.hpp), the exponentials
// with their ExponentialSummary (exp_summary.hpp), scale and store (scale_row.hpp), the probability-row summaries of
// the secular solver (probability_summary.hpp) and the sparsemax tail sums (tail_sum.hpp). Each vectorized kernel
// uses four independent packet accumulators reduced once at the end (docs/theory/normalization-maps.md §6, design
// note [derived]) and has a plain scalar reference beside it.
#pragma once

#include "attnscope/kernels/exp_sum.hpp"
#include "attnscope/kernels/exp_summary.hpp"
#include "attnscope/kernels/probability_summary.hpp"
#include "attnscope/kernels/row_extrema.hpp"
#include "attnscope/kernels/scale_row.hpp"
#include "attnscope/kernels/tail_sum.hpp"
