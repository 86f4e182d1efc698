// The split communication methods (concepts/cost_model.hpp,
// split_communication): neural_comm's and neural_cost's
// backward_communication / forward_communication give, bit for bit, the
// halves of communication(), or the networks' raw outputs with clamp = false;
// bad input is refused as communication() refuses it; and the searchers'
// pricer (search/detail/plan_pricer.hpp) gives the same figures, and plans,
// whether it asks for the halves or for communication(), evaluating half the
// networks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/cost/neural_comm.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/nn/packed_comm_cost_net.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/detail/plan_pricer.hpp"
#include "support/message_of.hpp"

// Named, not anonymous: test/cost's files are compiled a few to a
// translation unit (EMBPLAN_UNITY_TESTS), where anonymous helpers would clash.
namespace comm_split {

using embplan::test::message_of;

// Bitwise: the same doubles, not merely equal ones (-0.0 and 0.0 differ here).
bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

embplan::task task_on(std::size_t devices, std::int64_t batch) {
  embplan::task t;
  t.cluster = embplan::uniform_topology(devices);
  t.batch_size = batch;
  return t;
}

// NeuroShard's shape (128-64-32-16), PyTorch's init, feature statistics of
// the size of real dim sums and skews; the outputs straddle 0, so clamping is
// exercised. output_bias is added to both networks' last bias (a negative one
// makes the networks undershoot).
embplan::neural_comm random_comm(std::size_t devices, std::uint64_t seed,
                                 float output_bias = 0.0f) {
  const auto n = static_cast<Eigen::Index>(devices);
  embplan::nn::comm_cost_net forward({.features = 2 * n, .outputs = n}, seed);
  embplan::nn::comm_cost_net backward({.features = n, .outputs = n}, seed + 1);
  for (Eigen::Index c = 0; c < n; ++c) {
    forward.feature_norm.mean(0, c) = backward.feature_norm.mean(0, c) = 300.0f;
    forward.feature_norm.stddev(0, c) = backward.feature_norm.stddev(0, c) = 150.0f;
    forward.feature_norm.mean(0, n + c) = 2.0f;
    forward.feature_norm.stddev(0, n + c) = 3.0f;
  }
  forward.hidden.layers.back().bias.array() += output_bias;
  backward.hidden.layers.back().bias.array() += output_bias;
  embplan::neural_comm_metadata meta;
  meta.devices = devices;
  meta.meter = "synthetic";
  meta.batch_size = 4096;
  return embplan::neural_comm(forward, backward, meta);
}

const embplan::neural_comm& bundled_comm() {
  static const auto m = embplan::neural_comm::load(std::string(EMBPLAN_SOURCE_DIR) +
                                                   "/data/cost/cpu_comm_4dev_model.safetensors");
  return m;
}

const embplan::neural_cost& bundled_compute() {
  static const auto m = embplan::neural_cost::load(std::string(EMBPLAN_SOURCE_DIR) +
                                                   "/data/cost/cpu_compute_model.safetensors");
  return m;
}

// Random inputs of a plan: dim sums up to 2,000 columns (some 0), starts up to
// 30 ms (sometimes all equal).
struct comm_input {
  std::vector<std::int64_t> dim_sum;
  std::vector<double> start_ms;
};

comm_input random_input(std::size_t devices, embplan::rng& gen) {
  comm_input in;
  const bool level = gen.below(5) == 0;
  for (std::size_t d = 0; d < devices; ++d) {
    in.dim_sum.push_back(gen.below(8) == 0 ? 0 : 4 * static_cast<std::int64_t>(gen.below(500)));
    in.start_ms.push_back(level ? 1.5 : gen.uniform(0.0, 30.0));
  }
  return in;
}

// The halves of model.communication() against the split methods, clamped
// (bitwise) and raw (clamped = max(0, raw), bitwise).
template <class Model>
void check_halves(const Model& model, const embplan::task& t, const comm_input& in) {
  const std::size_t n = in.dim_sum.size();
  std::vector<embplan::comm_cost> both(n);
  model.communication(t, in.dim_sum, in.start_ms, both);
  std::vector<double> bwd(n), fwd(n), bwd_raw(n), fwd_raw(n);
  model.backward_communication(t, in.dim_sum, bwd);
  model.forward_communication(t, in.dim_sum, in.start_ms, fwd);
  model.backward_communication(t, in.dim_sum, bwd_raw, false);
  model.forward_communication(t, in.dim_sum, in.start_ms, fwd_raw, false);
  for (std::size_t d = 0; d < n; ++d) {
    CAPTURE(d);
    CHECK(same_bits(bwd[d], both[d].bwd_ms));
    CHECK(same_bits(fwd[d], both[d].fwd_ms));
    CHECK(same_bits(bwd[d], std::max(0.0, bwd_raw[d])));
    CHECK(same_bits(fwd[d], std::max(0.0, fwd_raw[d])));
  }
}

// A model that exposes only the CostModel contract's communication() (so the
// pricer falls back on it), or the split methods too; both count the
// networks they evaluate (communication(): 2, a split method: 1).
template <bool Split>
struct counted_model {
  embplan::neural_cost model;
  std::shared_ptr<std::uint64_t> networks = std::make_shared<std::uint64_t>(0);

  std::string_view name() const noexcept { return "counted"; }
  double shard_cost(const embplan::task& t, const embplan::shard& s) const {
    return model.shard_cost(t, s);
  }
  embplan::compute_cost compute(const embplan::task& t, std::span<const embplan::shard> g,
                                std::size_t d) const {
    return model.compute(t, g, d);
  }
  void communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<embplan::comm_cost> out) const {
    *networks += 2;
    model.communication(t, dim_sum, start_ms, out);
  }
  void backward_communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                              std::span<double> bwd_ms, bool clamp = true) const requires Split {
    *networks += 1;
    model.backward_communication(t, dim_sum, bwd_ms, clamp);
  }
  void forward_communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                             std::span<const double> start_ms, std::span<double> fwd_ms,
                             bool clamp = true) const requires Split {
    *networks += 1;
    model.forward_communication(t, dim_sum, start_ms, fwd_ms, clamp);
  }
};
static_assert(embplan::cost_model<counted_model<false>>);
static_assert(embplan::cost_model<counted_model<true>>);
static_assert(!embplan::split_communication<counted_model<false>>);
static_assert(embplan::split_communication<counted_model<true>>);

// neural_cost without its split methods, for a whole search: the searchers
// then price through communication(). Its compute takes neural_cost's
// piecewise path (specialised below), so only the communication path differs.
struct comm_only : embplan::neural_cost {
  explicit comm_only(embplan::neural_cost m) : embplan::neural_cost(std::move(m)) {}
  void backward_communication() const = delete;  // hides neural_cost's
  void forward_communication() const = delete;
};
static_assert(embplan::cost_model<comm_only>);
static_assert(!embplan::split_communication<comm_only>);

embplan::neural_cost compute_model_with(embplan::neural_comm comm) {
  embplan::nn::compute_cost_net net(embplan::nn::compute_cost_net_options{.table_features = 21}, 3);
  embplan::neural_cost_metadata meta;
  meta.batch_size = 4096;
  return embplan::neural_cost(net, meta, std::move(comm));
}

// neural_cost with the split methods but without the *_rows ones: a search
// then prices each plan as it finds it (grid_engine does not defer).
struct split_only : embplan::neural_cost {
  explicit split_only(embplan::neural_cost m) : embplan::neural_cost(std::move(m)) {}
  void backward_communication_rows() const = delete;  // hides neural_cost's
  void forward_communication_rows() const = delete;
};
static_assert(embplan::split_communication<split_only>);
static_assert(!embplan::batched_communication<split_only>);

// The *_rows methods against the one-plan methods, row by row, bitwise.
template <class Model>
void check_rows(const Model& model, const embplan::task& t, const std::vector<comm_input>& in,
                bool clamp) {
  const std::size_t n = t.cluster.size();
  std::vector<std::int64_t> dims;
  std::vector<double> starts;
  for (const auto& i : in) {
    dims.insert(dims.end(), i.dim_sum.begin(), i.dim_sum.end());
    starts.insert(starts.end(), i.start_ms.begin(), i.start_ms.end());
  }
  std::vector<double> bwd(dims.size(), -1.0), fwd(dims.size(), -1.0);
  model.backward_communication_rows(t, dims, bwd, clamp);
  model.forward_communication_rows(t, dims, starts, fwd, clamp);
  for (std::size_t r = 0; r < in.size(); ++r) {
    CAPTURE(r);
    std::vector<double> b(n), f(n);
    model.backward_communication(t, in[r].dim_sum, b, clamp);
    model.forward_communication(t, in[r].dim_sum, in[r].start_ms, f, clamp);
    for (std::size_t d = 0; d < n; ++d) {
      CHECK(same_bits(bwd[r * n + d], b[d]));
      CHECK(same_bits(fwd[r * n + d], f[d]));
    }
  }
}

// counted_model<true> with the *_rows methods too, counting the rows their
// networks evaluate, backward and forward apart.
struct counted_rows : counted_model<true> {
  std::shared_ptr<std::uint64_t> backward_rows = std::make_shared<std::uint64_t>(0);
  std::shared_ptr<std::uint64_t> forward_rows = std::make_shared<std::uint64_t>(0);

  void backward_communication_rows(const embplan::task& t, std::span<const std::int64_t> dims,
                                   std::span<double> bwd_ms, bool clamp = true) const {
    *backward_rows += dims.size() / t.cluster.size();
    model.backward_communication_rows(t, dims, bwd_ms, clamp);
  }
  void forward_communication_rows(const embplan::task& t, std::span<const std::int64_t> dims,
                                  std::span<const double> start_ms, std::span<double> fwd_ms,
                                  bool clamp = true) const {
    *forward_rows += dims.size() / t.cluster.size();
    model.forward_communication_rows(t, dims, start_ms, fwd_ms, clamp);
  }
};
static_assert(embplan::batched_communication<counted_rows>);

}  // namespace comm_split

template <>
struct embplan::piecewise_compute<comm_split::comm_only>
    : embplan::piecewise_compute<embplan::neural_cost> {};
template <>
struct embplan::piecewise_compute<comm_split::split_only>
    : embplan::piecewise_compute<embplan::neural_cost> {};

static_assert(embplan::split_communication<embplan::neural_comm>);
static_assert(embplan::split_communication<embplan::neural_cost>);
static_assert(!embplan::split_communication<embplan::analytic_cost>);

TEST_CASE("neural_comm: the split methods are communication()'s halves, bit for bit") {
  using namespace comm_split;
  for (const std::size_t devices : {std::size_t{4}, std::size_t{8}}) {
    CAPTURE(devices);
    const auto model = random_comm(devices, 11 + devices);
    embplan::rng gen(5 + devices);
    std::size_t clamped = 0;
    for (int i = 0; i < 300; ++i) {
      CAPTURE(i);
      // The model's batch, and others (dim sums scaled to the same bytes).
      const std::int64_t batch = i % 3 == 0 ? 4096 : (i % 3 == 1 ? 65536 : 1000);
      const auto t = task_on(devices, batch);
      const auto in = random_input(devices, gen);
      check_halves(model, t, in);
      std::vector<double> raw(devices);
      model.backward_communication(t, in.dim_sum, raw, false);
      for (const double v : raw)
        clamped += v < 0.0 ? 1 : 0;
    }
    // Raw outputs below 0 were among them, so clamping was compared too.
    CHECK(clamped > 0);
  }
  // The bundled 4-device model (trained weights and statistics).
  embplan::rng gen(17);
  for (int i = 0; i < 200; ++i)
    check_halves(bundled_comm(), task_on(4, 4096), random_input(4, gen));
}

TEST_CASE("neural_cost: the split methods are communication()'s halves, learned or analytic") {
  using namespace comm_split;
  embplan::rng gen(23);
  for (const std::size_t devices : {std::size_t{4}, std::size_t{8}}) {
    CAPTURE(devices);
    const auto learned = compute_model_with(random_comm(devices, 31));
    const embplan::neural_cost analytic = bundled_compute();
    REQUIRE(analytic.communication_name() == "analytic");
    // Only the analytic communication promises the forward half from the
    // backward one (plan_pricer::forward derives it then).
    CHECK(analytic.forward_is_skew_plus_backward(task_on(devices, 65536)));
    CHECK_FALSE(learned.forward_is_skew_plus_backward(task_on(devices, 4096)));
    for (int i = 0; i < 100; ++i) {
      CAPTURE(i);
      const auto in = random_input(devices, gen);
      check_halves(learned, task_on(devices, 4096), in);
      check_halves(analytic, task_on(devices, 65536), in);
    }
    // Analytic: the backward half is communication()'s with every start at 0.
    auto t = task_on(devices, 65536);
    t.cluster.devices_per_host = 2;  // inter-host links too
    const auto in = random_input(devices, gen);
    std::vector<embplan::comm_cost> both(devices);
    analytic.communication(t, in.dim_sum, std::vector<double>(devices, 0.0), both);
    std::vector<double> bwd(devices);
    analytic.backward_communication(t, in.dim_sum, bwd, false);
    for (std::size_t d = 0; d < devices; ++d)
      CHECK(same_bits(bwd[d], both[d].bwd_ms));
  }
}

TEST_CASE("neural_comm: clamp = false gives the networks' raw, negative, outputs") {
  using namespace comm_split;
  const auto model = random_comm(4, 41, -5.0f);  // every output far below 0
  const auto t = task_on(4, 4096);
  const std::vector<std::int64_t> dims{100, 200, 40, 320};
  const std::vector<double> start{1.0, 0.0, 3.0, 0.5};
  // The networks themselves on [dims, start - min], [dims]: neural_comm runs
  // them packed (nn::packed_comm_cost_net, bit for bit); Eigen's path agrees
  // up to float rounding.
  embplan::nn::matrix xf(1, 8);
  embplan::nn::matrix xb(1, 4);
  for (int d = 0; d < 4; ++d) {
    xf(0, d) = xb(0, d) = static_cast<float>(dims[static_cast<std::size_t>(d)]);
    xf(0, 4 + d) = static_cast<float>(start[static_cast<std::size_t>(d)]);
  }
  const auto ef = model.forward_network()(xf);
  const auto eb = model.backward_network()(xb);
  embplan::nn::matrix pf(1, 4);
  embplan::nn::matrix pb(1, 4);
  embplan::nn::packed_comm_cost_net(model.forward_network())(std::span<const float>(xf.data(), 8),
                                                             std::span<float>(pf.data(), 4));
  embplan::nn::packed_comm_cost_net(model.backward_network())(std::span<const float>(xb.data(), 4),
                                                              std::span<float>(pb.data(), 4));
  std::vector<double> fwd(4), bwd(4), fwd_clamped(4), bwd_clamped(4);
  model.forward_communication(t, dims, start, fwd, false);
  model.backward_communication(t, dims, bwd, false);
  model.forward_communication(t, dims, start, fwd_clamped);
  model.backward_communication(t, dims, bwd_clamped);
  std::vector<embplan::comm_cost> both(4);
  model.communication(t, dims, start, both);
  for (std::size_t d = 0; d < 4; ++d) {
    CAPTURE(d);
    const auto k = static_cast<Eigen::Index>(d);
    CHECK(fwd[d] < 0.0);
    CHECK(bwd[d] < 0.0);
    CHECK(same_bits(fwd[d], static_cast<double>(pf(0, k))));
    CHECK(same_bits(bwd[d], static_cast<double>(pb(0, k))));
    CHECK(std::abs(pf(0, k) - ef(0, k)) <= 1e-5f * std::max(1.0f, std::abs(ef(0, k))));
    CHECK(std::abs(pb(0, k) - eb(0, k)) <= 1e-5f * std::max(1.0f, std::abs(eb(0, k))));
    CHECK(same_bits(fwd_clamped[d], 0.0));
    CHECK(same_bits(bwd_clamped[d], 0.0));
    CHECK(same_bits(both[d].fwd_ms, 0.0));
    CHECK(same_bits(both[d].bwd_ms, 0.0));
  }
  // Through neural_cost as well.
  const auto cost = compute_model_with(model);
  std::vector<double> via_cost(4);
  cost.forward_communication(t, dims, start, via_cost, false);
  for (std::size_t d = 0; d < 4; ++d)
    CHECK(same_bits(via_cost[d], fwd[d]));
}

TEST_CASE("neural_comm split methods: bad input names the field and value") {
  using namespace comm_split;
  const auto model = random_comm(4, 51);
  const auto t = task_on(4, 4096);
  const std::vector<std::int64_t> dims{4, 8, 4, 8};
  const std::vector<double> start{0.0, 1.0, 0.0, 2.0};
  std::vector<double> out(4);
  const auto bwd = [&](const embplan::task& task, std::vector<std::int64_t> d,
                       std::vector<double> o) {
    return message_of([&] { model.backward_communication(task, d, o); });
  };
  const auto fwd = [&](const embplan::task& task, std::vector<std::int64_t> d,
                       std::vector<double> s, std::vector<double> o) {
    return message_of([&] { model.forward_communication(task, d, s, o, false); });
  };
  // The task's device count against the model's.
  for (const auto& msg : {bwd(task_on(8, 4096), std::vector<std::int64_t>(8, 4), out),
                          fwd(task_on(8, 4096), std::vector<std::int64_t>(8, 4),
                              std::vector<double>(8, 0.0), std::vector<double>(8))}) {
    CHECK(msg.find("field 'task.cluster.size' = 8") != std::string::npos);
    CHECK(msg.find("trained for 4 devices") != std::string::npos);
  }
  // Span lengths.
  auto msg = bwd(t, {4, 8}, out);
  CHECK(msg.find("field 'neural_comm.dim_sum.size' = 2") != std::string::npos);
  msg = bwd(t, dims, std::vector<double>(3));
  CHECK(msg.find("field 'neural_comm.bwd_ms.size' = 3") != std::string::npos);
  CHECK(msg.find("one entry per device (4)") != std::string::npos);
  msg = fwd(t, {4, 8, 4}, start, out);
  CHECK(msg.find("field 'neural_comm.dim_sum.size' = 3") != std::string::npos);
  msg = fwd(t, dims, {0.0, 0.0, 0.0, 0.0, 0.0}, out);
  CHECK(msg.find("field 'neural_comm.start_ms.size' = 5") != std::string::npos);
  msg = fwd(t, dims, start, std::vector<double>(2));
  CHECK(msg.find("field 'neural_comm.fwd_ms.size' = 2") != std::string::npos);
  // Values.
  msg = bwd(t, {4, -8, 4, 8}, out);
  CHECK(msg.find("field 'neural_comm.dim_sum[1]' = -8") != std::string::npos);
  CHECK(msg.find("a non-negative dim sum") != std::string::npos);
  msg = fwd(t, {4, 8, 4, -12}, start, out);
  CHECK(msg.find("field 'neural_comm.dim_sum[3]' = -12") != std::string::npos);
  msg = fwd(t, dims, {0.0, 0.0, std::numeric_limits<double>::quiet_NaN(), 0.0}, out);
  CHECK(msg.find("field 'neural_comm.start_ms[2]' = nan") != std::string::npos);
  CHECK(msg.find("a finite time") != std::string::npos);
  msg = fwd(t, dims, {-std::numeric_limits<double>::infinity(), 0.0, 0.0, 0.0}, out);
  CHECK(msg.find("field 'neural_comm.start_ms[0]' = -inf") != std::string::npos);
  msg = bwd(task_on(4, 0), dims, out);
  CHECK(msg.find("field 'task.batch_size' = 0") != std::string::npos);
  msg = fwd(task_on(4, -1), dims, start, out);
  CHECK(msg.find("field 'task.batch_size' = -1") != std::string::npos);
  // No model.
  msg = message_of([&] { embplan::neural_comm().backward_communication(t, dims, out); });
  CHECK(msg.find("field 'neural_comm' = \"(empty)\"") != std::string::npos);
  msg = message_of([&] { embplan::neural_comm().forward_communication(t, dims, start, out); });
  CHECK(msg.find("field 'neural_comm' = \"(empty)\"") != std::string::npos);

  // Through neural_cost: learned communication as above; analytic in
  // analytic_cost's words.
  const auto learned = compute_model_with(model);
  std::vector<double> out3(3), out5(5), out8(8);
  msg = message_of([&] {
    learned.backward_communication(task_on(8, 4096), std::vector<std::int64_t>(8, 4), out8);
  });
  CHECK(msg.find("field 'task.cluster.size' = 8") != std::string::npos);
  msg = message_of([&] {
    learned.forward_communication(
        t, dims, std::vector<double>{0.0, std::numeric_limits<double>::infinity(), 0.0, 0.0}, out);
  });
  CHECK(msg.find("field 'neural_comm.start_ms[1]' = inf") != std::string::npos);
  const embplan::neural_cost& analytic = bundled_compute();
  msg = message_of([&] { analytic.backward_communication(t, dims, out3); });
  CHECK(msg.find("field 'bwd_ms.size' = 3") != std::string::npos);
  CHECK(msg.find("one entry per device (4)") != std::string::npos);
  msg = message_of([&] { analytic.forward_communication(t, dims, start, out5); });
  CHECK(msg.find("field 'fwd_ms.size' = 5") != std::string::npos);
  msg = message_of([&] {
    analytic.backward_communication(t, std::vector<std::int64_t>{4, 8}, out);
  });
  CHECK(msg.find("field 'dim_sum.size' = 2") != std::string::npos);
  msg = message_of([&] { analytic.forward_communication(t, dims, std::vector<double>{0.0}, out); });
  CHECK(msg.find("field 'start_ms.size' = 1") != std::string::npos);
}

TEST_CASE("plan_pricer: split methods and communication() give the same figures, half the nets") {
  using namespace comm_split;
  for (const std::size_t devices : {std::size_t{4}, std::size_t{8}}) {
    CAPTURE(devices);
    const auto model = compute_model_with(random_comm(devices, 61));
    const counted_model<true> split{.model = model};
    const counted_model<false> whole{.model = model};
    embplan::search::detail::plan_pricer direct, by_halves, by_whole;
    const auto t = task_on(devices, 4096);
    embplan::rng gen(67);
    constexpr int plans = 200;
    for (int i = 0; i < plans; ++i) {
      CAPTURE(i);
      const auto in = random_input(devices, gen);
      std::vector<embplan::compute_cost> compute;
      for (std::size_t d = 0; d < devices; ++d)
        compute.push_back({.fwd_ms = gen.uniform(0.0, 5.0), .bwd_ms = gen.uniform(0.0, 10.0)});
      const double a = direct.max_ms(t, model, compute, in.dim_sum);
      const double b = by_halves.max_ms(t, split, compute, in.dim_sum);
      const double c = by_whole.max_ms(t, whole, compute, in.dim_sum);
      CHECK(same_bits(a, c));
      CHECK(same_bits(b, c));
      // Every device's figures too: totals, starts, and the plan_cost.
      for (std::size_t d = 0; d < devices; ++d) {
        CHECK(same_bits(direct.totals()[d], by_whole.totals()[d]));
        CHECK(same_bits(direct.starts()[d], by_whole.starts()[d]));
      }
      embplan::plan_cost pa, pc;
      const std::vector<std::uint64_t> memory(devices, 1);
      direct.plan_cost_of(compute, memory, in.dim_sum, pa);
      by_whole.plan_cost_of(compute, memory, in.dim_sum, pc);
      for (std::size_t d = 0; d < devices; ++d) {
        CHECK(same_bits(pa.devices[d].fwd_comm_ms, pc.devices[d].fwd_comm_ms));
        CHECK(same_bits(pa.devices[d].bwd_comm_ms, pc.devices[d].bwd_comm_ms));
      }
    }
    // calls(): the pricer's communication calls, 2 per plan either way (the
    // searches' evaluations do not change); the networks run: 2 per plan by
    // halves, 4 through communication().
    CHECK(direct.calls() == 2 * plans);
    CHECK(by_halves.calls() == 2 * plans);
    CHECK(by_whole.calls() == 2 * plans);
    CHECK(*split.networks == 2 * plans);
    CHECK(*whole.networks == 4 * plans);
  }
}

TEST_CASE("plan_pricer: one backward network per distinct dim-sum vector, the same figures") {
  using namespace comm_split;
  const auto model = compute_model_with(random_comm(4, 83, -0.5f));
  const counted_model<true> split{.model = model};
  const counted_model<false> whole{.model = model};
  const auto t = task_on(4, 4096);
  embplan::rng gen(89);
  // 20 dim-sum vectors again and again, then 34,000 distinct ones (past the
  // memo's cap of 32,768 entries, where it empties), then a clamp change.
  std::vector<std::vector<std::int64_t>> few;
  for (int i = 0; i < 20; ++i)
    few.push_back(random_input(4, gen).dim_sum);
  embplan::search::detail::plan_pricer memo, plain;
  const auto check = [&](const std::vector<std::int64_t>& dims) {
    std::vector<embplan::compute_cost> compute;
    for (std::size_t d = 0; d < 4; ++d)
      compute.push_back({.fwd_ms = gen.uniform(0.0, 5.0), .bwd_ms = gen.uniform(0.0, 10.0)});
    const double a = memo.max_ms(t, split, compute, dims);
    const double b = plain.max_ms(t, whole, compute, dims);
    for (std::size_t d = 0; d < 4; ++d)
      REQUIRE(same_bits(memo.starts()[d], plain.starts()[d]));
    REQUIRE(same_bits(a, b));
  };
  for (int i = 0; i < 500; ++i)
    check(few[static_cast<std::size_t>(i) % few.size()]);
  CHECK(*split.networks == 500 + 20);  // every forward, 20 backward
  for (std::int64_t i = 0; i < 34'000; ++i)
    check({4 * i, 4 * (i % 7), 8, 4 * (i % 13)});
  CHECK(*split.networks == 500 + 20 + 2 * 34'000);
  for (int i = 0; i < 40; ++i)  // the first of them again: emptied at the cap
    check({4 * i, 4 * (i % 7), 8, 4 * (i % 13)});
  CHECK(*split.networks == 500 + 20 + 2 * 34'000 + 2 * 40);
  memo.set_clamp_communication(false);
  plain.set_clamp_communication(false);
  const auto raw_before = *split.networks;
  std::vector<embplan::compute_cost> compute(4, {.fwd_ms = 1.0, .bwd_ms = 2.0});
  (void)memo.max_ms(t, split, compute, few[0]);
  CHECK(*split.networks == raw_before + 2);  // raw figures are not the clamped ones
}

TEST_CASE("plan_pricer: on 1,024 devices the backward memo is capped by bytes, not by entries") {
  // A slot holds 1,024 dim sums and 1,024 figures (16 KiB): the memo keeps at
  // most 32 MiB, 2,048 slots, emptied when the 1,025th vector comes (where
  // the count cap of 32,768 entries would have held 1 GiB of them).
  using namespace comm_split;
  const counted_model<true> split{.model = bundled_compute()};
  const auto t = task_on(1024, 4096);
  embplan::search::detail::plan_pricer pricer;
  const std::vector<embplan::compute_cost> compute(1024, {.fwd_ms = 1.0, .bwd_ms = 2.0});
  const auto dims_of = [](std::int64_t i) {
    std::vector<std::int64_t> dims(1024, 8);
    dims[static_cast<std::size_t>(i % 1024)] = 4 * (i + 3);
    return dims;
  };
  std::vector<double> first;
  for (std::int64_t i = 0; i < 1'100; ++i) {
    const double cost = pricer.max_ms(t, split, compute, dims_of(i));
    if (i == 0) first.push_back(cost);
  }
  CHECK(*split.networks == 2 * 1'100);
  (void)pricer.max_ms(t, split, compute, dims_of(1'099));  // held: the forward only
  CHECK(*split.networks == 2 * 1'100 + 1);
  const double again = pricer.max_ms(t, split, compute, dims_of(0));  // emptied: both
  CHECK(*split.networks == 2 * 1'100 + 3);
  CHECK(same_bits(again, first[0]));
}

TEST_CASE("plan_pricer::set_clamp_communication(false): raw predictions where the model splits") {
  using namespace comm_split;
  const auto model = compute_model_with(random_comm(4, 71, -5.0f));
  const counted_model<false> whole{.model = model};
  const auto t = task_on(4, 4096);
  const std::vector<std::int64_t> dims{64, 128, 32, 256};
  const std::vector<embplan::compute_cost> compute{{.fwd_ms = 10.0, .bwd_ms = 20.0},
                                                   {.fwd_ms = 12.0, .bwd_ms = 21.0},
                                                   {.fwd_ms = 9.0, .bwd_ms = 25.0},
                                                   {.fwd_ms = 11.0, .bwd_ms = 19.0}};
  embplan::search::detail::plan_pricer clamped, raw, raw_whole;
  CHECK(clamped.clamp_communication());
  raw.set_clamp_communication(false);
  raw_whole.set_clamp_communication(false);
  CHECK_FALSE(raw.clamp_communication());
  const double c = clamped.max_ms(t, model, compute, dims);
  const double r = raw.max_ms(t, model, compute, dims);
  // Without the split methods the pricer cannot honour it: communication() clamps.
  CHECK(same_bits(raw_whole.max_ms(t, whole, compute, dims), c));
  CHECK(r < c);
  // The raw figures are the networks' outputs on the same inputs.
  std::vector<double> bwd(4), fwd(4), start(4);
  model.backward_communication(t, dims, bwd, false);
  for (std::size_t d = 0; d < 4; ++d)
    start[d] = compute[d].fwd_ms + compute[d].bwd_ms + bwd[d];
  const double earliest = *std::min_element(start.begin(), start.end());
  for (auto& s : start)
    s -= earliest;
  model.forward_communication(t, dims, start, fwd, false);
  double worst = 0.0;
  for (std::size_t d = 0; d < 4; ++d) {
    CAPTURE(d);
    CHECK(bwd[d] < 0.0);
    CHECK(fwd[d] < 0.0);
    const double total = compute[d].fwd_ms + compute[d].bwd_ms + fwd[d] + bwd[d];
    CHECK(same_bits(raw.totals()[d], total));
    worst = std::max(worst, total);
  }
  CHECK(same_bits(r, worst));
  embplan::plan_cost pc;
  raw.plan_cost_of(compute, std::vector<std::uint64_t>(4, 1), dims, pc);
  for (std::size_t d = 0; d < 4; ++d) {
    CHECK(same_bits(pc.devices[d].fwd_comm_ms, fwd[d]));
    CHECK(same_bits(pc.devices[d].bwd_comm_ms, bwd[d]));
  }
}

TEST_CASE("column_beam on learned compute and communication: the same plans by halves") {
  using namespace comm_split;
  const auto model = bundled_compute().with_communication(bundled_comm());
  const comm_only whole(model);
  const auto pool = embplan::data::synthetic_pool({.seed = 0});
  const auto tasks = embplan::data::generate_tasks(
      pool, {.devices = 4, .max_dim = 128, .count = 3, .seed = 22, .max_tables = 20});
  const embplan::default_constraint rule;
  const embplan::column_beam searcher{};
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    CAPTURE(i);
    const auto& t = tasks[i];
    const auto a = searcher.search(t, model, rule, embplan::neg_max_cost_reward{}, i);
    const auto b = searcher.search(t, whole, rule, embplan::neg_max_cost_reward{}, i);
    REQUIRE(a.ok);
    CHECK(b.ok);
    CHECK(a.placement == b.placement);
    CHECK(a.evaluations == b.evaluations);
    CHECK(same_bits(embplan::evaluate(t, a.placement, model).max_ms(),
                    embplan::evaluate(t, b.placement, whole).max_ms()));
  }
}

TEST_CASE("*_rows: the one-plan methods row by row, bit for bit, learned or analytic") {
  using namespace comm_split;
  static_assert(embplan::batched_communication<embplan::neural_comm>);
  static_assert(embplan::batched_communication<embplan::neural_cost>);
  embplan::rng gen(97);
  for (const std::size_t devices : {std::size_t{4}, std::size_t{8}}) {
    CAPTURE(devices);
    const auto comm = random_comm(devices, 101 + devices, -0.3f);
    const auto learned = compute_model_with(comm);
    const embplan::neural_cost analytic = bundled_compute();
    // Row counts around the networks' chunks (12 rows) and kernel blocks.
    for (const std::size_t rows : {0, 1, 5, 12, 13, 30}) {
      CAPTURE(rows);
      std::vector<comm_input> in;
      for (std::size_t r = 0; r < rows; ++r)
        in.push_back(random_input(devices, gen));
      for (const bool clamp : {true, false}) {
        CAPTURE(clamp);
        check_rows(comm, task_on(devices, 4096), in, clamp);
        check_rows(comm, task_on(devices, 65536), in, clamp);
        check_rows(learned, task_on(devices, 4096), in, clamp);
        check_rows(analytic, task_on(devices, 65536), in, clamp);
      }
    }
  }
}

TEST_CASE("*_rows: bad input names the field and value") {
  using namespace comm_split;
  const auto model = random_comm(4, 113);
  const auto t = task_on(4, 4096);
  std::vector<double> out(8);
  auto msg = message_of(
      [&] { model.backward_communication_rows(t, std::vector<std::int64_t>(6, 4), out); });
  CHECK(msg.find("field 'neural_comm.dim_sums.size' = 6") != std::string::npos);
  CHECK(msg.find("a multiple of the device count 4") != std::string::npos);
  std::vector<double> out4(4), out5(5), out9(9);
  msg = message_of(
      [&] { model.backward_communication_rows(t, std::vector<std::int64_t>(8, 4), out4); });
  CHECK(msg.find("field 'neural_comm.bwd_ms.size' = 4") != std::string::npos);
  CHECK(msg.find("one entry per device (8)") != std::string::npos);
  msg = message_of([&] {
    model.forward_communication_rows(t, std::vector<std::int64_t>(8, 4), std::vector<double>(7),
                                     out);
  });
  CHECK(msg.find("field 'neural_comm.start_ms.size' = 7") != std::string::npos);
  msg = message_of([&] {
    model.forward_communication_rows(t, std::vector<std::int64_t>(8, 4), std::vector<double>(8),
                                     out9);
  });
  CHECK(msg.find("field 'neural_comm.fwd_ms.size' = 9") != std::string::npos);
  // Each row is checked as the one-plan methods check it: a value in row 1.
  std::vector<std::int64_t> dims(8, 4);
  dims[6] = -4;
  msg = message_of([&] { model.backward_communication_rows(t, dims, out); });
  CHECK(msg.find("field 'neural_comm.dim_sum[2]' = -4") != std::string::npos);
  msg = message_of([&] {
    model.backward_communication_rows(task_on(8, 4096), std::vector<std::int64_t>(8, 4), out);
  });
  CHECK(msg.find("field 'task.cluster.size' = 8") != std::string::npos);
  // neural_cost's analytic communication, in its words.
  const embplan::neural_cost& analytic = bundled_compute();
  msg = message_of(
      [&] { analytic.backward_communication_rows(t, std::vector<std::int64_t>(6, 4), out); });
  CHECK(msg.find("field 'dim_sums.size' = 6") != std::string::npos);
  msg = message_of([&] {
    analytic.forward_communication_rows(t, std::vector<std::int64_t>(8, 4), std::vector<double>(4),
                                        out);
  });
  CHECK(msg.find("field 'start_ms.size' = 4") != std::string::npos);
  msg = message_of(
      [&] { analytic.backward_communication_rows(t, std::vector<std::int64_t>(8, 4), out5); });
  CHECK(msg.find("field 'bwd_ms.size' = 5") != std::string::npos);
}

TEST_CASE("plan_pricer::max_ms_rows: max_ms's figures per plan, repeats asked for once") {
  using namespace comm_split;
  for (const bool clamp : {true, false}) {
    CAPTURE(clamp);
    const auto model = compute_model_with(random_comm(4, 127, -0.5f));
    counted_rows rows_model;
    rows_model.model = model;
    const auto t = task_on(4, 4096);
    embplan::rng gen(131);
    embplan::search::detail::plan_pricer one, many;
    one.set_clamp_communication(clamp);
    many.set_clamp_communication(clamp);
    // 40 plans: 25 distinct, then 15 repeats of earlier ones (same dim sums
    // and compute, so the same start skews), and 5 more that share only
    // their dim sums with earlier ones (a memo hit, another forward row).
    std::vector<std::vector<std::int64_t>> dims;
    std::vector<std::vector<embplan::compute_cost>> compute;
    const auto random_compute = [&] {
      std::vector<embplan::compute_cost> c;
      for (std::size_t d = 0; d < 4; ++d)
        c.push_back({.fwd_ms = gen.uniform(0.0, 5.0), .bwd_ms = gen.uniform(0.0, 10.0)});
      return c;
    };
    for (int i = 0; i < 25; ++i) {
      dims.push_back(random_input(4, gen).dim_sum);
      compute.push_back(random_compute());
    }
    for (int i = 0; i < 15; ++i) {
      dims.push_back(dims[static_cast<std::size_t>(i * 7 % 25)]);
      compute.push_back(compute[static_cast<std::size_t>(i * 7 % 25)]);
    }
    for (int i = 0; i < 5; ++i) {
      dims.push_back(dims[static_cast<std::size_t>(i)]);
      compute.push_back(random_compute());
    }
    std::vector<std::int64_t> flat_dims;
    std::vector<embplan::compute_cost> flat_compute;
    for (std::size_t p = 0; p < dims.size(); ++p) {
      flat_dims.insert(flat_dims.end(), dims[p].begin(), dims[p].end());
      flat_compute.insert(flat_compute.end(), compute[p].begin(), compute[p].end());
    }
    std::vector<double> got(dims.size());
    many.max_ms_rows(t, rows_model, flat_compute, flat_dims, got);
    for (std::size_t p = 0; p < dims.size(); ++p) {
      CAPTURE(p);
      CHECK(same_bits(got[p], one.max_ms(t, model, compute[p], dims[p])));
    }
    CHECK(many.calls() == 2 * dims.size());  // as max_ms counts them
    CHECK(*rows_model.backward_rows == 25);  // one per distinct dim-sum vector
    CHECK(*rows_model.forward_rows == 30);   // one per distinct (dim sums, skews)
    // Again: every backward vector is in the memo now; no rows at all is fine.
    many.max_ms_rows(t, rows_model, flat_compute, flat_dims, got);
    CHECK(*rows_model.backward_rows == 25);
    CHECK(*rows_model.forward_rows == 60);
    many.max_ms_rows(t, rows_model, std::span<const embplan::compute_cost>(),
                     std::span<const std::int64_t>(), std::span<double>());
    CHECK(many.calls() == 4 * dims.size());
    CHECK(*rows_model.networks == 0);  // never a one-plan call
  }
}

TEST_CASE(
    "column_beam, improved and faithful: the same plans whether plans are priced in batches") {
  using namespace comm_split;
  const auto model = bundled_compute().with_communication(bundled_comm());
  const split_only one_by_one(model);
  const auto pool = embplan::data::synthetic_pool({.seed = 0});
  const auto tasks = embplan::data::generate_tasks(
      pool, {.devices = 4, .max_dim = 128, .count = 3, .seed = 23, .max_tables = 20});
  const embplan::default_constraint rule;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    CAPTURE(i);
    const auto& t = tasks[i];
    const auto check = [&](const auto& searcher) {
      CAPTURE(searcher.name());
      CAPTURE(searcher.threads);
      const auto a = searcher.search(t, model, rule, embplan::neg_max_cost_reward{}, i);
      const auto b = searcher.search(t, one_by_one, rule, embplan::neg_max_cost_reward{}, i);
      REQUIRE(a.ok);
      CHECK(b.ok);
      CHECK(a.placement == b.placement);
      // With threads, which engine (and cache) prices which state depends
      // on timing, and so do the cache misses counted: only the plan is fixed.
      if (searcher.threads == 1) CHECK(a.evaluations == b.evaluations);
    };
    check(embplan::column_beam{});
    check(embplan::faithful_column_beam{});
    embplan::column_beam two_threads;
    two_threads.threads = 2;
    check(two_threads);
  }
}
