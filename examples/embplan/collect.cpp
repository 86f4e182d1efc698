// `embplan collect compute|comm` on the CPU meter (collect.hpp).
#include "collect.hpp"  // first: under EMBPLAN_WITH_MPI it includes <mpi.h> (MPI's C API)

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "options.hpp"

namespace embplan_cli {

namespace {

int run_cpu_collect(const collect_args& a) {
  const world w;
  return w.run_or_abort(
      [&] {
        return run_collect(
            a, w,
            [](const embplan::meter::meter_options& o) { return embplan::meter::shard_meter(o); },
            "cpu");
      },
      exit_bad_input);
}

}  // namespace

command add_collect(CLI::App& app) {
  auto a = std::make_shared<collect_args>();
  auto* sub = app.add_subcommand(
      "collect", "Measure cost data (NeuroShard Alg. 3-5) as JSON lines; resumable; MPI-aware");
  sub->add_option("kind", a->kind, "compute | comm")->required();
  add_collect_options(sub, *a);
  add_pool_option(sub, a->pool);
  add_int_option(sub, "--dims", a->dims, "augmentation dims (Alg. 3), multiples of 4", 4, 1024)
      ->delimiter(',')
      ->capture_default_str();
  add_int_option(sub, "--min-tables", a->min_tables, "compute: fewest tables per combination", 1,
                 1000)
      ->capture_default_str();
  add_int_option(sub, "--max-tables", a->max_tables, "compute: most tables per combination", 1,
                 1000)
      ->capture_default_str();
  add_int_option(sub, "--devices", a->devices, "comm: devices (default: MPI ranks, else 4)", 1,
                 max_devices);
  add_int_option(sub, "--min-place", a->min_place, "comm: fewest tables per placement", 1, 100000)
      ->capture_default_str();
  add_int_option(sub, "--max-place", a->max_place, "comm: most tables per placement", 1, 100000)
      ->capture_default_str();
  add_real_option(sub, "--max-start-ms", a->max_start_ms, "comm: start times in [0, this]", 0, 1e6)
      ->capture_default_str();
  add_memory_option(sub, a->memory_gib);
  add_flush_option(sub, a->flush_mib, "compute: ");
  sub->add_flag("--reference", a->reference,
                "compute: pair every timed run with a fixed reference shard and scale by it "
                "(cancels a shared machine's slow and fast spells)");
  add_real_option(sub, "--reference-ms", a->reference_ms,
                  "compute: the reference shard's time to scale to (implies --reference; "
                  "default: measured once by rank 0); recorded in every record",
                  0, 1e6);
  return {sub, [a] { return run_cpu_collect(*a); }};
}

}  // namespace embplan_cli
