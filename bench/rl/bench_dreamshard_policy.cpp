// DreamShard's policy network (rl/dreamshard_policy_net.hpp) at the target
// inference size, 100 tables on 8 devices, 21 table features (goal:
// inference under 5 ms):
// - one policy forward over an observation of 100 placed tables on 8 devices;
// - a full greedy pass (Algorithm 2): order the tables by the cost branch's
//   single-table cost, then 100 steps, each scoring the 8 devices and placing
//   the table on the argmax. Two ways: a batch forward over the observation
//   rebuilt at every step (what the authors' code does), and the incremental
//   dreamshard_policy_state (table latents once, running per-device sums);
// - one REINFORCE step's forward + loss + backward over a batch of 10
//   episodes x 100 steps on 8 devices (N_episode = 10, App. B.4.1).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/nn/dreamshard_cost_net.hpp"
#include "embplan/rl/dreamshard_policy_net.hpp"
#include "embplan/rl/ragged_softmax.hpp"
#include "embplan/rl/reinforce.hpp"

namespace {

using embplan::nn::matrix;
namespace rl = embplan::rl;

constexpr Eigen::Index features_per_table = 21;

matrix random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  embplan::rng gen(seed);
  matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i)
    m.data()[i] = static_cast<float>(gen.uniform(-1.0, 1.0));
  return m;
}

std::vector<std::int64_t> all_devices(Eigen::Index devices) {
  std::vector<std::int64_t> d(static_cast<std::size_t>(devices));
  std::iota(d.begin(), d.end(), 0);
  return d;
}

// Env.reset's order: single-table cost, descending, stable.
std::vector<std::int64_t> table_order(const embplan::nn::dreamshard_model& m,
                                      const matrix& features) {
  std::vector<double> cost;
  rl::dreamshard_single_table_costs(m, features, cost);
  std::vector<std::int64_t> order(cost.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
    return cost[static_cast<std::size_t>(a)] > cost[static_cast<std::size_t>(b)];
  });
  return order;
}

void bm_policy_forward(benchmark::State& state) {
  const Eigen::Index tables = state.range(0);
  const Eigen::Index devices = state.range(1);
  const auto m = embplan::nn::make_dreamshard_model(features_per_table, devices, 1);
  const matrix features = random_matrix(tables, features_per_table, 2);
  std::vector<std::vector<std::int64_t>> on(static_cast<std::size_t>(devices));
  for (Eigen::Index t = 0; t < tables; ++t)
    on[static_cast<std::size_t>(t % devices)].push_back(t);
  rl::dreamshard_obs_builder builder(features_per_table);
  builder.add(features, on, all_devices(devices));
  rl::dreamshard_obs_batch b;
  builder.build(b);
  rl::dreamshard_policy_tape tape;
  for (auto _ : state) {
    rl::dreamshard_policy_forward(m, b, tape);
    benchmark::DoNotOptimize(tape.logits.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_greedy_inference_batch(benchmark::State& state) {
  const Eigen::Index tables = state.range(0);
  const Eigen::Index devices = state.range(1);
  const auto m = embplan::nn::make_dreamshard_model(features_per_table, devices, 1);
  const matrix features = random_matrix(tables, features_per_table, 2);
  const auto legal = all_devices(devices);
  const std::vector<std::int64_t> one_group(legal.size(), 0);
  rl::dreamshard_obs_builder builder(features_per_table);
  rl::dreamshard_obs_batch b;
  rl::dreamshard_policy_tape tape;
  std::vector<std::int64_t> action;
  for (auto _ : state) {
    const auto order = table_order(m, features);
    std::vector<std::vector<std::int64_t>> on(static_cast<std::size_t>(devices));
    for (const std::int64_t t : order) {
      builder.clear();
      builder.add(features, on, legal);
      builder.build(b);
      rl::dreamshard_policy_forward(m, b, tape);
      rl::ragged_argmax(tape.logits, one_group, 1, action);
      on[static_cast<std::size_t>(legal[static_cast<std::size_t>(action[0])])].push_back(t);
    }
    benchmark::DoNotOptimize(on.data());
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_greedy_inference_incremental(benchmark::State& state) {
  const Eigen::Index tables = state.range(0);
  const Eigen::Index devices = state.range(1);
  const auto m = embplan::nn::make_dreamshard_model(features_per_table, devices, 1);
  const matrix features = random_matrix(tables, features_per_table, 2);
  const auto legal = all_devices(devices);
  const std::vector<std::int64_t> one_group(legal.size(), 0);
  rl::dreamshard_policy_state policy;
  rl::dreamshard_policy_tape tape;
  std::vector<std::int64_t> action;
  for (auto _ : state) {
    policy.reset(m, features, devices);
    std::vector<double> cost;
    policy.single_table_costs(m, cost);
    std::vector<std::int64_t> order(cost.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
      return cost[static_cast<std::size_t>(a)] > cost[static_cast<std::size_t>(b)];
    });
    for (const std::int64_t t : order) {
      policy.score(m, legal, tape);
      rl::ragged_argmax(tape.logits, one_group, 1, action);
      policy.place(t, legal[static_cast<std::size_t>(action[0])]);
    }
    benchmark::DoNotOptimize(policy.tables_on(0));
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_reinforce_step(benchmark::State& state) {
  const Eigen::Index tables = state.range(0);
  const Eigen::Index devices = state.range(1);
  const Eigen::Index episodes = 10;
  const auto m = embplan::nn::make_dreamshard_model(features_per_table, devices, 1);
  const matrix features = random_matrix(tables, features_per_table, 2);
  const auto legal = all_devices(devices);
  // Round-robin episodes, every device a slot at every step.
  rl::dreamshard_obs_builder builder(features_per_table);
  std::vector<std::int64_t> actions;
  std::vector<double> rewards;
  for (Eigen::Index e = 0; e < episodes; ++e) {
    std::vector<std::vector<std::int64_t>> on(static_cast<std::size_t>(devices));
    for (Eigen::Index t = 0; t < tables; ++t) {
      const auto g = builder.add(features, on, legal);
      const auto d = (t + e) % devices;
      actions.push_back(g * devices + d);
      rewards.push_back(-1.0 - 0.1 * static_cast<double>(e));
      on[static_cast<std::size_t>(d)].push_back(t);
    }
  }
  rl::dreamshard_obs_batch b;
  builder.build(b);
  rl::dreamshard_policy_tape tape;
  embplan::nn::dreamshard_model grad(features_per_table, devices);
  matrix dlogits;
  for (auto _ : state) {
    embplan::nn::set_zero(grad);
    rl::dreamshard_policy_forward(m, b, tape);
    const double loss =
        rl::reinforce_loss(tape.logits, b.group_of, b.groups, actions, rewards, {}, &dlogits);
    rl::dreamshard_policy_backward(m, b, tape, dlogits, grad);
    benchmark::DoNotOptimize(loss);
  }
  state.counters["rows"] = static_cast<double>(b.features.rows());
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(bm_policy_forward)->Args({100, 8})->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_greedy_inference_batch)->Args({100, 8})->Unit(benchmark::kMillisecond);
BENCHMARK(bm_greedy_inference_incremental)
    ->Args({100, 8})
    ->Args({200, 8})
    ->Args({100, 4})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_reinforce_step)->Args({100, 8})->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
