// attnscope/io.hpp — umbrella header of the IO module: whole files, llama2.c checkpoints.
// Needs zlib and nlohmann-json (link attnscope::io).
#pragma once

#include "attnscope/io/file.hpp"
#include "attnscope/io/llama2c.hpp"
