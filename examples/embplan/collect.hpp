#pragma once
// `embplan collect compute|comm`: NeuroShard's cost-data generation (§3.1,
// Algorithms 3-5) measured with the CPU meter (compute) and, under mpirun with
// two or more ranks, a real MPI_Alltoallv between the ranks (comm; one rank
// per device). Without MPI — or with one rank — comm costs come from the
// analytic model, and every record says which meter made it.
//
// Under `mpirun -np N`, compute samples are dealt round-robin to the ranks;
// after each round rank 0 gathers the records and appends them to the file
// (so an interrupted run loses at most one round). A rerun with the same
// arguments skips the ids already on file.
#if defined(EMBPLAN_WITH_MPI)
#include "embplan/meter/mpi/alltoall.hpp"  // first: it picks MPI's C API
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/data/tasks.hpp"
#include "embplan/io/json.hpp"
#include "embplan/meter/collect.hpp"
#include "embplan/meter/cpu_meter.hpp"
#include "embplan/rl/train_inputs.hpp"

#include "options.hpp"
#include "progress.hpp"
#include "world.hpp"

namespace embplan_cli {

struct collect_args {
  std::string kind;  // compute | comm
  std::string out;
  std::int64_t samples = 1000;
  std::uint64_t seed = 0;
  std::string pool;            // JSON; default: the synthetic pool, seed 0
  std::string half = "whole";  // whole | train | test: which half of the pool to draw from
  std::uint64_t split_seed = 0;
  std::vector<std::int32_t> dims{4, 8, 16, 32, 64, 128};
  std::int32_t min_tables = 1;
  std::int32_t max_tables = 15;
  std::int32_t devices = 0;  // comm: 0 = the MPI world's size (4 without MPI)
  std::int32_t min_place = 10;
  std::int32_t max_place = 60;
  double max_start_ms = 20.0;
  double memory_gib = 4.0;
  std::int64_t batch_size = 4096;
  std::int64_t max_weight_mib = 256;  // compute: weights materialised per sample
  std::int64_t flush_mib = 0;         // compute: the CPU meter's cache-flush buffer (0: 2 x LLC)
  int warmup = embplan::meter::protocol_options{}.warmup;
  int runs = embplan::meter::protocol_options{}.runs;
  int drop = embplan::meter::protocol_options{}.drop;
  // compute: the CPU meter's drift reference (meter_options::reference), with
  // reference_ms as given or, when 0, measured once by rank 0 for all ranks.
  bool reference = false;
  double reference_ms = 0.0;
  bool quiet = false;
  // The subcommand (add_collect_options): which options were given, so that
  // one the kind or mode ignores is refused.
  const CLI::App* app = nullptr;
};

// The kinds of collect each option applies to (one not listed: both). The
// protocol's --warmup, --runs and --drop time the compute meter and, under
// mpirun, the measured all-to-all; comm in a world of one is priced by the
// analytic model, which takes none.
inline constexpr std::pair<std::string_view, std::string_view> collect_option_kinds[] = {
    {"--max-weight-mib", "compute"}, {"--min-tables", "compute"}, {"--max-tables", "compute"},
    {"--flush-mib", "compute"},      {"--reference", "compute"},  {"--reference-ms", "compute"},
    {"--devices", "comm"},           {"--min-place", "comm"},     {"--max-place", "comm"},
    {"--max-start-ms", "comm"},      {"--memory-gib", "comm"},    {"--warmup", "protocol"},
    {"--runs", "protocol"},          {"--drop", "protocol"},
};

// Refuses an option given that the kind (or, for the protocol, the world)
// ignores, naming it, its value and where it applies.
inline void check_collect_options_apply(const collect_args& a, const world& w) {
  if (a.app == nullptr) return;
  for (const CLI::Option* opt : a.app->get_options()) {
    if (opt->count() == 0) continue;
    const std::string flag = opt->get_name();
    for (const auto& [name, kinds] : collect_option_kinds) {
      if (name != flag) continue;
      const bool protocol = kinds == "protocol";
      if (protocol ? a.kind == "compute" || w.size() > 1 : kinds == a.kind) continue;
      std::string shown;
      for (const auto& r : opt->results())
        shown += (shown.empty() ? "" : ",") + r;
      const std::string where =
          protocol ? "only with collect compute, or collect comm under mpirun (without MPI ranks "
                     "the analytic model prices the all-to-alls: nothing is timed)"
                   : "only with collect " + std::string(kinds) + " (collect " + a.kind +
                         " takes no " + flag + ")";
      throw embplan::error(
          embplan::detail::field_message(flag, shown.empty() ? "true" : shown, where));
    }
  }
}

// The options `embplan collect` and `embplan_gpu collect` share.
inline void add_collect_options(CLI::App* app, collect_args& a) {
  a.app = app;
  app->add_option("--out", a.out, "JSON-lines file (appended; ids on file are skipped)")
      ->required();
  add_int_option(app, "--samples", a.samples, "sample ids 0..N-1 to have on file", 0, 1e9)
      ->capture_default_str();
  add_seed_option(app, a.seed);
  add_half_options(app, a.half, a.split_seed);
  add_int_option(app, "--batch-size", a.batch_size,
                 "compute: bags per table; comm: the global batch", 1, 1e7)
      ->capture_default_str();
  add_int_option(app, "--max-weight-mib", a.max_weight_mib,
                 "compute: weights materialised per sample, MiB (rows scaled down to fit)", 1,
                 1 << 20)
      ->capture_default_str();
  add_protocol_options(app, a.warmup, a.runs, a.drop);
  add_quiet_option(app, a.quiet);
}

// What every record of a run records under "inputs" and an append must
// match (meter::record_settings::inputs): the options that change what a
// record measures, or which sample an id names, beyond what the record
// describes itself (its tables, dims, placement and batch).
inline std::map<std::string, std::string> collect_inputs(const collect_args& a,
                                                         const embplan::meter::collect_options& o,
                                                         bool mpi_comm) {
  const auto number = [](double x) { return nlohmann::json(x).dump(); };
  std::string dims;
  for (const auto d : a.dims)
    dims += (dims.empty() ? "" : ",") + std::to_string(d);
  std::map<std::string, std::string> in{
      {"--pool",
       a.pool.empty() ? "the synthetic pool, seed 0" : embplan::rl::content_fingerprint(a.pool)},
      {"--seed", std::to_string(a.seed)},
      {"--half", a.half},
      {"--split-seed", std::to_string(a.split_seed)},
      {"--dims", dims}};
  const bool timed = a.kind == "compute" || mpi_comm;
  if (timed) {
    in["--warmup"] = std::to_string(a.warmup);
    in["--runs"] = std::to_string(a.runs);
    in["--drop"] = std::to_string(a.drop);
  }
  if (a.kind == "compute") {
    in["--min-tables"] = std::to_string(a.min_tables);
    in["--max-tables"] = std::to_string(a.max_tables);
    in["--max-weight-mib"] = std::to_string(a.max_weight_mib);
    in["--flush-mib"] = std::to_string(a.flush_mib);
  } else {
    in["--devices"] = std::to_string(o.devices);
    in["--min-place"] = std::to_string(a.min_place);
    in["--max-place"] = std::to_string(a.max_place);
    in["--max-start-ms"] = number(a.max_start_ms);
    in["--memory-gib"] = number(a.memory_gib);
  }
  return in;
}

// `make_meter(meter_options)` builds the compute meter (anything with
// measure(tables, seed) -> shard_measurement): the CPU's shard_meter in
// `embplan collect`, the GPU's in `embplan_gpu collect`; `meter_name` goes
// into every compute record.
template <class MakeMeter>
int run_collect(const collect_args& a, const world& w, MakeMeter&& make_meter,
                const std::string& compute_meter_name) {
  namespace eb = embplan::meter;
  if (a.kind != "compute" && a.kind != "comm") {
    embplan::detail::fail("kind", a.kind, "\"compute\" or \"comm\"");
  }
  if (a.out.empty()) embplan::detail::fail("--out", "\"\"", "an output path");
  check_collect_options_apply(a, w);
  // The records file, before any work: a regular file (or a new one) this
  // process may append to (recorded_ids below refuses a directory, device
  // or FIFO as every reader does).
  check_output_path("--out", a.out);
  if (a.samples < 0) embplan::detail::fail("--samples", a.samples, "a count >= 0");
  if (!(a.memory_gib > 0.0)) embplan::detail::fail("--memory-gib", a.memory_gib, "> 0");
  const auto pool = a.pool.empty() ? embplan::data::synthetic_pool({.seed = 0})
                                   : embplan::io::read_pool_file(a.pool);
  eb::collect_options o;
  o.dims = a.dims;
  o.min_tables = a.min_tables;
  o.max_tables = a.max_tables;
  o.devices = a.devices > 0 ? a.devices : (w.size() > 1 ? w.size() : 4);
  o.min_place = a.min_place;
  o.max_place = a.max_place;
  o.max_start_ms = a.max_start_ms;
  o.device_memory_bytes =
      static_cast<std::uint64_t>(a.memory_gib * static_cast<double>(1ull << 30));
  o.seed = a.seed;
  naming_flags({{"collect.dims", "--dims"},
                {"collect.min_tables", "--min-tables"},
                {"collect.max_tables", "--max-tables"},
                {"collect.devices", "--devices"},
                {"collect.min_place", "--min-place"},
                {"collect.max_place", "--max-place"},
                {"collect.max_start_ms", "--max-start-ms"},
                {"collect.pool.size", "--pool"}},
               [&] { eb::validate(o, pool.size()); });
  const eb::protocol_options protocol{.warmup = a.warmup, .runs = a.runs, .drop = a.drop};
  naming_flags(
      {{"protocol.warmup", "--warmup"}, {"protocol.runs", "--runs"}, {"protocol.drop", "--drop"}},
      [&] { eb::validate(protocol); });
  if (a.batch_size < 1) embplan::detail::fail("--batch-size", a.batch_size, "a count >= 1");
  if (a.max_weight_mib < 1) {
    embplan::detail::fail("--max-weight-mib", a.max_weight_mib, "at least 1 MiB");
  }
  if (!(a.reference_ms >= 0.0) || !std::isfinite(a.reference_ms)) {
    embplan::detail::fail("--reference-ms", a.reference_ms,
                          "a finite time >= 0 (0: measured, with --reference)");
  }
  const bool reference = a.reference || a.reference_ms > 0.0;
  if (reference && a.kind != "compute") {
    embplan::detail::fail("--reference", true,
                          "off for comm samples (the drift reference scales the compute meter)");
  }
  if (a.flush_mib != 0 && a.kind != "compute") {
    embplan::detail::fail("--flush-mib", a.flush_mib,
                          "0 for comm samples (it sizes the compute meter's cache flush)");
  }
  const bool mpi_comm = a.kind == "comm" && w.size() > 1;
  if (mpi_comm && o.devices != w.size()) {
    embplan::detail::fail(
        "--devices", o.devices,
        "the number of MPI ranks (" + std::to_string(w.size()) + "): one rank per device");
  }
#if !defined(EMBPLAN_WITH_MPI)
  (void)mpi_comm;
#endif
  auto augmented = eb::augment(pool.size(), o.dims);
  // DreamShard's disjoint halves (data/tasks.hpp): a model trained on one half
  // is judged on tasks drawn from the other. Records keep whole-pool indices.
  const auto half = pool_half_of(a.half);
  if (half == embplan::data::pool_half::train || half == embplan::data::pool_half::test) {
    const auto [train, test] = embplan::data::detail::split_indices(pool.size(), a.split_seed);
    const auto& keep = half == embplan::data::pool_half::train ? train : test;
    std::erase_if(augmented, [&](const eb::augmented_table& x) {
      return !std::binary_search(keep.begin(), keep.end(), x.table);
    });
  }

  // Every rank reads what is on file before rank 0 appends to it; every
  // record on file must have been made with this run's settings.
  const std::string meter =
      a.kind == "compute" ? compute_meter_name : (mpi_comm ? "mpi-alltoallv" : "analytic");
  eb::record_settings settings{.kind = a.kind, .meter = meter, .batch_size = a.batch_size};
  if (a.kind == "compute" && reference) settings.reference_ms = a.reference_ms;
  settings.inputs = collect_inputs(a, o, mpi_comm);
  const auto done = eb::recorded_ids(a.out, &settings);
  w.barrier();
  std::vector<std::int64_t> todo;
  for (std::int64_t id = 0; id < a.samples; ++id)
    if (!done.contains(id)) todo.push_back(id);

  std::ofstream file;
  if (w.rank() == 0) {
    eb::truncate_torn_tail(a.out);
    file.open(a.out, std::ios::app);
    if (!file) embplan::detail::fail("--out", a.out, "a writable file");
  }
  if (w.rank() == 0 && !a.quiet) {
    std::cerr << "embplan collect " << a.kind << ": " << todo.size() << " samples to measure ("
              << (a.samples - static_cast<std::int64_t>(todo.size())) << " already in " << a.out
              << "), meter " << meter << ", " << w.size() << " rank(s)\n";
  }
  progress bar("collect " + a.kind, "samples", static_cast<std::size_t>(a.samples),
               w.rank() == 0 && !a.quiet, static_cast<std::size_t>(a.samples) - todo.size());
  const auto start = std::chrono::steady_clock::now();
  std::size_t written = 0;
  const auto append = [&](const std::vector<std::string>& lines) {
    std::size_t n = 0;
    // Each record whole, in one write, flushed: a kill leaves at most a torn
    // last line, which the next run drops (truncate_torn_tail).
    for (const auto& line : lines) {
      if (line.empty()) continue;
      const std::string whole = line + '\n';
      file.write(whole.data(), static_cast<std::streamsize>(whole.size()));
      file.flush();
      if (!file) {
        embplan::detail::fail("--out", a.out,
                              "a file the records can be appended to (a write failed after " +
                                  std::to_string(written + n) + " records of this run)");
      }
      ++n;
    }
    written += n;
    bar.advance(n);
  };

  if (a.kind == "compute") {
    const auto ranks = static_cast<std::size_t>(w.size());
    eb::meter_options mo{.batch_size = a.batch_size,
                         .protocol = protocol,
                         .max_weight_bytes = static_cast<std::uint64_t>(a.max_weight_mib) << 20,
                         .flush_bytes = flush_bytes_of(a.flush_mib),
                         .reference = reference,
                         .reference_ms = a.reference_ms};
    if (reference && mo.reference_ms == 0.0) {
      // One scale for every rank and every record: rank 0 measures it.
      mo.reference_ms = w.broadcast(w.rank() == 0 ? eb::calibrate_reference(mo) : 0.0);
      if (w.rank() == 0 && !a.quiet) {
        std::cerr << "embplan collect compute: drift reference " << mo.reference_ms
                  << " ms (pass --reference-ms " << mo.reference_ms
                  << " to resume on the same scale)\n";
      }
    }
    auto shard_meter = make_meter(mo);
    for (std::size_t round = 0; round * ranks < todo.size(); ++round) {
      const std::size_t k = round * ranks + static_cast<std::size_t>(w.rank());
      std::string line;
      if (k < todo.size()) {
        const auto sample = eb::make_compute_sample(augmented, o, todo[k]);
        const auto specs = eb::sample_specs(pool, sample.tables);
        const auto m = shard_meter.measure(
            specs, embplan::derive_seed(a.seed, static_cast<std::uint64_t>(sample.id)));
        auto record = eb::compute_record(sample, m, meter, a.batch_size);
        if (reference) record["reference_ms"] = mo.reference_ms;
        record["inputs"] = settings.inputs;
        line = record.dump();
      }
      const auto lines = w.gather(line);
      if (w.rank() == 0) append(lines);
    }
  } else {
    for (const auto id : todo) {
      const auto sample = eb::make_placement_sample(pool, augmented, o, id);
      std::vector<embplan::comm_cost> costs;
#if defined(EMBPLAN_WITH_MPI)
      if (mpi_comm) {
        costs = eb::mpi::measure_alltoall(
            MPI_COMM_WORLD, sample.dim_sum, sample.start_ms,
            {.batch_size = a.batch_size,
             .protocol = {.warmup = a.warmup, .runs = a.runs, .drop = a.drop, .flush = false}});
      } else {
        costs = eb::analytic_comm(sample, a.batch_size);
      }
#else
      costs = eb::analytic_comm(sample, a.batch_size);
#endif
      if (w.rank() == 0) {
        auto record = eb::comm_record(sample, costs, meter, a.batch_size);
        record["inputs"] = settings.inputs;
        append({record.dump()});
      }
    }
  }
  bar.clear();
  if (w.rank() == 0 && !a.quiet) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cerr << "embplan collect " << a.kind << ": wrote " << written << " records to " << a.out
              << " in " << s << " s\n";
  }
  return 0;
}

}  // namespace embplan_cli
