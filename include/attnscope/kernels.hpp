// attnscope/kernels.hpp — umbrella header of the SIMD row kernels (Eigen packet math; scalar references beside).
#pragma once

#include "attnscope/kernels/exp.hpp"
#include "attnscope/kernels/packet.hpp"
#include "attnscope/kernels/exp_sum.hpp"
#include "attnscope/kernels/exp_summary.hpp"
#include "attnscope/kernels/probability_summary.hpp"
#include "attnscope/kernels/row_extrema.hpp"
#include "attnscope/kernels/row_reductions.hpp"
#include "attnscope/kernels/runtime_dispatch.hpp"
#include "attnscope/kernels/secular.hpp"
