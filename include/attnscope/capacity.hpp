// attnscope/capacity.hpp — umbrella header of the capacity module: the limits of attention normalization
// (Mudarisov, Burtsev, Petrova, State, "Limitations of Normalization in Attention", arXiv:2508.17821).
#pragma once

#include "attnscope/capacity/critical_top_n.hpp"
#include "attnscope/capacity/distance.hpp"
#include "attnscope/capacity/gradient.hpp"
#include "attnscope/capacity/head_profile.hpp"
#include "attnscope/capacity/head_summary.hpp"
#include "attnscope/capacity/ks_test.hpp"
#include "attnscope/capacity/power_law.hpp"
#include "attnscope/capacity/selection.hpp"
#include "attnscope/capacity/separability.hpp"
#include "attnscope/capacity/vanishing.hpp"
#include "attnscope/capacity/vector_source.hpp"
#include "attnscope/capacity/wilcoxon.hpp"
