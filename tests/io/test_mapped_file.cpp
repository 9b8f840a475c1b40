// Tests of io::MappedFile: the mapped bytes equal the file's, empty files, missing files and directories; the path checks
// (io::detail::path_kind, join_path) the readers use against std::filesystem.
#include "support/catch.hpp"

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

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

TEST_CASE("path_kind tells a directory, a regular file, something else and nothing apart, as std::filesystem does, "
          "through symbolic links; join_path puts one separator between folder and name",
          "[io][mapped_file]") {
  namespace fs = std::filesystem;
  using io::detail::PathKind;
  const std::string folder = mapped_file_test_path("kinds");
  fs::remove_all(folder);
  fs::create_directory(folder);
  const std::string file = io::detail::join_path(folder, "a.bin");
  io::write_file(file, "x");
  const std::string link_to_file = io::detail::join_path(folder, "link_file"),
                    link_to_folder = io::detail::join_path(folder, "link_dir"),
                    dangling = io::detail::join_path(folder, "dangling");
  fs::create_symlink(file, link_to_file);
  fs::create_directory_symlink(folder, link_to_folder);
  fs::create_symlink(io::detail::join_path(folder, "nothing"), dangling);
  const std::string missing = io::detail::join_path(folder, "missing.bin");
  const std::pair<std::string, PathKind> cases[] = {
      {folder, PathKind::directory},         {folder + "/", PathKind::directory},
      {file, PathKind::regular_file},        {link_to_file, PathKind::regular_file},
      {link_to_folder, PathKind::directory}, {dangling, PathKind::missing},
      {missing, PathKind::missing},          {"/dev/null", PathKind::other},
      {"", PathKind::missing}};
  for (const auto& [path, kind] : cases) {
    INFO(path);
    CHECK(io::detail::path_kind(path) == kind);
    std::error_code error;
    CHECK(io::detail::path_is_directory(path) == fs::is_directory(path, error));
    CHECK(io::detail::path_is_regular_file(path) == fs::is_regular_file(path, error));
    CHECK(io::detail::path_exists(path) == fs::exists(path, error));
  }
  CHECK(io::detail::join_path("models/gpt2", "config.json") == "models/gpt2/config.json");
  CHECK(io::detail::join_path("models/gpt2/", "config.json") == "models/gpt2/config.json");
  CHECK(io::detail::join_path("", "config.json") == "config.json");
  CHECK(io::detail::join_path("/", "etc") == "/etc");
  CHECK(io::detail::join_path("models", "config.json") == (fs::path("models") / "config.json").string());
  fs::remove_all(folder);
}
