#pragma once
// Command-line options shared by the measuring subcommands of `embplan` (CPU
// meter) and `embplan_gpu` (GPU meter, examples/gpu): AutoShard's protocol and
// the observation counts.
#include <CLI/CLI.hpp>

#include "observe.hpp"

namespace embplan_cli {

inline void add_protocol_options(CLI::App* app, int& warmup, int& runs, int& drop) {
  app->add_option("--warmup", warmup, "protocol: warm-up runs")->capture_default_str();
  app->add_option("--runs", runs, "protocol: measured runs")->capture_default_str();
  app->add_option("--drop", drop, "protocol: highest and lowest runs dropped")
      ->capture_default_str();
}

inline void add_observe_options(CLI::App* app, observe_args& a) {
  app->add_option("--batch-size", a.batch_size, "bags per table")->capture_default_str();
  app->add_option("--sets", a.sets, "(1): random multi-table sets")->capture_default_str();
  app->add_option("--tables-per-set", a.tables_per_set, "(1): tables per set")
      ->capture_default_str();
  app->add_option("--halves", a.halves, "(2): tables split per dimension")->capture_default_str();
  app->add_option("--repeats", a.repeats, "(0): measurements of one shard")->capture_default_str();
  app->add_option("--seed", a.seed, "random seed")->capture_default_str();
  add_protocol_options(app, a.warmup, a.runs, a.drop);
}

}  // namespace embplan_cli
