// attnscope/normalize.hpp — umbrella header of the normalization-map module: softmax, sparsemax, entmax,
// SSMax, SA-Softmax, sink softmax, the generalized F-normalization, map descriptions and their Jacobians,
// the Shannon entropy of attention rows.
#pragma once

#include "attnscope/normalize/entmax.hpp"
#include "attnscope/normalize/entropy.hpp"
#include "attnscope/normalize/generalized.hpp"
#include "attnscope/normalize/jacobian.hpp"
#include "attnscope/normalize/maps.hpp"
#include "attnscope/normalize/row_helpers.hpp"
#include "attnscope/normalize/sa_softmax.hpp"
#include "attnscope/normalize/sink_softmax.hpp"
#include "attnscope/normalize/softmax.hpp"
#include "attnscope/normalize/sparsemax.hpp"
#include "attnscope/normalize/spectral_norm.hpp"
#include "attnscope/normalize/ssmax.hpp"
