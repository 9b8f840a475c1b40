// The optional compiled part (see decompositions.cpp): the analysis report's columns in both precisions.
#ifndef ATTNSCOPE_EXTERN_TEMPLATES
#define ATTNSCOPE_EXTERN_TEMPLATES
#endif
#include "attnscope/analysis/report_columns.hpp"

namespace attnscope::analysis {

template std::vector<ReportColumn> analysis_report_columns<double>(const std::vector<Index>&, SinkChannel, Index);
template std::vector<ReportColumn> analysis_report_columns<float>(const std::vector<Index>&, SinkChannel, Index);

}  // namespace attnscope::analysis
