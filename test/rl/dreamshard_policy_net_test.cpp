#include "embplan/rl/dreamshard_policy_net.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/dreamshard_cost_net.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/rl/ragged_softmax.hpp"
#include "embplan/rl/reinforce.hpp"
#include "nn/gradient_check.hpp"
#include "support/golden_tensor.hpp"
#include "support/message_of.hpp"

namespace nn = embplan::nn;
namespace rl = embplan::rl;
using embplan::nn::matrix;
using embplan::test::message_of;

namespace {

using device_tables = std::vector<std::vector<std::int64_t>>;

// Observations of 4 devices: the tables each holds, and the legal devices.
struct observation {
  device_tables tables;
  std::vector<std::int64_t> legal;
};

// The observations of tools/make_dreamshard_policy_golden.py (OBSERVATIONS).
const std::vector<observation>& golden_observations() {
  static const std::vector<observation> obs = {
      {{{}, {}, {}, {}}, {0, 1, 2, 3}},
      {{{0}, {}, {1, 2}, {}}, {0, 1, 2, 3}},
      {{{0, 3}, {4}, {1, 2}, {}}, {1, 3}},
      {{{0, 3, 5}, {4, 6}, {1, 2, 7}, {8}}, {0, 2, 3}},
      {{{0, 3, 5}, {4, 6, 9}, {1, 2, 7}, {8}}, {2}},
  };
  return obs;
}

rl::dreamshard_obs_batch build(const matrix& features, const std::vector<observation>& obs) {
  rl::dreamshard_obs_builder builder(features.cols());
  for (const auto& o : obs)
    builder.add(features, o.tables, o.legal);
  rl::dreamshard_obs_batch b;
  builder.build(b);
  return b;
}

// A random batch: 6 observations of 4 devices with random contents and legal subsets.
rl::dreamshard_obs_batch random_batch(const matrix& features, embplan::rng& gen) {
  std::vector<observation> obs;
  for (int g = 0; g < 6; ++g) {
    observation o{device_tables(4), {}};
    for (Eigen::Index t = 0; t < features.rows(); ++t) {
      const auto d = static_cast<std::size_t>(gen.uniform() * 5.0);  // 4: not placed yet
      if (d < 4) o.tables[d].push_back(t);
    }
    for (std::int64_t d = 0; d < 4; ++d) {
      if (gen.uniform() < 0.7) o.legal.push_back(d);
    }
    if (o.legal.empty()) o.legal.push_back(g % 4);
    obs.push_back(o);
  }
  return build(features, obs);
}

struct rl_batch {
  std::vector<std::int64_t> actions;
  std::vector<double> rewards;
};

rl_batch random_actions(const rl::dreamshard_obs_batch& b, embplan::rng& gen) {
  rl_batch out;
  for (Eigen::Index g = 0; g < b.groups; ++g) {
    std::vector<std::int64_t> members;
    for (std::size_t s = 0; s < b.group_of.size(); ++s) {
      if (b.group_of[s] == g) members.push_back(static_cast<std::int64_t>(s));
    }
    out.actions.push_back(
        members[static_cast<std::size_t>(gen.uniform() * static_cast<double>(members.size()))]);
    out.rewards.push_back(gen.uniform(-5.0, -1.0));
  }
  return out;
}

double policy_loss(const nn::dreamshard_model& m, const rl::dreamshard_obs_batch& b,
                   const rl_batch& a, const rl::reinforce_options& o) {
  rl::dreamshard_policy_tape t;
  rl::dreamshard_policy_forward(m, b, t);
  return rl::reinforce_loss(t.logits, b.group_of, b.groups, a.actions, a.rewards, o, nullptr);
}

embplan::io::safetensors_file golden() {
  return embplan::io::read_safetensors(std::string(EMBPLAN_SOURCE_DIR) +
                                       "/test/rl/golden/dreamshard_policy_golden.safetensors");
}

matrix as_matrix(const embplan::io::safetensors_file& f, const std::string& name) {
  return embplan::test::golden_rows(f, name);
}

std::vector<std::int64_t> as_ints(const embplan::io::safetensors_file& f, const std::string& name) {
  std::vector<std::int64_t> out;
  for (const float v : f.tensors.at(name).values)
    out.push_back(static_cast<std::int64_t>(v));
  return out;
}

double max_abs_diff(const matrix& a, const matrix& b) {
  REQUIRE(a.size() == b.size());
  const matrix d = a - Eigen::Map<const matrix>(b.data(), a.rows(), a.cols());
  return d.size() ? static_cast<double>(d.cwiseAbs().maxCoeff()) : 0.0;
}

const char* const rl_params[] = {
    "rl_table_fc_0.weight", "rl_table_fc_0.bias", "rl_table_fc_1.weight", "rl_table_fc_1.bias",
    "cost_fc_0.weight",     "cost_fc_0.bias",     "cost_fc_1.weight",     "cost_fc_1.bias",
    "policy_net.weight",    "policy_net.bias"};

bool is_rl_param(const std::string& name) {
  return std::find(std::begin(rl_params), std::end(rl_params), name) != std::end(rl_params);
}

matrix& param(nn::dreamshard_model& m, const std::string& name) {
  for (auto& [n, p] : m.named_parameters())
    if (n == name) return *p;
  FAIL("no parameter " << name);
  throw;
}

}  // namespace

TEST_CASE("policy forward: per-slot sums, cost features in kernel_forward's order") {
  embplan::rng gen(5);
  const auto m = nn::make_dreamshard_model(6, 4, 17);
  const matrix features = nn_test::random_matrix(5, 6, gen, 2.0);
  // Observation 0: device 0 holds tables 0, 2; device 1 empty; observation 1: device 3 holds 4.
  const auto b = build(features, {{{{0, 2}, {}, {}, {}}, {0, 1}}, {{{}, {}, {}, {4}}, {3}}});
  CHECK(b.features.rows() == 4);
  CHECK(b.slot_of == std::vector<std::int64_t>{0, 0, 1, 2});
  CHECK(b.group_of == std::vector<std::int64_t>{0, 0, 1});
  CHECK(b.features.row(2).isZero());
  rl::dreamshard_policy_tape t;
  rl::dreamshard_policy_forward(m, b, t);
  REQUIRE(t.logits.rows() == 3);
  REQUIRE(t.cost_features.cols() == 3);

  // Cost features = the cost network's device heads (forward, communication, backward).
  nn::dreamshard_cost_tape ct;
  const std::vector<std::int64_t> placement_of = {0, 0, 0};
  nn::dreamshard_cost_forward(m, b.features, b.slot_of, placement_of, 1, ct);
  CHECK(max_abs_diff(t.cost_features, ct.device_costs) < 1e-6);

  // Slot 0 by hand: sum of the two tables' RL latents, cost MLP, policy_net.
  const auto latent = [&](const matrix& x) {
    matrix h = m.rl_table_fc_0(x).cwiseMax(0.0f);
    return matrix(m.rl_table_fc_1(h).cwiseMax(0.0f));
  };
  const matrix rl_sum = latent(features.row(0)) + latent(features.row(2));
  const matrix k = m.cost_fc_1(m.cost_fc_0(t.cost_features.row(0)).cwiseMax(0.0f)).cwiseMax(0.0f);
  matrix cat(1, 64);
  cat << rl_sum, k;
  CHECK(m.policy_net(cat)(0, 0) == doctest::Approx(t.logits(0, 0)).epsilon(1e-5));
  // An empty device is scored from one all-zero row (not from nothing).
  const matrix zero_latent = latent(matrix::Zero(1, 6));
  CHECK(max_abs_diff(t.rl_sum.row(1), zero_latent) < 1e-6);
  CHECK(zero_latent.norm() > 0.0f);
}

TEST_CASE("policy backward matches central differences for every RL-branch parameter") {
  embplan::rng gen(21);
  auto m = nn::make_dreamshard_model(5, 4, 3);
  // Cost features of order 1 (PyTorch's init gives heads near 0), so that
  // cost_fc_0 gets a gradient well above float32's noise.
  for (nn::linear* l : {&m.forward_fc_1, &m.communication_fc_1, &m.backward_fc_1}) {
    l->weight *= 10.0f;
    l->bias *= 10.0f;
  }
  const matrix features = nn_test::random_matrix(7, 5, gen, 1.5);
  const auto b = random_batch(features, gen);
  const auto a = random_actions(b, gen);
  const rl::reinforce_options o{.entropy_weight = 0.1};

  rl::dreamshard_policy_tape t;
  rl::dreamshard_policy_forward(m, b, t);
  matrix dlogits;
  rl::reinforce_loss(t.logits, b.group_of, b.groups, a.actions, a.rewards, o, &dlogits);
  nn::dreamshard_model grad(5, 4);
  rl::dreamshard_policy_backward(m, b, t, dlogits, grad);

  for (const char* name : rl_params) {
    INFO(std::string(name));
    matrix& p = param(m, name);
    const matrix numeric = nn_test::numeric_gradient(
        p, [&] { return policy_loss(m, b, a, o); }, 3e-4f);
    if (std::string(name) == "policy_net.bias") {
      // A shift of every logit leaves each softmax unchanged: no gradient.
      CHECK(std::abs(param(grad, name)(0, 0)) < 1e-6f);
      CHECK(std::abs(numeric(0, 0)) < 1e-4f);
      continue;
    }
    // float32 forward and ReLU kinks near the perturbation: a few percent; a
    // wrong term would be off by O(1).
    CHECK(nn_test::relative_error(param(grad, name), numeric) < 5e-2);
  }
}

TEST_CASE("the cost branch receives no gradient from the policy; gradients accumulate") {
  embplan::rng gen(8);
  const auto m = nn::make_dreamshard_model(5, 4, 9);
  const matrix features = nn_test::random_matrix(6, 5, gen);
  const auto b = random_batch(features, gen);
  const auto a = random_actions(b, gen);
  rl::dreamshard_policy_tape t;
  rl::dreamshard_policy_forward(m, b, t);
  matrix dlogits;
  rl::reinforce_loss(t.logits, b.group_of, b.groups, a.actions, a.rewards, {}, &dlogits);
  nn::dreamshard_model grad(5, 4);
  rl::dreamshard_policy_backward(m, b, t, dlogits, grad);
  for (auto& [name, g] : grad.named_parameters()) {
    INFO(name);
    if (name == "policy_net.bias") {
      CHECK(std::abs((*g)(0, 0)) < 1e-6f);  // softmax is shift-invariant
    } else if (is_rl_param(name)) {
      CHECK(g->norm() > 0.0f);
    } else {
      CHECK(g->isZero());
    }
  }
  // A second backward adds to grad, as PyTorch accumulates .grad.
  nn::dreamshard_model twice = grad;
  rl::dreamshard_policy_backward(m, b, t, dlogits, twice);
  CHECK(max_abs_diff(twice.policy_net.weight, matrix(2.0f * grad.policy_net.weight)) < 1e-6);
}

TEST_CASE("golden: PyTorch's probabilities, loss and gradients for a fixed batch") {
  const auto f = golden();
  nn::dreamshard_model m(21, 4);
  nn::load_state_dict(m, f, "model");
  const matrix features = as_matrix(f, "features");
  const auto b = build(features, golden_observations());
  // The builder stacks the observations as the script does.
  CHECK(max_abs_diff(b.features, as_matrix(f, "rows")) == 0.0);
  CHECK(b.slot_of == as_ints(f, "slot_of"));
  CHECK(b.group_of == as_ints(f, "group_of"));

  rl::dreamshard_policy_tape t;
  rl::dreamshard_policy_forward(m, b, t);
  CHECK(max_abs_diff(t.logits, as_matrix(f, "logits")) < 1e-5);
  CHECK(max_abs_diff(t.cost_features, as_matrix(f, "cost_features")) < 1e-5);
  matrix probs;
  rl::ragged_softmax(t.logits, b.group_of, b.groups, probs);
  CHECK(max_abs_diff(probs, as_matrix(f, "probs")) < 1e-6);

  const auto actions = as_ints(f, "actions");
  std::vector<double> rewards;
  for (const float r : f.tensors.at("rewards").values)
    rewards.push_back(r);
  const rl::reinforce_options o{.entropy_weight = f.tensors.at("entropy_weight").values[0]};
  matrix dlogits;
  const double loss =
      rl::reinforce_loss(t.logits, b.group_of, b.groups, actions, rewards, o, &dlogits);
  CHECK(loss == doctest::Approx(f.tensors.at("loss").values[0]).epsilon(1e-5));
  nn::dreamshard_model grad(21, 4);
  rl::dreamshard_policy_backward(m, b, t, dlogits, grad);
  int checked = 0;
  for (const auto& [name, tensor] : f.tensors) {
    if (name.rfind("grad.", 0) != 0) continue;
    INFO(name);
    const matrix expected = as_matrix(f, name);
    const matrix& ours = param(grad, name.substr(5));
    const double scale = std::max(1e-6, static_cast<double>(expected.cwiseAbs().maxCoeff()));
    CHECK(max_abs_diff(ours, expected) <= std::max(1e-4 * scale, 1e-6));
    ++checked;
  }
  CHECK(checked == 8);

  // Env.reset's order: single-table costs, sorted descending, stable.
  std::vector<double> cost;
  rl::dreamshard_single_table_costs(m, features, cost);
  const matrix expected_cost = as_matrix(f, "single_table_cost");
  for (std::size_t i = 0; i < cost.size(); ++i)
    CHECK(cost[i] == doctest::Approx(expected_cost(static_cast<Eigen::Index>(i), 0)).epsilon(1e-5));
  std::vector<std::int64_t> order(cost.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto x, auto y) {
    return cost[static_cast<std::size_t>(x)] > cost[static_cast<std::size_t>(y)];
  });
  CHECK(order == as_ints(f, "table_order"));
  rl::dreamshard_policy_state from_latents;
  from_latents.reset(m, features, 4);
  std::vector<double> cost2;
  from_latents.single_table_costs(m, cost2);
  for (std::size_t i = 0; i < cost.size(); ++i)
    CHECK(cost2[i] == doctest::Approx(cost[i]).epsilon(1e-6));

  // The incremental state gives the same logits, observation by observation.
  const matrix golden_logits = as_matrix(f, "logits");
  rl::dreamshard_policy_state state;
  Eigen::Index slot = 0;
  for (const auto& o2 : golden_observations()) {
    state.reset(m, features, 4);
    for (std::size_t d = 0; d < o2.tables.size(); ++d)
      for (const auto tb : o2.tables[d])
        state.place(tb, static_cast<Eigen::Index>(d));
    rl::dreamshard_policy_tape st;
    state.score(m, o2.legal, st);
    const auto n = static_cast<Eigen::Index>(o2.legal.size());
    CHECK(max_abs_diff(st.logits, golden_logits.middleRows(slot, n)) < 1e-5);
    slot += n;
  }
}

TEST_CASE("incremental greedy inference equals the batch forward, on 2 to 16 devices") {
  for (const Eigen::Index devices : {2, 4, 8, 16}) {
    INFO("devices = " << devices);
    embplan::rng gen(static_cast<std::uint64_t>(devices));
    const auto m = nn::make_dreamshard_model(21, 4, 77);
    const matrix features = nn_test::random_matrix(24, 21, gen);
    rl::dreamshard_policy_state state;
    state.reset(m, features, devices);
    device_tables tables(static_cast<std::size_t>(devices));
    rl::dreamshard_policy_tape inc;
    rl::dreamshard_policy_tape full;
    std::vector<std::int64_t> a_inc;
    std::vector<std::int64_t> a_full;
    for (Eigen::Index t = 0; t < features.rows(); ++t) {
      std::vector<std::int64_t> legal;
      for (std::int64_t d = 0; d < devices; ++d)
        if (t % 3 != 0 || d % 2 == 0) legal.push_back(d);  // some steps mask devices
      state.score(m, legal, inc);
      const auto b = build(features, {{tables, legal}});
      rl::dreamshard_policy_forward(m, b, full);
      CHECK(max_abs_diff(inc.logits, full.logits) < 1e-4);
      const std::vector<std::int64_t> one_group(legal.size(), 0);
      rl::ragged_argmax(inc.logits, one_group, 1, a_inc);
      rl::ragged_argmax(full.logits, one_group, 1, a_full);
      CHECK(a_inc == a_full);
      const auto d = legal[static_cast<std::size_t>(a_inc[0])];
      state.place(t, d);
      tables[static_cast<std::size_t>(d)].push_back(t);
    }
    std::int64_t placed = 0;
    for (Eigen::Index d = 0; d < devices; ++d)
      placed += state.tables_on(d);
    CHECK(placed == features.rows());
  }
}

TEST_CASE("same model and batch, same logits and gradients") {
  const auto m = nn::make_dreamshard_model(5, 4, 12);
  embplan::rng g1(4);
  embplan::rng g2(4);
  const matrix f1 = nn_test::random_matrix(6, 5, g1);
  const matrix f2 = nn_test::random_matrix(6, 5, g2);
  const auto b1 = random_batch(f1, g1);
  const auto b2 = random_batch(f2, g2);
  rl::dreamshard_policy_tape t1;
  rl::dreamshard_policy_tape t2;
  rl::dreamshard_policy_forward(m, b1, t1);
  rl::dreamshard_policy_forward(m, b2, t2);
  CHECK(t1.logits == t2.logits);
}

TEST_CASE("policy network: bad input names the field and the value") {
  embplan::rng gen(3);
  const auto m = nn::make_dreamshard_model(5, 4, 1);
  const matrix features = nn_test::random_matrix(4, 5, gen);
  const auto good = build(features, {{{{0}, {1}, {}, {}}, {0, 2}}, {{{0}, {1, 2}, {}, {}}, {1}}});
  rl::dreamshard_policy_tape t;
  const auto forward = [&](const rl::dreamshard_obs_batch& b) {
    return message_of([&] { rl::dreamshard_policy_forward(m, b, t); });
  };

  auto b = good;
  b.features = matrix::Zero(good.features.rows(), 7);
  CHECK(forward(b).find("dreamshard_obs_batch.features' = \"[4, 7]\"") != std::string::npos);
  b = good;
  b.slot_of.pop_back();
  CHECK(forward(b).find("dreamshard_obs_batch.slot_of.size' = 3") != std::string::npos);
  b = good;
  b.slot_of[1] = 9;
  CHECK(forward(b).find("dreamshard_obs_batch.slot_of[1]' = 9") != std::string::npos);
  b = good;
  b.slot_of[1] = 0;  // slot 1 (device 2 of observation 0) left without a row
  CHECK(forward(b).find("dreamshard_obs_batch.slot_rows[1]' = 0") != std::string::npos);
  b = good;
  b.group_of[2] = -3;
  CHECK(forward(b).find("dreamshard_obs_batch.group_of[2]' = -3") != std::string::npos);
  b = good;
  b.groups = 3;
  CHECK(forward(b).find("dreamshard_obs_batch.group_size[2]' = 0") != std::string::npos);
  b = good;
  b.groups = 0;
  CHECK(forward(b).find("dreamshard_obs_batch.groups' = 0") != std::string::npos);
  b = good;
  b.features(2, 3) = std::numeric_limits<float>::quiet_NaN();
  CHECK(forward(b).find("dreamshard_obs_batch.features[2, 3]' = nan") != std::string::npos);

  // Backward: the upstream gradient's shape, and a tape from another batch.
  rl::dreamshard_policy_forward(m, good, t);
  nn::dreamshard_model grad(5, 4);
  auto msg =
      message_of([&] { rl::dreamshard_policy_backward(m, good, t, matrix::Zero(2, 1), grad); });
  CHECK(msg.find("dreamshard_policy_backward.logits_grad' = \"[2, 1]\"") != std::string::npos);
  rl::dreamshard_policy_tape fresh;
  msg =
      message_of([&] { rl::dreamshard_policy_backward(m, good, fresh, matrix::Zero(3, 1), grad); });
  CHECK(msg.find("dreamshard_policy_backward.tape' = \"[0, 0]\"") != std::string::npos);

  // Single-table costs.
  std::vector<double> cost;
  msg = message_of([&] { rl::dreamshard_single_table_costs(m, matrix::Zero(3, 4), cost); });
  CHECK(msg.find("dreamshard_single_table.features' = \"[3, 4]\"") != std::string::npos);

  // The builder.
  rl::dreamshard_obs_builder builder(5);
  const device_tables tables = {{0}, {1}, {}, {}};
  msg = message_of([&] { builder.add(features, tables, std::vector<std::int64_t>{0, 4}); });
  CHECK(msg.find("dreamshard_obs_builder.devices[1]' = 4") != std::string::npos);
  msg = message_of([&] { builder.add(features, tables, std::vector<std::int64_t>{}); });
  CHECK(msg.find("dreamshard_obs_builder.devices.size' = 0") != std::string::npos);
  msg = message_of([&] {
    builder.add(features, device_tables{{0}, {6}, {}, {}}, std::vector<std::int64_t>{1});
  });
  CHECK(msg.find("dreamshard_obs_builder.device_tables[1]' = 6") != std::string::npos);
  msg = message_of([&] { rl::dreamshard_obs_builder bad(0); });
  CHECK(msg.find("dreamshard_obs_builder.features' = 0") != std::string::npos);

  // The incremental state.
  rl::dreamshard_policy_state state;
  msg = message_of([&] { state.reset(m, features, 0); });
  CHECK(msg.find("dreamshard_policy_state.devices' = 0") != std::string::npos);
  msg = message_of([&] { state.reset(m, matrix::Zero(4, 6), 4); });
  CHECK(msg.find("dreamshard_policy_state.features' = \"[4, 6]\"") != std::string::npos);
  state.reset(m, features, 4);
  msg = message_of([&] { state.place(4, 0); });
  CHECK(msg.find("dreamshard_policy_state.table' = 4") != std::string::npos);
  msg = message_of([&] { state.place(0, 5); });
  CHECK(msg.find("dreamshard_policy_state.device' = 5") != std::string::npos);
  msg = message_of([&] { state.score(m, std::vector<std::int64_t>{1, -1}, t); });
  CHECK(msg.find("dreamshard_policy_state.devices[1]' = -1") != std::string::npos);
  msg = message_of([&] { state.score(m, std::vector<std::int64_t>{}, t); });
  CHECK(msg.find("dreamshard_policy_state.devices.size' = 0") != std::string::npos);
}
