// The libFuzzer program of every harness (fuzz_all, built by .ci/fuzz with
// EMBPLAN_BUILD_FUZZERS=ON): each harness's entry point is compiled in under
// the name embplan_fuzz_<harness> (harness_table.hpp), and the name the
// program is run by picks the one libFuzzer drives: build-fuzz/bin/fuzz_task,
// a link to fuzz_all, fuzzes the task reader. One program for all harnesses:
// the headers they share are compiled once.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "harness_table.hpp"

namespace {

// Set once, by LLVMFuzzerInitialize, before libFuzzer runs any input.
int (*chosen)(const std::uint8_t* data, std::size_t size) = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  std::string_view self = *argc > 0 ? (*argv)[0] : "";
  if (const auto slash = self.rfind('/'); slash != std::string_view::npos)
    self.remove_prefix(slash + 1);
  constexpr std::string_view prefix = "fuzz_";
  const std::string_view name =
      self.substr(0, prefix.size()) == prefix ? self.substr(prefix.size()) : self;
  using embplan::fuzz::harnesses;
  for (std::size_t i = 0; i < embplan::fuzz::harness_count; ++i) {
    if (harnesses[i].name == name) {
      chosen = harnesses[i].entry;
      return 0;
    }
  }
  std::fprintf(stderr, "fuzz_all: run it as fuzz_<harness> (a link to it); '%.*s' names none of:",
               static_cast<int>(self.size()), self.data());
  for (std::size_t i = 0; i < embplan::fuzz::harness_count; ++i)
    std::fprintf(stderr, " %.*s", static_cast<int>(harnesses[i].name.size()),
                 harnesses[i].name.data());
  std::fprintf(stderr, "\n");
  std::exit(2);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return chosen(data, size);
}
