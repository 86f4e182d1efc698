// libFuzzer harness: model files, as `embplan plan --model` / `--comm-model`
// / `--policy` / `--autoshard-policy` and `train ... --resume` read them:
// neural_cost::load (cost/neural.hpp), neural_comm::load
// (cost/neural_comm.hpp), the DreamShard and AutoShard policies and their
// training checkpoints (rl/), which take a path, so each input is written to
// a scratch file of this process first.

#include "embplan/cost/neural.hpp"
#include "embplan/cost/neural_comm.hpp"
#include "embplan/rl/autoshard.hpp"
#include "embplan/rl/autoshard_train.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "embplan/rl/dreamshard_train.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using embplan::fuzz::expect_only_embplan_errors;
  namespace rl = embplan::rl;
  const auto& file = embplan::fuzz::scratch().write(data, size);
  expect_only_embplan_errors([&] { (void)embplan::neural_cost::load(file); });
  expect_only_embplan_errors([&] { (void)embplan::neural_comm::load(file); });
  expect_only_embplan_errors([&] { (void)rl::dreamshard_policy::load(file); });
  expect_only_embplan_errors([&] { (void)rl::autoshard_policy::load(file); });
  expect_only_embplan_errors(
      [&] { (void)rl::load_checkpoint(file, rl::dreamshard_train_options{}); });
  expect_only_embplan_errors(
      [&] { (void)rl::load_checkpoint(file, rl::autoshard_train_options{}); });
  return 0;
}
