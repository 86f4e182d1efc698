// `embplan tasks`: sharding tasks by a paper's protocol.
#include "tasks.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include "commands.hpp"
#include "embplan/core/error.hpp"
#include "embplan/io/json.hpp"
#include "options.hpp"

namespace embplan_cli {

void check_devices(std::size_t devices) {
  if (devices == 0 || devices > static_cast<std::size_t>(max_devices)) {
    embplan::detail::fail("--devices", devices, "a device count in " + range_text(1, max_devices));
  }
}

void check_max_dim(std::int32_t max_dim) {
  if (max_dim < 4 || max_dim > 1024 || (max_dim & (max_dim - 1)) != 0) {
    embplan::detail::fail("--max-dim", max_dim, "a power of two in [4, 1024]");
  }
}

namespace {

// Rethrows `e`, the error of the library's task generation, naming the flags
// the user typed (--memory-gib, --tables) instead of the library's fields
// (device_memory_bytes, max_tables); any other error as it is. Called in a
// handler of `e`.
[[noreturn]] void rethrow_with_flags(const embplan::error& e, const task_args& a) {
  std::ostringstream gib;
  gib << a.memory_gib;
  const std::string gib_text = gib.str();
  const std::string tables_text = std::to_string(a.tables);
  for (auto text : {renamed_field(e.what(), "device_memory_bytes", "--memory-gib", &gib_text),
                    renamed_field(e.what(), "max_tables", "--tables", &tables_text)}) {
    if (!text.empty()) throw embplan::error(text);
  }
  throw;
}

}  // namespace

embplan::data::task_generator task_generator_of(std::span<const embplan::table_spec> pool,
                                                const embplan::data::task_options& options,
                                                const task_args& a) {
  try {
    return embplan::data::task_generator(pool, options);
  } catch (const embplan::error& e) {
    rethrow_with_flags(e, a);
  }
}

embplan::task next_task_of(embplan::data::task_generator& tasks, const task_args& a) {
  try {
    return tasks.next();
  } catch (const embplan::error& e) {
    rethrow_with_flags(e, a);
  }
}

embplan::data::task_options task_options_of(const task_args& a) {
  embplan::data::task_options o;
  if (a.protocol != "neuroshard" && a.protocol != "dreamshard" && a.protocol != "autoshard") {
    embplan::detail::fail("--protocol", a.protocol,
                          "one of \"neuroshard\", \"dreamshard\", \"autoshard\"");
  }
  o.proto = embplan::data::parse_protocol(a.protocol);
  check_devices(a.devices);
  check_max_dim(a.max_dim);
  if (a.count == 0 || a.count > static_cast<std::size_t>(max_task_count)) {
    embplan::detail::fail("--count", a.count, "a task count in " + range_text(1, max_task_count));
  }
  if (a.tables > static_cast<std::size_t>(max_tables)) {
    embplan::detail::fail("--tables", a.tables, "a table count in " + range_text(0, max_tables));
  }
  o.min_tables = a.tables;
  o.max_tables = a.tables;
  o.devices = a.devices;
  o.max_dim = a.max_dim;
  o.count = a.count;
  o.seed = a.seed;
  o.device_memory_bytes = memory_bytes_of(a.memory_gib);
  o.half = pool_half_of(a.half);
  o.split_seed = a.split_seed;
  if (a.unseen_share && o.half != embplan::data::pool_half::protocol_default) {
    embplan::detail::fail(
        "--unseen-share", *a.unseen_share,
        "--half default (the share draws from both halves), not --half " + a.half);
  }
  o.unseen_share = a.unseen_share;
  (void)embplan::data::resolve_protocol(o);  // what is left to check
  return o;
}

namespace {

struct tasks_command {
  task_args task;
  std::string pool;
  std::string out;
};

int run_tasks(const tasks_command& a) {
  const auto options = task_options_of(a.task);
  check_output_path("--out", a.out);
  const auto pool = load_pool(a.pool);
  // One task in memory at a time: each is drawn as the file reaches it.
  auto tasks = task_generator_of(pool, options, a.task);
  std::size_t min_t = ~std::size_t{0};
  std::size_t max_t = 0;
  embplan::task current;
  embplan::io::write_tasks_file(a.out, tasks.count(), [&]() -> const embplan::task& {
    current = next_task_of(tasks, a.task);
    min_t = std::min(min_t, current.tables.size());
    max_t = std::max(max_t, current.tables.size());
    return current;
  });
  std::cout << "wrote " << tasks.count() << " " << a.task.protocol << " tasks (" << min_t << "-"
            << max_t << " tables on " << a.task.devices << " devices";
  if (a.task.unseen_share) {
    std::cout << ", " << embplan::data::detail::share_text(*a.task.unseen_share)
              << " of each from the test half";
  }
  std::cout << ") to " << a.out << '\n';
  return 0;
}

}  // namespace

command add_tasks(CLI::App& app) {
  auto a = std::make_shared<tasks_command>();
  auto& t = a->task;
  auto* sub = app.add_subcommand("tasks", "Generate sharding tasks by a paper's protocol");
  sub->add_option("--protocol", t.protocol, "neuroshard | dreamshard | autoshard")
      ->capture_default_str();
  add_int_option(sub, "--devices", t.devices, "devices per task", 1, max_devices)
      ->capture_default_str();
  add_int_option(sub, "--max-dim", t.max_dim, "largest table dimension (power of two)", 4, 1024)
      ->capture_default_str();
  add_int_option(sub, "--count", t.count, "number of tasks", 1, max_task_count)
      ->capture_default_str();
  add_int_option(sub, "--tables", t.tables,
                 "tables per task (0: the protocol's; dreamshard: DLRM-T with T = --tables)", 0,
                 max_tables)
      ->capture_default_str();
  add_seed_option(sub, t.seed);
  add_memory_option(sub, t.memory_gib);
  add_pool_option(sub, a->pool);
  add_half_options(sub, t.half, t.split_seed);
  add_unseen_share_option(sub, t.unseen_share);
  sub->add_option("--out", a->out, "output tasks JSON")->required();
  return {sub, [a] { return run_tasks(*a); }};
}

}  // namespace embplan_cli
