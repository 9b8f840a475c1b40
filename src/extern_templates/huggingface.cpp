// The optional compiled part (see decompositions.cpp): reading a Hugging Face model folder (needs nlohmann/json, so
// compiled only when the io module is available).
#ifndef ATTNSCOPE_EXTERN_TEMPLATES
#define ATTNSCOPE_EXTERN_TEMPLATES
#endif
#include "attnscope/model/huggingface.hpp"

namespace attnscope::model {

template TransformerWeights read_huggingface_weights<nlohmann::json>(const std::string&);

}  // namespace attnscope::model
