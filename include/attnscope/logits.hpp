// attnscope/logits.hpp — umbrella header of the logit-explosion lab (arXiv:2505.15548, spec
// docs/theory/logits.md): targets and masks, rank tools and closed forms, attention kernels, rank-d fitting
// with Adam, bf16/fp16 emulation, training monitors.
#pragma once

#include "attnscope/logits/attention.hpp"
#include "attnscope/logits/bounds.hpp"
#include "attnscope/logits/fit.hpp"
#include "attnscope/logits/masks.hpp"
#include "attnscope/logits/monitors.hpp"
#include "attnscope/logits/precision.hpp"
#include "attnscope/logits/rank.hpp"
#include "attnscope/logits/targets.hpp"
