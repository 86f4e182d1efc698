#include "embplan/io/detail/atomic_file.hpp"

#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embplan/io/json_file.hpp"
#include "embplan/io/npy.hpp"
#include "embplan/io/safetensors.hpp"

#include "support/message_of.hpp"

// The test folder is one unity translation unit: the helpers below carry an
// atomic_ prefix no other file of test/io uses.
namespace {

namespace fs = std::filesystem;
namespace io = embplan::io;

// An empty folder of its own for one test case.
fs::path atomic_dir(const std::string& name) {
  const auto dir = fs::path(EMBPLAN_BINARY_DIR) / "test_io_atomic" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string atomic_read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void atomic_put(const fs::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary) << bytes;
}

// Names in `dir` that look like a writer's temporary (".<name>.tmp-XXXXXX").
std::vector<std::string> atomic_leftovers(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto name = entry.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) out.push_back(name);
  }
  return out;
}

bool atomic_contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// While alive, this process may write files of at most `bytes` (RLIMIT_FSIZE,
// as `ulimit -f` sets it) and a write past it fails with EFBIG instead of
// killing the process with SIGXFSZ. Both are restored on destruction.
class atomic_file_size_limit {
 public:
  explicit atomic_file_size_limit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved_) == 0);
    saved_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limited = saved_;
    limited.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  }
  atomic_file_size_limit(const atomic_file_size_limit&) = delete;
  atomic_file_size_limit& operator=(const atomic_file_size_limit&) = delete;
  ~atomic_file_size_limit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, saved_handler_);
  }

 private:
  rlimit saved_{};
  void (*saved_handler_)(int) = SIG_DFL;
};

::mode_t atomic_mode(const fs::path& file) {
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  return st.st_mode & 0777;
}

// A JSON value whose text is far beyond 4 KiB.
nlohmann::json atomic_big_json() {
  nlohmann::json j = nlohmann::json::array();
  for (int i = 0; i < 4000; ++i)
    j.push_back(i);
  return {{"values", j}};
}

}  // namespace

TEST_CASE("atomic writes: a new file is written, an overwrite replaces it whole") {
  const auto dir = atomic_dir("overwrite");
  const auto file = dir / "plan.json";
  io::write_json_file(file, {{"a", 1}, {"long", std::string(5000, 'x')}});
  CHECK(io::read_json_file(file) == nlohmann::json{{"a", 1}, {"long", std::string(5000, 'x')}});

  // A shorter value leaves nothing of the longer one behind.
  io::write_json_file(file, {{"b", 2}});
  CHECK(atomic_read(file) == "{\n  \"b\": 2\n}\n");
  CHECK(atomic_leftovers(dir).empty());

  // A new file gets the mode any new file gets here (0666 under the umask);
  // a replaced file keeps its own.
  const auto reference = dir / "reference";
  atomic_put(reference, "x");
  CHECK(atomic_mode(file) == atomic_mode(reference));
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  io::write_json_file(file, {{"c", 3}});
  CHECK(atomic_mode(file) == 0640);
  CHECK(io::read_json_file(file) == nlohmann::json{{"c", 3}});

  // Streamed in pieces through the class the writers share.
  {
    io::detail::atomic_file out(dir / "pieces.bin");
    out.write("abc");
    out.write(std::string(10000, 'd'));
    CHECK(!fs::exists(dir / "pieces.bin"));  // nothing there before commit()
    out.commit();
  }
  CHECK(atomic_read(dir / "pieces.bin") == "abc" + std::string(10000, 'd'));

  // Not committed (an exception on the way): no file, no temporary.
  {
    io::detail::atomic_file out(dir / "abandoned.bin");
    out.write("half");
  }
  CHECK(!fs::exists(dir / "abandoned.bin"));
  CHECK(atomic_leftovers(dir).empty());
}

TEST_CASE("atomic writes: a write that fails part-way leaves the old file byte for byte") {
  const auto dir = atomic_dir("failed_write");
  const auto file = dir / "report.json";
  const std::string old_text = "{\"previous\": \"good\"}\n";
  atomic_put(file, old_text);

  std::string msg;
  {
    const atomic_file_size_limit limit(4096);
    msg = embplan::test::message_of([&] { io::write_json_file(file, atomic_big_json()); });
  }
  CAPTURE(msg);
  CHECK(atomic_contains(msg, "field 'file' = \"" + file.string() + "\""));
  CHECK(atomic_contains(msg, "File too large"));
  CHECK(atomic_read(file) == old_text);
  CHECK(atomic_leftovers(dir).empty());

  // The limit gone, the same write succeeds.
  io::write_json_file(file, atomic_big_json());
  CHECK(io::read_json_file(file) == atomic_big_json());
}

TEST_CASE("atomic writes: npy and safetensors files are replaced whole or not at all") {
  const auto dir = atomic_dir("binary");
  const auto npy = dir / "indices.npy";
  const auto st = dir / "model.safetensors";
  const std::vector<std::int64_t> small{1, 2, 3};
  io::write_npy(npy, small);
  io::safetensors_file model;
  model.tensors["w"] = {.dtype = "F32", .shape = {2}, .values = {1, 2}};
  io::write_safetensors(st, model);
  const auto old_npy = atomic_read(npy);
  const auto old_st = atomic_read(st);

  const std::vector<std::int64_t> big(10'000, 7);
  io::safetensors_file big_model;
  big_model.tensors["w"] = {
      .dtype = "F32", .shape = {10'000}, .values = std::vector<float>(10'000)};
  std::string npy_msg;
  std::string st_msg;
  {
    const atomic_file_size_limit limit(4096);
    npy_msg = embplan::test::message_of([&] { io::write_npy(npy, big); });
    st_msg = embplan::test::message_of([&] { io::write_safetensors(st, big_model); });
  }
  CHECK(atomic_contains(npy_msg, npy.string()));
  CHECK(atomic_contains(npy_msg, "File too large"));
  CHECK(atomic_contains(st_msg, st.string()));
  CHECK(atomic_contains(st_msg, "File too large"));
  CHECK(atomic_read(npy) == old_npy);
  CHECK(atomic_read(st) == old_st);
  CHECK(io::read_npy<std::int64_t>(npy) == xt::xtensor<std::int64_t, 1>{1, 2, 3});
  CHECK(io::read_safetensors(st).tensors.at("w").values == std::vector<float>{1, 2});
  CHECK(atomic_leftovers(dir).empty());
}

TEST_CASE("atomic writes: a folder, a device or a FIFO is refused, never replaced") {
  const auto dir = atomic_dir("special");
  const auto folder = dir / "a_folder.json";
  fs::create_directories(folder);
  const auto folder_msg = embplan::test::message_of([&] { io::write_json_file(folder, {}); });
  CHECK(atomic_contains(folder_msg, folder.string()));
  CHECK(atomic_contains(folder_msg, "a directory is not replaced"));
  CHECK(fs::is_directory(folder));

  const auto trailing_slash =
      embplan::test::message_of([&] { io::write_json_file(folder.string() + "/", {}); });
  CHECK(atomic_contains(trailing_slash, "not a directory"));

  const auto fifo = dir / "a_fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto fifo_msg = embplan::test::message_of([&] { io::write_json_file(fifo, {}); });
  CHECK(atomic_contains(fifo_msg, fifo.string()));
  CHECK(atomic_contains(fifo_msg, "a device, pipe or socket is not replaced"));
  CHECK(fs::is_fifo(fifo));

  // /dev/null renamed over would be a regular file for every program after.
  if (fs::is_character_file("/dev/null")) {
    const auto null_msg = embplan::test::message_of([] { io::write_json_file("/dev/null", {}); });
    CHECK(atomic_contains(null_msg, "field 'file' = \"/dev/null\""));
    CHECK(atomic_contains(null_msg, "a device, pipe or socket is not replaced"));
    CHECK(fs::is_character_file("/dev/null"));
  }
  CHECK(atomic_leftovers(dir).empty());

  // A folder that does not exist: named whole (longer than a message shows
  // of other values), with the system's reason.
  const auto missing = dir / ("no_such_folder_" + std::string(220, 'd')) / "x.json";
  const auto missing_msg = embplan::test::message_of([&] { io::write_json_file(missing, {}); });
  CHECK(atomic_contains(missing_msg, missing.string()));
  CHECK(atomic_contains(missing_msg, "No such file or directory"));
}

TEST_CASE("atomic writes: through a symbolic link, the file it names is replaced") {
  const auto dir = atomic_dir("symlink");
  fs::create_directories(dir / "real");
  const auto real = dir / "real" / "plan.json";
  atomic_put(real, "{\"old\": true}\n");
  const auto link = dir / "plan.json";
  fs::create_symlink(fs::path("real") / "plan.json", link);  // relative, read from dir

  io::write_json_file(link, {{"new", true}});
  CHECK(fs::is_symlink(link));
  CHECK(fs::read_symlink(link) == fs::path("real") / "plan.json");
  CHECK(io::read_json_file(real) == nlohmann::json{{"new", true}});
  CHECK(atomic_leftovers(dir).empty());
  CHECK(atomic_leftovers(dir / "real").empty());

  // A link to a file not there yet: the file is made, the link kept.
  const auto dangling = dir / "later.json";
  fs::create_symlink(fs::path("real") / "later.json", dangling);
  io::write_json_file(dangling, {{"made", 1}});
  CHECK(fs::is_symlink(dangling));
  CHECK(io::read_json_file(dir / "real" / "later.json") == nlohmann::json{{"made", 1}});
}
