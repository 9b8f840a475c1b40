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
#include "attnscope/model/huggingface.hpp"
#include "attnscope/model/load.hpp"
#include "attnscope/model/reference.hpp"
