// Cost model files: a file of another kind (a policy, the other cost model)
// is named as such, not answered with the tensor names it lacks. (Both
// loaders named an absent required metadata key with the file before this
// change; neural_test.cpp holds that.)
#include <doctest/doctest.h>

#include <string>

#include "embplan/cost/dreamshard_cost.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/cost/neural_comm.hpp"
#include "support/message_of.hpp"

namespace model_files_test {

using embplan::test::message_of;

const std::string data = std::string(EMBPLAN_SOURCE_DIR) + "/data/";
const std::string autoshard_file = data + "rl/autoshard_cpu_8dev.safetensors";
const std::string dreamshard_file = data + "rl/dreamshard_cpu_4dev.safetensors";
const std::string compute_file = data + "cost/cpu_compute_model.safetensors";
const std::string comm_file = data + "cost/cpu_comm_4dev_model.safetensors";

}  // namespace model_files_test

using namespace model_files_test;

TEST_CASE("cost model files: a policy or the other model is named as what it is") {
  CHECK(message_of([] { (void)embplan::neural_cost::load(autoshard_file); }) ==
        autoshard_file + ": this is an AutoShard policy, expected a compute cost model");
  CHECK(message_of([] { (void)embplan::neural_cost::load(comm_file); }) ==
        comm_file + ": this is a communication cost model, expected a compute cost model");
  CHECK(message_of([] { (void)embplan::neural_comm::load(dreamshard_file); }) ==
        dreamshard_file + ": this is a DreamShard policy, expected a communication cost model");
  CHECK(message_of([] { (void)embplan::dreamshard_cost::load(compute_file); }) ==
        compute_file + ": this is a compute cost model, expected a DreamShard cost model");
  // A DreamShard policy holds the cost network: it loads as one.
  CHECK_NOTHROW((void)embplan::dreamshard_cost::load(dreamshard_file));
}
