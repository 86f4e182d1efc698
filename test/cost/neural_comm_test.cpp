#include "embplan/cost/neural_comm.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/learn/train_comm.hpp"
#include "support/message_of.hpp"

namespace fs = std::filesystem;

namespace {
using embplan::test::message_of;

// Records of a known law: the backward all-to-all grows with the device's dim
// sum and the total; the forward one adds the wait for the last starter.
std::vector<embplan::learn::comm_record> synthetic_comm(std::size_t n, std::size_t devices,
                                                        std::uint64_t seed) {
  embplan::rng gen(seed);
  std::vector<embplan::learn::comm_record> out;
  for (std::size_t i = 0; i < n; ++i) {
    embplan::learn::comm_record r;
    r.id = static_cast<std::int64_t>(i);
    r.batch_size = 4096;
    r.meter = "synthetic";
    std::int64_t total = 0;
    for (std::size_t d = 0; d < devices; ++d) {
      r.dim_sum.push_back(4 * static_cast<std::int64_t>(gen.below(100)));
      r.start_ms.push_back(gen.uniform(0.0, 5.0));
      total += r.dim_sum.back();
    }
    const double last = *std::max_element(r.start_ms.begin(), r.start_ms.end());
    for (std::size_t d = 0; d < devices; ++d) {
      const double transfer =
          0.1 + 0.004 * static_cast<double>(r.dim_sum[d]) + 0.001 * static_cast<double>(total);
      r.backward_ms.push_back(transfer);
      r.forward_ms.push_back(transfer + (last - r.start_ms[d]));
    }
    out.push_back(std::move(r));
  }
  return out;
}

embplan::learn::comm_train_options quick() {
  embplan::learn::comm_train_options o;
  o.epochs = 60;
  o.batch_size = 32;
  o.learning_rate = 3e-3f;
  o.hidden = {32, 16};  // NeuroShard's 128-64-32-16 is the default; smaller keeps the test quick
  return o;
}

embplan::neural_comm make_model(const embplan::learn::trained_comm& t) {
  embplan::neural_comm_metadata meta;
  meta.devices = t.report.devices;
  meta.meter = t.report.meter;
  meta.batch_size = t.report.batch_size;
  meta.trained_on = "synthetic comm records";
  meta.extra["metrics.note"] = "kept";
  return embplan::neural_comm(t.forward, t.backward, meta);
}

const embplan::learn::trained_comm& trained4() {
  static const auto t = embplan::learn::train_comm_models(synthetic_comm(200, 4, 1), quick());
  return t;
}

embplan::task task_on(std::size_t devices, std::int64_t batch) {
  embplan::task t;
  t.cluster = embplan::uniform_topology(devices);
  t.batch_size = batch;
  return t;
}

struct comm_temp_dir {
  fs::path path;
  explicit comm_temp_dir(const std::string& tag)
      : path(fs::temp_directory_path() / ("embplan-" + tag + "-" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~comm_temp_dir() { fs::remove_all(path); }
};
}  // namespace

TEST_CASE("train_comm_models learns the forward and backward all-to-all laws") {
  const auto& t = trained4();
  const auto& r = t.report;
  CHECK(r.devices == 4);
  CHECK(r.batch_size == 4096);
  CHECK(r.meter == "synthetic");
  CHECK(r.forward.train.samples == 160);
  CHECK(r.forward.validation.samples == 20);
  CHECK(r.forward.test.samples == 20);
  CHECK(r.forward.validation_mse.size() == 60);
  // 2D -> hidden -> D, and D -> hidden -> D; by default NeuroShard's 128-64-32-16.
  CHECK(embplan::learn::comm_train_options{}.hidden == std::vector<Eigen::Index>{128, 64, 32, 16});
  CHECK(t.forward.hidden.in_features() == 8);
  CHECK(t.forward.hidden.layers.size() == 3);
  CHECK(t.forward.hidden.out_features() == 4);
  CHECK(t.backward.hidden.in_features() == 4);
  CHECK(t.forward.named_parameters().front().first == "hidden.0.weight");
  MESSAGE("forward test R2 " << r.forward.test.r2 << ", backward test R2 " << r.backward.test.r2);
  CHECK(r.forward.test.r2 > 0.9);
  CHECK(r.backward.test.r2 > 0.9);
  // The kept epoch is the best validation epoch.
  CHECK(r.forward.validation.mse ==
        doctest::Approx(
            *std::min_element(r.forward.validation_mse.begin(), r.forward.validation_mse.end()))
            .epsilon(1e-6));
  // Fresh draws of the same law.
  const auto model = make_model(t);
  const auto other = synthetic_comm(100, 4, 7);
  const auto [f, b] = embplan::learn::evaluate_comm_models(model, other);
  CHECK(f.samples == 100);
  CHECK(f.r2 > 0.85);
  CHECK(b.r2 > 0.85);
  // Same seed, same models (a shorter run, to keep the test quick).
  auto brief = quick();
  brief.epochs = 5;
  const auto once = embplan::learn::train_comm_models(synthetic_comm(50, 4, 1), brief);
  const auto twice = embplan::learn::train_comm_models(synthetic_comm(50, 4, 1), brief);
  CHECK(once.report.forward.test.mse == twice.report.forward.test.mse);
  CHECK(once.report.backward.test.mse == twice.report.backward.test.mse);
}

TEST_CASE("neural_comm prices a task: skews, batch scaling, save and load") {
  const auto model = make_model(trained4());
  CHECK(model.devices() == 4);
  const auto t = task_on(4, 4096);
  const std::vector<std::int64_t> dims{100, 200, 40, 320};
  const std::vector<double> start{1.0, 0.0, 3.0, 0.5};
  std::vector<embplan::comm_cost> out(4);
  model.communication(t, dims, start, out);
  {  // exactly the two networks on [dims, start - min] and [dims]
    embplan::nn::matrix xf(1, 8);
    embplan::nn::matrix xb(1, 4);
    for (int d = 0; d < 4; ++d) {
      xf(0, d) = static_cast<float>(dims[static_cast<std::size_t>(d)]);
      xf(0, 4 + d) = static_cast<float>(start[static_cast<std::size_t>(d)]);
      xb(0, d) = xf(0, d);
    }
    const auto pf = model.forward_network()(xf);
    const auto pb = model.backward_network()(xb);
    for (int d = 0; d < 4; ++d) {
      CHECK(out[static_cast<std::size_t>(d)].fwd_ms ==
            doctest::Approx(std::max(0.0f, pf(0, d))).epsilon(1e-6));
      CHECK(out[static_cast<std::size_t>(d)].bwd_ms ==
            doctest::Approx(std::max(0.0f, pb(0, d))).epsilon(1e-6));
    }
  }
  // The device that starts last waits least; the learned law says so.
  CHECK(out[2].fwd_ms < out[1].fwd_ms);
  // Only skews matter: shifting every start changes nothing.
  std::vector<double> shifted = start;
  for (auto& s : shifted)
    s += 7.0;
  std::vector<embplan::comm_cost> again(4);
  model.communication(t, dims, shifted, again);
  for (std::size_t d = 0; d < 4; ++d)
    CHECK(again[d].fwd_ms == doctest::Approx(out[d].fwd_ms).epsilon(1e-5));
  // Half the batch moves the bytes of half the dims.
  std::vector<std::int64_t> half_dims;
  for (const auto d : dims)
    half_dims.push_back(d / 2);
  std::vector<embplan::comm_cost> half(4);
  std::vector<embplan::comm_cost> same_bytes(4);
  model.communication(task_on(4, 2048), dims, start, half);
  model.communication(t, half_dims, start, same_bytes);
  for (std::size_t d = 0; d < 4; ++d)
    CHECK(half[d].bwd_ms == doctest::Approx(same_bytes[d].bwd_ms).epsilon(1e-5));

  comm_temp_dir dir("neural-comm");
  const auto path = dir.path / "comm.safetensors";
  model.save(path);
  const auto file = embplan::io::read_safetensors(path);
  CHECK(file.metadata.at("embplan.kind") == "comm_cost_net");
  CHECK(file.metadata.at("embplan.devices") == "4");
  CHECK(file.metadata.at("embplan.forward_mlp_sizes") == "8,32,16,4");
  CHECK(file.tensors.count("forward.hidden.0.weight") == 1);
  CHECK(file.tensors.count("backward.hidden.2.bias") == 1);
  CHECK(file.tensors.count("forward.feature_means") == 1);
  const auto loaded = embplan::neural_comm::load(path);
  CHECK(loaded.metadata().meter == "synthetic");
  CHECK(loaded.metadata().batch_size == 4096);
  CHECK(loaded.metadata().trained_on == "synthetic comm records");
  CHECK(loaded.metadata().extra.at("metrics.note") == "kept");
  std::vector<embplan::comm_cost> back(4);
  loaded.communication(t, dims, start, back);
  for (std::size_t d = 0; d < 4; ++d) {
    CHECK(back[d].fwd_ms == out[d].fwd_ms);
    CHECK(back[d].bwd_ms == out[d].bwd_ms);
  }
}

TEST_CASE("neural_cost with a neural_comm uses it for communication") {
  const auto comm = make_model(trained4());
  embplan::nn::compute_cost_net net(embplan::nn::compute_cost_net_options{.table_features = 21}, 3);
  embplan::neural_cost_metadata meta;
  meta.batch_size = 4096;
  const embplan::neural_cost analytic(net, meta);
  CHECK(analytic.communication_name() == "analytic");
  const embplan::neural_cost learned(net, meta, comm);
  CHECK(learned.communication_name() == "neural_comm");
  CHECK(analytic.with_communication(comm).communication_name() == "neural_comm");
  const auto t = task_on(4, 4096);
  // Only the analytic communication promises no negative figure (searchers
  // skip pricing on that promise).
  CHECK(analytic.communication_nonnegative(t));
  CHECK_FALSE(learned.communication_nonnegative(t));
  const std::vector<std::int64_t> dims{64, 32, 16, 8};
  const std::vector<double> start{0.0, 2.0, 1.0, 0.0};
  std::vector<embplan::comm_cost> a(4);
  std::vector<embplan::comm_cost> b(4);
  learned.communication(t, dims, start, a);
  comm.communication(t, dims, start, b);
  for (std::size_t d = 0; d < 4; ++d) {
    CHECK(a[d].fwd_ms == b[d].fwd_ms);
    CHECK(a[d].bwd_ms == b[d].bwd_ms);
  }
  // A task on another device count is refused through neural_cost too.
  std::vector<embplan::comm_cost> out8(8);
  const std::vector<std::int64_t> dims8(8, 4);
  const std::vector<double> start8(8, 0.0);
  const auto msg =
      message_of([&] { learned.communication(task_on(8, 4096), dims8, start8, out8); });
  CHECK(msg.find("task.cluster.size") != std::string::npos);
  CHECK(msg.find("= 8") != std::string::npos);
  CHECK(msg.find("trained for 4 devices") != std::string::npos);
}

TEST_CASE("neural_comm: bad input names the field and value") {
  const auto model = make_model(trained4());
  std::vector<embplan::comm_cost> out(4);
  const std::vector<std::int64_t> dims{4, 8, 4, 8};
  const std::vector<double> start{0.0, 0.0, 0.0, 0.0};
  // Device count of the task vs the model.
  std::vector<embplan::comm_cost> out2(2);
  auto msg = message_of([&] {
    model.communication(task_on(2, 4096), std::vector<std::int64_t>{4, 4},
                        std::vector<double>{0.0, 0.0}, out2);
  });
  CHECK(msg.find("task.cluster.size") != std::string::npos);
  CHECK(msg.find("= 2") != std::string::npos);
  CHECK(msg.find("trained for 4 devices") != std::string::npos);
  msg = message_of([&] {
    model.communication(task_on(4, 4096), std::vector<std::int64_t>{4, 4}, start, out);
  });
  CHECK(msg.find("neural_comm.dim_sum.size") != std::string::npos);
  CHECK(msg.find("= 2") != std::string::npos);
  msg = message_of([&] {
    model.communication(task_on(4, 4096), std::vector<std::int64_t>{4, -8, 4, 4}, start, out);
  });
  CHECK(msg.find("neural_comm.dim_sum[1]") != std::string::npos);
  CHECK(msg.find("-8") != std::string::npos);
  msg = message_of([&] {
    model.communication(task_on(4, 4096), dims,
                        std::vector<double>{0.0, std::numeric_limits<double>::infinity(), 0.0, 0.0},
                        out);
  });
  CHECK(msg.find("neural_comm.start_ms[1]") != std::string::npos);
  CHECK(msg.find("inf") != std::string::npos);
  msg = message_of([] {
    std::vector<embplan::comm_cost> o(4);
    embplan::neural_comm().communication(task_on(4, 1), std::vector<std::int64_t>(4, 0),
                                         std::vector<double>(4, 0.0), o);
  });
  CHECK(msg.find("neural_comm") != std::string::npos);
  CHECK(msg.find("(empty)") != std::string::npos);

  // Construction: nets that do not fit the device count.
  embplan::neural_comm_metadata meta;
  meta.devices = 8;
  meta.batch_size = 4096;
  msg = message_of(
      [&] { (void)embplan::neural_comm(trained4().forward, trained4().backward, meta); });
  CHECK(msg.find("neural_comm.forward.in_features") != std::string::npos);
  CHECK(msg.find("= 8") != std::string::npos);
  meta.devices = 4;
  meta.batch_size = 0;
  msg = message_of(
      [&] { (void)embplan::neural_comm(trained4().forward, trained4().backward, meta); });
  CHECK(msg.find("neural_comm.batch_size") != std::string::npos);

  // Files.
  comm_temp_dir dir("neural-comm-bad");
  const auto good = dir.path / "good.safetensors";
  model.save(good);
  const auto base = embplan::io::read_safetensors(good);
  {  // a compute model file
    embplan::nn::compute_cost_net net(embplan::nn::compute_cost_net_options{}, 1);
    embplan::neural_cost_metadata m;
    m.features = embplan::feature_set::neuroshard20;
    m.batch_size = 64;
    embplan::neural_cost(net, m).save(dir.path / "compute.safetensors");
    msg = message_of([&] { (void)embplan::neural_comm::load(dir.path / "compute.safetensors"); });
    CHECK(msg == (dir.path / "compute.safetensors").string() +
                     ": this is a compute cost model, expected a communication cost model");
  }
  {  // metadata devices that do not match the stored networks
    auto f = base;
    f.metadata["embplan.devices"] = "8";
    embplan::io::write_safetensors(dir.path / "devices.safetensors", f);
    msg = message_of([&] { (void)embplan::neural_comm::load(dir.path / "devices.safetensors"); });
    CHECK(msg.find("metadata.embplan.forward_mlp_sizes") != std::string::npos);
    CHECK(msg.find("8,32,16,4") != std::string::npos);
  }
  {  // a missing and a stray tensor
    auto f = base;
    f.tensors.erase("backward.hidden.2.bias");
    embplan::io::write_safetensors(dir.path / "missing.safetensors", f);
    msg = message_of([&] { (void)embplan::neural_comm::load(dir.path / "missing.safetensors"); });
    CHECK(msg.find("missing [backward.hidden.2.bias]") != std::string::npos);
    f = base;
    f.tensors.emplace("hidden.0.weight", base.tensors.at("forward.hidden.0.weight"));
    embplan::io::write_safetensors(dir.path / "stray.safetensors", f);
    msg = message_of([&] { (void)embplan::neural_comm::load(dir.path / "stray.safetensors"); });
    CHECK(msg.find("tensors[\"hidden.0.weight\"]") != std::string::npos);
  }
  {  // a bad number in the metadata
    auto f = base;
    f.metadata["embplan.batch_size"] = "many";
    embplan::io::write_safetensors(dir.path / "batch.safetensors", f);
    msg = message_of([&] { (void)embplan::neural_comm::load(dir.path / "batch.safetensors"); });
    CHECK(msg.find("metadata.embplan.batch_size") != std::string::npos);
    CHECK(msg.find("\"many\"") != std::string::npos);
  }
  {  // a normaliser 2e9 wide declared in a small file: refused before allocating
    auto f = base;
    f.metadata["embplan.devices"] = "1000000000";
    f.metadata["embplan.forward_mlp_sizes"] = "2000000000,32,16,1000000000";
    f.metadata["embplan.backward_mlp_sizes"] = "1000000000,32,16,1000000000";
    embplan::io::write_safetensors(dir.path / "huge.safetensors", f);
    msg = message_of([&] { (void)embplan::neural_comm::load(dir.path / "huge.safetensors"); });
    CHECK(msg.find("metadata.embplan.devices' = 1000000000") != std::string::npos);
  }
  {  // widths within the limits that the file's tensors do not hold
    auto f = base;
    f.metadata["embplan.devices"] = "100000";
    f.metadata["embplan.forward_mlp_sizes"] = "200000,32,16,100000";
    f.metadata["embplan.backward_mlp_sizes"] = "100000,32,16,100000";
    embplan::io::write_safetensors(dir.path / "wide.safetensors", f);
    msg = message_of([&] { (void)embplan::neural_comm::load(dir.path / "wide.safetensors"); });
    CHECK(msg.find("metadata.embplan.forward_mlp_sizes' = \"200000,32,16,100000\"") !=
          std::string::npos);
    CHECK(msg.find("tensors[\"forward.hidden.0.weight\"] has shape [32, 8], not [32, 200000]") !=
          std::string::npos);
  }
}

TEST_CASE("comm records and training: bad input names the field and value") {
  comm_temp_dir dir("comm-records");
  const auto path = dir.path / "c.jsonl";
  std::ofstream(path)
      << R"({"id":0,"dim_sum":[4,8],"start_ms":[0,1],"forward_ms":[1,1],"backward_ms":[1,1],)"
      << R"("batch_size":64,"meter":"analytic"})" << '\n'
      << R"({"id":1,"dim_sum":[4,8],"start_ms":[0],"forward_ms":[1,1],"backward_ms":[1,1],)"
      << R"("batch_size":64,"meter":"analytic"})" << '\n';
  auto msg = message_of([&] { (void)embplan::learn::read_comm_records(path); });
  CHECK(msg.find("c.jsonl:2.start_ms") != std::string::npos);
  CHECK(msg.find("= 1") != std::string::npos);
  std::ofstream(path)
      << R"({"id":0,"dim_sum":[4,8],"start_ms":[0,1],"forward_ms":[1,-2],"backward_ms":[1,1],)"
      << R"("batch_size":64,"meter":"analytic"})" << '\n';
  msg = message_of([&] { (void)embplan::learn::read_comm_records(path); });
  CHECK(msg.find("c.jsonl:1.forward_ms[1]") != std::string::npos);
  CHECK(msg.find("-2") != std::string::npos);
  std::ofstream(path) << R"({"id":0,"dim_sum":[4,8]})" << '\n';
  msg = message_of([&] { (void)embplan::learn::read_comm_records(path); });
  CHECK(msg.find("c.jsonl:1") != std::string::npos);
  CHECK(msg.find("c.jsonl:1.start_ms' is missing") != std::string::npos);

  auto records = synthetic_comm(20, 4, 3);
  records[6].dim_sum.push_back(4);
  msg = message_of([&] { (void)embplan::learn::train_comm_models(records, quick()); });
  CHECK(msg.find("records[6].dim_sum.size") != std::string::npos);
  CHECK(msg.find("= 5") != std::string::npos);
  records = synthetic_comm(20, 4, 3);
  records[2].meter = "other";
  msg = message_of([&] { (void)embplan::learn::train_comm_models(records, quick()); });
  CHECK(msg.find("records[2].batch_size") != std::string::npos);
  auto bad = quick();
  bad.epochs = 0;
  msg = message_of([&] { (void)embplan::learn::train_comm_models(synthetic_comm(20, 4, 3), bad); });
  CHECK(msg.find("train.epochs") != std::string::npos);
  CHECK(msg.find("= 0") != std::string::npos);
  msg = message_of([&] { (void)embplan::learn::train_comm_models(synthetic_comm(5, 4, 3)); });
  CHECK(msg.find("train.records") != std::string::npos);
  CHECK(msg.find("= 5") != std::string::npos);
  // A model judged on records of another device count.
  msg = message_of([&] {
    (void)embplan::learn::evaluate_comm_models(make_model(trained4()), synthetic_comm(10, 8, 3));
  });
  CHECK(msg.find("records[0].dim_sum.size") != std::string::npos);
  CHECK(msg.find("= 8") != std::string::npos);
}

TEST_CASE("the bundled 4-device communication model loads and prices a 4-device task") {
  const auto model = embplan::neural_comm::load(fs::path(EMBPLAN_SOURCE_DIR) / "data" / "cost" /
                                                "cpu_comm_4dev_model.safetensors");
  CHECK(model.devices() == 4);
  CHECK(model.metadata().meter == "mpi-alltoallv");
  CHECK(model.metadata().batch_size == 4096);
  std::vector<embplan::comm_cost> out(4);
  model.communication(task_on(4, 4096), std::vector<std::int64_t>{256, 128, 64, 32},
                      std::vector<double>{0.0, 5.0, 0.0, 10.0}, out);
  for (const auto& c : out) {
    CHECK(c.fwd_ms > 0.0);
    CHECK(c.bwd_ms > 0.0);
    CHECK(std::isfinite(c.fwd_ms));
  }
  // The device that starts last waits least.
  CHECK(out[3].fwd_ms < out[0].fwd_ms);
}

TEST_CASE("neural_comm::with_kernel: every kernel prices the same, bit for bit") {
  using embplan::nn::simd_kernel;
  const auto model = make_model(trained4());
  CHECK(model.kernel() != simd_kernel::automatic);
  const auto t = task_on(4, 4096);
  const auto reference = model.with_kernel(simd_kernel::scalar);
  CHECK(reference.kernel() == simd_kernel::scalar);
  CHECK(reference.metadata().meter == model.metadata().meter);
  embplan::rng gen(3);
  for (const auto k : {simd_kernel::automatic, simd_kernel::avx2, simd_kernel::avx512}) {
    CAPTURE(to_string(k));
    if (!embplan::nn::simd_kernel_supported(k)) {
      CHECK(message_of([&] { (void)model.with_kernel(k); }).find("packed_comm_cost_net.kernel") !=
            std::string::npos);
      continue;
    }
    const auto other = model.with_kernel(k);
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<std::int64_t> dims(4);
      std::vector<double> start(4);
      for (std::size_t d = 0; d < 4; ++d) {
        dims[d] = static_cast<std::int64_t>(gen.between(0, 2000));
        start[d] = gen.uniform(0.0, 5.0);
      }
      std::vector<double> a(4), b(4);
      reference.forward_communication(t, dims, start, a, false);
      other.forward_communication(t, dims, start, b, false);
      CHECK(a == b);
      reference.backward_communication(t, dims, a, false);
      other.backward_communication(t, dims, b, false);
      CHECK(a == b);
    }
  }
}
