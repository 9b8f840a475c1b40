// attnscope/model.hpp — umbrella header of the model module (Llama forward pass with per-head capture).
#pragma once

#include "attnscope/model/layers.hpp"
#include "attnscope/model/llama.hpp"
#include "attnscope/model/reference.hpp"
