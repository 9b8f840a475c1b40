// The optional compiled part (see decompositions.cpp): the transformer's forward pass.
#ifndef ATTNSCOPE_EXTERN_TEMPLATES
#define ATTNSCOPE_EXTERN_TEMPLATES
#endif
#include "attnscope/model/transformer.hpp"

namespace attnscope::model {

template class BasicTransformer<float>;

}  // namespace attnscope::model
