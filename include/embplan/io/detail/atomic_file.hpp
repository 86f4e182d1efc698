#pragma once
// Files written whole or not at all (docs/design.md, "Principles": nothing is
// lost). Every file the library writes (plans, reports, traces, models,
// checkpoints, ...) goes to a temporary file beside the target, is flushed to
// disk and then renamed over the target, so a write that fails part-way (disk
// full, `ulimit -f`, an I/O error) leaves the previous file byte for byte as
// it was and no temporary behind, and a reader never sees half a file.
// POSIX: open(O_EXCL), write, fsync, rename.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <system_error>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::io::detail {

// The operating system's words for `code` ("File too large").
inline std::string os_reason(int code) {
  return std::error_code(code, std::generic_category()).message();
}

// "field 'file' = "<path>": expected <expected>", the path whole however long
// (to_display cuts a long string; a path is bounded by PATH_MAX and a message
// cut inside one would not name the file).
[[noreturn]] inline void fail_write_target(const std::string& path, std::string_view expected) {
  throw error(embplan::detail::field_message("file", "\"" + path + "\"", expected));
}

// The file `target` names, following symbolic links (a relative link is read
// from the link's folder), so that writing through a link replaces the file
// it points at and keeps the link. A dangling link yields the path it names.
inline std::filesystem::path resolve_write_target(const std::filesystem::path& target) {
  std::filesystem::path p = target;
  for (int hops = 0; hops < 40; ++hops) {  // 40: Linux's own limit (ELOOP)
    std::error_code ec;
    if (!std::filesystem::is_symlink(std::filesystem::symlink_status(p, ec))) return p;
    const auto next = std::filesystem::read_symlink(p, ec);
    if (ec) return p;
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  fail_write_target(target.string(), "a writable path (" + os_reason(ELOOP) + " resolving it)");
}

// One file being written: bytes go to a temporary beside the target, which
// commit() renames over it. Destroyed without commit() (an exception on the
// way), the temporary is removed and the target left untouched.
class atomic_file {
 public:
  explicit atomic_file(const std::filesystem::path& target)
      : name_(target.string()), target_(resolve_write_target(target)) {
    const std::string file_name = target_.filename().string();
    if (file_name.empty() || file_name == "." || file_name == "..") {
      fail_write_target(name_, "a path naming a file, not a directory");
    }
    struct stat st {};
    if (::stat(target_.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) {
        fail_write_target(name_, "a writable file path; a directory is not replaced");
      }
      if (!S_ISREG(st.st_mode)) {
        fail_write_target(name_, "a writable file path; a device, pipe or socket is not replaced");
      }
      keep_mode_ = true;
      mode_ = st.st_mode & 0777;
    }
    // ".<name>.tmp-XXXXXX", the name cut so the temporary's stays under NAME_MAX.
    const std::filesystem::path dir = target_.parent_path();
    const std::string stem = "." + file_name.substr(0, 200) + ".tmp-";
    static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::random_device entropy;
    int open_errno = EEXIST;
    for (int attempt = 0; attempt < 100 && open_errno == EEXIST; ++attempt) {
      std::string suffix(6, 'x');
      for (auto& c : suffix)
        c = alphabet[entropy() % (sizeof(alphabet) - 1)];
      temp_ = (dir / (stem + suffix)).string();
      // 0666 under the umask (and any default ACL): the mode a new file gets.
      fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      open_errno = fd_ < 0 ? errno : 0;
    }
    if (fd_ < 0) {
      temp_.clear();
      fail_os("cannot create a file in its folder", open_errno);
    }
  }

  atomic_file(const atomic_file&) = delete;
  atomic_file& operator=(const atomic_file&) = delete;

  ~atomic_file() { discard(); }

  // Writes all `size_bytes`; a short or failed write (EFBIG, ENOSPC, EIO)
  // throws, naming the file and the reason.
  void write(const void* data, std::size_t size_bytes) {
    const auto* p = static_cast<const char*>(data);
    while (size_bytes > 0) {
      const ::ssize_t n = ::write(fd_, p, size_bytes);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail_os("the write failed", errno);
      }
      if (n == 0) fail_os("the write failed", EIO);
      p += n;
      size_bytes -= static_cast<std::size_t>(n);
    }
  }

  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }

  // Flushes the temporary to disk, gives it the target's mode and renames it
  // over the target. Only after this returns has the target changed.
  void commit() {
    if (keep_mode_ && ::fchmod(fd_, mode_) != 0) fail_os("cannot set its mode", errno);
    if (::fsync(fd_) != 0) fail_os("flushing it to disk failed", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail_os("closing it failed", errno);
    if (::rename(temp_.c_str(), target_.c_str()) != 0) fail_os("renaming it failed", errno);
    temp_.clear();
    // The rename itself reaches the disk with the folder. Best effort: the
    // file is already in place, and some file systems refuse fsync on a folder.
    const std::filesystem::path dir = target_.parent_path();
    const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      (void)::fsync(dir_fd);
      (void)::close(dir_fd);
    }
  }

 private:
  void discard() noexcept {
    if (fd_ >= 0) (void)::close(fd_);
    fd_ = -1;
    if (!temp_.empty()) (void)::unlink(temp_.c_str());
    temp_.clear();
  }

  [[noreturn]] void fail_os(std::string_view what, int code) {
    discard();
    std::string expected = "a writable path (";
    expected += what;
    expected += ": ";
    expected += os_reason(code);
    expected += "; nothing was replaced)";
    fail_write_target(name_, expected);
  }

  std::string name_;              // as given, for messages
  std::filesystem::path target_;  // the file replaced, links followed
  std::string temp_;              // empty once renamed or removed
  int fd_ = -1;
  bool keep_mode_ = false;
  ::mode_t mode_ = 0;
};

// Replaces `file` with exactly `bytes`, atomically (atomic_file).
inline void write_file_atomically(const std::filesystem::path& file, std::string_view bytes) {
  atomic_file out(file);
  out.write(bytes);
  out.commit();
}

}  // namespace embplan::inline EMBPLAN_ABI::io::detail
