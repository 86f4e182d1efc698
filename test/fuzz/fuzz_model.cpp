// libFuzzer harness: model files, as `embplan plan --model` / `--comm-model`
// read them: neural_cost::load (cost/neural.hpp) and neural_comm::load
// (cost/neural_comm.hpp), which take a path, so each input is written to a
// scratch file of this process first.

#include "embplan/cost/neural.hpp"
#include "embplan/cost/neural_comm.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using embplan::fuzz::expect_only_embplan_errors;
  const auto& file = embplan::fuzz::scratch().write(data, size);
  expect_only_embplan_errors([&] { (void)embplan::neural_cost::load(file); });
  expect_only_embplan_errors([&] { (void)embplan::neural_comm::load(file); });
  return 0;
}
