// The optional compiled part of attnscope (CMake target attnscope::extern_templates), one file per module: the
// explicit instantiations that headers declare `extern template` when ATTNSCOPE_EXTERN_TEMPLATES is defined. Linking
// it changes no result; it only saves every translation unit that uses these templates from compiling them again.
// This file: the Eigen decompositions of core/decompositions.hpp.
#ifndef ATTNSCOPE_EXTERN_TEMPLATES
#define ATTNSCOPE_EXTERN_TEMPLATES
#endif
#include "attnscope/core/decompositions.hpp"

namespace attnscope::detail {

template Vector<double> singular_values_divide_and_conquer<Eigen::MatrixXd>(const Eigen::MatrixXd&);
template Vector<double> singular_values_jacobi<Eigen::MatrixXd>(const Eigen::MatrixXd&);
template Vector<float> singular_values_jacobi<Eigen::MatrixXf>(const Eigen::MatrixXf&);
template SymmetricEigen<Eigen::MatrixXd> symmetric_eigen<Eigen::MatrixXd>(const Eigen::MatrixXd&, bool);
template Vector<double> minimum_norm_least_squares<Eigen::MatrixXd>(const Eigen::MatrixXd&, const Vector<double>&,
                                                                    double);

}  // namespace attnscope::detail
