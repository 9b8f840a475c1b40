// The optional compiled part (see decompositions.cpp): the safetensors reader and writer, and the Hugging Face folder
// with its JSON files, on nlohmann::json (compiled only when the io module is available).
#ifndef ATTNSCOPE_EXTERN_TEMPLATES
#define ATTNSCOPE_EXTERN_TEMPLATES
#endif
#include "attnscope/io/huggingface.hpp"
#include "attnscope/io/mapped_safetensors.hpp"
#include "attnscope/io/safetensors.hpp"

namespace attnscope::io {

template SafetensorsHeader parse_safetensors_header<nlohmann::json>(const unsigned char*, std::size_t,
                                                                     const std::string&);
template SafetensorsContents parse_safetensors_contents<nlohmann::json>(const unsigned char*, std::size_t,
                                                                         const std::string&);
template std::map<std::string, Array> parse_safetensors<nlohmann::json>(const unsigned char*, std::size_t,
                                                                         const std::string&);
template std::string serialize_safetensors<nlohmann::json>(const NamedArrays&,
                                                           const std::map<std::string, std::string>&);
template MappedSafetensors::MappedSafetensors(const std::string&);
namespace detail {
template std::string safetensors_header_text<nlohmann::json>(const NamedArrays&,
                                                             const std::map<std::string, std::string>&);
template nlohmann::json read_json_file<nlohmann::json>(const std::string&, const char*);
}  // namespace detail
template class BasicHuggingFaceFolder<nlohmann::json>;

}  // namespace attnscope::io
