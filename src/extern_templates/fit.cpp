// The optional compiled part (see decompositions.cpp): the attention-fitting engine of logits/fit.hpp.
#ifndef ATTNSCOPE_EXTERN_TEMPLATES
#define ATTNSCOPE_EXTERN_TEMPLATES
#endif
#include "attnscope/logits/fit.hpp"

namespace attnscope::logits::detail {

template FitResult<float> run_fit<float>(const char*, const RowMatrixView<float>&, const std::vector<Visibility>&,
                                         const FitOptions&);
template FitResult<double> run_fit<double>(const char*, const RowMatrixView<double>&, const std::vector<Visibility>&,
                                           const FitOptions&);
template FitObjective<float> objective_at<float>(const char*, const RowMatrixView<float>&,
                                                 const std::vector<Visibility>&, const FitOptions&,
                                                 const std::vector<RowMatrix<float>>&);
template FitObjective<double> objective_at<double>(const char*, const RowMatrixView<double>&,
                                                   const std::vector<Visibility>&, const FitOptions&,
                                                   const std::vector<RowMatrix<double>>&);

}  // namespace attnscope::logits::detail
