#pragma once
// What the harnesses share: the libFuzzer entry point's signature, the one
// exception a reader may throw, and a scratch file for readers that take a
// path (CONTRIBUTING.md, fuzzing).
//
// A harness feeds one input to one reader and accepts only embplan::error:
// any other exception escapes LLVMFuzzerTestOneInput (libFuzzer reports it as
// a crash; the replay driver, replay_main.cpp, names the input and fails), and
// a sanitizer report or a crash is a finding too.

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "embplan/core/error.hpp"
#include "embplan/version.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace embplan::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

inline std::span<const std::byte> as_bytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

// Runs `read`; an embplan::error is the reader refusing bad input, which is
// fine. Anything else propagates.
template <class Read>
void expect_only_embplan_errors(Read&& read) {
  try {
    read();
  } catch (const embplan::error&) {
  }
}

// A round trip's check: what a reader accepted, its writer must write so that
// the reader reads it back equal. A failure is a finding (std::logic_error is
// no embplan::error), naming `what`.
template <class Fn>
decltype(auto) must_succeed(std::string_view what, Fn&& fn) {
  try {
    return fn();
  } catch (const embplan::error& e) {
    throw std::logic_error(std::string(what) + " refused what was written: " + e.what());
  }
}

inline void require_equal(bool equal, std::string_view what) {
  if (!equal) throw std::logic_error(std::string(what) + ": read back different");
}

// A file of this process, rewritten with each input: the readers of model
// files and records take a path, not bytes. An in-memory file (memfd_create,
// read back as /proc/self/fd/N) where Linux has one: a file on disk costs
// about 3 ms per input to truncate and rewrite, 100 times the read. Otherwise
// mkstemp under $TMPDIR (or /tmp), removed at exit.
class scratch_file {
 public:
  scratch_file() {
#ifdef __linux__
    fd_ = ::memfd_create("embplan_fuzz", 0);
    if (fd_ >= 0) {
      path_ = "/proc/self/fd/" + std::to_string(fd_);
      std::error_code ec;
      if (std::filesystem::exists(path_, ec)) return;
      ::close(fd_);  // no /proc: fall back to a file on disk
    }
#endif
    const char* dir = std::getenv("TMPDIR");
    std::string pattern = (dir != nullptr && *dir != '\0') ? dir : "/tmp";
    pattern += "/embplan_fuzz_XXXXXX";
    fd_ = ::mkstemp(pattern.data());
    if (fd_ < 0) throw std::runtime_error("embplan fuzz: mkstemp failed for " + pattern);
    path_ = pattern;
    on_disk_ = true;
  }
  scratch_file(const scratch_file&) = delete;
  scratch_file& operator=(const scratch_file&) = delete;
  ~scratch_file() {
    ::close(fd_);
    if (on_disk_) ::unlink(path_.c_str());
  }

  // The file now holds exactly `data`.
  const std::filesystem::path& write(const std::uint8_t* data, std::size_t size) {
    if (::ftruncate(fd_, 0) != 0) throw std::runtime_error("embplan fuzz: ftruncate failed");
    std::size_t done = 0;
    while (done < size) {
      const auto n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) throw std::runtime_error("embplan fuzz: write to the scratch file failed");
      done += static_cast<std::size_t>(n);
    }
    return path_;
  }

 private:
  int fd_ = -1;
  std::filesystem::path path_{};
  bool on_disk_ = false;
};

// The process's scratch file, made on first use.
inline scratch_file& scratch() {
  static scratch_file file;
  return file;
}

}  // namespace embplan::fuzz
