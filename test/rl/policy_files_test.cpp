// Policy files: a file of another kind is named as such ("this is a
// DreamShard policy, expected an AutoShard policy"), not answered with the
// tensor names it lacks; a required metadata key that is absent is an error
// naming the file and the key, never a default.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "embplan/io/safetensors.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/rl/autoshard.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "support/message_of.hpp"

namespace policy_files_test {

using embplan::test::message_of;
namespace rl = embplan::rl;
namespace fs = std::filesystem;

const std::string data = std::string(EMBPLAN_SOURCE_DIR) + "/data/";
const std::string autoshard_file = data + "rl/autoshard_cpu_8dev.safetensors";
const std::string dreamshard_file = data + "rl/dreamshard_cpu_4dev.safetensors";
const std::string compute_file = data + "cost/cpu_compute_model.safetensors";
const std::string comm_file = data + "cost/cpu_comm_4dev_model.safetensors";

fs::path scratch(const std::string& name) {
  const auto dir = fs::temp_directory_path() / "embplan_policy_files_test";
  fs::create_directories(dir);
  return dir / name;
}

// `file` written again under `name` with its metadata edited by `edit`.
template <class Edit>
fs::path rewritten(const std::string& file, const std::string& name, Edit edit) {
  auto f = embplan::io::read_safetensors(file);
  edit(f.metadata);
  const auto out = scratch(name);
  embplan::io::write_safetensors(out, f);
  return out;
}

}  // namespace policy_files_test

using namespace policy_files_test;

TEST_CASE("policy files: a file of another kind is named, by its metadata") {
  CHECK(message_of([] { (void)rl::autoshard_policy::load(dreamshard_file); }) ==
        dreamshard_file + ": this is a DreamShard policy, expected an AutoShard policy");
  CHECK(message_of([] { (void)rl::dreamshard_policy::load(autoshard_file); }) ==
        autoshard_file + ": this is an AutoShard policy, expected a DreamShard policy");
  CHECK(message_of([] { (void)rl::autoshard_policy::load(compute_file); }) ==
        compute_file + ": this is a compute cost model, expected an AutoShard policy");
  CHECK(message_of([] { (void)rl::dreamshard_policy::load(comm_file); }) ==
        comm_file + ": this is a communication cost model, expected a DreamShard policy");
}

TEST_CASE("policy files: a file of another kind without metadata is named by its tensors") {
  const auto strip = [](auto& md) { md.clear(); };
  const auto bare_dreamshard = rewritten(dreamshard_file, "bare_dreamshard.safetensors", strip);
  const auto bare_autoshard = rewritten(autoshard_file, "bare_autoshard.safetensors", strip);
  const auto bare_compute = rewritten(compute_file, "bare_compute.safetensors", strip);
  CHECK(message_of([&] { (void)rl::autoshard_policy::load(bare_dreamshard); }) ==
        bare_dreamshard.string() + ": this is a DreamShard policy, expected an AutoShard policy");
  CHECK(message_of([&] { (void)rl::dreamshard_policy::load(bare_autoshard); }) ==
        bare_autoshard.string() + ": this is an AutoShard policy, expected a DreamShard policy");
  CHECK(message_of([&] { (void)rl::autoshard_policy::load(bare_compute); }) ==
        bare_compute.string() + ": this is a compute cost model, expected an AutoShard policy");
  // The authors' DreamShard checkpoint has no metadata and still loads.
  CHECK_NOTHROW((void)rl::dreamshard_policy::load(bare_dreamshard));
}

TEST_CASE("autoshard policy file: each feature statistic is required, named when absent") {
  for (const char* stat : {"mean", "stdev"}) {
    for (const char* feature : {"dim", "rows", "pooling_factor"}) {
      const std::string key = std::string("embplan.autoshard.") + stat + "." + feature;
      CAPTURE(key);
      const auto file =
          rewritten(autoshard_file, "no_stat.safetensors", [&](auto& md) { md.erase(key); });
      CHECK(message_of([&] { (void)rl::autoshard_policy::load(file); }) ==
            "field '" + file.string() + ": metadata." + key +
                "' is missing: expected the feature statistic the policy was trained with (a "
                "file of `embplan train autoshard` records all six)");
    }
  }
  // Labels stay optional: a file without its meter still loads.
  const auto no_meter = rewritten(autoshard_file, "no_meter.safetensors",
                                  [](auto& md) { md.erase("embplan.meter"); });
  CHECK(rl::autoshard_policy::load(no_meter).metadata().meter.empty());
}

TEST_CASE("dreamshard policy file: a pool half without its split seed is named") {
  const auto file = rewritten(dreamshard_file, "no_split_seed.safetensors",
                              [](auto& md) { md.erase("embplan.split_seed"); });
  CHECK(message_of([&] { (void)rl::dreamshard_policy::load(file); }) ==
        "field '" + file.string() +
            ": metadata.embplan.split_seed' is missing: expected the seed that split the pool "
            "(recorded with embplan.pool_half \"train\")");
}
