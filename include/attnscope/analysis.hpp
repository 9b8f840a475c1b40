// attnscope/analysis.hpp — umbrella header of the analysis module: the per-layer, per-head report (`attnscope
// report`) over captured attention, with its standard columns and the columns contributed by the three paper modules,
// and the per-head visitor over a forward pass. Sits above model/ and the paper modules. Two optional parts are
// included where they are used, so that this header stays cheap: analysis/capture.hpp (capture files: the memory-
// mapped readers, NPZ and safetensors) and analysis/html_report.hpp (the HTML page).
#pragma once

#include "attnscope/analysis/head_input.hpp"
#include "attnscope/analysis/head_report.hpp"
#include "attnscope/analysis/report_columns.hpp"
#include "attnscope/analysis/row_check.hpp"
