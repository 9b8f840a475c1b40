// The optional compiled part (see decompositions.cpp): reading model files, a Hugging Face folder, a GGUF file or
// any of them by load_model (needs nlohmann/json, so compiled only when the io module is available).
#ifndef ATTNSCOPE_EXTERN_TEMPLATES
#define ATTNSCOPE_EXTERN_TEMPLATES
#endif
#include "attnscope/model/gguf.hpp"
#include "attnscope/model/huggingface.hpp"
#include "attnscope/model/load.hpp"

namespace attnscope::model {

template TransformerWeights read_huggingface_weights<nlohmann::json>(const std::string&);
template TransformerWeights read_gguf_weights<nlohmann::json>(const std::string&);
template Transformer load_model<nlohmann::json>(const std::string&);

}  // namespace attnscope::model
