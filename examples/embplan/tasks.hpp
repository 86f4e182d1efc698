#pragma once
// The task options `embplan tasks` and `compare` share (tasks.cpp).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "embplan/data/tasks.hpp"

namespace embplan_cli {

struct task_args {
  std::string protocol = "neuroshard";
  std::size_t devices = 4;
  std::int32_t max_dim = 128;
  std::size_t count = 100;
  std::size_t tables = 0;  // tables per task; 0: the protocol's (e.g. DLRM-50 (4) for dreamshard)
  std::uint64_t seed = 0;
  double memory_gib = 4.0;
  std::string half = "default";
  std::uint64_t split_seed = 0;
  std::optional<double> unseen_share{};  // --unseen-share (AutoShard §5.5)
};

// The library's task options, every field checked first (the errors name the
// flags): a subcommand calls this before it prints anything.
embplan::data::task_options task_options_of(const task_args& a);

// embplan::data::task_generator, its refusals naming the flags the user typed
// (--memory-gib, --tables) instead of the library's fields
// (device_memory_bytes, max_tables); `pool` must outlive it.
embplan::data::task_generator task_generator_of(std::span<const embplan::table_spec> pool,
                                                const embplan::data::task_options& options,
                                                const task_args& a);

// tasks.next(), its error naming the flags as task_generator_of's do.
embplan::task next_task_of(embplan::data::task_generator& tasks, const task_args& a);

// Checks --devices and --max-dim values alone (compare takes lists of them).
void check_devices(std::size_t devices);
void check_max_dim(std::int32_t max_dim);

}  // namespace embplan_cli
