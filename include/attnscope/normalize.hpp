// attnscope/normalize.hpp — umbrella header of the normalization-map module.
#pragma once

#include "attnscope/normalize/softmax.hpp"
