#include "embplan/rl/policy_searcher.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/dreamshard_cost.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/dreamshard_cost_net.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "embplan/rl/dreamshard_policy_net.hpp"
#include "embplan/rl/ragged_softmax.hpp"
#include "support/message_of.hpp"
#include "support/random_task.hpp"

using embplan::test::message_of;
namespace rl = embplan::rl;
namespace nn = embplan::nn;

namespace {

using dreamshard_planner =
    embplan::planner<embplan::analytic_cost, rl::policy_searcher<rl::dreamshard_policy>,
                     embplan::memory_capacity, embplan::neg_max_cost_reward>;

dreamshard_planner make_planner(const rl::dreamshard_policy& policy, std::int64_t samples = 0) {
  return dreamshard_planner({}, {policy, {.samples = samples}}, {}, {});
}

// Algorithm 2 written out on the batch forward (the authors' sharders.py
// `dreamshard`: the observation of the legal devices, argmax).
std::vector<std::size_t> reference_plan(const rl::dreamshard_policy& policy,
                                        const embplan::task& t) {
  const auto& m = policy.network();
  const auto x = embplan::dreamshard_task_features(t);
  std::vector<double> keys;
  rl::dreamshard_single_table_costs(m, x, keys);
  const auto order = rl::descending_order(keys);
  std::vector<std::vector<std::int64_t>> on(t.cluster.size());
  std::vector<std::uint64_t> used(t.cluster.size(), 0);
  std::vector<std::size_t> assignment(t.tables.size());
  for (const auto table : order) {
    std::vector<std::int64_t> legal;
    const auto bytes = embplan::table_bytes(t.tables[table]);
    for (std::size_t d = 0; d < t.cluster.size(); ++d)
      if (used[d] + bytes <= t.cluster.devices[d].memory_bytes)
        legal.push_back(static_cast<std::int64_t>(d));
    if (legal.empty()) return {};  // stuck: no plan
    rl::dreamshard_obs_builder builder(21);
    builder.add(x, on, legal);
    rl::dreamshard_obs_batch b;
    builder.build(b);
    rl::dreamshard_policy_tape tape;
    rl::dreamshard_policy_forward(m, b, tape);
    std::vector<std::int64_t> pick;
    rl::ragged_argmax(tape.logits, b.group_of, 1, pick);
    const auto d = static_cast<std::size_t>(legal[static_cast<std::size_t>(pick[0])]);
    assignment[table] = d;
    on[d].push_back(table);
    used[d] += bytes;
  }
  return assignment;
}

std::vector<std::size_t> devices_of(const embplan::plan& p) {
  std::vector<std::size_t> out(p.shards.size());
  for (const auto& s : p.shards)
    out[s.table] = s.device;
  return out;
}

}  // namespace

static_assert(embplan::searcher<rl::policy_searcher<rl::dreamshard_policy>>);
static_assert(embplan::searcher_uses_reward<rl::policy_searcher<rl::dreamshard_policy>>);

TEST_CASE(
    "greedy inference places tables as Algorithm 2 on the batch forward, on 2, 4, 8, 16 devices") {
  const auto policy = rl::dreamshard_policy::untrained(21);
  int planned = 0;
  for (const std::size_t devices : {2u, 4u, 8u, 16u}) {
    CAPTURE(devices);
    for (std::uint64_t seed = 0; seed < 3; ++seed) {
      const auto t = embplan_test::tight_task(seed + 10 * devices, 3 * devices + 5, devices, 0.5);
      const auto r = make_planner(policy)(t, seed);
      const auto expected = reference_plan(policy, t);
      CHECK(r.ok == !expected.empty());
      if (!r.ok) continue;
      ++planned;
      // The planner already replayed the plan through the constraint; check it again.
      embplan::validate(t, r.placement);
      CHECK(devices_of(r.placement) == expected);
    }
  }
  CHECK(planned >= 10);
}

TEST_CASE("equal logits go to the lowest legal device (torch.argmax)") {
  auto m = nn::make_dreamshard_model(21, 4, 3);
  m.policy_net.weight.setZero();
  const rl::dreamshard_policy policy(m);
  const auto t = embplan_test::search_task(1, 9, 3, std::uint64_t{4} << 30);  // roomy
  const auto r = make_planner(policy)(t);
  REQUIRE(r.ok);
  for (const auto& s : r.placement.shards)
    CHECK(s.device == 0);
  // Memory for three tables a device: device 0 fills first, then 1, then 2.
  auto tight = t;
  for (auto& s : tight.tables) {
    s.rows = 1000;
    s.dim = 16;
  }
  for (auto& d : tight.cluster.devices)
    d.memory_bytes = 3 * 1000 * 16 * 4;
  const auto q = make_planner(policy)(tight);
  REQUIRE(q.ok);
  std::vector<int> count(3, 0);
  for (const auto& s : q.placement.shards)
    ++count[s.device];
  CHECK(count == std::vector<int>{3, 3, 3});
}

TEST_CASE("best of k: sampled episodes, the best by the planner's reward, seeded") {
  const auto policy = rl::dreamshard_policy::untrained(4);
  const auto t = embplan_test::tight_task(7, 24, 4, 0.7);
  const auto greedy = make_planner(policy)(t, 1);
  const auto best = make_planner(policy, 16)(t, 1);
  REQUIRE(greedy.ok);
  REQUIRE(best.ok);
  CHECK(best.reward >= greedy.reward);
  CHECK(best.evaluations == 17);
  CHECK(make_planner(policy, 16)(t, 1).placement == best.placement);
  const auto bad = message_of([&] { make_planner(policy, -1)(t); });
  CHECK(bad.find("policy_search_options.samples") != std::string::npos);
  CHECK(bad.find("= -1") != std::string::npos);
}

TEST_CASE("a const planner serves several threads: same plans as one thread") {
  const auto planner = make_planner(rl::dreamshard_policy::untrained(5), 3);
  std::vector<embplan::task> tasks;
  for (std::uint64_t s = 0; s < 8; ++s)
    tasks.push_back(embplan_test::tight_task(s, 20, 4, 0.8));
  std::vector<embplan::plan> serial;
  for (std::size_t i = 0; i < tasks.size(); ++i)
    serial.push_back(planner(tasks[i], i).placement);
  std::vector<embplan::plan> parallel(tasks.size());
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (std::size_t i = k; i < tasks.size(); i += 4)
        parallel[i] = planner(tasks[i], i).placement;
    });
  }
  for (auto& th : threads)
    th.join();
  CHECK(parallel == serial);
}

TEST_CASE("an infeasible task: not ok, the failure names the table and each device's free memory") {
  auto t = embplan_test::search_task(2, 4, 2);
  for (auto& d : t.cluster.devices)
    d.memory_bytes = 1000;
  const auto r = make_planner(rl::dreamshard_policy::untrained(1))(t);
  CHECK_FALSE(r.ok);
  CHECK(make_planner(rl::dreamshard_policy::untrained(1)).searcher().name() == "dreamshard");
  CHECK(r.failure.find("fits on no device under memory capacity") != std::string::npos);
  CHECK(r.failure.find("0: 1000 bytes, 1: 1000 bytes") != std::string::npos);
}

TEST_CASE("policy files: save / load gives the same logits and plans; bad files are named") {
  rl::dreamshard_policy_metadata meta;
  meta.cost.meter = "cpu";
  meta.cost.pool_half = "train";
  meta.hyperparameters["iterations"] = "10";
  meta.learning_curve = {3.5, 2.25, 0.1};
  const rl::dreamshard_policy policy(nn::make_dreamshard_model(21, 4, 8), meta);
  const auto path = std::filesystem::temp_directory_path() / "embplan_mdp_policy.safetensors";
  policy.save(path);
  const auto back = rl::dreamshard_policy::load(path);
  CHECK(back.metadata().cost.meter == "cpu");
  CHECK(back.metadata().cost.pool_half == "train");
  CHECK(back.metadata().hyperparameters.at("iterations") == "10");
  CHECK(back.metadata().learning_curve == meta.learning_curve);

  const auto t = embplan_test::tight_task(3, 30, 8, 0.6);
  CHECK(make_planner(back)(t).placement == make_planner(policy)(t).placement);
  // Logits and probabilities of a mid-episode state, bit for bit.
  rl::dreamshard_context a, b;
  policy.prepare(t, a);
  back.prepare(t, b);
  std::vector<std::uint32_t> order;
  policy.order(a, order);
  rl::placement_mdp mdp(t, rl::no_cost_source{}, embplan::memory_capacity{}, order);
  for (int k = 0; k < 10; ++k)
    mdp.step(mdp.legal()[static_cast<std::size_t>(k) % mdp.legal().size()]);
  std::vector<double> la, lb;
  policy.logits(mdp.view(), a, la);
  back.logits(mdp.view(), b, lb);
  CHECK(la.size() == mdp.legal().size());
  CHECK(la == lb);

  SUBCASE("NaN in a checkpoint") {
    auto f = nn::state_dict(policy.network());
    f.tensors["policy_net.weight"].values[7] = std::numeric_limits<float>::quiet_NaN();
    embplan::io::write_safetensors(path, f);
    const auto msg = message_of([&] { rl::dreamshard_policy::load(path); });
    CHECK(msg.find("policy_net.weight") != std::string::npos);
    CHECK(msg.find("nan") != std::string::npos);
  }
  SUBCASE("another architecture") {
    auto f = nn::state_dict(policy.network());
    f.tensors["cost_fc_1.weight"] =
        embplan::io::tensor{"F32", {16, 64}, std::vector<float>(16 * 64)};
    embplan::io::write_safetensors(path, f);
    const auto msg = message_of([&] { rl::dreamshard_policy::load(path); });
    CHECK(msg.find("cost_fc_1.weight") != std::string::npos);
    CHECK(msg.find("[16, 64]") != std::string::npos);
  }
  SUBCASE("a bad learning curve") {
    auto f = nn::state_dict(policy.network(), {}, {{"embplan.learning_curve", "1.5,x"}});
    embplan::io::write_safetensors(path, f);
    const auto msg = message_of([&] { rl::dreamshard_policy::load(path); });
    CHECK(msg.find("metadata.embplan.learning_curve") != std::string::npos);
    CHECK(msg.find("\"x\"") != std::string::npos);
  }
  SUBCASE("a context of another task") {
    const auto other = embplan_test::tight_task(4, 12, 8, 0.6);
    rl::dreamshard_context c;
    policy.prepare(other, c);
    const auto msg = message_of([&] { policy.logits(mdp.view(), c, la); });
    CHECK(msg.find("dreamshard_policy.context") != std::string::npos);
    CHECK(msg.find("= 12") != std::string::npos);
  }
  std::filesystem::remove(path);
}
