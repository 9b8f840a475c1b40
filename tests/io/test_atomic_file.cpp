// Tests of io/atomic_file.hpp and the writers on it (write_file, write_npy, write_npz, write_safetensors): a target is
// replaced whole at commit or left as it was, no temporary file survives a failure (an exception, a full disk, a
// device that takes no byte), the listener hears of every temporary file before it exists and after it is gone, the
// bytes written are those of the serializers, and output_path_problem names each path that cannot be written.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "attnscope/core/random.hpp"
#include "attnscope/io/atomic_file.hpp"
#include "attnscope/io/npy.hpp"
#include "attnscope/io/npz.hpp"
#include "attnscope/io/safetensors.hpp"
#include "io_test_support.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"

using namespace attnscope;
using attnscope::testing::error_message;
using attnscope::testing::file_bytes;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

namespace fs = std::filesystem;

/// An empty folder of the build tree for one test case, removed afterwards.
struct AtomicScratch {
  fs::path path;
  explicit AtomicScratch(const std::string& name)
      : path(fs::path(ATTNSCOPE_BINARY_DIR) / ("test_atomic_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~AtomicScratch() {
    std::error_code ignored;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(path, ignored);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  /// The names in the folder, hidden ones included.
  std::set<std::string> names() const {
    std::set<std::string> result;
    for (const auto& entry : fs::directory_iterator(path)) result.insert(entry.path().filename().string());
    return result;
  }
};

/// Records what an AtomicOutputFile reports, and whether each temporary file existed when it was reported.
struct RecordingListener final : io::TemporaryFileListener {
  std::vector<std::string> created, gone;
  bool existed_at_creation = false, existed_when_gone = false;
  void temporary_file_created(const std::string& path) override {
    created.push_back(path);
    existed_at_creation = existed_at_creation || fs::exists(path);
  }
  void temporary_file_gone(const std::string& path) override {
    gone.push_back(path);
    existed_when_gone = existed_when_gone || fs::exists(path);
  }
};

/// A file-size limit of `bytes` for this process while it lives (RLIMIT_FSIZE: a write past it fails with EFBIG,
/// as a full disk fails with ENOSPC), SIGXFSZ ignored so that the write returns the error instead of ending the
/// process.
struct FileSizeLimit {
  rlimit previous{};
  struct sigaction previous_action {};
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &previous) == 0);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ignore, &previous_action);
    rlimit limited = previous;
    limited.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &previous);
    ::sigaction(SIGXFSZ, &previous_action, nullptr);
  }
};

io::NamedArrays arrays_of_bytes(std::size_t bytes, Random& random) {
  std::vector<float> values(bytes / 4);
  for (float& value : values) value = static_cast<float>(random.normal());
  return {{"a", io::Array::from_vector(values, {static_cast<std::int64_t>(values.size())})},
          {"b", io::Array::from_vector(std::vector<std::int32_t>{1, 2, 3}, {3})}};
}

}  // namespace

TEST_CASE("AtomicOutputFile: the target changes only at commit; meanwhile a temporary file beside it",
          "[io][atomic_file]") {
  const AtomicScratch scratch("commit");
  const std::string target = scratch.file("t.bin");
  io::write_file(target, "previous");
  RecordingListener listener;
  {
    io::AtomicOutputFile file("test", target, &listener);
    const std::string temporary = file.temporary_path();
    CHECK_THAT(temporary, StartsWith(scratch.file(".t.bin.tmp-" + std::to_string(::getpid()) + "-")));
    CHECK(temporary.size() == scratch.file(".t.bin.tmp-" + std::to_string(::getpid()) + "-").size() + 8);
    file.write("new ", 4);
    file.write("contents", 8);
    CHECK(file.bytes_written() == 12);
    CHECK(file_bytes(target) == "previous");
    CHECK(file_bytes(temporary) == "new contents");
    CHECK(scratch.names() == std::set<std::string>{"t.bin", fs::path(temporary).filename().string()});
    file.commit();
    CHECK(file.temporary_path().empty());
    CHECK(file_bytes(target) == "new contents");
    CHECK_THAT(error_message<io_error>([&] { file.write("x", 1); }), Contains("write after commit"));
  }
  CHECK(scratch.names() == std::set<std::string>{"t.bin"});
  // The listener heard of the temporary file before it existed and after it was renamed.
  REQUIRE(listener.created.size() == 1);
  CHECK(listener.gone == listener.created);
  CHECK_FALSE(listener.existed_at_creation);
  CHECK_FALSE(listener.existed_when_gone);

  // Not committed (an exception on the way): the previous file stays, the temporary file goes.
  RecordingListener abandoned;
  {
    io::AtomicOutputFile file("test", target, &abandoned);
    file.write("half", 4);
  }
  CHECK(file_bytes(target) == "new contents");
  CHECK(scratch.names() == std::set<std::string>{"t.bin"});
  CHECK(abandoned.gone == abandoned.created);
  CHECK(abandoned.created.size() == 1);
  CHECK(error_message([&] {
          io::detail::write_file_streamed("write_npz", target, [](const auto& write) {
            write("PK", 2);
            attnscope::detail::throw_invalid_argument("serialize_npz", "stop");
          });
        }) == "attnscope::serialize_npz: stop");
  CHECK(file_bytes(target) == "new contents");
  CHECK(scratch.names() == std::set<std::string>{"t.bin"});

  // A new file, and a bare relative name (the temporary file in the working folder).
  const std::string fresh = scratch.file("fresh.txt");
  io::write_file(fresh, "");
  CHECK(fs::exists(fresh));
  CHECK(fs::file_size(fresh) == 0);
  const fs::path working = fs::current_path();
  fs::current_path(scratch.path);
  RecordingListener relative;
  io::write_file("relative.txt", "r", &relative);
  fs::current_path(working);
  CHECK(file_bytes(scratch.file("relative.txt")) == "r");
  REQUIRE(relative.created.size() == 1);
  CHECK_THAT(relative.created[0], StartsWith(".relative.txt.tmp-"));
}

TEST_CASE("AtomicOutputFile: the replaced file keeps its permission bits; a symbolic link stays a link",
          "[io][atomic_file]") {
  const AtomicScratch scratch("mode");
  const std::string target = scratch.file("mode.csv");
  io::write_file(target, "old");
  fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  io::write_file(target, "new");
  CHECK(file_bytes(target) == "new");
  CHECK((fs::status(target).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));

  const std::string real = scratch.file("real.npy"), link = scratch.file("link.npy");
  io::write_file(real, "old");
  fs::create_symlink(real, link);
  const io::Array array = io::Array::from_vector(std::vector<double>{1.5, -2}, {2});
  io::write_npy(link, array);
  CHECK(fs::is_symlink(link));
  CHECK(file_bytes(real) == io::serialize_npy(array));
  CHECK(scratch.names() == std::set<std::string>{"mode.csv", "real.npy", "link.npy"});
}

TEST_CASE("Writers on a full disk: an io_error naming the writer and the path, the previous file intact, no "
          "temporary file", "[io][atomic_file][errors]") {
  const AtomicScratch scratch("full");
  Random random(20261207);
  const std::string previous = "previous output, shorter than the limit";
  const rlim_t limit = 1 << 16;
  const io::NamedArrays big = arrays_of_bytes(1 << 18, random);  // four times the limit
  struct Writer {
    std::string name, file;
    std::function<void(const std::string&)> write;
  };
  const std::vector<Writer> writers = {
      {"write_file", "a.csv", [&](const std::string& path) { io::write_file(path, std::string(1 << 18, 'x')); }},
      {"write_npy", "a.npy", [&](const std::string& path) { io::write_npy(path, big[0].second); }},
      {"write_npz", "a.npz", [&](const std::string& path) { io::write_npz(path, big, io::Compression::stored); }},
      {"write_safetensors", "a.safetensors", [&](const std::string& path) { io::write_safetensors(path, big); }}};
  for (const Writer& writer : writers) {
    INFO(writer.name);
    const std::string target = scratch.file(writer.file);
    io::write_file(target, previous);
    std::string message;
    {
      const FileSizeLimit limited(limit);
      message = error_message<io_error>([&] { writer.write(target); });
    }
    CHECK_THAT(message, StartsWith("attnscope::" + writer.name + ": " + target + ": write failed after "));
    CHECK_THAT(message, Contains("File too large"));
    CHECK(file_bytes(target) == previous);
    CHECK(scratch.names() == std::set<std::string>{writer.file});
    fs::remove(target);
    // The same write without the limit succeeds with the serializer's bytes.
    writer.write(target);
    if (writer.name == "write_npz") CHECK(file_bytes(target) == io::serialize_npz(big, io::Compression::stored));
    if (writer.name == "write_safetensors") CHECK(file_bytes(target) == io::serialize_safetensors(big));
    if (writer.name == "write_npy") CHECK(file_bytes(target) == io::serialize_npy(big[0].second));
    if (writer.name == "write_file") CHECK(file_bytes(target) == std::string(1 << 18, 'x'));
    fs::remove(target);
  }

  // A device that takes no byte (/dev/full: ENOSPC) is written in place: the error names the path and the system's
  // reason, the device stays a device and no temporary file appears beside it.
  if (fs::is_character_file("/dev/full")) {
    auto dev_leftovers = [] {
      std::size_t count = 0;
      for (const auto& entry : fs::directory_iterator("/dev"))
        count += entry.path().filename().string().rfind(".full.tmp-", 0) == 0;
      return count;
    };
    CHECK_THAT(error_message<io_error>([&] { io::write_file("/dev/full", "bytes"); }),
               StartsWith("attnscope::write_file: /dev/full: "));
    CHECK_THAT(error_message<io_error>([&] { io::write_file("/dev/full", "bytes"); }),
               Contains("No space left on device"));
    CHECK_THAT(error_message<io_error>([&] { io::write_npz("/dev/full", big); }),
               StartsWith("attnscope::write_npz: /dev/full: write failed after 0 bytes: No space left on device"));
    CHECK(fs::is_character_file("/dev/full"));
    CHECK(dev_leftovers() == 0);
  }
  if (fs::is_character_file("/dev/null")) CHECK_NOTHROW(io::write_npz("/dev/null", big));
}

TEST_CASE("Writers: the bytes of the serializers, into new and existing files, on many random arrays",
          "[io][atomic_file]") {
  const AtomicScratch scratch("bytes");
  Random random(7);
  const std::vector<io::DType> dtypes = {io::DType::float32, io::DType::float64, io::DType::int32, io::DType::int64,
                                         io::DType::float16, io::DType::boolean};
  for (int trial = 0; trial < 40; ++trial) {
    INFO("trial " << trial);
    const io::NamedArrays arrays = attnscope::testing::random_named_arrays(
        random, dtypes, trial % 2 == 0, [](std::size_t i) { return "key" + std::to_string(i); });
    const std::string npz = scratch.file("x.npz"), safetensors = scratch.file("x.safetensors");
    if (trial % 3 == 0) io::write_file(npz, "previous");
    const auto compression = trial % 4 < 2 ? io::Compression::stored : io::Compression::deflated;
    io::write_npz(npz, arrays, compression);
    CHECK(file_bytes(npz) == io::serialize_npz(arrays, compression));
    io::write_safetensors(safetensors, arrays, {{"trial", std::to_string(trial)}});
    CHECK(file_bytes(safetensors) == io::serialize_safetensors(arrays, {{"trial", std::to_string(trial)}}));
    if (!arrays.empty()) {
      io::write_npy(scratch.file("x.npy"), arrays[0].second, trial % 2 == 1);
      CHECK(file_bytes(scratch.file("x.npy")) == io::serialize_npy(arrays[0].second, trial % 2 == 1));
    }
  }
  std::set<std::string> names = scratch.names();
  names.erase("x.npy");
  CHECK(names == std::set<std::string>{"x.npz", "x.safetensors"});
}

TEST_CASE("output_path_problem: each path that cannot be written, named before any work", "[io][atomic_file]") {
  const AtomicScratch scratch("check");
  io::write_file(scratch.file("plain"), "p");
  fs::create_directory(scratch.path / "folder");
  CHECK(io::output_path_problem(scratch.file("new.npz")).empty());
  CHECK(io::output_path_problem(scratch.file("plain")).empty());
  CHECK(io::output_path_problem("/dev/null").empty());
  CHECK(io::output_path_problem("") == "the output path is empty");
  CHECK(io::output_path_problem(scratch.file("folder")) == "is a directory");
  CHECK(io::output_path_problem(scratch.file("missing/x.npz")) ==
        "the folder " + scratch.file("missing") + " does not exist");
  CHECK(io::output_path_problem(scratch.file("plain/x.npz")) == scratch.file("plain") + " is not a folder");
  // A folder where no file can be created: a read-only folder binds a user who is not root; root is refused by a
  // file system that takes no new file (/sys). The check creates and removes a probe file, leaving nothing behind.
  RecordingListener listener;
  if (::geteuid() != 0) {
    fs::create_directory(scratch.path / "read_only");
    fs::permissions(scratch.path / "read_only", fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THAT(io::output_path_problem(scratch.file("read_only/x.npz"), &listener),
               StartsWith("no file can be created in the folder " + scratch.file("read_only") + " ("));
    io::write_file(scratch.file("locked"), "l");
    fs::permissions(scratch.file("locked"), fs::perms::owner_read);
    CHECK_THAT(io::output_path_problem(scratch.file("locked")), StartsWith("the existing file is not writable"));
  } else if (fs::is_directory("/sys")) {
    CHECK_THAT(io::output_path_problem("/sys/x.npz", &listener),
               StartsWith("no file can be created in the folder /sys ("));
  }
  CHECK(listener.created == listener.gone);
  CHECK(io::output_path_problem(scratch.file("probe.npz"), &listener).empty());
  CHECK(listener.created.size() >= 1);
  CHECK(listener.created == listener.gone);
  CHECK_FALSE(listener.existed_when_gone);
  std::set<std::string> names = scratch.names();
  names.erase("read_only");
  names.erase("locked");
  CHECK(names == std::set<std::string>{"plain", "folder"});
  // The constructor refuses what output_path_problem names, with the writer's name.
  CHECK(error_message<io_error>([&] { io::write_npz(scratch.file("missing/x.npz"), {}); }) ==
        "attnscope::write_npz: " + scratch.file("missing/x.npz") + ": cannot open file for writing: the folder " +
            scratch.file("missing") + " does not exist");
  CHECK(error_message<io_error>([&] { io::write_file(scratch.file("folder"), "x"); }) ==
        "attnscope::write_file: " + scratch.file("folder") + ": cannot open file for writing: is a directory");
}
