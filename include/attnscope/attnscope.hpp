// attnscope/attnscope.hpp — everything that needs only Eigen (the IO module, which also needs zlib and
// nlohmann-json, is included separately through attnscope/io.hpp).
#pragma once

#include "attnscope/core.hpp"
#include "attnscope/normalize.hpp"
