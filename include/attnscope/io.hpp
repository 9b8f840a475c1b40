// attnscope/io.hpp — umbrella header of the IO module: whole files, arrays, NPY, NPZ, safetensors (copied or
// memory-mapped), Hugging Face model folders, llama2.c checkpoints, GGUF files
// (io/gguf.hpp: metadata and tensor views of a memory-mapped GGUF file).
// Needs zlib and nlohmann-json (link attnscope::io). Opt-in parts, not included here so that this header stays cheap
// to compile: attnscope/io/mapped_arrays.hpp (NPY/NPZ arrays of a memory-mapped file), attnscope/io/array_file.hpp
// (io::ArrayFile, the arrays of one NPY/NPZ/safetensors file) and attnscope/io/capture_layout.hpp (the capture layout).
#pragma once

#include "attnscope/io/array.hpp"
#include "attnscope/io/detect_format.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/gguf.hpp"
#include "attnscope/io/huggingface.hpp"
#include "attnscope/io/llama2c.hpp"
#include "attnscope/io/mapped_file.hpp"
#include "attnscope/io/mapped_safetensors.hpp"
#include "attnscope/io/npy.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/safetensors.hpp"
