#include "embplan/rl/dreamshard_train.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "embplan/rl/policy_searcher.hpp"
#include "support/message_of.hpp"
#include "support/random_task.hpp"

using embplan::test::message_of;
namespace rl = embplan::rl;
namespace nn = embplan::nn;

namespace {

// A meter whose costs are known: a table costs w = dim x pooling / 100 forward,
// 2w backward and dim / 20 communication on its device; the plan costs the max
// over devices of their sums.
struct fake_meter {
  rl::dreamshard_measurement operator()(const embplan::task& t, const embplan::plan& p) const {
    rl::dreamshard_measurement m;
    m.devices.resize(t.cluster.size());
    for (const auto& s : p.shards) {
      const auto& x = t.tables[s.table];
      const double w = 1e-2 * x.dim * x.pooling_factor;
      m.devices[s.device].fwd_ms += w;
      m.devices[s.device].bwd_ms += 2 * w;
      m.devices[s.device].comm_ms += 0.05 * x.dim;
    }
    for (const auto& d : m.devices)
      m.overall_ms = std::max(m.overall_ms, d.fwd_ms + d.bwd_ms + d.comm_ms);
    return m;
  }
};

constexpr rl::dreamshard_train_options tiny{.iterations = 3,
                                            .collect = 3,
                                            .cost_steps = 5,
                                            .cost_batch = 8,
                                            .rl_steps = 2,
                                            .episodes = 3,
                                            .seed = 42};

std::vector<embplan::task> small_tasks() {
  return {embplan_test::search_task(1, 8, 2), embplan_test::search_task(2, 10, 3)};
}

bool same_model(const nn::dreamshard_model& a, const nn::dreamshard_model& b) {
  const auto pa = a.named_parameters(std::string_view{});
  const auto pb = b.named_parameters(std::string_view{});
  for (std::size_t i = 0; i < pa.size(); ++i)
    if (!(*pa[i].second == *pb[i].second)) return false;
  return true;
}

rl::dreamshard_train_state train(const std::vector<embplan::task>& tasks,
                                 const rl::dreamshard_train_options& o) {
  auto st = rl::dreamshard_train_start(o);
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, o, st);
  return st;
}

}  // namespace

TEST_CASE("same seed, same policy, bit for bit; another seed, another policy") {
  const auto tasks = small_tasks();
  const auto a = train(tasks, tiny);
  const auto b = train(tasks, tiny);
  CHECK(a.iteration == 3);
  CHECK(a.buffer.size() == 9);
  CHECK(same_model(a.model, b.model));
  CHECK(a.learning_curve == b.learning_curve);
  CHECK(a.optimizer.steps() == 3 * (5 + 2));
  auto other = tiny;
  other.seed = 43;
  CHECK_FALSE(same_model(a.model, train(tasks, other).model));
  // Training moved the weights of both branches, and not value_net (no loss reaches it).
  const auto start = rl::dreamshard_train_start(tiny);
  CHECK_FALSE(start.model.table_fc_0.weight == a.model.table_fc_0.weight);
  CHECK_FALSE(start.model.rl_table_fc_0.weight == a.model.rl_table_fc_0.weight);
  CHECK_FALSE(start.model.policy_net.weight == a.model.policy_net.weight);
  CHECK(start.model.value_net.weight == a.model.value_net.weight);
}

TEST_CASE("resuming from a copy of the state gives the uninterrupted run, bit for bit") {
  const auto tasks = small_tasks();
  const auto whole = train(tasks, tiny);
  auto st = rl::dreamshard_train_start(tiny);
  std::vector<std::int64_t> seen;
  rl::dreamshard_train(
      std::span<const embplan::task>(tasks), fake_meter{}, tiny, st, embplan::memory_capacity{},
      [&](const rl::dreamshard_progress& p) { seen.push_back(p.iteration); }, 1);
  CHECK(st.iteration == 1);
  const auto checkpoint = st;  // e.g. kept between two calls of a long run
  auto resumed = checkpoint;
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, resumed,
                       embplan::memory_capacity{},
                       [&](const rl::dreamshard_progress& p) { seen.push_back(p.iteration); });
  CHECK(seen == std::vector<std::int64_t>{0, 1, 2});
  CHECK(resumed.iteration == 3);
  CHECK(same_model(resumed.model, whole.model));
  CHECK(resumed.learning_curve == whole.learning_curve);
  // A finished run does nothing more.
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, resumed);
  CHECK(resumed.iteration == 3);
}

TEST_CASE("a file checkpoint keeps model, iteration, curve and buffer; training goes on from it") {
  const auto tasks = small_tasks();
  auto st = rl::dreamshard_train_start(tiny);
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, st,
                       embplan::memory_capacity{}, {}, 2);
  const auto path = std::filesystem::temp_directory_path() / "embplan_mdp_checkpoint.safetensors";
  rl::save_checkpoint(path, st, tiny);
  auto back = rl::load_checkpoint(path, tiny);
  CHECK(back.iteration == 2);
  CHECK(same_model(back.model, st.model));
  CHECK(back.learning_curve == st.learning_curve);
  REQUIRE(back.buffer.size() == st.buffer.size());
  for (std::size_t r = 0; r < st.buffer.size(); ++r) {
    CHECK(back.buffer[r].task == st.buffer[r].task);
    CHECK(back.buffer[r].tables_on == st.buffer[r].tables_on);
    CHECK(back.buffer[r].measured.overall_ms == st.buffer[r].measured.overall_ms);
    CHECK(back.buffer[r].measured.devices[0].comm_ms == st.buffer[r].measured.devices[0].comm_ms);
  }
  // The trained policy in the checkpoint places as the in-memory one.
  const auto t = tasks[1];
  const rl::policy_searcher<rl::dreamshard_policy> a{rl::dreamshard_trained_policy(st, tiny), {}};
  const rl::policy_searcher<rl::dreamshard_policy> b{rl::dreamshard_trained_policy(back, tiny), {}};
  CHECK(a.search(t, embplan::analytic_cost{}, embplan::memory_capacity{},
                 embplan::neg_max_cost_reward{}, 0)
            .placement == b.search(t, embplan::analytic_cost{}, embplan::memory_capacity{},
                                   embplan::neg_max_cost_reward{}, 0)
                              .placement);
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, back);
  CHECK(back.iteration == 3);
  CHECK(back.learning_curve.size() == 3);
  CHECK(back.learning_curve[2] > 0.0);

  // Other options than the file's: named.
  auto other = tiny;
  other.cost_batch = 16;
  const auto msg = message_of([&] { rl::load_checkpoint(path, other); });
  CHECK(msg.find("metadata.embplan.train.cost_batch") != std::string::npos);
  CHECK(msg.find("\"8\"") != std::string::npos);
  // A policy file is not a checkpoint.
  rl::dreamshard_trained_policy(st, tiny).save(path);
  const auto not_checkpoint = message_of([&] { rl::load_checkpoint(path, tiny); });
  CHECK(not_checkpoint.find("metadata.embplan.train.iterations_done") != std::string::npos);
  CHECK(not_checkpoint.find("(missing)") != std::string::npos);
  std::filesystem::remove(path);
}

namespace {

std::size_t parameter_index(const nn::dreamshard_model& m, std::string_view name) {
  const auto params = m.named_parameters(std::string_view{});
  for (std::size_t i = 0; i < params.size(); ++i)
    if (params[i].first == name) return i;
  FAIL("no parameter " << name);
  return 0;
}

}  // namespace

TEST_CASE("Adam runs at LambdaLR's rate and steps each branch from its first gradient on") {
  const auto tasks = small_tasks();
  auto st = rl::dreamshard_train_start(tiny);
  CHECK(st.optimizer.lr() == tiny.lr);
  const auto steps_of = [&](std::string_view name) {
    return st.optimizer.parameter_steps().at(parameter_index(st.model, name));
  };
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, st,
                       embplan::memory_capacity{}, {}, 1);
  // Iteration 0 at lr x 1; the RL branch's state starts at its first update
  // (torch: .grad None through the 5 cost steps), value_net never has one.
  CHECK(st.optimizer.lr() == tiny.lr);
  CHECK(steps_of("table_fc_0.weight") == 5 + 2);
  CHECK(steps_of("overall_fc_1.bias") == 5 + 2);
  CHECK(steps_of("rl_table_fc_0.weight") == 2);
  CHECK(steps_of("cost_fc_1.bias") == 2);
  CHECK(steps_of("policy_net.weight") == 2);
  CHECK(steps_of("value_net.weight") == 0);
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, st,
                       embplan::memory_capacity{}, {}, 1);
  // Iteration 1 at lr x (1 - 1/3), the double LambdaLR hands to Adam; from
  // then on zero_grad keeps zero gradients, so both branches step every time.
  CHECK(st.optimizer.lr() == tiny.lr * (1.0 - 1.0 / 3.0));
  CHECK(steps_of("table_fc_0.weight") == 14);
  CHECK(steps_of("policy_net.weight") == 9);
  CHECK(steps_of("value_net.bias") == 0);
  CHECK(st.optimizer.steps() == 14);
}

TEST_CASE("a run resumed from a checkpoint file is the uninterrupted run, bit for bit") {
  const auto tasks = small_tasks();
  const auto whole = train(tasks, tiny);
  const auto plan_of = [&](const rl::dreamshard_train_state& st, const embplan::task& t) {
    const rl::policy_searcher<rl::dreamshard_policy> greedy{rl::dreamshard_trained_policy(st, tiny),
                                                            {}};
    return greedy
        .search(t, embplan::analytic_cost{}, embplan::memory_capacity{},
                embplan::neg_max_cost_reward{}, 0)
        .placement;
  };
  const auto path = std::filesystem::temp_directory_path() / "embplan_mdp_resume.safetensors";
  for (const std::int64_t k : {0, 1, 2}) {
    CAPTURE(k);
    auto st = rl::dreamshard_train_start(tiny);
    if (k > 0) {
      rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, st,
                           embplan::memory_capacity{}, {}, k);
    }
    rl::save_checkpoint(path, st, tiny);
    auto back = rl::load_checkpoint(path, tiny);  // a fresh state, from the file alone
    CHECK(back.optimizer.steps() == st.optimizer.steps());
    CHECK(back.optimizer.parameter_steps() == st.optimizer.parameter_steps());
    rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, back);
    CHECK(back.iteration == 3);
    CHECK(same_model(back.model, whole.model));
    CHECK(back.learning_curve == whole.learning_curve);
    CHECK(back.buffer.size() == whole.buffer.size());
    const auto a = back.optimizer.state(), b = whole.optimizer.state();
    CHECK(a.parameter_steps == b.parameter_steps);
    CHECK(a.exp_avg == b.exp_avg);
    CHECK(a.exp_avg_sq == b.exp_avg_sq);
    for (const auto& t : tasks)
      CHECK(plan_of(back, t) == plan_of(whole, t));
  }
  std::filesystem::remove(path);
}

TEST_CASE("a checkpoint with bad Adam state: the message names the field and the value") {
  const auto tasks = small_tasks();
  auto st = rl::dreamshard_train_start(tiny);
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, st,
                       embplan::memory_capacity{}, {}, 1);
  const auto path = std::filesystem::temp_directory_path() / "embplan_mdp_bad_adam.safetensors";
  rl::save_checkpoint(path, st, tiny);
  const auto good = embplan::io::read_safetensors(path);
  CHECK(good.tensors.count("adam.exp_avg.policy_net.weight") == 1);
  CHECK(good.tensors.count("adam.exp_avg_sq.value_net.bias") == 1);
  const auto refused = [&](embplan::io::safetensors_file f, const std::string& text) {
    CAPTURE(text);
    embplan::io::write_safetensors(path, f);
    const auto msg = message_of([&] { rl::load_checkpoint(path, tiny); });
    CHECK(msg.find(text) != std::string::npos);
    CHECK(msg.find(path.string()) != std::string::npos);
  };
  auto f = good;
  f.tensors.erase("adam.exp_avg.policy_net.weight");
  refused(f, "tensors[\"adam.*\"].size' = 63");
  f = good;
  f.tensors["adam.exp_avg.policy_net.weight"].shape = {64, 1};
  refused(f, "tensors[\"adam.exp_avg.policy_net.weight\"].shape' = \"[64, 1]\"");
  f = good;
  f.tensors["adam.exp_avg_sq.cost_fc_0.bias"].dtype = "F16";
  refused(f, "tensors[\"adam.exp_avg_sq.cost_fc_0.bias\"].dtype' = \"F16\"");
  f = good;
  f.metadata["embplan.train.adam_parameter_steps"] = "[1, 2]";
  refused(f, "metadata.embplan.train.adam_parameter_steps' = 2: expected 32 counts");
  f = good;
  f.metadata["embplan.train.adam_parameter_steps"] = "{";
  refused(f, "metadata.embplan.train.adam_parameter_steps' = \"{\"");
  f = good;
  f.metadata.erase("embplan.train.adam_steps");
  refused(f, "metadata.embplan.train.adam_steps' is missing");
  f = good;
  f.metadata["embplan.train.adam_steps"] = "3";  // fewer than the parameters' own counts
  refused(f, "Adam's state: field 'adam_state.parameter_steps[0]' = 7");
  f = good;
  f.tensors["adam.exp_avg_sq.table_fc_0.bias"].values[5] = -2.0f;
  refused(f, "'adam_state.exp_avg_sq[1]' = -2");
  // A checkpoint from before Adam's state was kept: loads, with a fresh Adam.
  f = good;
  f.metadata.erase("embplan.train.adam_steps");
  f.metadata.erase("embplan.train.adam_parameter_steps");
  std::erase_if(f.tensors, [](const auto& kv) { return kv.first.starts_with("adam."); });
  embplan::io::write_safetensors(path, f);
  auto old = rl::load_checkpoint(path, tiny);
  CHECK(old.optimizer.steps() == 0);
  CHECK(same_model(old.model, st.model));
  // ... and Adam's restart shows: not the uninterrupted run (what the saved state buys).
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, old);
  CHECK_FALSE(same_model(old.model, train(tasks, tiny).model));
  std::filesystem::remove(path);
}

TEST_CASE("training on a toy task with a known cost improves the measured cost") {
  // 10 tables on 2 devices; the best plan costs at least half of the total.
  const std::vector<embplan::task> tasks = {
      embplan_test::search_task(100, 10, 2, std::uint64_t{4} << 30)};
  double total = 0.0;
  for (const auto& x : tasks[0].tables)
    total += 3e-2 * x.dim * x.pooling_factor + 0.05 * x.dim;
  const rl::dreamshard_train_options o{.iterations = 4,
                                       .collect = 10,
                                       .cost_steps = 150,
                                       .cost_batch = 32,
                                       .rl_steps = 15,
                                       .episodes = 10,
                                       .lr = 1e-3,
                                       .seed = 0};
  std::vector<double> reported;
  auto st = rl::dreamshard_train_start(o);
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, o, st,
                       embplan::memory_capacity{}, [&](const rl::dreamshard_progress& p) {
                         reported.push_back(p.mean_measured_ms);
                         CHECK(p.iterations == 4);
                         CHECK(std::isfinite(p.cost_loss));
                         CHECK(p.mean_reward < 0.0);
                       });
  REQUIRE(st.learning_curve.size() == 4);
  CHECK(reported == st.learning_curve);
  MESSAGE("learning curve (ms): ", st.learning_curve[0], " ", st.learning_curve[1], " ",
          st.learning_curve[2], " ", st.learning_curve[3], "; lower bound ", total / 2.0);
  CHECK(st.learning_curve.back() < 0.8 * st.learning_curve.front());
  CHECK(st.learning_curve.back() < 1.1 * total / 2.0);

  // The trained policy's greedy plan is near the bound too, and the file keeps
  // the hyperparameters and the curve.
  auto policy = rl::dreamshard_trained_policy(st, o, {.meter = "fake"});
  const rl::policy_searcher<rl::dreamshard_policy> greedy{policy, {}};
  const auto r = greedy.search(tasks[0], embplan::analytic_cost{}, embplan::memory_capacity{},
                               embplan::neg_max_cost_reward{}, 0);
  REQUIRE(r.ok);
  CHECK(fake_meter{}(tasks[0], r.placement).overall_ms < 1.1 * total / 2.0);
  const auto path = std::filesystem::temp_directory_path() / "embplan_mdp_trained.safetensors";
  policy.save(path);
  const auto back = rl::dreamshard_policy::load(path);
  CHECK(back.metadata().cost.meter == "fake");
  CHECK(back.metadata().hyperparameters.at("cost_steps") == "150");
  CHECK(back.metadata().hyperparameters.at("iterations_done") == "4");
  CHECK(back.metadata().learning_curve == st.learning_curve);
  std::filesystem::remove(path);
}

TEST_CASE("the policy head starts at zero: the untrained policy places like random, not piled") {
  const auto torch_start = [] {
    auto o = tiny;
    o.head_init = rl::policy_head_init::torch;
    return o;
  }();
  const auto zero = rl::dreamshard_train_start(tiny);
  const auto torch = rl::dreamshard_train_start(torch_start);
  CHECK(tiny.head_init == rl::policy_head_init::zero);  // the default
  CHECK(zero.model.policy_net.weight.isZero(0.0f));
  CHECK(zero.model.policy_net.bias.isZero(0.0f));
  // torch: PyTorch's init, the authors' Model; the rest of the model is that in both.
  const auto made = nn::make_dreamshard_model(21, 4, embplan::derive_seed(tiny.seed, 0));
  CHECK(torch.model.policy_net.weight == made.policy_net.weight);
  CHECK(torch.model.policy_net.bias == made.policy_net.bias);
  CHECK_FALSE(torch.model.policy_net.weight.isZero(0.0f));
  auto head_zeroed = torch.model;
  head_zeroed.policy_net.weight.setZero();
  head_zeroed.policy_net.bias.setZero();
  CHECK(same_model(head_zeroed, zero.model));

  // 40 tables on 4 devices with memory to spare: the first iteration's 10
  // placements are the untrained policy's. Against uniformly random
  // placements of the same tasks: with the zero head the policy IS uniform
  // over the legal devices; PyTorch's head scores a device by a random
  // projection of the sum of its tables' latents, and for some seeds that
  // piles tables onto the device that got the first one.
  std::vector<embplan::task> tasks;
  for (std::uint64_t i = 0; i < 4; ++i)
    tasks.push_back(embplan_test::search_task(200 + i, 40, 4, std::uint64_t{64} << 30));
  embplan::rng gen(7);
  double random_ms = 0.0;
  constexpr int draws = 200;
  for (int k = 0; k < draws; ++k) {
    const auto& t = tasks[static_cast<std::size_t>(k) % tasks.size()];
    embplan::plan p;
    for (std::uint32_t i = 0; i < t.tables.size(); ++i)
      p.shards.push_back(embplan::whole_table(t, i, gen() % 4));
    random_ms += fake_meter{}(t, p).overall_ms / draws;
  }
  double worst_zero = 0.0;
  double worst_torch = 0.0;
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    rl::dreamshard_train_options o{.iterations = 1,
                                   .collect = 10,
                                   .cost_steps = 1,
                                   .cost_batch = 8,
                                   .rl_steps = 1,
                                   .episodes = 1,
                                   .seed = seed};
    worst_zero = std::max(worst_zero, train(tasks, o).learning_curve.at(0));
    o.head_init = rl::policy_head_init::torch;
    worst_torch = std::max(worst_torch, train(tasks, o).learning_curve.at(0));
  }
  MESSAGE("untrained policy, worst of 4 seeds (mean ms of 10 placements): zero head ", worst_zero,
          ", PyTorch's head ", worst_torch, "; uniformly random placements ", random_ms);
  CHECK(worst_zero < 1.3 * random_ms);
  CHECK(worst_torch > 2.0 * random_ms);
}

TEST_CASE("a checkpoint keeps the head's init; one from before the option resumes as torch") {
  const auto tasks = small_tasks();
  auto o = tiny;
  o.head_init = rl::policy_head_init::torch;
  auto st = rl::dreamshard_train_start(o);
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, o, st,
                       embplan::memory_capacity{}, {}, 1);
  const auto path = std::filesystem::temp_directory_path() / "embplan_mdp_head.safetensors";
  rl::save_checkpoint(path, st, o);
  CHECK(rl::load_checkpoint(path, o).iteration == 1);
  auto msg = message_of([&] { rl::load_checkpoint(path, tiny); });
  CHECK(msg.find("metadata.embplan.train.head_init") != std::string::npos);
  INFO(msg);
  CHECK(msg.find("= \"torch\"") != std::string::npos);
  CHECK(msg.find("\"zero\"") != std::string::npos);
  // Without the entry (a file written before the option): PyTorch's init.
  auto file = embplan::io::read_safetensors(path);
  REQUIRE(file.metadata.erase("embplan.train.head_init") == 1);
  embplan::io::write_safetensors(path, file);
  CHECK(same_model(rl::load_checkpoint(path, o).model, st.model));
  msg = message_of([&] { rl::load_checkpoint(path, tiny); });
  CHECK(msg.find("metadata.embplan.train.head_init") != std::string::npos);
  CHECK(rl::dreamshard_trained_policy(st, tiny).metadata().hyperparameters.at("head_init") ==
        "zero");
  std::filesystem::remove(path);
}

TEST_CASE("hyperparameters <= 0 and other bad input: the message names the field and the value") {
  const auto tasks = small_tasks();
  const auto check = [&](rl::dreamshard_train_options o, const std::string& field,
                         const std::string& value) {
    CAPTURE(field);
    const auto msg = message_of([&] { rl::dreamshard_train_start(o); });
    CHECK(msg.find("'dreamshard_train_options." + field + "'") != std::string::npos);
    CHECK(msg.find("= " + value) != std::string::npos);
    auto st = rl::dreamshard_train_start(tiny);
    const auto in_train = message_of(
        [&] { rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, o, st); });
    CHECK(in_train == msg);
  };
  auto o = tiny;
  o.iterations = 0;
  check(o, "iterations", "0");
  o = tiny;
  o.collect = -2;
  check(o, "collect", "-2");
  o = tiny;
  o.cost_steps = 0;
  check(o, "cost_steps", "0");
  o = tiny;
  o.cost_batch = -1;
  check(o, "cost_batch", "-1");
  o = tiny;
  o.rl_steps = 0;
  check(o, "rl_steps", "0");
  o = tiny;
  o.episodes = 0;
  check(o, "episodes", "0");
  o = tiny;
  o.lr = 0.0;
  check(o, "lr", "0");
  o = tiny;
  o.lr = std::numeric_limits<double>::quiet_NaN();
  check(o, "lr", "nan");
  o = tiny;
  o.entropy_weight = -0.5;
  check(o, "entropy_weight", "-0.5");
  o = tiny;
  o.max_grad_norm = -1.0;
  check(o, "max_grad_norm", "-1");
  o = tiny;
  o.head_init = static_cast<rl::policy_head_init>(7);
  check(o, "head_init", "7");

  SUBCASE("no tasks") {
    auto st = rl::dreamshard_train_start(tiny);
    const auto msg = message_of(
        [&] { rl::dreamshard_train(std::span<const embplan::task>(), fake_meter{}, tiny, st); });
    CHECK(msg.find("dreamshard_train.tasks.size") != std::string::npos);
  }
  SUBCASE("a meter that returns another device count") {
    auto st = rl::dreamshard_train_start(tiny);
    const auto short_meter = [](const embplan::task&, const embplan::plan&) {
      return rl::dreamshard_measurement{.devices = {{}}, .overall_ms = 1.0};
    };
    const auto msg = message_of([&] {
      rl::dreamshard_train(std::span<const embplan::task>(tasks), short_meter, tiny, st);
    });
    CHECK(msg.find("dreamshard_train.measurement[0].devices.size") != std::string::npos);
    CHECK(msg.find("= 1") != std::string::npos);
  }
  SUBCASE("a meter that returns NaN") {
    auto st = rl::dreamshard_train_start(tiny);
    const auto nan_meter = [](const embplan::task& t, const embplan::plan& p) {
      auto m = fake_meter{}(t, p);
      m.overall_ms = std::numeric_limits<double>::quiet_NaN();
      return m;
    };
    const auto msg = message_of(
        [&] { rl::dreamshard_train(std::span<const embplan::task>(tasks), nan_meter, tiny, st); });
    CHECK(msg.find("dreamshard_train.measurement[0].overall_ms") != std::string::npos);
    CHECK(msg.find("nan") != std::string::npos);
  }
  SUBCASE("a buffer that does not fit the tasks (a checkpoint of other tasks)") {
    auto st = train(tasks, tiny);
    st.iteration = 1;
    st.buffer[0].tables_on[0].push_back(99);
    const auto msg = message_of([&] {
      rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, st);
    });
    CHECK(msg.find("dreamshard_train_state.buffer[0].tables_on") != std::string::npos);
    CHECK(msg.find("= 99") != std::string::npos);
  }
  SUBCASE("a task no legal action can complete") {
    auto bad = tasks;
    for (auto& d : bad[1].cluster.devices)
      d.memory_bytes = 1000;
    auto st = rl::dreamshard_train_start(tiny);
    const auto msg = message_of(
        [&] { rl::dreamshard_train(std::span<const embplan::task>(bad), fake_meter{}, tiny, st); });
    CHECK(msg.find("fits on no device under memory capacity") != std::string::npos);
    CHECK(msg.find("0: 1000 bytes, 1: 1000 bytes, 2: 1000 bytes") != std::string::npos);
  }
  SUBCASE("a cost model as the meter") {
    const embplan::analytic_cost model;
    auto st = rl::dreamshard_train_start(tiny);
    rl::dreamshard_train(std::span<const embplan::task>(tasks),
                         rl::cost_model_meter<embplan::analytic_cost>{&model}, tiny, st);
    const auto& rec = st.buffer.front();
    std::vector<std::size_t> assignment(tasks[rec.task].tables.size());
    for (std::size_t d = 0; d < rec.tables_on.size(); ++d)
      for (const auto i : rec.tables_on[d])
        assignment[i] = d;
    const auto priced = embplan::evaluate(
        tasks[rec.task], embplan::table_wise_plan(tasks[rec.task], assignment), model);
    CHECK(rec.measured.overall_ms == priced.max_ms());
    // The backward all-to-all only (the forward one holds the wait for the slowest device).
    CHECK(rec.measured.devices[0].comm_ms == priced.devices[0].bwd_comm_ms);
  }
}

TEST_CASE("a checkpoint records its run's inputs; a resume with others is refused, naming both") {
  const auto tasks = small_tasks();
  auto st = rl::dreamshard_train_start(tiny);
  rl::dreamshard_train(std::span<const embplan::task>(tasks), fake_meter{}, tiny, st,
                       embplan::memory_capacity{}, {}, 1);
  const auto path = std::filesystem::temp_directory_path() / "embplan_mdp_inputs.safetensors";
  const rl::train_inputs started{{"--meter", "simulated"}, {"--tasks", "fnv1a64:00000000000000aa"}};
  rl::save_checkpoint(path, st, tiny, started);
  CHECK(embplan::io::read_safetensors(path).metadata.at("embplan.train.inputs") ==
        R"({"--meter":"simulated","--tasks":"fnv1a64:00000000000000aa"})");
  // The same inputs: resumed, the same state.
  const auto back = rl::load_checkpoint(path, tiny, started);
  CHECK(back.iteration == 1);
  CHECK(same_model(back.model, st.model));
  // Another meter: the field, this run's value and the checkpoint's.
  auto other = started;
  other["--meter"] = "analytic";
  const auto meter = message_of([&] { rl::load_checkpoint(path, tiny, other); });
  CHECK(meter.find("field '--meter' = \"analytic\": expected \"simulated\", what the checkpoint") !=
        std::string::npos);
  CHECK(meter.find(path.string()) != std::string::npos);
  // An input the checkpoint does not record, and one it records that this run lacks.
  other = started;
  other["--pool"] = "fnv1a64:00000000000000bb";
  CHECK(message_of([&] {
          rl::load_checkpoint(path, tiny, other);
        }).find("field '--pool' = \"fnv1a64:00000000000000bb\": expected no value") !=
        std::string::npos);
  other = started;
  other.erase("--tasks");
  CHECK(message_of([&] {
          rl::load_checkpoint(path, tiny, other);
        }).find("field '--tasks' = \"(none)\": expected \"fnv1a64:00000000000000aa\"") !=
        std::string::npos);
  // A checkpoint that records no inputs cannot be bound to them: refused.
  rl::save_checkpoint(path, st, tiny);
  CHECK(message_of([&] {
          rl::load_checkpoint(path, tiny, started);
        }).find("metadata.embplan.train.inputs' is missing") != std::string::npos);
  // ... but loads where the caller binds none (the library's own use).
  CHECK(rl::load_checkpoint(path, tiny).iteration == 1);
  std::filesystem::remove(path);
}

TEST_CASE("content_fingerprint: a file's bytes, not its name; a directory is refused") {
  const auto dir = std::filesystem::temp_directory_path() / "embplan_fingerprint_test";
  std::filesystem::create_directories(dir);
  const auto write = [&](const char* name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return dir / name;
  };
  const auto a = write("a.json", "[1, 2]");
  const auto b = write("b.json", "[1, 2]");
  const auto c = write("c.json", "[1, 3]");
  CHECK(rl::content_fingerprint(a) == rl::content_fingerprint(b));
  CHECK(rl::content_fingerprint(a) != rl::content_fingerprint(c));
  CHECK(rl::content_fingerprint(a).starts_with("fnv1a64:"));
  CHECK(rl::content_fingerprint(a).size() == 8 + 16);
  // FNV-1a 64 of the empty file: the offset basis.
  CHECK(rl::content_fingerprint(write("e.json", "")) == "fnv1a64:cbf29ce484222325");
  CHECK(message_of([&] { (void)rl::content_fingerprint(dir); }).find(dir.string()) !=
        std::string::npos);
  std::filesystem::remove_all(dir);
}
