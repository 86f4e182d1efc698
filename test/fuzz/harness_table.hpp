#pragma once
// The harnesses of the replay and the fuzzing program (fuzz_replay, fuzz_all;
// test/fuzz/CMakeLists.txt): each harness's LLVMFuzzerTestOneInput, renamed
// embplan_fuzz_<name> in the one generated translation unit that includes
// them all, under its name.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace embplan::fuzz {

struct harness {
  std::string_view name;  // "task" for fuzz_task.cpp
  int (*entry)(const std::uint8_t* data, std::size_t size);
};

extern const harness harnesses[];
extern const std::size_t harness_count;

}  // namespace embplan::fuzz
