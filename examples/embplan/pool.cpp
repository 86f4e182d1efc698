// `embplan pool`: the synthetic MetaSyn-like pool and its statistics.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "commands.hpp"
#include "embplan/data/pool_stats.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/io/json.hpp"
#include "options.hpp"

namespace embplan_cli {

namespace {

struct pool_args {
  std::uint64_t seed = 0;
  std::size_t tables = 856;
  std::string out;
};

int run_pool(const pool_args& a) {
  check_output_path("--out", a.out);
  const auto pool = embplan::data::synthetic_pool({.tables = a.tables, .seed = a.seed});
  const auto stats = embplan::data::compute_statistics(pool);
  std::cout << "synthetic MetaSyn-like pool, seed " << a.seed << ", " << pool.size() << " tables\n"
            << embplan::data::format_statistics(stats);
  if (!a.out.empty()) {
    embplan::io::write_pool_file(a.out, pool);
    std::cout << "wrote " << a.out << '\n';
  }
  return 0;
}

}  // namespace

command add_pool(CLI::App& app) {
  auto a = std::make_shared<pool_args>();
  auto* sub = app.add_subcommand(
      "pool", "Generate the synthetic MetaSyn-like pool and print its statistics");
  add_seed_option(sub, a->seed);
  add_int_option(sub, "--tables", a->tables, "number of tables", 1, max_tables)
      ->capture_default_str();
  sub->add_option("--out", a->out, "write the pool as JSON");
  return {sub, [a] { return run_pool(*a); }};
}

}  // namespace embplan_cli
