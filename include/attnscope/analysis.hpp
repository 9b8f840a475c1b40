// attnscope/analysis.hpp — umbrella header of the analysis module: the per-layer, per-head report (`attnscope
// report`) over captured attention, with its standard columns and the columns contributed by the three paper modules.
// Sits above model/ and the paper modules; needs nlohmann-json (link attnscope::io).
#pragma once

#include "attnscope/analysis/capture.hpp"
#include "attnscope/analysis/head_input.hpp"
#include "attnscope/analysis/head_report.hpp"
#include "attnscope/analysis/report_columns.hpp"
#include "attnscope/analysis/row_check.hpp"
