// attnscope/composition.hpp — umbrella header of the composition module: attention rows as compositional data
// (arXiv:2608.14712; docs/theory/composition.md). CoDA core, sink/content channels and exact
// decompositions, keep/drop conventions and verdict flips, head clustering, entropy-collapse attribution, head scores.
#pragma once

#include "attnscope/composition/attribution.hpp"
#include "attnscope/composition/channels.hpp"
#include "attnscope/composition/clustering.hpp"
#include "attnscope/composition/coda.hpp"
#include "attnscope/composition/controls.hpp"
#include "attnscope/composition/correlation.hpp"
#include "attnscope/composition/rankings.hpp"
#include "attnscope/composition/rows.hpp"
#include "attnscope/composition/scores.hpp"
#include "attnscope/composition/verdicts.hpp"
