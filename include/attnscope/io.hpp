// attnscope/io.hpp — umbrella header of the IO module: whole files, arrays, NPY, NPZ, safetensors (copied or
// memory-mapped), Hugging Face model folders, llama2.c checkpoints.
// Needs zlib and nlohmann-json (link attnscope::io).
#pragma once

#include "attnscope/io/array.hpp"
#include "attnscope/io/array_file.hpp"
#include "attnscope/io/capture_layout.hpp"
#include "attnscope/io/detect_format.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/huggingface.hpp"
#include "attnscope/io/llama2c.hpp"
#include "attnscope/io/mapped_arrays.hpp"
#include "attnscope/io/mapped_file.hpp"
#include "attnscope/io/mapped_safetensors.hpp"
#include "attnscope/io/npy.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/safetensors.hpp"
