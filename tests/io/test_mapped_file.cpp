// Tests of io::MappedFile: the mapped bytes equal the file's, empty files, missing files and directories.
#include "support/catch.hpp"

#include <filesystem>
#include <string>

#include "attnscope/io/file.hpp"
#include "attnscope/io/mapped_file.hpp"

using namespace attnscope;

namespace {
std::string mapped_file_test_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("attnscope_mapped_" + name)).string();
}
}  // namespace

TEST_CASE("MappedFile maps exactly the bytes of the file", "[io][mapped_file]") {
  std::string bytes;
  for (int i = 0; i < 100000; ++i) bytes.push_back(static_cast<char>((i * 7919) % 251));
  const std::string path = mapped_file_test_path("bytes.bin");
  io::write_file(path, bytes);
  io::MappedFile file(path);
  REQUIRE(file.size() == bytes.size());
  REQUIRE(file.path() == path);
  REQUIRE(std::string(reinterpret_cast<const char*>(file.data()), file.size()) == bytes);
  io::MappedFile moved = std::move(file);
  REQUIRE(moved.size() == bytes.size());
  REQUIRE(file.data() == nullptr);
  REQUIRE(moved.data()[12345] == static_cast<unsigned char>(bytes[12345]));
  std::filesystem::remove(path);
}

TEST_CASE("MappedFile of an empty file has size 0", "[io][mapped_file]") {
  const std::string path = mapped_file_test_path("empty.bin");
  io::write_file(path, "");
  io::MappedFile file(path);
  REQUIRE(file.size() == 0);
  REQUIRE_FALSE(file.is_memory_mapped());
  std::filesystem::remove(path);
}

TEST_CASE("MappedFile rejects missing files and directories by name", "[io][mapped_file][errors]") {
  REQUIRE_THROWS_WITH(io::MappedFile(mapped_file_test_path("does-not-exist.bin")),
                      Catch::Contains("MappedFile") && Catch::Contains("does-not-exist.bin"));
  REQUIRE_THROWS_WITH(io::MappedFile(std::filesystem::temp_directory_path().string()),
                      Catch::Contains("is a directory"));
}
