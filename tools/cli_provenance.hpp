// tools/cli_provenance.hpp — what every output of a command records about its run (io/run_options.hpp): the
// attnscope version and the command, the model (path, architecture, the storage types of its weights), and the input
// (the token ids, their count and CRC-32, and where they came from: the text file or --text with its CRC-32, --from,
// --skip-tokens, --max-tokens, the tokenizer flags, --generate, or the token file). The command adds its options.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attnscope/io/gguf.hpp"
#include "attnscope/io/huggingface.hpp"
#include "cli_model.hpp"
#include "run_options.hpp"

namespace attnscope::cli {

/// The storage types of a model's weights, most frequent first ("bfloat16", "q4_K,f32"): a Hugging Face folder's
/// safetensors dtypes, a GGUF file's ggml types, a llama2.c checkpoint's float32 (versions 0, 1) or q8_0 (version 2).
/// "unknown" when the file cannot be read for it (the model itself was read by its loader).
inline std::string model_weight_types(const std::string& path) {
  std::map<std::string, std::size_t> count;
  try {
    if (std::filesystem::is_directory(path)) {
      const io::HuggingFaceFolder folder(path);
      for (const std::string& name : folder.tensor_names()) ++count[io::dtype_name(folder.tensor(name).dtype)];
    } else if (io::detect_file_format(path) == io::FileFormat::gguf) {
      const io::GgufFile file(path);
      for (const io::GgufTensor& tensor : file.tensors()) {
        const char* name = tensor.type_name();
        ++count[name ? name : "unknown"];
      }
    } else {
      // llama2.c: version 0 has no header magic; versions 1 and 2 start with uint32 0x616b3432 and an int32 version
      std::ifstream in(path, std::ios::binary);
      unsigned char head[8] = {};
      in.read(reinterpret_cast<char*>(head), sizeof head);
      const bool versioned = in.gcount() == 8 && head[0] == 0x32 && head[1] == 0x34 && head[2] == 0x6b && head[3] == 0x61;
      return versioned && head[4] == 2 && head[5] == 0 && head[6] == 0 && head[7] == 0 ? "q8_0" : "float32";
    }
  } catch (const std::exception&) {
    return "unknown";
  }
  std::vector<std::pair<std::string, std::size_t>> types(count.begin(), count.end());
  std::stable_sort(types.begin(), types.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string text;
  for (const auto& entry : types) text += (text.empty() ? "" : ",") + entry.first;
  return text.empty() ? "unknown" : text;
}

/// The record every output starts from: the attnscope version and the command.
inline RunOptions command_record(const std::string& command) {
  RunOptions run;
  run["attnscope_version"] = io::attnscope_version;
  run["command"] = command;
  return run;
}

/// Records the model: its path, architecture and weight types.
inline void record_model(RunOptions& run, const std::string& model_path, const std::string& architecture,
                         const std::string& prefix = "") {
  run[prefix + "model"] = model_path;
  run[prefix + "architecture"] = architecture;
  run[prefix + "model_dtype"] = model_weight_types(model_path);
}

/// Records where a model's input came from (the options of add_model_options that say which tokens were analysed)
/// and the tokens themselves.
inline void record_model_input(RunOptions& run, const Arguments& arguments, const std::vector<int>& tokens) {
  if (arguments.has("text-file")) {
    run["text_file"] = arguments.get("text-file");
    run["text_crc32"] = io::bytes_crc32(read_input_file(arguments.get("text-file")));  // "-": stdin, read once
  } else if (arguments.has("text")) {
    const std::string& text = arguments.get("text");
    run["text_crc32"] = io::bytes_crc32(text);
    if (text.size() <= 256) run["text"] = text;
  }
  if (arguments.has("tokens-file")) run["tokens_file"] = arguments.get("tokens-file");
  for (const char* name : {"from", "skip-tokens", "max-tokens", "generate"})
    if (arguments.has(name)) {
      std::string key = name;
      std::replace(key.begin(), key.end(), '-', '_');
      run[key] = arguments.get(name);
    }
  for (const char* name : {"special-tokens", "add-special-tokens"})
    if (arguments.has(name)) {
      std::string key = name;
      std::replace(key.begin(), key.end(), '-', '_');
      run[key] = "true";
    }
  io::record_tokens(run, tokens);
}

/// Records an input file by its path and CRC-32, and, when the file carries a run record of its own (a capture),
/// the model and the document that record names, so that an analysis of a capture still says which model and text
/// it shows.
inline void record_input_file(RunOptions& run, const std::string& path, const RunOptions& inner = {}) {
  run["input"] = path;
  run["input_crc32"] = io::file_crc32(path);
  for (const auto& [key, value] : inner) {
    const bool model = key == "model" || key == "architecture" || key == "model_dtype" || key == "matmul";
    const bool document = io::run_document_keys().count(key) && key != "input" && key != "input_crc32";
    if ((model || document) && !run.count(key)) run.emplace(key, value);
  }
}

/// The record as the rows of an HTML header (key, value).
inline std::vector<std::pair<std::string, std::string>> record_rows(const RunOptions& run) {
  return {run.begin(), run.end()};
}

}  // namespace attnscope::cli
