#include "embplan/rl/autoshard_train.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/module.hpp"
#include "support/message_of.hpp"
#include "support/random_task.hpp"

namespace autoshard_train_test {

using embplan::test::message_of;
namespace rl = embplan::rl;
namespace nn = embplan::nn;

// The analytic model, counting the shards it prices (copies share the count).
struct counting_meter {
  embplan::analytic_cost model{};
  std::shared_ptr<std::atomic<std::int64_t>> calls = std::make_shared<std::atomic<std::int64_t>>(0);

  std::string_view name() const noexcept { return "counting"; }
  double shard_cost(const embplan::task& t, const embplan::shard& s) const {
    return model.shard_cost(t, s);
  }
  embplan::compute_cost compute(const embplan::task& t, std::span<const embplan::shard> group,
                                std::size_t device) const {
    ++*calls;
    return model.compute(t, group, device);
  }
  void communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<embplan::comm_cost> out) const {
    model.communication(t, dim_sum, start_ms, out);
  }
};

std::vector<embplan::task> small_tasks(std::uint64_t seed, std::size_t count, std::size_t tables,
                                       std::size_t devices) {
  std::vector<embplan::task> out;
  for (std::size_t i = 0; i < count; ++i)
    out.push_back(embplan_test::search_task(seed + i, tables, devices));
  return out;
}

rl::autoshard_train_options quick(std::int64_t updates) {
  rl::autoshard_train_options o;
  o.updates = updates;
  o.batch = 4;
  o.cost_updates = 3;
  o.cost_batch = 16;
  o.seed = 5;
  return o;
}

bool same_net(const nn::autoshard_net& a, const nn::autoshard_net& b) {
  const auto pa = a.named_parameters();
  const auto pb = b.named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i)
    if (*pa[i].second != *pb[i].second) return false;
  return true;
}

}  // namespace autoshard_train_test

using namespace autoshard_train_test;

TEST_CASE("autoshard train: same seed, same policy, whatever the actor threads or a resume") {
  const auto tasks = small_tasks(40, 3, 12, 3);
  const embplan::analytic_cost meter{};
  auto o = quick(4);
  auto one = rl::autoshard_initial_state(tasks, o);
  rl::autoshard_train(tasks, meter, o, one);
  CHECK(one.updates_done == 4);
  CHECK(one.learning_curve.size() == 4);
  CHECK(one.episodes == 16);
  CHECK(!same_net(one.net, rl::autoshard_initial_state(tasks, o).net));

  auto threads = o;
  threads.actors = 3;
  auto three = rl::autoshard_initial_state(tasks, threads);
  rl::autoshard_train(tasks, meter, threads, three);
  CHECK(same_net(one.net, three.net));
  CHECK(one.learning_curve == three.learning_curve);

  // Two updates, a copy of the state, two more: as the uninterrupted run.
  auto part = rl::autoshard_initial_state(tasks, o);
  rl::autoshard_train(tasks, meter, o, part, embplan::all_of<>{}, {}, 2);
  CHECK(part.updates_done == 2);
  auto resumed = part;
  rl::autoshard_train(tasks, meter, o, resumed);
  CHECK(same_net(one.net, resumed.net));
  CHECK(one.learning_curve == resumed.learning_curve);

  // On-policy (no lag) is another schedule: another policy.
  auto on = o;
  on.policy_lag = 0;
  auto zero = rl::autoshard_initial_state(tasks, on);
  rl::autoshard_train(tasks, meter, on, zero);
  CHECK(!same_net(one.net, zero.net));
}

TEST_CASE("autoshard train: the degree of balance rises on a small problem") {
  const auto tasks = small_tasks(70, 4, 16, 4);
  const embplan::analytic_cost meter{};
  auto o = quick(40);
  o.batch = 8;
  o.cost_updates = 5;
  o.cost_batch = 64;
  o.learning_rate = 3e-3;
  auto st = rl::autoshard_initial_state(tasks, o);
  std::vector<rl::autoshard_progress> seen;
  rl::autoshard_train(tasks, meter, o, st, embplan::all_of<>{},
                      [&](const rl::autoshard_progress& p) { seen.push_back(p); });
  REQUIRE(seen.size() == 40);
  CHECK(seen.back().update == 39);
  CHECK(seen.back().episodes == 320);
  const auto mean = [&](std::size_t from, std::size_t to) {
    double s = 0.0;
    for (std::size_t i = from; i < to; ++i)
      s += st.learning_curve[i];
    return s / static_cast<double>(to - from);
  };
  MESSAGE("balance first 8 updates " << mean(0, 8) << ", last 8 " << mean(32, 40));
  CHECK(mean(32, 40) > mean(0, 8) + 0.05);
  // The cost head learned the measured latencies: its loss fell.
  CHECK(seen.back().cost_loss < seen[1].cost_loss);
}

TEST_CASE("autoshard train: a plan that overflows memory is penalised, not measured") {
  // Two devices that each hold a bit over half the tables' bytes: most random
  // plans overflow one of them.
  auto tasks = std::vector<embplan::task>{embplan_test::tight_task(3, 10, 2, 0.95)};
  const counting_meter meter{};
  auto o = quick(1);
  o.batch = 16;
  o.policy_lag = 0;
  const auto policy = rl::autoshard_policy::untrained(1, rl::autoshard_feature_stats::of(tasks));
  const auto batch =
      rl::detail::autoshard_play(tasks, meter, embplan::all_of<>{}, o, policy, 0, 0, 1);
  std::int64_t fits = 0;
  for (const auto& s : batch) {
    CHECK(s.trajectory.reward.back() == s.reward);
    CHECK(std::accumulate(s.trajectory.reward.begin(), s.trajectory.reward.end() - 1, 0.0) == 0.0);
    if (s.fits) {
      ++fits;
      CHECK(s.reward == doctest::Approx(s.balance));
      CHECK(s.reward >= 0.0);
      CHECK(s.shard_ms.size() == s.shard_tables.size());
    } else {
      CHECK(s.reward < 0.0);
      CHECK(s.shard_ms.empty());
    }
  }
  CHECK(fits < 16);
  CHECK(*meter.calls == 2 * fits);  // two devices measured per plan that fits
  // Under the memory rule (masked actions) every plan fits.
  const auto masked =
      rl::detail::autoshard_play(tasks, meter, embplan::memory_capacity{}, o, policy, 0, 0, 1);
  for (const auto& s : masked)
    CHECK(s.fits);
}

TEST_CASE("autoshard train: bad options, states and players name the field") {
  const auto tasks = small_tasks(1, 1, 6, 2);
  const embplan::analytic_cost meter{};
  const auto bad = [&](auto edit, const std::string& want) {
    auto o = quick(2);
    edit(o);
    const auto msg = message_of([&] { (void)rl::autoshard_initial_state(tasks, o); });
    CHECK_MESSAGE(msg.find(want) != std::string::npos, msg);
  };
  bad([](auto& o) { o.updates = 0; }, "'autoshard_train_options.updates' = 0");
  bad([](auto& o) { o.batch = -1; }, "'autoshard_train_options.batch' = -1");
  bad([](auto& o) { o.actors = 0; }, "'autoshard_train_options.actors' = 0");
  bad([](auto& o) { o.policy_lag = -2; }, "'autoshard_train_options.policy_lag' = -2");
  bad([](auto& o) { o.cost_buffer = 0; }, "'autoshard_train_options.cost_buffer' = 0");
  bad([](auto& o) { o.learning_rate = 0.0; }, "'autoshard_train_options.learning_rate' = 0");
  bad([](auto& o) { o.memory_penalty_weight = -1.0; },
      "'autoshard_train_options.memory_penalty_weight' = -1");
  bad([](auto& o) { o.learner.max_grad_norm = -3.0; },
      "'autoshard_train_options.learner.max_grad_norm' = -3");
  bad([](auto& o) { o.learner.impala.gamma = 2.0; }, "'impala_options.gamma' = 2");
  CHECK(message_of([&] {
          (void)rl::autoshard_initial_state({}, quick(2));
        }).find("'autoshard_train.tasks.size' = 0") != std::string::npos);

  auto o = quick(2);
  auto st = rl::autoshard_initial_state(tasks, o);
  auto broken = st;
  broken.history.clear();
  CHECK(message_of([&] {
          rl::autoshard_train(tasks, meter, o, broken);
        }).find("'autoshard_train_state.history.size' = 0") != std::string::npos);
  broken = st;
  broken.updates_done = 3;
  CHECK(message_of([&] {
          rl::autoshard_train(tasks, meter, o, broken);
        }).find("'autoshard_train_state.updates_done' = 3") != std::string::npos);
  CHECK(message_of([&] {
          rl::autoshard_train(tasks, meter, o, st, embplan::all_of<>{}, {}, -1);
        }).find("'autoshard_train.max_updates' = -1") != std::string::npos);
  const rl::autoshard_player short_player{
      .play = [](const rl::autoshard_policy&,
                 std::int64_t) { return std::vector<rl::autoshard_sample>(1); },
      .concurrent = false};
  CHECK(message_of([&] {
          rl::autoshard_train(tasks, short_player, o, st);
        }).find("'autoshard_player.play.size' = 1") != std::string::npos);
  const rl::autoshard_player failing{
      .play = [](const rl::autoshard_policy&, std::int64_t) -> std::vector<rl::autoshard_sample> {
        throw embplan::error("actor 2: the meter failed");
      },
      .concurrent = true};
  CHECK(message_of([&] {
          rl::autoshard_train(tasks, failing, o, st);
        }).find("actor 2: the meter failed") != std::string::npos);
  CHECK(st.updates_done == 0);
}

TEST_CASE("autoshard train: a checkpoint file resumes bit-equal; another run's is refused") {
  const auto dir = std::filesystem::temp_directory_path() / "embplan_autoshard_train_test";
  std::filesystem::create_directories(dir);
  const auto tasks = small_tasks(90, 3, 10, 3);
  const embplan::analytic_cost meter{};
  auto o = quick(5);
  o.cost_buffer = 11;  // the ring wraps before the save
  o.policy_lag = 2;
  auto whole = rl::autoshard_initial_state(tasks, o);
  rl::autoshard_train(tasks, meter, o, whole);

  auto part = rl::autoshard_initial_state(tasks, o);
  rl::autoshard_train(tasks, meter, o, part, embplan::all_of<>{}, {}, 3);
  REQUIRE(part.buffer.size() == 11);
  CHECK(part.buffer.next_slot() != 0);
  rl::save_checkpoint(dir / "c.safetensors", part, o);
  auto back = rl::load_checkpoint(dir / "c.safetensors", o);
  CHECK(back.updates_done == 3);
  CHECK(back.history.size() == 3);
  CHECK(back.buffer.next_slot() == part.buffer.next_slot());
  CHECK(back.learning_curve == part.learning_curve);
  CHECK(back.optimizer.parameter_steps() == part.optimizer.parameter_steps());
  rl::autoshard_train(tasks, meter, o, back);
  CHECK(same_net(whole.net, back.net));
  CHECK(whole.learning_curve == back.learning_curve);
  CHECK(whole.running_balance == back.running_balance);

  auto other = o;
  other.learner.impala.entropy_cost = 0.01;
  CHECK(message_of([&] {
          (void)rl::load_checkpoint(dir / "c.safetensors", other);
        }).find("metadata.embplan.train.entropy_cost' = \"0.001") != std::string::npos);
  // A buffer whose group sizes overrun the stacked rows (or overflow): refused.
  auto file = embplan::io::read_safetensors(dir / "c.safetensors");
  file.metadata["embplan.train.buffer"] =
      R"({"offset": [9000000000000000000, 9000000000000000000], "cost": [1, 2], "next": 0})";
  embplan::io::write_safetensors(dir / "bad.safetensors", file);
  CHECK(message_of([&] {
          (void)rl::load_checkpoint(dir / "bad.safetensors", o);
        }).find("metadata.embplan.train.buffer.offset' = 9000000000000000000") !=
        std::string::npos);
  rl::autoshard_policy::untrained(1).save(dir / "p.safetensors");
  CHECK(message_of([&] {
          (void)rl::load_checkpoint(dir / "p.safetensors", o);
        }).find("metadata.embplan.checkpoint' = \"(none)\"") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("autoshard train: a checkpoint records its inputs; a resume with others is refused") {
  const auto dir = std::filesystem::temp_directory_path() / "embplan_autoshard_inputs_test";
  std::filesystem::create_directories(dir);
  const auto tasks = small_tasks(90, 3, 10, 3);
  const embplan::analytic_cost meter{};
  const auto o = quick(2);
  auto st = rl::autoshard_initial_state(tasks, o);
  rl::autoshard_train(tasks, meter, o, st, embplan::all_of<>{}, {}, 1);
  const rl::train_inputs started{{"--meter", "cpu"}, {"--tasks", "fnv1a64:0123456789abcdef"}};
  rl::save_checkpoint(dir / "c.safetensors", st, o, started);
  CHECK(rl::load_checkpoint(dir / "c.safetensors", o, started).updates_done == 1);
  auto other = started;
  other["--tasks"] = "fnv1a64:fedcba9876543210";
  const auto msg = message_of([&] { (void)rl::load_checkpoint(dir / "c.safetensors", o, other); });
  CHECK(msg.find("field '--tasks' = \"fnv1a64:fedcba9876543210\": expected "
                 "\"fnv1a64:0123456789abcdef\", what the checkpoint") != std::string::npos);
  // The inputs are compared before the options: the message names the input.
  auto later = o;
  later.seed = 9;
  CHECK(message_of([&] {
          (void)rl::load_checkpoint(dir / "c.safetensors", later, other);
        }).find("'--tasks'") != std::string::npos);
  std::filesystem::remove_all(dir);
}
