// attnscope/attnscope.hpp — everything that needs only Eigen: core, kernels, normalization maps, the three paper
// modules (capacity, logits, composition) and the long-context row statistics (stream). The file formats, the
// tokenizers and the model, which also need zlib, nlohmann-json or PCRE2 (targets attnscope::io and attnscope::text),
// are included separately through attnscope/io.hpp, attnscope/text.hpp and attnscope/model.hpp.
#pragma once

#include "attnscope/capacity.hpp"
#include "attnscope/composition.hpp"
#include "attnscope/core.hpp"
#include "attnscope/kernels.hpp"
#include "attnscope/logits.hpp"
#include "attnscope/normalize.hpp"
#include "attnscope/stream.hpp"
