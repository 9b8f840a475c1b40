// attnscope/io/npz.hpp — NumPy .npz archives: a ZIP file (PKWARE APPNOTE 6.3) of .npy members, stored or
// deflated (zlib raw deflate), CRC-32 checked on read. ZIP64, encryption and multi-disk archives are rejected.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <zlib.h>

#include "attnscope/core/error.hpp"
#include "attnscope/io/array.hpp"
#include "attnscope/io/file.hpp"
#include "attnscope/io/npy.hpp"

namespace attnscope::io {

/// How write_npz stores members: deflated (numpy's savez_compressed, the default) or stored (numpy's savez).
enum class Compression { stored, deflated };

namespace detail {

inline constexpr std::uint32_t zip_local_signature = 0x04034b50;
inline constexpr std::uint32_t zip_central_signature = 0x02014b50;
inline constexpr std::uint32_t zip_end_signature = 0x06054b50;
inline constexpr std::uint32_t zip64_locator_signature = 0x07064b50;
inline constexpr std::size_t zip_end_record_bytes = 22;

inline std::uint32_t zip_crc32(const unsigned char* data, std::size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (size > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(size, 1u << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    size -= chunk;
  }
  return static_cast<std::uint32_t>(crc);
}

/// Inflates a raw deflate stream that must expand to exactly `expected_size` bytes.
inline std::vector<unsigned char> zip_inflate(const ByteReader& reader, const std::string& member,
                                              const unsigned char* data, std::uint32_t size,
                                              std::uint32_t expected_size) {
  // Deflate expands at most ~1032:1; a larger claim is corrupt (and must not trigger a huge allocation).
  if (static_cast<std::uint64_t>(expected_size) > 1032ull * size + 1024)
    reader.fail("member '", member, "' claims ", expected_size, " uncompressed bytes from ", size,
                " compressed bytes: impossible for deflate");
  std::vector<unsigned char> out(expected_size);
  z_stream stream{};
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) reader.fail("zlib inflateInit2 failed");
  stream.next_in = const_cast<unsigned char*>(data);
  stream.avail_in = size;
  unsigned char sink = 0;  // a 1-byte spill slot so that overlong output is detected, not written out of bounds
  stream.next_out = expected_size ? out.data() : &sink;
  stream.avail_out = expected_size ? expected_size : 1;
  int status = inflate(&stream, Z_FINISH);
  if (status == Z_BUF_ERROR && stream.avail_out == 0 && expected_size != 0) {
    stream.next_out = &sink;
    stream.avail_out = 1;
    status = inflate(&stream, Z_FINISH);
  }
  const uLong produced = stream.total_out;
  inflateEnd(&stream);
  if (status != Z_STREAM_END)
    reader.fail("member '", member, "': corrupt or truncated deflate stream (zlib status ", status, ")");
  if (produced != expected_size)
    reader.fail("member '", member, "' inflates to ", produced, " bytes, the directory says ", expected_size);
  return out;
}

/// Raw deflate of a whole buffer (zlib level 6, as Python's zipfile).
inline std::string zip_deflate(const std::string& data) {
  z_stream stream{};
  if (deflateInit2(&stream, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw_invalid_argument("write_npz", "zlib deflateInit2 failed");
  std::string out(deflateBound(&stream, static_cast<uLong>(data.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(&out[0]);
  stream.avail_out = static_cast<uInt>(out.size());
  const int status = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (status != Z_STREAM_END) throw_invalid_argument("write_npz", "zlib deflate failed with status ", status);
  return out;
}

/// Key of an NPZ member: its name without the ".npy" suffix (non-.npy members are rejected).
inline std::string npz_key(const ByteReader& reader, const std::string& member) {
  if (member.size() < 5 || member.compare(member.size() - 4, 4, ".npy") != 0)
    reader.fail("member '", member, "' is not a .npy file");
  return member.substr(0, member.size() - 4);
}

}  // namespace detail

namespace detail {

/// One member of an NPZ archive as found by walk_npz_members: its key (name without ".npy"), member name, ZIP
/// method (0 stored, 8 deflate), its stored bytes inside the archive, their sizes and CRC-32.
struct NpzMember {
  std::string key, name;
  std::uint16_t method = 0;
  const unsigned char* stored = nullptr;
  std::uint32_t compressed_size = 0, uncompressed_size = 0, crc = 0;
};

/// Walks the central directory of an .npz archive in memory and calls visit(reader, member) for every member after
/// validating its directory entry and local header (the one ZIP walker, used by parse_npz_ordered and the
/// memory-mapped reader in io/mapped_arrays.hpp). Throws attnscope::io_error as parse_npz_ordered.
template <class Visit>
void walk_npz_members(const unsigned char* data, std::size_t size, const std::string& name_for_errors, Visit&& visit) {
  ByteReader reader(data, size, "parse_npz", name_for_errors);
  if (size < zip_end_record_bytes) reader.fail("too short for a ZIP archive (", size, " bytes)");
  // End-of-central-directory record: the last signature whose comment reaches exactly the end of the file.
  std::size_t end_record = size;
  for (std::size_t position = size - zip_end_record_bytes + 1; position-- > 0;) {
    if (size - position > zip_end_record_bytes + 65535) break;
    reader.seek(position, "end record");
    if (reader.read<std::uint32_t>("signature") != zip_end_signature) continue;
    reader.seek(position + 20, "comment length");
    if (reader.read<std::uint16_t>("comment length") == size - position - zip_end_record_bytes) {
      end_record = position;
      break;
    }
  }
  if (end_record == size) {
    reader.seek(0, "start");
    reader.fail("not a ZIP archive (no end-of-central-directory record)");
  }
  if (end_record >= 20) {
    reader.seek(end_record - 20, "ZIP64 locator");
    if (reader.read<std::uint32_t>("signature") == zip64_locator_signature)
      reader.fail("ZIP64 archives are not supported");
  }
  reader.seek(end_record + 4, "end record");
  const std::uint16_t disk = reader.read<std::uint16_t>("disk number");
  const std::uint16_t directory_disk = reader.read<std::uint16_t>("directory disk");
  const std::uint16_t entries_here = reader.read<std::uint16_t>("entry count");
  const std::uint16_t entries = reader.read<std::uint16_t>("entry count");
  const std::uint32_t directory_size = reader.read<std::uint32_t>("directory size");
  const std::uint32_t directory_offset = reader.read<std::uint32_t>("directory offset");
  if (entries == 0xFFFF || directory_size == 0xFFFFFFFF || directory_offset == 0xFFFFFFFF)
    reader.fail("ZIP64 archives are not supported");
  if (disk != 0 || directory_disk != 0 || entries_here != entries) reader.fail("multi-disk ZIP archives are not supported");
  if (std::uint64_t{directory_offset} + directory_size > end_record)
    reader.fail("central directory [", directory_offset, ", +", directory_size, ") points past its end record at ",
                end_record);

  std::set<std::string> keys;
  std::map<std::uint64_t, std::uint64_t> member_extents;  // local header offset -> end of its data
  std::uint64_t directory_position = directory_offset;
  for (std::uint16_t entry = 0; entry < entries; ++entry) {
    ByteReader directory(data, std::size_t{directory_offset} + directory_size, "parse_npz", name_for_errors);
    directory.seek(directory_position, "central directory entry");
    if (directory.read<std::uint32_t>("central directory signature") != zip_central_signature)
      directory.fail("bad central directory signature for entry ", entry);
    directory.take(4, "central directory entry");  // version made by, version needed
    const std::uint16_t flags = directory.read<std::uint16_t>("flags");
    const std::uint16_t method = directory.read<std::uint16_t>("compression method");
    directory.take(4, "central directory entry");  // time, date
    const std::uint32_t crc = directory.read<std::uint32_t>("CRC-32");
    const std::uint32_t compressed_size = directory.read<std::uint32_t>("compressed size");
    const std::uint32_t uncompressed_size = directory.read<std::uint32_t>("uncompressed size");
    const std::uint16_t name_length = directory.read<std::uint16_t>("name length");
    const std::uint16_t extra_length = directory.read<std::uint16_t>("extra length");
    const std::uint16_t comment_length = directory.read<std::uint16_t>("comment length");
    directory.take(8, "central directory entry");  // disk start, internal and external attributes
    const std::uint32_t local_offset = directory.read<std::uint32_t>("local header offset");
    const unsigned char* name_bytes = directory.take(name_length, "member name");
    const std::string member(reinterpret_cast<const char*>(name_bytes), name_length);
    directory.take(std::uint64_t{extra_length} + comment_length, "extra field and comment");
    directory_position = directory.position();

    if (compressed_size == 0xFFFFFFFF || uncompressed_size == 0xFFFFFFFF || local_offset == 0xFFFFFFFF)
      reader.fail("member '", member, "': ZIP64 archives are not supported");
    if (flags & 1) reader.fail("member '", member, "' is encrypted");
    if (method != 0 && method != 8)
      reader.fail("member '", member, "' uses unsupported compression method ", method, " (supported: 0 stored, 8 deflate)");
    const std::string key = npz_key(reader, member);
    if (!keys.insert(key).second) reader.fail("duplicate member '", member, "'");

    // Local header: only its name and extra lengths are used (numpy writes ZIP64 extras and 0xFFFFFFFF sizes there).
    if (local_offset >= directory_offset) reader.fail("member '", member, "': local header offset ", local_offset,
                                                      " is not before the central directory at ", directory_offset);
    ByteReader local(data, directory_offset, "parse_npz", name_for_errors);
    local.seek(local_offset, "local header");
    if (local.read<std::uint32_t>("local header signature") != zip_local_signature)
      local.fail("bad local header signature for member '", member, "'");
    local.take(22, "local header");
    const std::uint16_t local_name_length = local.read<std::uint16_t>("local name length");
    const std::uint16_t local_extra_length = local.read<std::uint16_t>("local extra length");
    const unsigned char* local_name = local.take(local_name_length, "local member name");
    if (local_name_length != name_length || std::memcmp(local_name, name_bytes, name_length) != 0)
      local.fail("local header name differs from the central directory name '", member, "'");
    local.take(local_extra_length, "local extra field");
    const unsigned char* stored = local.take(compressed_size, "member data");
    // Members must not share bytes (overlapping entries are the classic ZIP bomb).
    const auto next = member_extents.lower_bound(local_offset);
    if ((next != member_extents.end() && next->first < local.position()) ||
        (next != member_extents.begin() && std::prev(next)->second > local_offset))
      reader.fail("member '", member, "' overlaps another member's bytes");
    member_extents.emplace(local_offset, local.position());

    if (method == 0 && compressed_size != uncompressed_size)
      reader.fail("stored member '", member, "' has compressed size ", compressed_size, " != uncompressed size ",
                  uncompressed_size);
    visit(static_cast<const ByteReader&>(reader),
          NpzMember{key, member, method, stored, compressed_size, uncompressed_size, crc});
  }
}

/// The uncompressed bytes of a member (inflated into `inflated` when deflated, in place when stored) after checking
/// its CRC-32.
inline const unsigned char* npz_member_content(const ByteReader& reader, const NpzMember& member,
                                               std::vector<unsigned char>& inflated) {
  if (member.method == 8)
    inflated = zip_inflate(reader, member.name, member.stored, member.compressed_size, member.uncompressed_size);
  const unsigned char* content = member.method == 8 ? inflated.data() : member.stored;
  const std::uint32_t computed = zip_crc32(content, member.uncompressed_size);
  if (computed != member.crc)
    reader.fail("CRC-32 mismatch in member '", member.name, "': directory says 0x", std::hex, member.crc,
                ", data gives 0x", computed, std::dec);
  return content;
}

}  // namespace detail

/// Parses an .npz archive from memory into (key, array) pairs in central-directory order; keys lack ".npy".
/// Throws attnscope::io_error (naming `name_for_errors` and the member) for anything that is not a well-formed
/// single-disk, non-ZIP64, unencrypted archive of stored/deflated .npy members with matching CRC-32 and sizes.
inline NamedArrays parse_npz_ordered(const unsigned char* data, std::size_t size, const std::string& name_for_errors) {
  NamedArrays arrays;
  detail::walk_npz_members(data, size, name_for_errors,
                           [&](const detail::ByteReader& reader, const detail::NpzMember& member) {
    std::vector<unsigned char> inflated;  // stored members are parsed in place
    const unsigned char* content = detail::npz_member_content(reader, member, inflated);
    arrays.emplace_back(member.key,
                        parse_npy(content, member.uncompressed_size, name_for_errors + ":" + member.name));
  });
  return arrays;
}

/// Parses an .npz archive from memory into a map keyed by member name without ".npy" (see parse_npz_ordered).
inline std::map<std::string, Array> parse_npz(const unsigned char* data, std::size_t size,
                                              const std::string& name_for_errors) {
  return detail::to_map(parse_npz_ordered(data, size, name_for_errors));
}

/// Reads an .npz file into (key, array) pairs in archive order.
inline NamedArrays read_npz_ordered(const std::string& path) {
  return detail::parse_file(path, parse_npz_ordered);
}

/// Reads an .npz file into a map keyed by member name without ".npy".
inline std::map<std::string, Array> read_npz(const std::string& path) {
  return detail::parse_file(path, parse_npz);
}

namespace detail {

/// The checks of the .npz writers that need no member bytes, made before anything is written (write_npz: before
/// the file is created): fewer than 65535 members, non-empty unique keys, member names of at most 65535 bytes, no
/// bfloat16. Throws invalid_argument naming serialize_npz (serialize_npy for bfloat16).
inline void check_npz_arrays(const NamedArrays& arrays) {
  const char* fn = "serialize_npz";
  if (arrays.size() >= 0xFFFF) throw_invalid_argument(fn, arrays.size(), " arrays exceed the ZIP limit of 65534");
  std::set<std::string> keys;
  for (const auto& [key, array] : arrays) {
    if (key.empty() || !keys.insert(key).second)
      throw_invalid_argument(fn, "array names must be non-empty and unique, got '", key, "'");
    if (key.size() + 4 > 0xFFFF) throw_invalid_argument(fn, "array name of ", key.size(), " bytes is too long");
    required_npy_descr(array.dtype());
  }
}

/// Writes the .npz archive of `arrays` (which passed check_npz_arrays) in file order through
/// write(const char* data, std::size_t size): for each member its local header, name and stored bytes, then the
/// central directory and the end record. Holds in memory one member's .npy bytes (and their deflated copy) at a time
/// and the central directory; the one record layout behind serialize_npz and write_npz. Throws invalid_argument
/// naming serialize_npz for a member or an archive that would need ZIP64 (≥ 4 GiB).
template <class Write>
void write_npz_archive(const NamedArrays& arrays, Compression compression, Write&& write) {
  const char* fn = "serialize_npz";
  auto require_small = [&](std::uint64_t value, const std::string& what) {
    if (value >= 0xFFFFFFFFull) throw_invalid_argument(fn, what, " would need ZIP64 (", value, " bytes)");
  };
  std::uint64_t offset = 0;  // bytes written so far
  auto emit = [&](const std::string& bytes) {
    write(bytes.data(), bytes.size());
    offset += bytes.size();
  };
  std::string header, directory;
  for (const auto& [key, array] : arrays) {
    const std::string member = key + ".npy";
    std::string content = serialize_npy(array);
    require_small(content.size(), "member '" + member + "'");
    const std::uint32_t crc = zip_crc32(reinterpret_cast<const unsigned char*>(content.data()), content.size());
    const auto uncompressed_size = static_cast<std::uint32_t>(content.size());
    if (compression == Compression::deflated) content = zip_deflate(content);
    const std::uint16_t method = compression == Compression::deflated ? 8 : 0;
    const std::uint64_t local_offset = offset;
    require_small(local_offset, "archive");
    auto common_fields = [&](std::string& record) {  // version needed .. extra length, shared by both headers
      append_little_endian<std::uint16_t>(record, 20);      // version needed: 2.0
      append_little_endian<std::uint16_t>(record, 0);       // flags
      append_little_endian<std::uint16_t>(record, method);
      append_little_endian<std::uint16_t>(record, 0);       // time 00:00:00
      append_little_endian<std::uint16_t>(record, 0x21);    // date 1980-01-01
      append_little_endian<std::uint32_t>(record, crc);
      append_little_endian<std::uint32_t>(record, static_cast<std::uint32_t>(content.size()));
      append_little_endian<std::uint32_t>(record, uncompressed_size);
      append_little_endian<std::uint16_t>(record, static_cast<std::uint16_t>(member.size()));
      append_little_endian<std::uint16_t>(record, 0);       // extra length
    };
    header.clear();
    append_little_endian(header, zip_local_signature);
    common_fields(header);
    header += member;
    emit(header);
    emit(content);
    append_little_endian(directory, zip_central_signature);
    append_little_endian<std::uint16_t>(directory, 20);  // version made by: MS-DOS, 2.0
    common_fields(directory);
    append_little_endian<std::uint16_t>(directory, 0);   // comment length
    append_little_endian<std::uint16_t>(directory, 0);   // disk
    append_little_endian<std::uint16_t>(directory, 0);   // internal attributes
    append_little_endian<std::uint32_t>(directory, 0);   // external attributes
    append_little_endian<std::uint32_t>(directory, static_cast<std::uint32_t>(local_offset));
    directory += member;
  }
  require_small(offset + directory.size(), "archive");
  const auto directory_offset = static_cast<std::uint32_t>(offset);
  emit(directory);
  std::string end;
  append_little_endian(end, zip_end_signature);
  append_little_endian<std::uint16_t>(end, 0);  // disk
  append_little_endian<std::uint16_t>(end, 0);  // directory disk
  append_little_endian<std::uint16_t>(end, static_cast<std::uint16_t>(arrays.size()));
  append_little_endian<std::uint16_t>(end, static_cast<std::uint16_t>(arrays.size()));
  append_little_endian<std::uint32_t>(end, static_cast<std::uint32_t>(directory.size()));
  append_little_endian<std::uint32_t>(end, directory_offset);
  append_little_endian<std::uint16_t>(end, 0);  // comment length
  emit(end);
}

}  // namespace detail

/// The bytes of an .npz archive with one "<key>.npy" member per array (numpy-compatible; date 1980-01-01 so that
/// output is deterministic). Throws invalid_argument for empty or duplicate keys, bfloat16 arrays, more than
/// 65534 members or an archive that would need ZIP64 (≥ 4 GiB).
inline std::string serialize_npz(const NamedArrays& arrays, Compression compression = Compression::deflated) {
  detail::check_npz_arrays(arrays);
  std::string out;
  detail::write_npz_archive(arrays, compression, [&](const char* data, std::size_t size) { out.append(data, size); });
  return out;
}

/// Writes an .npz file, byte for byte what serialize_npz returns, streamed member by member: besides the arrays it
/// holds in memory only one member's .npy bytes (and their deflated copy) and the central directory. The file is
/// replaced whole or not at all (io/atomic_file.hpp: a temporary file beside `path`, renamed over it once flushed;
/// `listener` hears of it). Throws invalid_argument as serialize_npz; the checks that need no member bytes (keys,
/// member count, bfloat16) come before any file is created. Throws attnscope::io_error naming write_npz and the path
/// when the file cannot be created or written. On any failure (a write error, a full disk, an archive found to need
/// ZIP64) the temporary file is removed and an existing file at `path` is left as it was.
inline void write_npz(const std::string& path, const NamedArrays& arrays, Compression compression = Compression::deflated,
                      TemporaryFileListener* listener = nullptr) {
  detail::check_npz_arrays(arrays);
  detail::write_file_streamed("write_npz", path, [&](const auto& write) {
    detail::write_npz_archive(arrays, compression, write);
  }, listener);
}

}  // namespace attnscope::io
