#pragma once
// `embplan train`'s options (train.cpp), the AutoShard kind, which has a
// translation unit of its own (train_autoshard.cpp), and what both do across
// MPI ranks (world.cpp).
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/costs.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/task.hpp"
#include "embplan/rl/autoshard_train.hpp"
#include "embplan/rl/dreamshard_train.hpp"
#include "embplan/rl/train_inputs.hpp"
#include "models.hpp"

namespace embplan_cli {

class world;

struct train_args {
  std::string kind;  // compute | comm | dreamshard | autoshard
  std::string data;
  std::string tasks;  // dreamshard, autoshard
  std::string out;
  std::string pool;  // the pool the records index (default: the synthetic pool, seed 0)
  std::string features = "embplan21";
  std::string target = "total";  // compute: total | parts (learn/train.hpp)
  std::string loss = "mse";      // compute: mse | relative
  std::string trained_on;
  std::string eval;  // records to judge the model on (e.g. the other half of the pool)
  int epochs = 0;    // 0: the kind's default (train_options / comm_train_options)
  std::uint64_t seed = 0;
  std::uint64_t split_seed = 0;  // the pool split the records' half is told by
  bool quiet = false;            // no progress line
  // dreamshard, autoshard
  std::string meter = "cpu";  // cpu | analytic
  bool reference = false;     // the CPU meter's drift reference (models.hpp)
  double reference_ms = 0.0;
  std::int64_t flush_mib = 0;  // the CPU meter's cache-flush buffer (0: twice the LLC)
  embplan::rl::dreamshard_train_options rl{};
  std::string checkpoint;  // written after every iteration (update)
  std::string resume;      // a checkpoint to continue from
  // Shared flags whose default depends on the kind: negative = the kind's.
  double lr = -1.0;
  double max_grad_norm = -1.0;
  double entropy = -1.0;
  std::int64_t cost_batch = 0;     // 0: the kind's
  std::string head_init = "zero";  // dreamshard: zero | torch (rl::policy_head_init)
  // autoshard
  embplan::rl::autoshard_train_options autoshard{};
  // The program's own meter (embplan_gpu: cuda), which --meter also takes; null: none.
  std::shared_ptr<const program_meter> own{};
  // The options given on the command line (flag, value as typed), filled by
  // add_train before the run: an option the kind ignores is refused.
  std::vector<std::pair<std::string, std::string>> given{};
};

// The tasks of `train dreamshard|autoshard`: every dim a multiple of 4 (the
// planners' default_constraint) and, when asked (DreamShard's policy is per
// device count), all on one device count; refused naming the task.
std::vector<embplan::task> load_training_tasks(const std::string& path, bool one_device_count);

// The pool half every task's tables come from, by table name; "whole" when not
// all of them are in one half or a name is not in the pool.
std::string pool_half_of_tasks(std::span<const embplan::task> tasks,
                               std::span<const embplan::table_spec> pool, std::uint64_t split_seed);

// The meter train dreamshard|autoshard measure placements with: cpu
// (compare's measured meter, its drift reference included), analytic, or the
// program's own (`own`; embplan_gpu: cuda, no drift reference). `kind` names
// the command in messages. check_training_meter checks --meter and the
// reference flags against it; training_meter makes it (the own meter's
// factory may throw where it cannot run, e.g. no GPU).
void check_training_meter(const train_args& a, std::string_view kind);
meter_choice training_meter(const train_args& a);

// What a run of train dreamshard|autoshard is bound to besides the library's
// options (which `options` holds, by the library's names): the tasks file's
// content, the pool, the split seed, the meter and its settings, and (world
// of several ranks, dreamshard) the rank count, each under its flag; the
// library's options under their flags too, so that a checkpoint resumed with
// any of them changed is refused naming the flag and both values.
embplan::rl::train_inputs training_inputs(const train_args& a,
                                          const std::map<std::string, std::string>& options);

// `embplan train autoshard` (train_autoshard.cpp).
int run_train_autoshard(const train_args& a, const world& w);

// What `train dreamshard|autoshard` do across the MPI ranks of a world of two
// or more (world.cpp, compiled into each program with its MPI setting, so that
// train.cpp and train_autoshard.cpp call no MPI themselves). In a world of one
// they throw, naming world.size. measure_plan_on_ranks: the plan measured by
// meter::mpi::measure_plan, each rank timing its own device's shard
// (collective). autoshard_player_on_ranks: rl::mpi::autoshard_mpi_player, the
// ranks as the actors.
embplan::plan_cost measure_plan_on_ranks(const world& w, const embplan::task& t,
                                         const embplan::plan& p, std::uint64_t flush_bytes);
embplan::rl::autoshard_player autoshard_player_on_ranks(
    const world& w, std::span<const embplan::task> tasks, const any_meter& meter,
    const embplan::rl::autoshard_train_options& o);

}  // namespace embplan_cli
