#pragma once
// AutoShard's training, Algorithm 1 (KDD'22 §4.4-4.5, the Appendix's
// hyperparameters; the authors' training.py train / act / learn) as a library
// function. Per learner update u:
//  1. the actors play `batch` episodes, each on a training task drawn
//     uniformly, sampling their actions from the policy's softmax, and
//     MEASURE each finished plan's shards with the caller's meter, unless the
//     plan overflows a device's memory (no measurement: the memory penalty);
//  2. the learner takes one IMPALA step on the batch (V-trace with
//     rho-bar = c-bar = 1, policy + 0.5 value - 0.001 entropy, gamma = 1,
//     gradient clip 40; rl::autoshard_learner_step);
//  3. every measured shard goes into the cost buffer (a ring of 5000), and
//     the cost head takes `cost_updates` (N_cost = 20) Adam steps on batches
//     of 512 from it (rl::autoshard_cost_step).
// One Adam (lr 1e-3, decayed linearly to 0 as the authors' LambdaLR) serves
// both losses. Reward (§4.3): the degree of balance of the shards' measured
// latencies when every device's tables fit its memory, else
// memory_penalty_reward's penalty.
// Actors play with the policy of `policy_lag` updates earlier, V-trace
// correcting for it. Invariants: the trained policy depends on the seed and
// the options only, not on how many actor threads (or MPI ranks) played the
// episodes nor their timing (each episode and cost batch draws from its own
// derived seed); a copy of autoshard_train_state taken after update k and
// trained on gives the same policy, bit for bit, as an uninterrupted run.
// A meter shared by actor threads must be thread-safe.
// Design notes, with the fidelity notes: docs/design/autoshard.md.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/adam.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/reward/memory_penalty.hpp"
#include "embplan/rl/autoshard.hpp"
#include "embplan/rl/autoshard_cost.hpp"
#include "embplan/rl/autoshard_learner.hpp"
#include "embplan/rl/detail/checkpoint.hpp"
#include "embplan/rl/placement_mdp.hpp"
#include "embplan/rl/policy_searcher.hpp"
#include "embplan/rl/train_inputs.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

// The paper's values (Appendix; the authors' run_autoshard.py) as defaults.
struct autoshard_train_options {
  std::int64_t updates = 125;   // learner updates (total_steps 100,000 / (unroll 100 x batch 8))
  std::int64_t batch = 8;       // episodes per learner update (B)
  std::int64_t actors = 1;      // threads playing a batch
  std::int64_t policy_lag = 1;  // updates the actors' policy lags behind (0: on-policy)
  double learning_rate = 1e-3;  // Adam, decayed linearly to 0
  autoshard_learner_options learner{};  // IMPALA's weights, V-trace, clip 40
  std::int64_t cost_updates = 20;       // N_cost: cost-head steps per learner update (0: none)
  std::int64_t cost_buffer = 5000;      // shards the ring buffer keeps
  std::int64_t cost_batch = 512;        // shards per cost step
  std::int64_t cost_min_buffer = 0;     // cost steps start once the buffer holds more
  double memory_penalty_weight = 1.0;   // memory_penalty_reward.overflow_weight
  std::uint64_t seed = 0;
};

// One played episode (what an actor sends the learner).
struct autoshard_sample {
  std::uint32_t task = 0;  // index into the training tasks
  autoshard_trajectory trajectory{};
  double reward = 0.0;   // the final reward
  bool fits = true;      // every device within its memory (else not measured)
  double balance = 0.0;  // measured min / max shard latency (0 when it does not fit)
  std::vector<nn::matrix> shard_tables{};  // measured shards: their tables' features
  std::vector<double> shard_ms{};          // and latency
};

struct autoshard_progress {
  std::int64_t update = 0;       // the update just finished, from 0
  std::int64_t updates = 0;      // of the schedule
  std::int64_t episodes = 0;     // played so far (this run's and the resumed state's)
  std::int64_t measured = 0;     // plans measured so far
  double mean_reward = 0.0;      // of this update's batch
  double mean_balance = 0.0;     // of its plans that fit (0 if none)
  double fit_share = 0.0;        // share of its plans that fit memory
  double running_balance = 0.0;  // exponential average (0.9) of mean_balance
  autoshard_learner_stats learner{};
  double cost_loss = -1.0;  // mean loss of its cost steps (-1: none)
  double seconds = 0.0;     // wall time of this update
};

struct autoshard_train_state {
  nn::autoshard_net net{};
  nn::adam optimizer{};
  autoshard_feature_stats stats{};
  std::int64_t updates_done = 0;
  std::int64_t episodes = 0;
  std::int64_t measured = 0;
  double running_balance = 0.0;
  // The actors' policies: the nets after updates max(0, done - lag) .. done.
  std::vector<nn::autoshard_net> history{};
  autoshard_cost_buffer buffer{};
  std::vector<double> learning_curve{};  // mean measured balance per update
};

namespace detail {

inline void autoshard_require_options(const autoshard_train_options& o) {
  const auto positive = [](std::int64_t v, const char* field) {
    if (v <= 0) embplan::detail::fail(field, v, "a positive integer");
  };
  const auto nonneg = [](std::int64_t v, const char* field) {
    if (v < 0) embplan::detail::fail(field, v, "a non-negative integer");
  };
  positive(o.updates, "autoshard_train_options.updates");
  positive(o.batch, "autoshard_train_options.batch");
  positive(o.actors, "autoshard_train_options.actors");
  nonneg(o.policy_lag, "autoshard_train_options.policy_lag");
  nonneg(o.cost_updates, "autoshard_train_options.cost_updates");
  positive(o.cost_buffer, "autoshard_train_options.cost_buffer");
  positive(o.cost_batch, "autoshard_train_options.cost_batch");
  nonneg(o.cost_min_buffer, "autoshard_train_options.cost_min_buffer");
  if (!(o.learning_rate > 0.0) || !std::isfinite(o.learning_rate)) {
    embplan::detail::fail("autoshard_train_options.learning_rate", o.learning_rate,
                          "a positive finite number");
  }
  if (!(o.memory_penalty_weight > 0.0) || !std::isfinite(o.memory_penalty_weight)) {
    embplan::detail::fail("autoshard_train_options.memory_penalty_weight", o.memory_penalty_weight,
                          "a positive finite number");
  }
  if (!(o.learner.max_grad_norm >= 0.0) || !std::isfinite(o.learner.max_grad_norm)) {
    embplan::detail::fail("autoshard_train_options.learner.max_grad_norm", o.learner.max_grad_norm,
                          "a finite number >= 0 (0: no clipping)");
  }
  require_impala(o.learner.impala);
}

inline std::uint64_t autoshard_update_seed(std::uint64_t seed, std::int64_t update) {
  return derive_seed(seed, static_cast<std::uint64_t>(update) + 1);
}

}  // namespace detail

// A fresh state: the network with PyTorch's default init from the seed, Adam,
// the feature statistics of the training tasks.
inline autoshard_train_state autoshard_initial_state(std::span<const task> tasks,
                                                     const autoshard_train_options& o) {
  detail::autoshard_require_options(o);
  if (tasks.empty()) {
    embplan::detail::fail("autoshard_train.tasks.size", 0, "at least one task");
  }
  autoshard_train_state st;
  st.net = make_autoshard_net(derive_seed(o.seed, 0));
  st.optimizer = nn::adam(nn::adam_options{.lr = o.learning_rate});
  st.stats = autoshard_feature_stats::of(tasks);
  st.history = {st.net};
  st.buffer = autoshard_cost_buffer(static_cast<std::size_t>(o.cost_buffer),
                                    static_cast<std::size_t>(o.cost_batch));
  return st;
}

// One episode of `policy` on `t`, actions sampled from its softmax over the
// devices `rule` admits (the paper's rule: all_of<>, every device), the plan
// measured with `meter` (compute() per device) when it fits memory. An
// episode that no legal device can continue ends there with the penalty -1.
template <cost_model Meter, constraint Constraint>
autoshard_sample autoshard_act(const autoshard_policy& policy, const task& t, const Meter& meter,
                               const Constraint& rule, rng& gen,
                               const memory_penalty_reward& penalty = {}) {
  autoshard_sample out;
  autoshard_context ctx;
  ctx.record = true;
  policy.prepare(t, ctx);
  std::vector<std::uint32_t> order;
  policy.order(ctx, order);
  placement_mdp<no_cost_source, Constraint> mdp(t, no_cost_source{}, rule, std::move(order));
  auto& traj = out.trajectory;
  std::vector<double> logits;
  bool finished = mdp.failure().empty();
  while (finished && !mdp.done()) {
    policy.logits(mdp.view(), ctx, logits);
    const std::size_t k = detail::mdp_sample(logits, gen);
    double top = logits[0];
    for (const double z : logits)
      top = std::max(top, z);
    double sum = 0.0;
    for (const double z : logits)
      sum += std::exp(z - top);
    traj.action.push_back(static_cast<std::int64_t>(k));
    traj.behaviour_logp.push_back(logits[k] - top - std::log(sum));
    finished = mdp.try_step(mdp.legal()[k]);
  }
  traj.inputs = std::move(ctx.episode);
  traj.reward.assign(traj.action.size(), 0.0);
  if (traj.action.empty()) {
    embplan::detail::fail("autoshard_act", mdp.failure(), "a task whose first table fits a device");
  }
  if (!finished) {
    out.fits = false;
    out.reward = -1.0;
    traj.reward.back() = out.reward;
    return out;
  }
  // Memory first (the MDP's device state has every device's bytes): a plan
  // that overflows is not measured.
  plan_cost cost;
  const std::size_t devices = t.cluster.size();
  cost.memory_bytes = mdp.state().memory_bytes;
  cost.devices.resize(devices);
  for (std::size_t d = 0; d < devices; ++d)
    out.fits = out.fits && cost.memory_bytes[d] <= t.cluster.devices[d].memory_bytes;
  if (out.fits) {
    const plan p = mdp.to_plan();
    const auto groups = shards_by_device(t, p);
    for (std::size_t d = 0; d < devices; ++d) {
      const compute_cost c = meter.compute(t, groups[d], d);
      cost.devices[d].fwd_compute_ms = c.fwd_ms;
      cost.devices[d].bwd_compute_ms = c.bwd_ms;
      if (groups[d].empty()) continue;
      nn::matrix tables(static_cast<Eigen::Index>(groups[d].size()), autoshard_table_features);
      for (std::size_t k = 0; k < groups[d].size(); ++k)
        tables.row(static_cast<Eigen::Index>(k)) =
            ctx.features.row(static_cast<Eigen::Index>(groups[d][k].table));
      out.shard_tables.push_back(std::move(tables));
      out.shard_ms.push_back(c.total_ms());
    }
    out.balance = cost.balance();
  }
  out.reward = penalty.score(t, cost);
  traj.reward.back() = out.reward;
  return out;
}

namespace detail {

// The episodes of update u, played with `policy` by `o.actors` threads: those
// k with k % stride == offset (the rest left default: another rank's share).
// Episode k draws its task and actions from rng(derive_seed(update seed, k)).
// An actor's exception is rethrown here.
template <cost_model Meter, constraint Constraint>
std::vector<autoshard_sample> autoshard_play(std::span<const task> tasks, const Meter& meter,
                                             const Constraint& rule,
                                             const autoshard_train_options& o,
                                             const autoshard_policy& policy, std::int64_t update,
                                             std::size_t offset, std::size_t stride) {
  const auto n = static_cast<std::size_t>(o.batch);
  std::vector<autoshard_sample> out(n);
  std::vector<std::size_t> mine;
  for (std::size_t k = offset; k < n; k += stride)
    mine.push_back(k);
  const memory_penalty_reward penalty{.overflow_weight = o.memory_penalty_weight};
  const std::uint64_t base = autoshard_update_seed(o.seed, update);
  const auto play = [&](std::size_t k) {
    rng gen(derive_seed(base, k));
    const auto ti = static_cast<std::uint32_t>(gen.below(tasks.size()));
    out[k] = autoshard_act(policy, tasks[ti], meter, rule, gen, penalty);
    out[k].task = ti;
  };
  const auto threads = std::min<std::size_t>(static_cast<std::size_t>(o.actors), mine.size());
  if (threads <= 1) {
    for (const auto k : mine)
      play(k);
    return out;
  }
  std::vector<std::exception_ptr> errors(threads);
  std::vector<std::thread> pool;
  for (std::size_t a = 0; a < threads; ++a) {
    pool.emplace_back([&, a] {
      try {
        for (std::size_t i = a; i < mine.size(); i += threads)
          play(mine[i]);
      } catch (...) {
        errors[a] = std::current_exception();
      }
    });
  }
  for (auto& th : pool)
    th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace detail

// The options that shape a trained policy, as text (policy files'
// "embplan.hp.*", checkpoints' "embplan.train.*"). Not `actors`: the policy
// does not depend on it.
inline std::map<std::string, std::string> autoshard_hyperparameters(
    const autoshard_train_options& o) {
  const auto num = [](double v) { return detail::mdp_number_text(v); };
  return {
      {"updates", std::to_string(o.updates)},
      {"batch", std::to_string(o.batch)},
      {"policy_lag", std::to_string(o.policy_lag)},
      {"learning_rate", num(o.learning_rate)},
      {"baseline_cost", num(o.learner.impala.baseline_cost)},
      {"entropy_cost", num(o.learner.impala.entropy_cost)},
      {"gamma", num(o.learner.impala.gamma)},
      {"rho_bar", num(o.learner.impala.vtrace.rho_bar)},
      {"c_bar", num(o.learner.impala.vtrace.c_bar)},
      {"pg_rho_bar", num(o.learner.impala.vtrace.pg_rho_bar)},
      {"lambda", num(o.learner.impala.vtrace.lambda)},
      {"max_grad_norm", num(o.learner.max_grad_norm)},
      {"cost_updates", std::to_string(o.cost_updates)},
      {"cost_buffer", std::to_string(o.cost_buffer)},
      {"cost_batch", std::to_string(o.cost_batch)},
      {"cost_min_buffer", std::to_string(o.cost_min_buffer)},
      {"memory_penalty_weight", num(o.memory_penalty_weight)},
      {"seed", std::to_string(o.seed)},
  };
}

// The policy a trained state places with (its network and feature statistics;
// metadata for the file: the meter's name, the hyperparameters, the curve).
inline autoshard_policy autoshard_trained_policy(const autoshard_train_state& st,
                                                 const autoshard_train_options& o,
                                                 std::string meter_name = {}) {
  autoshard_policy_metadata meta;
  meta.stats = st.stats;
  meta.meter = std::move(meter_name);
  meta.learning_curve = st.learning_curve;
  meta.hyperparameters = autoshard_hyperparameters(o);
  meta.hyperparameters["updates_done"] = std::to_string(st.updates_done);
  return autoshard_policy(st.net, std::move(meta));
}

// Who plays a learner update's episodes: play(policy, update) returns the
// update's `batch` samples in episode order (autoshard_local_player: threads
// of this process; rl/mpi/autoshard_actors.hpp: MPI ranks). `concurrent`: the
// player may run on another thread while the learner learns (policy_lag >= 1);
// a player that talks MPI says false.
struct autoshard_player {
  std::function<std::vector<autoshard_sample>(const autoshard_policy&, std::int64_t)> play{};
  bool concurrent = true;
};

// `o.actors` threads of this process, each episode measured with `meter`
// (compute() per device), the actions among the devices `rule` admits (the
// paper: every device, all_of<>{}). The meter and the tasks must outlive the
// player.
template <cost_model Meter, constraint Constraint = all_of<>>
autoshard_player autoshard_local_player(std::span<const task> tasks, const Meter& meter,
                                        const autoshard_train_options& o,
                                        const Constraint& rule = {}) {
  return {.play =
              [tasks, &meter, o, rule](const autoshard_policy& policy, std::int64_t update) {
                return detail::autoshard_play(tasks, meter, rule, o, policy, update, 0, 1);
              },
          .concurrent = true};
}

// Runs Algorithm 1 from st.updates_done up to o.updates (or max_updates of
// them when > 0), the episodes played by `player`. `progress` is called after
// each update, with `st` complete (a checkpoint saved from it resumes exactly;
// the actors may be playing the next batch meanwhile, on their own copy of
// the policy).
inline void autoshard_train(std::span<const task> tasks, const autoshard_player& player,
                            const autoshard_train_options& o, autoshard_train_state& st,
                            const std::function<void(const autoshard_progress&)>& progress = {},
                            std::int64_t max_updates = 0) {
  detail::autoshard_require_options(o);
  if (tasks.empty()) embplan::detail::fail("autoshard_train.tasks.size", 0, "at least one task");
  if (!player.play) embplan::detail::fail("autoshard_train.player", "(empty)", "a player");
  if (max_updates < 0) {
    embplan::detail::fail("autoshard_train.max_updates", max_updates,
                          "a non-negative count (0: the rest of the schedule)");
  }
  if (st.updates_done < 0 || st.updates_done > o.updates) {
    embplan::detail::fail("autoshard_train_state.updates_done", st.updates_done,
                          "an update in [0, " + std::to_string(o.updates) + "]");
  }
  const auto lag_nets = static_cast<std::size_t>(std::min(o.policy_lag, st.updates_done)) + 1;
  if (st.history.size() != lag_nets) {
    embplan::detail::fail("autoshard_train_state.history.size", st.history.size(),
                          std::to_string(lag_nets) + " (the nets after updates max(0, done - " +
                              "policy_lag) .. done)");
  }
  for (std::size_t i = 0; i < tasks.size(); ++i)
    validate(tasks[i], embplan::detail::path("autoshard_train.tasks", i));
  (void)autoshard_policy(st.net, {.stats = st.stats});  // refuses a network of another shape

  const std::int64_t last =
      max_updates > 0 ? std::min(o.updates, st.updates_done + max_updates) : o.updates;
  const auto policy_for = [&](std::int64_t u) {
    // history.front() is the net after max(0, done - lag) updates.
    const std::int64_t first = std::max<std::int64_t>(0, st.updates_done - o.policy_lag);
    const std::int64_t want = std::max<std::int64_t>(0, u - o.policy_lag);
    return autoshard_policy(st.history.at(static_cast<std::size_t>(want - first)),
                            {.stats = st.stats});
  };
  const auto play = [&](const autoshard_policy& pol, std::int64_t u) {
    auto batch = player.play(pol, u);
    if (batch.size() != static_cast<std::size_t>(o.batch)) {
      embplan::detail::fail("autoshard_player.play.size", batch.size(),
                            std::to_string(o.batch) + " samples (autoshard_train_options.batch)");
    }
    return batch;
  };
  std::future<std::vector<autoshard_sample>> next;
  while (st.updates_done < last) {
    const std::int64_t u = st.updates_done;
    const auto started = std::chrono::steady_clock::now();
    std::vector<autoshard_sample> batch = next.valid() ? next.get() : play(policy_for(u), u);
    if (player.concurrent && o.policy_lag >= 1 && u + 1 < last) {
      next = std::async(std::launch::async, play, policy_for(u + 1), u + 1);
    }
    try {
      st.optimizer.set_lr(o.learning_rate *
                          (1.0 - static_cast<double>(u) / static_cast<double>(o.updates)));
      autoshard_progress report{.update = u, .updates = o.updates};
      std::vector<autoshard_trajectory> trajectories;
      trajectories.reserve(batch.size());
      double fit = 0.0;
      for (auto& s : batch) {
        report.mean_reward += s.reward / static_cast<double>(batch.size());
        if (s.fits) {
          report.mean_balance += s.balance;
          fit += 1.0;
          ++st.measured;
        }
        trajectories.push_back(std::move(s.trajectory));
      }
      report.mean_balance = fit > 0.0 ? report.mean_balance / fit : 0.0;
      report.fit_share = fit / static_cast<double>(batch.size());
      report.learner = autoshard_learner_step(st.net, st.optimizer, trajectories, o.learner);
      for (const auto& s : batch)
        for (std::size_t k = 0; k < s.shard_ms.size(); ++k)
          st.buffer.append(s.shard_tables[k], s.shard_ms[k]);
      if (o.cost_updates > 0 && st.buffer.size() > static_cast<std::size_t>(o.cost_min_buffer)) {
        const std::uint64_t base = detail::autoshard_update_seed(o.seed, u);
        autoshard_cost_batch cb;
        report.cost_loss = 0.0;
        for (std::int64_t j = 0; j < o.cost_updates; ++j) {
          rng gen(derive_seed(base, static_cast<std::uint64_t>(o.batch + j)));
          st.buffer.sample(gen, cb);
          report.cost_loss +=
              autoshard_cost_step(st.net, st.optimizer, cb, o.learner.max_grad_norm).loss /
              static_cast<double>(o.cost_updates);
        }
      }
      st.episodes += static_cast<std::int64_t>(batch.size());
      st.running_balance =
          u == 0 ? report.mean_balance : 0.9 * st.running_balance + 0.1 * report.mean_balance;
      st.learning_curve.push_back(report.mean_balance);
      st.history.push_back(st.net);
      if (static_cast<std::int64_t>(st.history.size()) > o.policy_lag + 1)
        st.history.erase(st.history.begin());
      ++st.updates_done;
      report.episodes = st.episodes;
      report.measured = st.measured;
      report.running_balance = st.running_balance;
      report.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (progress) progress(report);
    } catch (...) {
      if (next.valid()) next.wait();  // the actors finish before the state they read goes
      throw;
    }
  }
}

// autoshard_train with this process's actor threads (autoshard_local_player).
template <cost_model Meter, constraint Constraint = all_of<>>
void autoshard_train(std::span<const task> tasks, const Meter& meter,
                     const autoshard_train_options& o, autoshard_train_state& st,
                     const Constraint& rule = {},
                     const std::function<void(const autoshard_progress&)>& progress = {},
                     std::int64_t max_updates = 0) {
  autoshard_train(tasks, autoshard_local_player(tasks, meter, o, rule), o, st, progress,
                  max_updates);
}

// ------------------------------------------------------------ checkpoints
// One safetensors file holding an autoshard_train_state exactly: the network
// (the authors' names), the actors' lagged networks ("history.<k>.<name>"),
// Adam's moments and step counts (rl/detail/checkpoint.hpp), the cost
// buffer's groups stacked in slot order ("buffer.tables", F32 as kept) and
// metadata "embplan.train.*": the options (autoshard_hyperparameters), the
// counters, the feature statistics, the learning curve, the buffer's group
// sizes, latencies and next slot (JSON; doubles round-trip exactly), and the
// caller's `inputs` ("inputs", rl/train_inputs.hpp). A run resumed from it is
// bit-equal to an uninterrupted one.
inline void save_checkpoint(const std::filesystem::path& path, const autoshard_train_state& st,
                            const autoshard_train_options& o, const train_inputs& inputs = {}) {
  std::map<std::string, std::string> md;
  md["embplan.checkpoint"] = "autoshard";
  for (const auto& [k, v] : autoshard_hyperparameters(o))
    md["embplan.train." + k] = v;
  const auto num = [](double v) { return detail::mdp_number_text(v); };
  md["embplan.train.updates_done"] = std::to_string(st.updates_done);
  md["embplan.train.episodes"] = std::to_string(st.episodes);
  md["embplan.train.measured"] = std::to_string(st.measured);
  md["embplan.train.running_balance"] = num(st.running_balance);
  md["embplan.train.learning_curve"] = nlohmann::json(st.learning_curve).dump();
  md["embplan.train.stats"] =
      nlohmann::json({{"mean", st.stats.mean}, {"stdev", st.stats.stdev}}).dump();
  md["embplan.train.history"] = std::to_string(st.history.size());
  std::vector<std::int64_t> offset;
  std::vector<double> cost;
  Eigen::Index rows = 0;
  for (std::size_t k = 0; k < st.buffer.size(); ++k) {
    offset.push_back(static_cast<std::int64_t>(st.buffer.tables(k).rows()));
    cost.push_back(st.buffer.cost_ms(k));
    rows += st.buffer.tables(k).rows();
  }
  md["embplan.train.buffer"] =
      nlohmann::json({{"offset", offset}, {"cost", cost}, {"next", st.buffer.next_slot()}}).dump();
  detail::put_train_inputs(md, inputs);
  auto file = nn::state_dict(st.net, {}, std::move(md));
  detail::mdp_put_adam_tensors(file, st.net, st.optimizer.state(),
                               "autoshard_train_state.optimizer");
  for (std::size_t k = 0; k < st.history.size(); ++k) {
    for (auto& [name, t] : nn::state_dict(st.history[k], "history." + std::to_string(k)).tensors)
      file.tensors.emplace(name, std::move(t));
  }
  io::tensor tables;
  tables.shape = {rows, st.buffer.empty() ? autoshard_table_features : st.buffer.features()};
  tables.values.reserve(static_cast<std::size_t>(rows * tables.shape[1]));
  for (std::size_t k = 0; k < st.buffer.size(); ++k) {
    const nn::matrix& g = st.buffer.tables(k);
    for (Eigen::Index r = 0; r < g.rows(); ++r)
      for (Eigen::Index c = 0; c < g.cols(); ++c)
        tables.values.push_back(g(r, c));
  }
  file.tensors.emplace("buffer.tables", std::move(tables));
  io::write_safetensors(path, file);
}

// A state saved by save_checkpoint, to train on with the same options `o`
// and `inputs` (every option and input the file records must match; a
// mismatch names the option or input and both values).
inline autoshard_train_state load_checkpoint(const std::filesystem::path& path,
                                             const autoshard_train_options& o,
                                             const train_inputs& inputs = {}) {
  detail::autoshard_require_options(o);
  auto file = io::read_safetensors(path);
  const std::string source = path.string();
  const std::string written_by = "a checkpoint written by rl::save_checkpoint (autoshard)";
  const auto kind = file.metadata.find("embplan.checkpoint");
  if (kind == file.metadata.end() || kind->second != "autoshard") {
    embplan::detail::fail(source + ": metadata.embplan.checkpoint",
                          kind == file.metadata.end() ? std::string("(none)") : kind->second,
                          "\"autoshard\" (" + written_by + ")");
  }
  const auto get = [&](const std::string& key) -> const std::string& {
    return cost::detail::require_key(file.metadata, source, "embplan.train." + key, written_by);
  };
  // The inputs first: a resume with another tasks file or meter is named as
  // such before any option is compared.
  detail::require_train_inputs(file.metadata, source, inputs);
  for (const auto& [k, v] : autoshard_hyperparameters(o)) {
    if (get(k) != v) {
      embplan::detail::fail(source + ": metadata.embplan.train." + k, get(k),
                            "\"" + v + "\", as autoshard_train_options." + k + " now");
    }
  }
  const auto integer = [&](const std::string& key) {
    return cost::detail::parse_number<std::int64_t>(get(key),
                                                    source + ": metadata.embplan.train." + key);
  };
  autoshard_train_state st;
  st.updates_done = integer("updates_done");
  if (st.updates_done < 0 || st.updates_done > o.updates) {
    embplan::detail::fail(source + ": metadata.embplan.train.updates_done", st.updates_done,
                          "an update in [0, " + std::to_string(o.updates) + "]");
  }
  st.episodes = integer("episodes");
  st.measured = integer("measured");
  st.running_balance = cost::detail::parse_number<double>(
      get("running_balance"), source + ": metadata.embplan.train.running_balance");
  const auto history = integer("history");
  std::vector<std::int64_t> offset;
  std::vector<double> cost;
  std::size_t next = 0;
  const auto json = [&](const std::string& key, auto&& read) {
    try {
      read(io::parse_json(get(key), source + ": metadata.embplan.train." + key));
    } catch (const nlohmann::json::exception& e) {
      embplan::detail::fail(source + ": metadata.embplan.train." + key, std::string(e.what()),
                            "the JSON rl::save_checkpoint writes");
    }
  };
  json("learning_curve", [&](const nlohmann::json& j) { j.get_to(st.learning_curve); });
  json("stats", [&](const nlohmann::json& j) {
    j.at("mean").get_to(st.stats.mean);
    j.at("stdev").get_to(st.stats.stdev);
  });
  json("buffer", [&](const nlohmann::json& j) {
    j.at("offset").get_to(offset);
    j.at("cost").get_to(cost);
    j.at("next").get_to(next);
  });
  if (static_cast<std::int64_t>(st.learning_curve.size()) != st.updates_done) {
    embplan::detail::fail(source + ": metadata.embplan.train.learning_curve",
                          st.learning_curve.size(),
                          "one entry per update done (" + std::to_string(st.updates_done) + ")");
  }
  if (history != std::min(o.policy_lag, st.updates_done) + 1) {
    embplan::detail::fail(
        source + ": metadata.embplan.train.history", history,
        std::to_string(std::min(o.policy_lag, st.updates_done) + 1) + " lagged networks");
  }
  // The buffer's groups.
  const auto tables_it = file.tensors.find("buffer.tables");
  if (tables_it == file.tensors.end()) {
    embplan::detail::fail_missing(source + ": tensors[\"buffer.tables\"]", "the cost buffer");
  }
  const io::tensor tables = std::move(tables_it->second);
  file.tensors.erase(tables_it);
  // Group sizes >= 1 that add up to at most the stacked rows (no overflow).
  const std::int64_t stacked = tables.shape.empty() ? 0 : tables.shape[0];
  std::int64_t rows = 0;
  for (const auto n : offset) {
    if (n < 1 || n > stacked - rows) {
      embplan::detail::fail(source + ": metadata.embplan.train.buffer.offset", n,
                            "group sizes >= 1 adding up to the " + std::to_string(stacked) +
                                " rows of tensors[\"buffer.tables\"]");
    }
    rows += n;
  }
  if (tables.shape.size() != 2 || tables.shape[0] != rows ||
      tables.shape[1] != autoshard_table_features) {
    std::string shape = "[";
    for (std::size_t k = 0; k < tables.shape.size(); ++k)
      shape += (k ? ", " : "") + std::to_string(tables.shape[k]);
    embplan::detail::fail(
        source + ": tensors[\"buffer.tables\"].shape", shape + "]",
        "[" + std::to_string(rows) + ", " + std::to_string(autoshard_table_features) + "]");
  }
  std::vector<nn::matrix> groups;
  std::size_t at = 0;
  for (const auto n : offset) {
    nn::matrix g(n, autoshard_table_features);
    for (Eigen::Index r = 0; r < g.rows(); ++r)
      for (Eigen::Index c = 0; c < g.cols(); ++c)
        g(r, c) = tables.values[at++];
    groups.push_back(std::move(g));
  }
  st.buffer = autoshard_cost_buffer::restore(static_cast<std::size_t>(o.cost_buffer),
                                             static_cast<std::size_t>(o.cost_batch),
                                             std::move(groups), std::move(cost), next);
  // The lagged networks, Adam, then the network from the rest.
  for (std::int64_t k = 0; k < history; ++k) {
    nn::autoshard_net h(autoshard_table_features, autoshard_state_features,
                        autoshard_action_features);
    nn::load_state_dict(h, file, "history." + std::to_string(k), false);
    st.history.push_back(std::move(h));
  }
  for (auto it = file.tensors.begin(); it != file.tensors.end();) {
    it = it->first.starts_with("history.") ? file.tensors.erase(it) : std::next(it);
  }
  const auto adam_tensors = detail::mdp_take_adam_tensors(file);
  st.net = nn::autoshard_net(autoshard_table_features, autoshard_state_features,
                             autoshard_action_features);
  nn::load_state_dict(st.net, file);
  st.optimizer = nn::adam(nn::adam_options{.lr = o.learning_rate});
  try {
    st.optimizer.load_state(
        detail::mdp_adam_state_from(adam_tensors, file.metadata, st.net, source));
  } catch (const error& e) {
    throw error(source + ": Adam's state: " + e.what());
  }
  return st;
}

}  // namespace embplan::inline EMBPLAN_ABI::rl
