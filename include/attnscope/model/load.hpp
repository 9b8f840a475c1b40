// attnscope/model/load.hpp — one entry point for every model format: a directory is a Hugging Face folder, a file
// starting with the GGUF magic a GGUF model (model/gguf.hpp), any other file a llama2.c checkpoint. Needs nlohmann-json (link attnscope::io). A template on the JSON type (default
// nlohmann::json, never given by callers) so that the loaders are compiled only where a model is loaded.
#pragma once

#include <string>

#include "attnscope/io/detect_format.hpp"
#include "attnscope/io/llama2c.hpp"
#include "attnscope/model/gguf.hpp"
#include "attnscope/model/huggingface.hpp"
#include "attnscope/model/llama.hpp"
#include "attnscope/model/transformer.hpp"

namespace attnscope::model {

/// Loads a model: a directory → load_huggingface_model(path); a GGUF file (recognised by its magic, whatever its
/// extension) → load_gguf_model(path); anything else → a llama2.c checkpoint (io::read_llama2c). Throws attnscope::io_error naming the path for a missing or unreadable model.
template <class Json = nlohmann::json>
Transformer load_model(const std::string& path) {
  if (io::detail::path_is_directory(path)) return load_huggingface_model<Json>(path);
  if (io::detect_file_format(path) == io::FileFormat::gguf) return load_gguf_model<Json>(path);
  return Transformer(transformer_weights_from_llama2c(io::read_llama2c(path)));
}

#ifdef ATTNSCOPE_EXTERN_TEMPLATES
extern template Transformer load_model<nlohmann::json>(const std::string&);  // compiled part
#endif

}  // namespace attnscope::model
