// attnscope/model.hpp — umbrella header of the model module: one transformer abstraction (model::Transformer) for
// llama2.c checkpoints and Hugging Face GPT-2 / Llama / Mistral / Qwen2 folders, with per-head capture.
#pragma once

#include "attnscope/model/config.hpp"
#include "attnscope/model/weights.hpp"
#include "attnscope/model/forward_options.hpp"
#include "attnscope/model/sampling.hpp"
#include "attnscope/model/layers.hpp"
#include "attnscope/model/transformer.hpp"
#include "attnscope/model/llama.hpp"
// Opt-in headers, not included here because they need nlohmann/json.hpp, which alone costs about as much to compile
// as the rest of the model (link attnscope::io): attnscope/model/load.hpp (load_model, and through
// attnscope/model/huggingface.hpp load_huggingface_model and read_huggingface_weights) and attnscope/model/reference.hpp
// (compare_with_reference).
