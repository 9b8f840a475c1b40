// attnscope/attnscope.hpp — everything that needs only Eigen: core, kernels, normalization maps and the three paper
// modules (capacity, logits, composition), and the long-context row statistics (stream). The file formats and the model, which also need zlib and nlohmann-json
// (target attnscope::io), are included separately through attnscope/io.hpp and attnscope/model.hpp.
#pragma once

#include "attnscope/capacity.hpp"
#include "attnscope/composition.hpp"
#include "attnscope/core.hpp"
#include "attnscope/kernels.hpp"
#include "attnscope/logits.hpp"
#include "attnscope/normalize.hpp"
#include "attnscope/stream.hpp"
