// A raw PyTorch state_dict of NeuroShard's ComputeCostNet (test/cost/golden/,
// made by tools/make_neuroshard_import.py) imported as a neural_cost: the
// per-device costs of tables built from NeuroShard's table configs match
// PyTorch's to 1e-5 (relative), through neural_cost::compute.
#include "embplan/cost/import_neuroshard.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "embplan/core/plan.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/io/safetensors.hpp"
#include "support/message_of.hpp"

namespace fs = std::filesystem;

namespace {
using embplan::test::message_of;

fs::path golden_dir() {
  return fs::path(EMBPLAN_SOURCE_DIR) / "test" / "cost" / "golden";
}

const embplan::io::safetensors_file& golden() {
  static const auto f =
      embplan::io::read_safetensors(golden_dir() / "neuroshard_import_golden.safetensors");
  return f;
}

const std::vector<float>& values(const char* name) {
  return golden().tensors.at(name).values;
}

embplan::cost::neuroshard_import_options options() {
  embplan::cost::neuroshard_import_options o;
  o.feature_means = values("feature_means");
  o.feature_stds = values("feature_stds");
  o.meter = "cuda-2080ti";
  o.batch_size = 65536;
  return o;
}

fs::path state_dict_path() {
  return golden_dir() / "neuroshard_state_dict.safetensors";
}

struct temp_dir {
  fs::path path;
  temp_dir() : path(fs::temp_directory_path() / ("embplan-import-" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
};
}  // namespace

TEST_CASE("import_neuroshard: a raw ComputeCostNet state_dict prices devices as PyTorch does") {
  const auto model = embplan::cost::import_neuroshard(state_dict_path(), options());
  CHECK(model.metadata().features == embplan::cost::feature_set::neuroshard20);
  CHECK(model.metadata().meter == "cuda-2080ti");
  CHECK(model.metadata().batch_size == 65536);
  CHECK(model.network().table_features() == 20);

  const auto& rows = values("tables.row");
  const auto& dims = values("tables.dim");
  const auto& pooling = values("tables.pooling_factor");
  const auto& bins = values("tables.bins");
  const auto& lengths = golden().tensors.at("devices.lengths").values;
  const auto& expected = values("output");
  embplan::task t;
  t.batch_size = 65536;  // the model's batch: no scaling
  for (std::size_t i = 0; i < rows.size(); ++i) {
    embplan::table_spec s;
    s.rows = static_cast<std::int64_t>(rows[i]);
    s.dim = static_cast<std::int32_t>(dims[i]);
    s.pooling_factor = pooling[i];
    for (std::size_t k = 0; k < embplan::reuse_bin_count; ++k)
      s.reuse_hist[k] = bins[i * embplan::reuse_bin_count + k];
    t.tables.push_back(s);
  }
  t.cluster = embplan::uniform_topology(lengths.size());
  std::size_t next = 0;
  double worst = 0.0;
  for (std::size_t d = 0; d < lengths.size(); ++d) {
    std::vector<embplan::shard> group;
    for (int k = 0; k < static_cast<int>(lengths[d]); ++k, ++next)
      group.push_back(embplan::whole_table(t, next, d));
    const double got = model.compute(t, group, d).total_ms();
    const double want = expected[d];
    worst = std::max(worst, std::abs(got - want) / std::max(1.0, std::abs(want)));
    CHECK(got == doctest::Approx(want).epsilon(1e-5));
  }
  MESSAGE("max relative difference to PyTorch " << worst);
  CHECK(next == rows.size());
}

TEST_CASE("import_neuroshard: bad checkpoints and options name the tensor or field") {
  temp_dir dir;
  const auto base = embplan::io::read_safetensors(state_dict_path());
  const auto import = [&](const embplan::io::safetensors_file& f,
                          const embplan::cost::neuroshard_import_options& o = options()) {
    const auto path = dir.path / "ckpt.safetensors";
    embplan::io::write_safetensors(path, f);
    return message_of([&] { (void)embplan::cost::import_neuroshard(path, o); });
  };
  {  // a missing bias
    auto f = base;
    f.tensors.erase("c_hidden.1.bias");
    const auto msg = import(f);
    CHECK(msg.find("missing [c_hidden.1.bias]") != std::string::npos);
  }
  {  // an extra tensor
    auto f = base;
    f.tensors.emplace("policy_net.weight", base.tensors.at("c_hidden.1.weight"));
    const auto msg = import(f);
    CHECK(msg.find("unexpected [policy_net.weight]") != std::string::npos);
  }
  {  // a checkpoint trained on 21 features (embplan21 / NeuroShard with size)
    auto f = base;
    auto& w = f.tensors.at("t_hidden.0.weight");
    w.shape = {128, 21};
    w.values.resize(128 * 21, 0.0f);
    const auto msg = import(f);
    CHECK(msg.find("tensors[\"t_hidden.0.weight\"].shape") != std::string::npos);
    CHECK(msg.find("[128, 21]") != std::string::npos);
    CHECK(msg.find("[out, 20]") != std::string::npos);
  }
  {  // a layer that does not read the previous one's outputs
    auto f = base;
    auto& w = f.tensors.at("c_hidden.0.weight");
    w.shape = {64, 16};
    w.values.resize(64 * 16);
    const auto msg = import(f);
    CHECK(msg.find("tensors[\"c_hidden.0.weight\"].shape") != std::string::npos);
    CHECK(msg.find("[64, 16]") != std::string::npos);
  }
  {  // a bias of the wrong length
    auto f = base;
    f.tensors.at("t_hidden.1.bias").shape = {16};
    f.tensors.at("t_hidden.1.bias").values.resize(16);
    const auto msg = import(f);
    CHECK(msg.find("tensors[\"t_hidden.1.bias\"].shape") != std::string::npos);
    CHECK(msg.find("[16]") != std::string::npos);
  }
  {  // no table MLP at all
    auto f = base;
    f.tensors.erase("t_hidden.0.weight");
    const auto msg = import(f);
    CHECK(msg.find("t_hidden.0.weight") != std::string::npos);
    CHECK(msg.find("(missing)") != std::string::npos);
  }
  {  // a head that does not end in one cost
    auto f = base;
    f.tensors.at("c_hidden.1.weight").shape = {2, 64};
    f.tensors.at("c_hidden.1.weight").values.resize(128);
    const auto msg = import(f);
    CHECK(msg.find("tensors[\"c_hidden.1.weight\"].shape") != std::string::npos);
    CHECK(msg.find("[2, 64]") != std::string::npos);
  }
  // Options.
  auto o = options();
  o.feature_means.clear();
  o.feature_stds.clear();
  auto msg = import(base, o);
  CHECK(msg.find("neuroshard_import.feature_means") != std::string::npos);
  CHECK(msg.find("holds no normalisation") != std::string::npos);
  o = options();
  o.feature_stds.pop_back();
  msg = import(base, o);
  CHECK(msg.find("neuroshard_import.feature_stds.size") != std::string::npos);
  CHECK(msg.find("= 19") != std::string::npos);
  o = options();
  o.feature_stds[3] = 0.0f;
  msg = import(base, o);
  CHECK(msg.find("neuroshard_import.feature_stds[3]") != std::string::npos);
  o = options();
  o.batch_size = 0;
  msg = import(base, o);
  CHECK(msg.find("neuroshard_import.batch_size") != std::string::npos);
  CHECK(msg.find("= 0") != std::string::npos);
  {  // normalisation in the file and from the caller
    auto f = base;
    f.tensors.emplace("feature_means", golden().tensors.at("feature_means"));
    f.tensors.emplace("feature_stds", golden().tensors.at("feature_stds"));
    msg = import(f);
    CHECK(msg.find("neuroshard_import.feature_means") != std::string::npos);
    CHECK(msg.find("not both") != std::string::npos);
    // ... and from the file alone: the same model.
    o = options();
    o.feature_means.clear();
    o.feature_stds.clear();
    CHECK(import(f, o) == "no error");
  }
}
