// The optional compiled part (see decompositions.cpp): the blockwise attention kernel of stream/, in float (the
// model's forward) and double (row statistics of captured queries and keys).
#ifndef ATTNSCOPE_EXTERN_TEMPLATES
#define ATTNSCOPE_EXTERN_TEMPLATES
#endif
#include "attnscope/stream/detail/attention_kernel.hpp"

namespace attnscope::stream::detail {

template void attention_kernel<float>(const char*, const RowMatrixView<float>&, const RowMatrixView<float>&,
                                      const RowMatrixView<float>*, RowMatrixSpan<float>*, bool,
                                      const RowStatisticsOptions&, const AttentionCapture<float>&);
template void attention_kernel<double>(const char*, const RowMatrixView<double>&, const RowMatrixView<double>&,
                                       const RowMatrixView<double>*, RowMatrixSpan<double>*, bool,
                                       const RowStatisticsOptions&, const AttentionCapture<double>&);

}  // namespace attnscope::stream::detail
