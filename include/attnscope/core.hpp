// attnscope/core.hpp — umbrella header of the core module (types, errors, checks, visibility, random, parallel).
#pragma once

#include "attnscope/core/check.hpp"
#include "attnscope/core/error.hpp"
#include "attnscope/core/parallel.hpp"
#include "attnscope/core/random.hpp"
#include "attnscope/core/types.hpp"
#include "attnscope/core/visibility.hpp"
