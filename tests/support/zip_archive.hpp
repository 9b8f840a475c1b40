// A minimal ZIP writer for tests (stored members, no compression; APPNOTE.TXT 4.3.7 local header, 4.3.12 central
// directory, 4.3.16 end record): builds archives the library must recognise without writing them, e.g. the layout
// of a PyTorch torch.save file (archive/data.pkl, archive/data/0, ...) or a ZIP that is not an NPZ.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace attnscope::testing {

namespace detail {
inline void append_little_endian(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}
inline std::uint32_t crc32_of(const std::string& data) {
  std::uint32_t crc = 0xffffffffu;
  for (const char c : data) {
    crc ^= static_cast<unsigned char>(c);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}
}  // namespace detail

/// The bytes of a ZIP archive holding `members` (name, content) stored uncompressed.
inline std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out, directory;
  for (const auto& [name, content] : members) {
    const std::uint32_t crc = detail::crc32_of(content), offset = static_cast<std::uint32_t>(out.size());
    auto common = [&](std::string& record) {
      detail::append_little_endian(record, 20, 2);  // version needed
      detail::append_little_endian(record, 0, 2);   // flags
      detail::append_little_endian(record, 0, 2);   // method: stored
      detail::append_little_endian(record, 0, 4);   // time, date
      detail::append_little_endian(record, crc, 4);
      detail::append_little_endian(record, content.size(), 4);
      detail::append_little_endian(record, content.size(), 4);
      detail::append_little_endian(record, name.size(), 2);
      detail::append_little_endian(record, 0, 2);  // extra length
    };
    detail::append_little_endian(out, 0x04034b50, 4);
    common(out);
    out += name + content;
    detail::append_little_endian(directory, 0x02014b50, 4);
    detail::append_little_endian(directory, 20, 2);  // version made by
    common(directory);
    detail::append_little_endian(directory, 0, 2);  // comment length
    detail::append_little_endian(directory, 0, 2);  // disk
    detail::append_little_endian(directory, 0, 2);  // internal attributes
    detail::append_little_endian(directory, 0, 4);  // external attributes
    detail::append_little_endian(directory, offset, 4);
    directory += name;
  }
  const std::uint32_t directory_offset = static_cast<std::uint32_t>(out.size());
  out += directory;
  detail::append_little_endian(out, 0x06054b50, 4);
  detail::append_little_endian(out, 0, 4);  // disk numbers
  detail::append_little_endian(out, members.size(), 2);
  detail::append_little_endian(out, members.size(), 2);
  detail::append_little_endian(out, directory.size(), 4);
  detail::append_little_endian(out, directory_offset, 4);
  detail::append_little_endian(out, 0, 2);  // comment length
  return out;
}

/// The member layout of a PyTorch torch.save archive of one tensor (torch ≥ 1.6 zip serialization), with
/// placeholder contents: what the detection must recognise, not a loadable pickle.
inline std::string torch_save_like_zip(const std::string& archive_name = "archive") {
  return stored_zip({{archive_name + "/data.pkl", std::string("\x80\x02}q\x00.", 6)},
                     {archive_name + "/byteorder", "little"},
                     {archive_name + "/data/0", std::string(16, '\0')},
                     {archive_name + "/version", "3\n"}});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace attnscope::testing
