// attnscope/stream.hpp — umbrella header of the streaming module: exact per-row attention statistics of
// softmax(scale·Q Kᵀ) for long contexts without the L×L matrix, and their per-head aggregates.
#pragma once

#include "attnscope/stream/aggregate.hpp"
#include "attnscope/stream/attention.hpp"
#include "attnscope/stream/row_statistics.hpp"
