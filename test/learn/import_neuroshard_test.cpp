// Raw PyTorch checkpoints of NeuroShard's cost models (test/cost/golden/, made
// by tools/make_neuroshard_import.py): a ComputeCostNet state_dict imported as
// a neural_cost prices devices of tables built from NeuroShard's table configs
// as PyTorch does (1e-5 relative, through neural_cost::compute); the forward
// and backward CommCostNets imported as a neural_comm price placements as
// PyTorch does (through neural_comm::communication), and together they price
// a plan as NeuroShard's simulator composes them.
#include "embplan/learn/import_neuroshard.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "embplan/core/plan.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/io/safetensors.hpp"
#include "support/message_of.hpp"

namespace fs = std::filesystem;

namespace {
using embplan::test::message_of;

fs::path golden_dir() {
  return fs::path(EMBPLAN_SOURCE_DIR) / "test" / "cost" / "golden";
}

// The golden files, each read once.
const embplan::io::safetensors_file& golden_file(const char* name) {
  static const std::map<std::string, embplan::io::safetensors_file> files = [] {
    std::map<std::string, embplan::io::safetensors_file> out;
    for (const char* f :
         {"neuroshard_import_golden.safetensors", "neuroshard_comm_golden.safetensors"})
      out.emplace(f, embplan::io::read_safetensors(golden_dir() / f));
    return out;
  }();
  return files.at(name);
}

const embplan::io::safetensors_file& golden() {
  return golden_file("neuroshard_import_golden.safetensors");
}
const embplan::io::safetensors_file& comm_golden() {
  return golden_file("neuroshard_comm_golden.safetensors");
}

const std::vector<float>& values(const char* name) {
  return golden().tensors.at(name).values;
}
const std::vector<float>& comm_values(const char* name) {
  return comm_golden().tensors.at(name).values;
}

embplan::learn::neuroshard_import_options options() {
  embplan::learn::neuroshard_import_options o;
  o.feature_means = values("feature_means");
  o.feature_stds = values("feature_stds");
  o.meter = "cuda-2080ti";
  o.batch_size = 65536;
  return o;
}

fs::path state_dict_path() {
  return golden_dir() / "neuroshard_state_dict.safetensors";
}

// The golden table configs as a task on 4 devices, and the plan that puts
// devices.lengths[d] consecutive tables on device d.
std::pair<embplan::task, embplan::plan> golden_task() {
  const auto& rows = values("tables.row");
  const auto& dims = values("tables.dim");
  const auto& pooling = values("tables.pooling_factor");
  const auto& bins = values("tables.bins");
  const auto& lengths = golden().tensors.at("devices.lengths").values;
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
  embplan::plan p;
  std::size_t next = 0;
  for (std::size_t d = 0; d < lengths.size(); ++d)
    for (int k = 0; k < static_cast<int>(lengths[d]); ++k, ++next)
      p.shards.push_back(embplan::whole_table(t, next, d));
  return {t, p};
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
  const auto model = embplan::learn::import_neuroshard(state_dict_path(), options());
  CHECK(model.metadata().features == embplan::feature_set::neuroshard20);
  CHECK(model.metadata().meter == "cuda-2080ti");
  CHECK(model.metadata().batch_size == 65536);
  CHECK(model.network().table_features() == 20);

  const auto& expected = values("output");
  const auto [t, p] = golden_task();
  const auto groups = embplan::shards_by_device(t, p);
  double worst = 0.0;
  for (std::size_t d = 0; d < groups.size(); ++d) {
    const double got = model.compute(t, groups[d], d).total_ms();
    const double want = expected[d];
    worst = std::max(worst, std::abs(got - want) / std::max(1.0, std::abs(want)));
    CHECK(got == doctest::Approx(want).epsilon(1e-5));
  }
  MESSAGE("max relative difference to PyTorch " << worst);
  CHECK(p.shards.size() == values("tables.row").size());
}

TEST_CASE("import_neuroshard: bad checkpoints and options name the tensor or field") {
  temp_dir dir;
  const auto base = embplan::io::read_safetensors(state_dict_path());
  const auto import = [&](const embplan::io::safetensors_file& f,
                          const embplan::learn::neuroshard_import_options& o = options()) {
    const auto path = dir.path / "ckpt.safetensors";
    embplan::io::write_safetensors(path, f);
    return message_of([&] { (void)embplan::learn::import_neuroshard(path, o); });
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

// ------------------------------------------------------------ CommCostNet
namespace {

fs::path comm_forward_path() {
  return golden_dir() / "neuroshard_comm_forward.safetensors";
}
fs::path comm_backward_path() {
  return golden_dir() / "neuroshard_comm_backward.safetensors";
}

// The forward file holds its normalisation (CommCostModel.save's dict); the
// backward one is a bare state_dict, so the caller gives it.
embplan::learn::neuroshard_comm_import_options comm_options() {
  embplan::learn::neuroshard_comm_import_options o;
  o.backward_means = comm_values("backward.feature_means");
  o.backward_stds = comm_values("backward.feature_stds");
  o.meter = "nccl-2080ti";
  o.batch_size = 65536;
  return o;
}

constexpr std::size_t comm_devices = 4;

}  // namespace

TEST_CASE("import_neuroshard_comm: raw CommCostNet checkpoints price all-to-alls as PyTorch does") {
  const auto comm = embplan::learn::import_neuroshard_comm(comm_forward_path(),
                                                           comm_backward_path(), comm_options());
  CHECK(comm.devices() == comm_devices);
  CHECK(comm.metadata().meter == "nccl-2080ti");
  CHECK(comm.metadata().batch_size == 65536);
  CHECK(comm.forward_network().hidden.in_features() == 2 * comm_devices);
  CHECK(comm.backward_network().hidden.in_features() == comm_devices);

  const auto& dims = comm_values("dims");
  const auto& sleep = comm_values("sleep");
  const auto& fwd = comm_values("forward_output");
  const auto& bwd = comm_values("backward_output");
  const std::size_t samples = dims.size() / comm_devices;
  REQUIRE(samples > 0);
  embplan::task t;
  t.cluster = embplan::uniform_topology(comm_devices);
  t.batch_size = 65536;  // the model's batch: dim sums go in unscaled
  double worst = 0.0;
  for (std::size_t s = 0; s < samples; ++s) {
    std::vector<std::int64_t> dim_sum(comm_devices);
    std::vector<double> start(comm_devices);
    for (std::size_t d = 0; d < comm_devices; ++d) {
      dim_sum[d] = static_cast<std::int64_t>(dims[s * comm_devices + d]);
      // Start times on another origin: only their differences (NeuroShard's
      // sleep times) reach the forward net.
      start[d] = 7.25 + sleep[s * comm_devices + d];
    }
    std::vector<embplan::comm_cost> out(comm_devices);
    comm.communication(t, dim_sum, start, out);
    for (std::size_t d = 0; d < comm_devices; ++d) {
      // The golden costs are all above 0, where neural_comm's clamp is a no-op.
      const double want_f = fwd[s * comm_devices + d];
      const double want_b = bwd[s * comm_devices + d];
      REQUIRE(want_f > 0.0);
      REQUIRE(want_b > 0.0);
      CHECK(out[d].fwd_ms == doctest::Approx(want_f).epsilon(1e-5));
      CHECK(out[d].bwd_ms == doctest::Approx(want_b).epsilon(1e-5));
      worst = std::max({worst, std::abs(out[d].fwd_ms - want_f) / want_f,
                        std::abs(out[d].bwd_ms - want_b) / want_b});
    }
  }
  MESSAGE("max relative difference to PyTorch " << worst << " over " << samples << " placements");

  // The sleep times are features the forward net reads: swapping two devices'
  // start times changes their forward costs.
  std::vector<std::int64_t> dim_sum(dims.begin(), dims.begin() + comm_devices);
  std::vector<double> start(sleep.begin(), sleep.begin() + comm_devices);
  std::vector<embplan::comm_cost> a(comm_devices), b(comm_devices);
  comm.communication(t, dim_sum, start, a);
  std::swap(start[0], start[1]);
  comm.communication(t, dim_sum, start, b);
  CHECK(a[0].fwd_ms != b[0].fwd_ms);
  CHECK(a[0].bwd_ms == b[0].bwd_ms);

  // A task on another device count is refused, naming the count.
  embplan::task eight = t;
  eight.cluster = embplan::uniform_topology(8);
  std::vector<std::int64_t> dims8(8, 16);
  std::vector<double> start8(8, 0.0);
  std::vector<embplan::comm_cost> out8(8);
  const auto msg = message_of([&] { comm.communication(eight, dims8, start8, out8); });
  CHECK(msg.find("task.cluster.size") != std::string::npos);
  CHECK(msg.find("trained for 4 devices, the task has 8") != std::string::npos);
}

TEST_CASE("import_neuroshard_comm: the imported pair prices a plan as NeuroShard's simulator") {
  // ShardingSimulator.get_final_cost: per device compute + backward comm +
  // forward comm, the forward net reading the dim sums and then the sleep
  // times (compute + backward comm minus their minimum); the max over devices.
  const auto comm = embplan::learn::import_neuroshard_comm(comm_forward_path(),
                                                           comm_backward_path(), comm_options());
  const auto model =
      embplan::learn::import_neuroshard(state_dict_path(), options()).with_communication(comm);
  CHECK(model.communication_name() == "neural_comm");
  const auto [t, p] = golden_task();
  const auto cost = embplan::evaluate(t, p, model);

  const auto groups = embplan::shards_by_device(t, p);
  const auto n = static_cast<Eigen::Index>(comm_devices);
  embplan::nn::matrix dims(1, n);
  for (std::size_t d = 0; d < comm_devices; ++d) {
    float sum = 0.0f;
    for (const auto& s : groups[d])
      sum += static_cast<float>(s.cols());
    dims(0, static_cast<Eigen::Index>(d)) = sum;
  }
  const embplan::nn::matrix bwd = comm.backward_network()(dims);
  std::vector<double> compute(comm_devices), sleep(comm_devices);
  for (std::size_t d = 0; d < comm_devices; ++d) {
    compute[d] = model.compute(t, groups[d], d).total_ms();
    sleep[d] = compute[d] + bwd(0, static_cast<Eigen::Index>(d));
  }
  const double first = *std::min_element(sleep.begin(), sleep.end());
  embplan::nn::matrix x(1, 2 * n);
  for (std::size_t d = 0; d < comm_devices; ++d) {
    x(0, static_cast<Eigen::Index>(d)) = dims(0, static_cast<Eigen::Index>(d));
    x(0, n + static_cast<Eigen::Index>(d)) = static_cast<float>(sleep[d] - first);
  }
  const embplan::nn::matrix fwd = comm.forward_network()(x);
  double want = 0.0;
  for (std::size_t d = 0; d < comm_devices; ++d) {
    const auto i = static_cast<Eigen::Index>(d);
    CHECK(cost.devices[d].bwd_comm_ms == doctest::Approx(bwd(0, i)).epsilon(1e-6));
    CHECK(cost.devices[d].fwd_comm_ms == doctest::Approx(fwd(0, i)).epsilon(1e-6));
    want = std::max(want, compute[d] + bwd(0, i) + fwd(0, i));
  }
  CHECK(cost.max_ms() == doctest::Approx(want).epsilon(1e-6));
}

TEST_CASE("import_neuroshard_comm: bad checkpoints and options name the tensor or field") {
  temp_dir dir;
  const auto forward = embplan::io::read_safetensors(comm_forward_path());
  const auto backward = embplan::io::read_safetensors(comm_backward_path());
  const auto import =
      [&](const embplan::io::safetensors_file& f, const embplan::io::safetensors_file& b,
          const embplan::learn::neuroshard_comm_import_options& o = comm_options()) {
        const auto fp = dir.path / "forward.safetensors";
        const auto bp = dir.path / "backward.safetensors";
        embplan::io::write_safetensors(fp, f);
        embplan::io::write_safetensors(bp, b);
        return message_of([&] { (void)embplan::learn::import_neuroshard_comm(fp, bp, o); });
      };
  CHECK(import(forward, backward) == "no error");
  {  // the two files swapped: the "forward" net reads 4 features, not 8
    auto o = comm_options();
    o.forward_means = o.backward_means;  // the backward file has no statistics
    o.forward_stds = o.backward_stds;
    o.backward_means.clear();
    o.backward_stds.clear();
    const auto msg = import(backward, forward, o);
    CHECK(msg.find("tensors[\"hidden.0.weight\"].shape' = \"[128, 8]\"") != std::string::npos);
    CHECK(msg.find("a forward net reads twice its outputs") != std::string::npos);
  }
  {  // told another device count
    auto o = comm_options();
    o.devices = 8;
    const auto msg = import(forward, backward, o);
    CHECK(msg.find("neuroshard_comm_import.devices' = 8") != std::string::npos);
    CHECK(msg.find("input width, 4") != std::string::npos);
  }
  {  // a forward checkpoint saved for another device count
    auto f = forward;
    f.metadata["ndevices"] = "8";
    const auto msg = import(f, backward);
    CHECK(msg.find("metadata.ndevices' = \"8\"") != std::string::npos);
    CHECK(msg.find("4 devices") != std::string::npos);
  }
  {  // a forward net that does not read dim sums and sleep times (4 + 4 inputs)
    auto f = forward;
    auto& w = f.tensors.at("hidden.0.weight");
    w.shape = {128, 12};
    w.values.resize(128 * 12, 0.0f);
    const auto msg = import(f, backward);
    CHECK(msg.find("tensors[\"hidden.0.weight\"].shape' = \"[128, 12]\"") != std::string::npos);
    CHECK(msg.find("[out, 8]") != std::string::npos);
  }
  {  // a last layer with one output, not one per device
    auto f = forward;
    f.tensors.at("hidden.4.weight").shape = {1, 16};
    f.tensors.at("hidden.4.weight").values.resize(16);
    auto msg = import(f, backward);
    CHECK(msg.find("tensors[\"hidden.4.weight\"].shape' = \"[1, 16]\"") != std::string::npos);
    CHECK(msg.find("one cost per device") != std::string::npos);
    auto b = backward;
    b.tensors.at("hidden.4.weight").shape = {1, 16};
    b.tensors.at("hidden.4.weight").values.resize(16);
    msg = import(forward, b);
    CHECK(msg.find("tensors[\"hidden.0.weight\"].shape' = \"[128, 4]\"") != std::string::npos);
    CHECK(msg.find("one input and one output per device") != std::string::npos);
  }
  {  // a missing bias, an extra tensor
    auto b = backward;
    b.tensors.erase("hidden.2.bias");
    CHECK(import(forward, b).find("missing [hidden.2.bias]") != std::string::npos);
    auto f = forward;
    f.tensors.emplace("t_hidden.0.weight", forward.tensors.at("hidden.0.weight"));
    CHECK(import(f, backward).find("unexpected [t_hidden.0.weight]") != std::string::npos);
  }
  {  // no first layer: the device count cannot be read
    auto b = backward;
    b.tensors.erase("hidden.0.weight");
    const auto msg = import(forward, b);
    CHECK(msg.find("tensors[\"hidden.0.weight\"]' = \"(missing)\"") != std::string::npos);
  }
  // Normalisation: exactly one source per network, of the right width.
  auto o = comm_options();
  o.backward_means.clear();
  o.backward_stds.clear();
  auto msg = import(forward, backward, o);
  CHECK(msg.find("neuroshard_comm_import.backward_means' = \"(empty)\"") != std::string::npos);
  CHECK(msg.find("holds no normalisation") != std::string::npos);
  o = comm_options();
  o.forward_means = std::vector<float>(8, 0.0f);
  o.forward_stds = std::vector<float>(8, 1.0f);
  msg = import(forward, backward, o);
  CHECK(msg.find("neuroshard_comm_import.forward_means") != std::string::npos);
  CHECK(msg.find("not both") != std::string::npos);
  o = comm_options();
  o.backward_stds.push_back(1.0f);
  msg = import(forward, backward, o);
  CHECK(msg.find("neuroshard_comm_import.backward_stds.size' = 5") != std::string::npos);
  o = comm_options();
  o.backward_stds[2] = -1.0f;
  msg = import(forward, backward, o);
  CHECK(msg.find("neuroshard_comm_import.backward_stds[2]' = -1") != std::string::npos);
  o = comm_options();
  o.batch_size = -3;
  msg = import(forward, backward, o);
  CHECK(msg.find("neuroshard_comm_import.batch_size' = -3") != std::string::npos);
}
