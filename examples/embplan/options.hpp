#pragma once
// The options several subcommands of `embplan` (and `embplan_gpu`, examples/gpu)
// share, each defined here once with one help text, and their checks. A
// subcommand adds the groups it takes; the checks name the flag and the value.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/io/json.hpp"

namespace embplan_cli {

// --pool: the table pool.
inline void add_pool_option(CLI::App* app, std::string& pool) {
  app->add_option("--pool", pool, "table pool JSON (default: the synthetic pool, seed 0)");
}

inline std::vector<embplan::table_spec> load_pool(const std::string& path) {
  if (path.empty()) return embplan::data::synthetic_pool({.seed = 0});
  return embplan::io::pool_from_json(embplan::io::read_json_file(path));
}

// A file a subcommand writes after its work: checked before the work, so a
// typo in the path does not cost a long run.
inline void check_output_path(std::string_view flag, const std::string& path) {
  if (path.empty()) return;
  const auto parent = std::filesystem::absolute(path).parent_path();
  if (!std::filesystem::is_directory(parent)) {
    embplan::detail::fail(flag, path, "a file in an existing directory");
  }
}

// --split-seed: DreamShard's split of the pool into disjoint train and test halves.
inline void add_split_seed_option(CLI::App* app, std::uint64_t& split_seed) {
  app->add_option("--split-seed", split_seed,
                  "seed of the pool's split into disjoint train and test halves")
      ->capture_default_str();
}

// --half (+ --split-seed): which tables of the pool a subcommand draws from.
inline void add_half_options(CLI::App* app, std::string& half, std::uint64_t& split_seed) {
  app->add_option("--half", half,
                  "tables from: whole (the pool) | train | test (one half, split by "
                  "--split-seed) | default (the protocol's: train for dreamshard, else whole) | "
                  "auto (compare: the half the learned model did not train on)")
      ->capture_default_str();
  add_split_seed_option(app, split_seed);
}

// A --half value other than "auto" (which compare resolves itself); the error
// lists "auto" where the subcommand takes it.
inline embplan::data::pool_half pool_half_of(const std::string& half, bool takes_auto = false) {
  if (half != "default" && half != "whole" && half != "train" && half != "test") {
    embplan::detail::fail("--half", half,
                          std::string("one of ") + (takes_auto ? "\"auto\", " : "") +
                              "\"default\", \"whole\", \"train\", \"test\"");
  }
  return embplan::data::parse_pool_half(half, "--half");
}

// --memory-gib: the memory of every device.
inline void add_memory_option(CLI::App* app, double& memory_gib) {
  app->add_option("--memory-gib", memory_gib, "memory per device for embedding tables, GiB")
      ->capture_default_str();
}

inline std::uint64_t memory_bytes_of(double gib_value) {
  if (!(gib_value > 0.0) || gib_value > 1e9) {
    embplan::detail::fail("--memory-gib", gib_value, "a positive number of GiB");
  }
  return static_cast<std::uint64_t>(gib_value * static_cast<double>(embplan::gib));
}

// --model: the learned compute-cost model NeuroShard's planners search on (models.hpp).
inline void add_model_option(CLI::App* app, std::string& model) {
  app->add_option("--model", model,
                  "learned compute-cost model neuroshard plans on: a file of `embplan train "
                  "compute`, or none (analytic); default: the bundled CPU-meter model");
}

// --meter, --reference, --reference-ms: what prices every finished plan (models.hpp).
struct meter_args {
  std::string name = "simulated";
  bool reference = false;    // the measured meter's drift reference
  double reference_ms = 0.;  // its time; 0: measured once before the first plan
};

inline void add_meter_options(CLI::App* app, meter_args& m) {
  app->add_option("--meter", m.name,
                  "simulated (the learned model, else analytic) | analytic | measured (CPU meter; "
                  "slow: keep the task count small)")
      ->capture_default_str();
  app->add_flag("--reference", m.reference,
                "--meter measured: pair every timed run with a fixed reference shard and scale "
                "by it (cancels a shared machine's slow and fast spells)");
  app->add_option("--reference-ms", m.reference_ms,
                  "--meter measured: the reference shard's time to scale to (implies "
                  "--reference; default: measured once at the start)");
}

// --quiet: no progress line (progress.hpp; shown only when stderr is a terminal).
inline void add_quiet_option(CLI::App* app, bool& quiet) {
  app->add_flag("--quiet", quiet, "no progress line on stderr (shown only on a terminal)");
}

// --warmup, --runs, --drop: AutoShard's measuring protocol (bench/protocol.hpp).
inline void add_protocol_options(CLI::App* app, int& warmup, int& runs, int& drop) {
  app->add_option("--warmup", warmup, "protocol: warm-up runs")->capture_default_str();
  app->add_option("--runs", runs, "protocol: measured runs")->capture_default_str();
  app->add_option("--drop", drop, "protocol: highest and lowest runs dropped")
      ->capture_default_str();
}

}  // namespace embplan_cli
