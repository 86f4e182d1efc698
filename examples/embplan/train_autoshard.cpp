// `embplan train autoshard`: AutoShard's Algorithm 1 (KDD'22 §4.4-4.5,
// rl/autoshard_train.hpp) on a tasks file: actors play sampled episodes and
// the meter measures each plan's shards (the reward: the degree of balance, or
// the memory penalty), the learner takes IMPALA steps with V-trace, the cost
// head learns from every measured shard. Writes the rl::autoshard_policy file
// (metadata: feature statistics, meter, hyperparameters, learning curve).
// Under `mpirun -np N` the ranks are the actors: rank r plays episodes r,
// r + N, ... of every update and measures them on its own meter, the samples
// are exchanged, and every rank takes the same learner step (the policy equals
// a one-process run's with a deterministic meter); rank 0 prints and writes.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "embplan/constraint/all_of.hpp"
#include "embplan/core/error.hpp"
#include "embplan/rl/autoshard_train.hpp"
#include "models.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "text_table.hpp"
#include "train.hpp"
#include "world.hpp"

namespace embplan_cli {

int run_train_autoshard(const train_args& a, const world& w) {
  namespace rl = embplan::rl;
  rl::autoshard_train_options o = a.autoshard;
  o.seed = a.seed;
  if (a.lr >= 0.0) o.learning_rate = a.lr;
  if (a.max_grad_norm >= 0.0) o.learner.max_grad_norm = a.max_grad_norm;
  if (a.entropy >= 0.0) o.learner.impala.entropy_cost = a.entropy;
  if (a.cost_batch > 0) o.cost_batch = a.cost_batch;
  // Every option checked before the first line of output.
  if (a.tasks.empty()) embplan::detail::fail("--tasks", "(none)", "a tasks file for autoshard");
  check_training_meter(a, "autoshard");
  if (!(o.learning_rate > 0.0)) {
    embplan::detail::fail("--lr", o.learning_rate, "a learning rate > 0");
  }
  if (!a.resume.empty() && !std::filesystem::exists(a.resume)) {
    embplan::detail::fail("--resume", a.resume, "a checkpoint file (--checkpoint)");
  }
  const auto tasks = load_training_tasks(a.tasks, /*one_device_count=*/false);
  const auto pool = load_pool(a.pool);
  // What the run is bound to: a checkpoint records it, a resume must match it
  // (not the actors, MPI ranks or threads: the policy does not depend on them).
  const auto inputs = training_inputs(a, rl::autoshard_hyperparameters(o));
  auto state = a.resume.empty() ? rl::autoshard_initial_state(tasks, o)
                                : rl::load_checkpoint(a.resume, o, inputs);
  const auto chosen = training_meter(a);
  const auto& meter = chosen.meter;
  const bool mpi = w.size() > 1;
  const rl::autoshard_player player =
      mpi ? autoshard_player_on_ranks(w, tasks, meter, o)
          : rl::autoshard_local_player(tasks, meter, o, embplan::all_of<>{});

  // Rank 0 speaks and writes; the others train the same policy silently.
  const bool speaks = w.rank() == 0;
  std::ostream out(speaks ? std::cout.rdbuf() : nullptr);
  const std::string half = pool_half_of_tasks(tasks, pool, a.split_seed);
  std::size_t fewest = tasks[0].cluster.size(), most = fewest;
  for (const auto& t : tasks) {
    fewest = std::min(fewest, t.cluster.size());
    most = std::max(most, t.cluster.size());
  }
  out << "AutoShard training (Algorithm 1, IMPALA with V-trace) on " << tasks.size() << " tasks of "
      << a.tasks << " ("
      << (fewest == most ? std::to_string(fewest)
                         : std::to_string(fewest) + "-" + std::to_string(most))
      << " devices; tables from the "
      << (half == "whole"
              ? "whole pool or not one half of it"
              : half + " half of the pool (split seed " + std::to_string(a.split_seed) + ")")
      << ")\nmeter: " << a.meter << ", " << chosen.text << " (each shard's forward + backward "
      << "kernel time; the reward is their min / max, or the memory penalty)\nactors: "
      << (mpi ? std::to_string(w.size()) + " MPI ranks" : std::to_string(o.actors) + " thread(s)")
      << ", policy lag " << o.policy_lag << "; " << o.updates << " updates of " << o.batch
      << " episodes\n";
  if (state.updates_done > 0) {
    out << "resumed from " << a.resume << " after " << state.updates_done << " of " << o.updates
        << " updates\n";
  }

  progress bar("train autoshard", "updates", static_cast<std::size_t>(o.updates),
               !a.quiet && speaks, static_cast<std::size_t>(state.updates_done));
  bar.advance(0);
  std::vector<rl::autoshard_progress> rows;
  const auto on_update = [&](const rl::autoshard_progress& p) {
    rows.push_back(p);
    if (!a.checkpoint.empty() && speaks) rl::save_checkpoint(a.checkpoint, state, o, inputs);
    bar.note(std::to_string(p.episodes) + " episodes, " + std::to_string(p.measured) +
             " measured, balance " + fixed(p.running_balance, 3));
    bar.advance();
  };
  const auto started = progress::clock::now();
  rl::autoshard_train(tasks, player, o, state, on_update);
  bar.clear();
  const double seconds = std::chrono::duration<double>(progress::clock::now() - started).count();

  // At most ~25 rows: every k-th update and the last.
  text_table table({"update", "episodes", "fit memory", "mean balance", "running balance",
                    "policy loss", "cost loss", "seconds"});
  const std::size_t step = std::max<std::size_t>(1, (rows.size() + 24) / 25);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i % step != 0 && i + 1 != rows.size()) continue;
    const auto& p = rows[i];
    table.add({std::to_string(p.update + 1), std::to_string(p.episodes),
               fixed(100.0 * p.fit_share, 0) + " %", fixed(p.mean_balance, 3),
               fixed(p.running_balance, 3), fixed(p.learner.policy, 4),
               p.cost_loss < 0.0 ? "-" : fixed(p.cost_loss, 4), fixed(p.seconds, 2)});
  }
  table.print(out);
  out << "balance: measured min / max shard latency of the update's plans that fit memory "
         "(running: exponential average, 0.9); cost loss: the cost head's MSE (ms^2)\n"
      << rows.size() << " updates (" << state.episodes << " episodes, " << state.measured
      << " plans measured) in " << progress::duration_text(seconds) << '\n';

  if (!speaks) return 0;
  auto policy = rl::autoshard_trained_policy(state, o, a.meter);
  auto meta = policy.metadata();
  meta.hyperparameters["trained_on"] = a.trained_on.empty() ? a.tasks : a.trained_on;
  meta.hyperparameters["pool_half"] = half;
  meta.hyperparameters["split_seed"] = std::to_string(a.split_seed);
  meta.hyperparameters["tasks"] = std::to_string(tasks.size());
  meta.hyperparameters["actors"] =
      mpi ? std::to_string(w.size()) + " MPI ranks" : std::to_string(o.actors) + " threads";
  rl::autoshard_policy(policy.network(), std::move(meta)).save(a.out);
  out << "wrote " << a.out << '\n';
  if (!a.checkpoint.empty()) out << "checkpoint: " << a.checkpoint << '\n';
  return 0;
}

}  // namespace embplan_cli
