#include "embplan/rl/autoshard.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/planner.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/rl/autoshard_net.hpp"
#include "embplan/rl/placement_mdp.hpp"
#include "embplan/rl/policy_searcher.hpp"
#include "support/message_of.hpp"
#include "support/random_task.hpp"

namespace autoshard_policy_test {

using embplan::test::message_of;
namespace rl = embplan::rl;
namespace nn = embplan::nn;

// The step's inputs written out from scratch, as the authors' GymWrapper
// builds them, for rl::autoshard_inference (the network's plain forward).
struct reference_inputs {
  nn::matrix table, state_other, held, other;
  std::vector<std::int64_t> counts;
};

reference_inputs reference_step(const rl::autoshard_policy& p, const embplan::task& t,
                                const nn::matrix& x, const rl::mdp_view& v) {
  reference_inputs in;
  const auto table = static_cast<Eigen::Index>(v.order[v.step]);
  in.table = x.row(table);
  in.state_other = nn::matrix::Constant(
      1, 1, static_cast<float>(static_cast<double>(v.step) / static_cast<double>(v.order.size())));
  Eigen::Index rows = 0;
  for (const auto d : v.legal)
    rows += static_cast<Eigen::Index>((*v.tables_on)[d].size()) + 1;
  in.held.resize(rows, x.cols());
  in.other.resize(static_cast<Eigen::Index>(v.legal.size()), 2);
  rl::autoshard_inference inf(p.network());
  Eigen::Index r = 0;
  for (std::size_t k = 0; k < v.legal.size(); ++k) {
    const auto& on = (*v.tables_on)[v.legal[k]];
    double gib = 0.0;
    nn::matrix latent_sum = nn::matrix::Zero(1, 32);
    for (const auto tab : on) {
      in.held.row(r++) = x.row(tab);
      nn::matrix e;
      inf.table_latent(x.row(tab), e);
      latent_sum += e;
      gib += static_cast<double>(embplan::table_bytes(t.tables[tab])) / (1024.0 * 1024.0 * 1024.0);
    }
    in.held.row(r++).setZero();
    in.counts.push_back(static_cast<std::int64_t>(on.size()) + 1);
    nn::matrix c;
    inf.cost(latent_sum, c);
    in.other(static_cast<Eigen::Index>(k), 0) = on.empty() ? 0.0f : c(0, 0);
    in.other(static_cast<Eigen::Index>(k), 1) = static_cast<float>(gib);
  }
  return in;
}

}  // namespace autoshard_policy_test

using namespace autoshard_policy_test;

TEST_CASE("autoshard policy: incremental logits equal the network's plain forward step by step") {
  const auto t = embplan_test::search_task(7, 14, 4);
  const std::vector<embplan::task> pool{t};
  const auto p = rl::autoshard_policy::untrained(3, rl::autoshard_feature_stats::of(pool));
  nn::matrix x;
  rl::autoshard_task_features(t, p.metadata().stats, x);
  rl::autoshard_context ctx;
  p.prepare(t, ctx);
  std::vector<std::uint32_t> order;
  p.order(ctx, order);
  // The order: single-table cost head, descending.
  rl::autoshard_inference ref(p.network());
  for (std::size_t k = 1; k < order.size(); ++k) {
    nn::matrix a, b, ca, cb;
    ref.table_latent(x.row(order[k - 1]), a);
    ref.table_latent(x.row(order[k]), b);
    ref.cost(a, ca);
    ref.cost(b, cb);
    CHECK(ca(0, 0) >= cb(0, 0));
  }
  rl::placement_mdp mdp(t, rl::no_cost_source{}, embplan::all_of<>{}, order);
  std::vector<double> logits;
  embplan::rng gen(11);
  ref.reset();
  while (!mdp.done()) {
    const auto v = mdp.view();
    p.logits(v, ctx, logits);
    const auto in = reference_step(p, t, x, v);
    const auto want = ref.step({.table = in.table,
                                .state_other = in.state_other,
                                .held_tables = in.held,
                                .shard_tables = in.counts,
                                .actions_other = in.other});
    REQUIRE(logits.size() == want.logits.size());
    for (std::size_t k = 0; k < logits.size(); ++k)
      CHECK(logits[k] == doctest::Approx(want.logits[k]).epsilon(1e-5));
    CHECK(ctx.value == doctest::Approx(want.value).epsilon(1e-5));
    mdp.step(mdp.legal()[static_cast<std::size_t>(gen.below(mdp.legal().size()))]);
  }
}

TEST_CASE("autoshard policy: a recorded episode replays to the same logits in the learner") {
  const auto t = embplan_test::tight_task(5, 12, 3, 0.7);
  const std::vector<embplan::task> pool{t};
  const auto p = rl::autoshard_policy::untrained(9, rl::autoshard_feature_stats::of(pool));
  rl::autoshard_context ctx;
  ctx.record = true;
  p.prepare(t, ctx);
  std::vector<std::uint32_t> order;
  p.order(ctx, order);
  // Memory masks devices: steps have fewer actions than devices.
  rl::placement_mdp mdp(t, rl::no_cost_source{}, embplan::memory_capacity{}, order);
  std::vector<double> all_logits, logits;
  std::vector<float> values;
  embplan::rng gen(2);
  bool masked = false;
  while (!mdp.done()) {
    p.logits(mdp.view(), ctx, logits);
    masked = masked || mdp.legal().size() < 3;
    all_logits.insert(all_logits.end(), logits.begin(), logits.end());
    values.push_back(ctx.value);
    REQUIRE(mdp.try_step(mdp.legal()[rl::detail::mdp_sample(logits, gen)]));
  }
  CHECK(masked);
  rl::autoshard_tape tape;
  rl::autoshard_forward(p.network(), ctx.episode, tape);
  REQUIRE(tape.logits.rows() == static_cast<Eigen::Index>(all_logits.size()));
  for (std::size_t k = 0; k < all_logits.size(); ++k)
    CHECK(tape.logits(static_cast<Eigen::Index>(k), 0) ==
          doctest::Approx(all_logits[k]).epsilon(1e-5));
  for (std::size_t s = 0; s < values.size(); ++s)
    CHECK(tape.values(static_cast<Eigen::Index>(s), 0) == doctest::Approx(values[s]).epsilon(1e-5));
}

TEST_CASE(
    "autoshard policy: as a searcher it places every table within memory, deterministically") {
  const auto t = embplan_test::tight_task(21, 30, 4, 0.8);
  const std::vector<embplan::task> pool{t};
  const auto p = rl::autoshard_policy::untrained(4, rl::autoshard_feature_stats::of(pool));
  const embplan::planner<embplan::analytic_cost, rl::policy_searcher<rl::autoshard_policy>,
                         embplan::memory_capacity, embplan::neg_max_cost_reward>
      planner({}, {.policy = p, .options = {.samples = 3}}, {}, {});
  const auto a = planner(t, 1);
  const auto b = planner(t, 1);
  REQUIRE(a.ok);
  CHECK(a.placement == b.placement);
  std::vector<std::uint64_t> used(4, 0);
  for (const auto& s : a.placement.shards)
    used[s.device] += embplan::shard_bytes(t, s);
  for (std::size_t d = 0; d < 4; ++d)
    CHECK(used[d] <= t.cluster.devices[d].memory_bytes);
  // Any device count: the same policy on 9 devices.
  const auto wide = embplan_test::search_task(22, 40, 9);
  CHECK(planner(wide, 0).ok);
}

TEST_CASE("autoshard policy: a file round-trips; another policy's or architecture's is refused") {
  const auto dir = std::filesystem::temp_directory_path() / "embplan_autoshard_policy_test";
  std::filesystem::create_directories(dir);
  const auto t = embplan_test::search_task(1, 10, 3);
  const std::vector<embplan::task> pool{t};
  rl::autoshard_policy_metadata meta{.stats = rl::autoshard_feature_stats::of(pool),
                                     .meter = "analytic",
                                     .hyperparameters = {{"batch", "8"}},
                                     .learning_curve = {0.25, 0.5}};
  const rl::autoshard_policy p(rl::make_autoshard_net(6), meta);
  p.save(dir / "p.safetensors");
  const auto q = rl::autoshard_policy::load(dir / "p.safetensors");
  CHECK(q.metadata().stats.mean == meta.stats.mean);
  CHECK(q.metadata().stats.stdev == meta.stats.stdev);
  CHECK(q.metadata().meter == "analytic");
  CHECK(q.metadata().hyperparameters.at("batch") == "8");
  CHECK(q.metadata().learning_curve == meta.learning_curve);
  rl::autoshard_context c1, c2;
  p.prepare(t, c1);
  q.prepare(t, c2);
  CHECK(c1.single_cost == c2.single_cost);

  auto file = nn::state_dict(p.network(), {}, rl::autoshard_policy::metadata_text(meta));
  file.metadata["embplan.policy"] = "dreamshard";
  CHECK(message_of([&] { (void)rl::autoshard_policy::from_file(file, "f"); }) ==
        "f: this is a DreamShard policy, expected an AutoShard policy");
  file.metadata["embplan.policy"] = "neuroshard";  // a kind not known here: named as it is
  CHECK(message_of([&] {
          (void)rl::autoshard_policy::from_file(file, "f");
        }).find("'f: metadata.embplan.policy' = \"neuroshard\"") != std::string::npos);
  // A network with 2 action features more: another architecture.
  nn::autoshard_net other(21, 1, 4);
  auto wide = nn::state_dict(other, {}, rl::autoshard_policy::metadata_text(meta));
  CHECK(message_of([&] {
          (void)rl::autoshard_policy::from_file(wide, "w");
        }).find("a_fc_0.weight") != std::string::npos);
  CHECK(message_of([&] {
          (void)rl::autoshard_policy(std::move(other));
        }).find("'autoshard_policy.net.(t_fc_0, s_fc_0, a_fc_0).in_features' = \"21, 1, 4\"") !=
        std::string::npos);
  auto stats = meta.stats;
  stats.stdev[1] = -1.0;
  CHECK(message_of([&] {
          (void)rl::autoshard_policy(rl::make_autoshard_net(1), {.stats = stats});
        }).find("'autoshard_feature_stats.stdev.rows' = -1") != std::string::npos);
  CHECK(message_of([&] {
          rl::autoshard_context ctx;
          rl::autoshard_policy{}.prepare(t, ctx);
        }).find("'autoshard_policy' = \"(empty)\"") != std::string::npos);
  std::filesystem::remove_all(dir);
}
