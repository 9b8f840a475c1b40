// attnscope/io/detect_format.hpp — what kind of file a path is, decided from its first bytes (and, for a ZIP archive,
// from the names in its central directory), never from its extension: an NPY array, an NPZ archive, a PyTorch
// torch.save archive (a ZIP holding data.pkl), another ZIP archive, a safetensors file, a GGUF file (the magic
// "GGUF"), a llama2.c checkpoint (a plausible header), a Hugging Face model folder, text, or something unknown. Readers and the `attnscope` command use
// it to give a precise message instead of misreading a file (e.g. a .npy renamed .bin read as a checkpoint).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "attnscope/core/error.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/llama2c.hpp"

namespace attnscope::io {

/// The kinds of input detect_file_format() tells apart.
enum class FileFormat {
  npy,                 ///< starts with the NPY magic "\x93NUMPY"
  npz,                 ///< a ZIP archive whose members are all *.npy (numpy.savez); also an empty ZIP
  torch_save,          ///< a ZIP archive holding data.pkl (PyTorch torch.save since 1.6)
  zip,                 ///< any other ZIP archive
  safetensors,         ///< 8-byte little-endian header length N ≤ size − 8, then a JSON object
  gguf,                ///< starts with the GGUF magic "GGUF" (llama.cpp model files)
  llama2c,             ///< a llama2.c checkpoint header (version 0, 1 or 2) that passes the reader's sanity limits
  huggingface_folder,  ///< a directory holding config.json
  directory,           ///< any other directory
  text,                ///< no NUL byte and printable characters (UTF-8 allowed) in the first 4 KiB (CSV, JSON, …)
  unknown,             ///< none of the above (including an empty file)
};

/// A short human name: "NPY array", "NPZ archive", "PyTorch torch.save archive", …
inline const char* file_format_name(FileFormat format) {
  switch (format) {
    case FileFormat::npy: return "NPY array";
    case FileFormat::npz: return "NPZ archive";
    case FileFormat::torch_save: return "PyTorch torch.save archive";
    case FileFormat::zip: return "ZIP archive";
    case FileFormat::safetensors: return "safetensors file";
    case FileFormat::gguf: return "GGUF file";
    case FileFormat::llama2c: return "llama2.c checkpoint";
    case FileFormat::huggingface_folder: return "Hugging Face model folder";
    case FileFormat::directory: return "directory";
    case FileFormat::text: return "text file";
    case FileFormat::unknown: return "file of unknown format";
  }
  return "?";
}

namespace detail {

inline std::uint64_t little_endian_value(const unsigned char* bytes, int count) {
  std::uint64_t value = 0;
  for (int i = count - 1; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

/// The member names of a ZIP archive's central directory, read from the file's tail (the end-of-central-directory
/// record, ZIP64 when its fields are saturated; APPNOTE.TXT 4.3.12-4.3.16). Empty when no directory is found.
inline std::vector<std::string> zip_member_names(std::ifstream& stream, std::uint64_t file_size) {
  std::vector<std::string> names;
  const std::uint64_t tail_size = std::min<std::uint64_t>(file_size, 65535 + 22 + 20);
  std::vector<unsigned char> tail(static_cast<std::size_t>(tail_size));
  stream.clear();
  stream.seekg(static_cast<std::streamoff>(file_size - tail_size));
  if (!stream.read(reinterpret_cast<char*>(tail.data()), static_cast<std::streamsize>(tail_size))) return names;
  std::int64_t end_record = -1;
  for (std::int64_t i = static_cast<std::int64_t>(tail_size) - 22; i >= 0; --i)
    if (little_endian_value(&tail[static_cast<std::size_t>(i)], 4) == 0x06054b50) {
      end_record = i;
      break;
    }
  if (end_record < 0) return names;
  const unsigned char* record = &tail[static_cast<std::size_t>(end_record)];
  std::uint64_t entries = little_endian_value(record + 10, 2), directory_size = little_endian_value(record + 12, 4),
                directory_offset = little_endian_value(record + 16, 4);
  if ((directory_offset == 0xffffffffu || entries == 0xffff) && end_record >= 20 &&
      little_endian_value(record - 20, 4) == 0x07064b50) {  // ZIP64 locator → ZIP64 end record
    const std::uint64_t zip64_offset = little_endian_value(record - 20 + 8, 8);
    unsigned char zip64[56];
    stream.clear();
    stream.seekg(static_cast<std::streamoff>(zip64_offset));
    if (zip64_offset + 56 > file_size || !stream.read(reinterpret_cast<char*>(zip64), 56) ||
        little_endian_value(zip64, 4) != 0x06064b50)
      return names;
    entries = little_endian_value(zip64 + 32, 8);
    directory_size = little_endian_value(zip64 + 40, 8);
    directory_offset = little_endian_value(zip64 + 48, 8);
  }
  if (directory_offset > file_size || directory_size > file_size - directory_offset || directory_size > (64u << 20))
    return names;
  std::vector<unsigned char> directory(static_cast<std::size_t>(directory_size));
  stream.clear();
  stream.seekg(static_cast<std::streamoff>(directory_offset));
  if (!stream.read(reinterpret_cast<char*>(directory.data()), static_cast<std::streamsize>(directory_size)))
    return names;
  std::size_t position = 0;
  for (std::uint64_t e = 0; e < entries && position + 46 <= directory.size(); ++e) {
    const unsigned char* entry = &directory[position];
    if (little_endian_value(entry, 4) != 0x02014b50) break;
    const std::size_t name_length = little_endian_value(entry + 28, 2), extra = little_endian_value(entry + 30, 2),
                      comment = little_endian_value(entry + 32, 2);
    if (position + 46 + name_length > directory.size()) break;
    names.emplace_back(reinterpret_cast<const char*>(entry + 46), name_length);
    position += 46 + name_length + extra + comment;
  }
  return names;
}

inline bool name_ends_with(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Text: no NUL and at most 2% control characters other than tab, CR, LF, FF (bytes ≥ 0x80 count as UTF-8 text).
inline bool looks_like_text(const unsigned char* data, std::size_t size) {
  if (size == 0) return false;
  std::size_t control = 0;
  for (std::size_t i = 0; i < size; ++i) {
    const unsigned char c = data[i];
    if (c == 0) return false;
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f') ++control;
  }
  return control * 50 <= size;
}

}  // namespace detail

/// The format of the first bytes of a file (`prefix`, up to 4 KiB is enough) of `file_size` bytes, without the ZIP
/// member names: a ZIP archive is reported as FileFormat::zip here (detect_file_format() looks inside it).
inline FileFormat detect_format_of_prefix(const unsigned char* prefix, std::size_t prefix_size, std::uint64_t file_size) {
  if (prefix_size >= 6 && std::memcmp(prefix, "\x93NUMPY", 6) == 0) return FileFormat::npy;
  if (prefix_size >= 4 && std::memcmp(prefix, "GGUF", 4) == 0) return FileFormat::gguf;
  if (prefix_size >= 4 && (std::memcmp(prefix, "PK\x03\x04", 4) == 0 || std::memcmp(prefix, "PK\x05\x06", 4) == 0))
    return FileFormat::zip;
  if (prefix_size >= 9 && file_size >= 10) {
    const std::uint64_t header_length = detail::little_endian_value(prefix, 8);
    if (header_length >= 2 && header_length <= file_size - 8 && prefix[8] == '{') return FileFormat::safetensors;
  }
  if (prefix_size >= 28) {
    try {
      detail::ByteReader reader(prefix, prefix_size, "detect_format_of_prefix", "header");
      detail::llama_read_header(reader);  // throws unless every field is within the reader's sanity limits
      return FileFormat::llama2c;
    } catch (const attnscope::io_error&) {
    }
  }
  if (detail::looks_like_text(prefix, prefix_size)) return FileFormat::text;
  return FileFormat::unknown;
}

/// The format of `path` from its content (the extension is ignored). A ZIP archive is told apart by its member
/// names: data.pkl (anywhere) → torch_save, only *.npy members → npz, otherwise zip. Reads at most the first 4 KiB
/// and the ZIP central directory. Throws attnscope::io_error naming the path when it does not exist or cannot be read.
inline FileFormat detect_file_format(const std::string& path) {
  if (detail::path_is_directory(path))
    return detail::path_exists(detail::join_path(path, "config.json")) ? FileFormat::huggingface_folder
                                                                        : FileFormat::directory;
  std::ifstream stream(path, std::ios::binary);
  if (!stream) detail::throw_io_error("detect_file_format", path, "cannot open file for reading (missing or unreadable)");
  stream.seekg(0, std::ios::end);
  const std::streamoff end = stream.tellg();
  if (end < 0) detail::throw_io_error("detect_file_format", path, "cannot determine the file size");
  const std::uint64_t file_size = static_cast<std::uint64_t>(end);
  std::vector<unsigned char> prefix(static_cast<std::size_t>(std::min<std::uint64_t>(file_size, 4096)));
  stream.seekg(0);
  if (!stream.read(reinterpret_cast<char*>(prefix.data()), static_cast<std::streamsize>(prefix.size())))
    detail::throw_io_error("detect_file_format", path, "read of the first ", prefix.size(), " bytes failed");
  const FileFormat format = detect_format_of_prefix(prefix.data(), prefix.size(), file_size);
  if (format != FileFormat::zip) return format;
  const std::vector<std::string> names = detail::zip_member_names(stream, file_size);
  for (const std::string& name : names)
    if (name == "data.pkl" || detail::name_ends_with(name, "/data.pkl")) return FileFormat::torch_save;
  for (const std::string& name : names)
    if (!detail::name_ends_with(name, ".npy")) return FileFormat::zip;
  return FileFormat::npz;
}

}  // namespace attnscope::io
