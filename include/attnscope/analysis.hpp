// attnscope/analysis.hpp — umbrella header of the analysis module: the per-layer, per-head report (`attnscope
// report`) over captured attention, with its standard columns and the columns contributed by the three paper modules,
// the per-head visitor over a forward pass, and the sink rate and retrieval score of heads. Sits above model/ and the
// paper modules. Optional parts are included where they are used, so that this header stays cheap:
// analysis/capture.hpp (capture files: the memory-mapped readers, NPZ and safetensors), analysis/html_report.hpp (the
// HTML page), analysis/compare.hpp (two models compared head by head, `attnscope compare`) and
// analysis/compare_html.hpp (its page).
#pragma once

#include "attnscope/analysis/head_input.hpp"
#include "attnscope/analysis/head_report.hpp"
#include "attnscope/analysis/report_columns.hpp"
#include "attnscope/analysis/routing.hpp"
#include "attnscope/analysis/row_check.hpp"
#include "attnscope/analysis/sink_rate.hpp"
