#pragma once
// `embplan observe`: the papers' three observations about embedding cost,
// measured on the CPU meter (they were made on GPUs with FBGEMM), after the
// meter's own repeatability (0):
//  (1) multi-table: is a fused multi-table cost below the sum of its
//      single-table costs? (AutoShard §3.2, Fig. 4 right; NeuroShard §2.1
//      Observation 2)
//  (2) column halves: does each half of a column-split table cost more than
//      half the original? (NeuroShard §2.1 Observation 1)
//  (3) growth: cost against dimension, pooling factor and hash size, and as
//      indices concentrate (AutoShard §3.1, Fig. 4 left and middle).
// Every figure is forward + backward of one fused embedding bag under the
// AutoShard protocol (meter/protocol.hpp), at the meter's batch size.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/random.hpp"
#include "embplan/data/synthetic_pool.hpp"
#include "embplan/meter/collect.hpp"
#include "embplan/meter/cpu_meter.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "text_table.hpp"

namespace embplan_cli {

struct observe_args {
  std::int64_t batch_size = 2048;
  std::int32_t sets = 50;  // observation 1: random 10-table sets
  std::int32_t tables_per_set = 10;
  std::int32_t halves = 20;   // observation 2: random tables split at each dim
  std::int32_t repeats = 10;  // observation 0: measurements of one shard
  std::uint64_t seed = 0;
  int warmup = 2;
  int runs = 10;
  int drop = 2;
  bool repeatability = false;  // only (0), under each meter configuration
  double reference_ms = 0.0;   // the drift-reference rows' scale (0: each meter measures it)
  bool separate = false;       // CPU: also time forward and backward alone ((1) splits by part)
  std::int64_t max_weight_mib = 1536;  // CPU: largest shard materialised (10M x 32 fp32 fits)
  std::int64_t flush_mib = 0;          // CPU: the cache-flush buffer (0: twice the LLC)
  bool quiet = false;                  // no progress line
};

// The options `embplan observe` and `embplan_gpu observe` share.
inline void add_observe_options(CLI::App* app, observe_args& a) {
  add_int_option(app, "--batch-size", a.batch_size, "bags per table", 1, 1e7)
      ->capture_default_str();
  add_int_option(app, "--sets", a.sets, "(1): random multi-table sets", 1, 100000)
      ->capture_default_str();
  add_int_option(app, "--tables-per-set", a.tables_per_set, "(1): tables per set", 2, 1000)
      ->capture_default_str();
  add_int_option(app, "--halves", a.halves, "(2): tables split per dimension", 1, 100000)
      ->capture_default_str();
  add_int_option(app, "--repeats", a.repeats, "(0): measurements of one shard", 2, 100000)
      ->capture_default_str();
  add_seed_option(app, a.seed);
  add_protocol_options(app, a.warmup, a.runs, a.drop);
  add_quiet_option(app, a.quiet);
}

namespace detail {

inline embplan::table_spec synthetic_table(std::int64_t rows, std::int32_t dim, double pf,
                                           std::size_t reuse_bin) {
  embplan::table_spec t;
  t.name = "synthetic";
  t.rows = rows;
  t.dim = dim;
  t.pooling_factor = pf;
  t.reuse_hist[reuse_bin] = 1.0;
  return t;
}

}  // namespace detail

// `observe --repeatability`: one 10-table pool shard (dim 32), measured
// `repeats` times under six meter configurations — wall clock or the thread's
// CPU time; the plain protocol, the median of 3 protocol means, or the
// protocol with the drift reference (meter_options::reference) — taken in
// turn (measurement r of every configuration before r + 1), so that all six
// see the same machine. Prints, per configuration, the coefficient of
// variation between the measurements (the meter's repeatability) and the mean
// CV of the runs within one measurement.
inline int run_repeatability(const observe_args& a) {
  namespace eb = embplan::meter;
  const auto pool = embplan::data::synthetic_pool({.seed = 0});
  embplan::rng gen(embplan::derive_seed(a.seed, 0x0b5e));
  std::vector<embplan::table_spec> shard;
  for (const auto i : eb::detail::sample_distinct(gen, pool.size(), 10)) {
    auto t = pool[i];
    t.dim = 32;
    shard.push_back(std::move(t));
  }
  struct configuration {
    const char* name;
    eb::meter_clock clock;
    int repeats;
    bool reference;
  };
  const std::vector<configuration> configurations{
      {"wall clock, protocol", eb::meter_clock::wall, 1, false},
      {"thread CPU, protocol", eb::meter_clock::thread_cpu, 1, false},
      {"wall clock, median of 3", eb::meter_clock::wall, 3, false},
      {"thread CPU, median of 3", eb::meter_clock::thread_cpu, 3, false},
      {"wall clock, drift reference", eb::meter_clock::wall, 1, true},
      {"thread CPU, drift reference", eb::meter_clock::thread_cpu, 1, true},
  };
  std::vector<eb::shard_meter> meters;
  for (const auto& c : configurations) {
    meters.emplace_back(
        eb::meter_options{.batch_size = a.batch_size,
                          .seed = a.seed,
                          .protocol = {.warmup = a.warmup, .runs = a.runs, .drop = a.drop},
                          .flush_bytes = flush_bytes_of(a.flush_mib),
                          .separate = false,
                          .clock = c.clock,
                          .repeats = c.repeats,
                          .reference = c.reference,
                          .reference_ms = c.reference ? a.reference_ms : 0.0});
  }
  std::vector<std::vector<double>> means(configurations.size());
  std::vector<double> within(configurations.size(), 0.0);
  progress bar("observe --repeatability", "measurements",
               static_cast<std::size_t>(a.repeats) * configurations.size(), !a.quiet);
  for (std::int32_t r = 0; r < a.repeats; ++r) {
    for (std::size_t c = 0; c < configurations.size(); ++c) {
      const auto m = meters[c].measure(shard, a.seed);
      means[c].push_back(m.total.mean_ms);
      within[c] += m.total.cv() / a.repeats;
      bar.advance();
    }
  }
  bar.clear();
  std::cout << "CPU meter repeatability: one 10-table shard (dim 32), B = " << a.batch_size
            << " bags per table, forward + backward, protocol W=" << a.warmup << " B=" << a.runs
            << " K=" << a.drop << ", " << a.repeats << " measurements per configuration\n";
  text_table table({"configuration", "mean ms", "min ms", "max ms", "CV between %", "CV within %"});
  for (std::size_t c = 0; c < configurations.size(); ++c) {
    const auto moments = eb::trimmed(means[c], 0);
    table.add({configurations[c].name, fixed(moments.mean_ms, 3),
               fixed(moments.sorted_ms.front(), 3), fixed(moments.sorted_ms.back(), 3),
               fixed(100.0 * moments.cv(), 2), fixed(100.0 * within[c], 2)});
  }
  table.print(std::cout);
  for (std::size_t c = 0; c < configurations.size(); ++c) {
    if (!configurations[c].reference) continue;
    std::cout << configurations[c].name << ": scaled to a reference time of "
              << fixed(meters[c].reference_ms(), 3) << " ms"
              << (a.reference_ms > 0.0 ? " (given)" : " (measured by the meter at its start)")
              << '\n';
  }
  return 0;
}

inline void validate(const observe_args& a) {
  if (a.repeats < 2) embplan::detail::fail("observe.repeats", a.repeats, "a count >= 2");
  if (a.sets < 1) embplan::detail::fail("observe.sets", a.sets, "a count >= 1");
  if (a.tables_per_set < 2) {
    embplan::detail::fail("observe.tables_per_set", a.tables_per_set, "a count >= 2");
  }
  if (a.halves < 1) embplan::detail::fail("observe.halves", a.halves, "a count >= 1");
}

// The meter options of `observe`: the protocol and batch from the arguments,
// shards up to `max_weight_bytes`; forward + backward only unless `separate`.
inline embplan::meter::meter_options observe_meter_options(const observe_args& a,
                                                           std::uint64_t max_weight_bytes,
                                                           bool separate = false) {
  return {.batch_size = a.batch_size,
          .seed = a.seed,
          .protocol = {.warmup = a.warmup, .runs = a.runs, .drop = a.drop},
          .max_weight_bytes = max_weight_bytes,
          .flush_bytes = flush_bytes_of(a.flush_mib),
          .separate = separate};
}

// Observations (0)-(3) on any meter with measure(tables, seed) -> shard_measurement
// and options(): meter::shard_meter (CPU) here, meter::cuda_shard_meter through
// examples/gpu (embplan_gpu).
template <class Meter>
int run_observations(const observe_args& a, Meter& meter, const std::string& meter_name) {
  namespace eb = embplan::meter;
  validate(a);
  const eb::meter_options& mo = meter.options();
  // Every measurement below, in order: (0), (1) fused and singles, (2), (3).
  const std::size_t measurements =
      static_cast<std::size_t>(a.repeats) +
      static_cast<std::size_t>(a.sets) * (1 + static_cast<std::size_t>(a.tables_per_set)) +
      10 * static_cast<std::size_t>(a.halves) + 23;
  progress bar("observe", "measurements", measurements, !a.quiet);
  const auto measure = [&](std::span<const embplan::table_spec> tables, std::uint64_t seed) {
    auto m = meter.measure(tables, seed);
    bar.advance();
    return m;
  };
  // Output goes where the progress line was.
  const auto say = [&]() -> std::ostream& {
    bar.clear();
    return std::cout;
  };
  const auto measure_total = [&](std::span<const embplan::table_spec> tables, std::uint64_t seed) {
    return measure(tables, seed).total.mean_ms;
  };
  const auto pool = embplan::data::synthetic_pool({.seed = 0});
  embplan::rng gen(embplan::derive_seed(a.seed, 0x0b5e));
  const std::vector<std::int32_t> dims{4, 8, 16, 32, 64, 128};
  say() << meter_name << ", B = " << mo.batch_size << " bags per table, forward + backward, "
        << "protocol W=" << mo.protocol.warmup << " B=" << mo.protocol.runs
        << " K=" << mo.protocol.drop << "\n\n";

  // (0) repeatability: one 10-table shard measured `repeats` times.
  {
    std::vector<embplan::table_spec> shard;
    for (const auto i : eb::detail::sample_distinct(gen, pool.size(), 10)) {
      auto t = pool[i];
      t.dim = 32;
      shard.push_back(std::move(t));
    }
    std::vector<double> means;
    double within = 0.0;
    for (std::int32_t r = 0; r < a.repeats; ++r) {
      const auto m = measure(shard, a.seed);
      means.push_back(m.total.mean_ms);
      within += m.total.cv() / a.repeats;
    }
    const auto moments = eb::trimmed(means, 0);
    say() << "(0) repeatability: one 10-table shard (dim 32) measured " << a.repeats
          << " times: mean " << fixed(moments.mean_ms, 3) << " ms, coefficient of variation "
          << fixed(100.0 * moments.cv(), 2)
          << " % (runs within one measurement: " << fixed(100.0 * within, 2) << " %)\n\n";
  }

  // (1) fused vs sum of singles, over random sets of pool tables at random dims.
  // With a meter that times the parts (meter_options::separate), forward and
  // backward are compared too, to show which one fusion helps or hurts.
  {
    std::vector<double> ratios;
    std::vector<double> forward_ratios;
    std::vector<double> backward_ratios;
    int below = 0;
    for (std::int32_t s = 0; s < a.sets; ++s) {
      std::vector<embplan::table_spec> set;
      for (const auto i : eb::detail::sample_distinct(gen, pool.size(),
                                                      static_cast<std::size_t>(a.tables_per_set))) {
        auto t = pool[i];
        t.dim = dims[static_cast<std::size_t>(gen.below(dims.size()))];
        set.push_back(std::move(t));
      }
      // The same (capped) rows alone and fused, so only the fusion differs.
      const auto rows = eb::detail::capped_rows(set, mo.max_weight_bytes);
      for (std::size_t i = 0; i < set.size(); ++i)
        set[i].rows = rows[i];
      const auto seed = embplan::derive_seed(a.seed, static_cast<std::uint64_t>(s));
      const auto fused = measure(set, seed);
      double sum = 0.0;
      double forward_sum = 0.0;
      double backward_sum = 0.0;
      for (const auto& t : set) {
        const auto single = measure(std::span<const embplan::table_spec>(&t, 1), seed);
        sum += single.total.mean_ms;
        forward_sum += single.forward.mean_ms;
        backward_sum += single.backward.mean_ms;
      }
      ratios.push_back(fused.total.mean_ms / sum);
      if (mo.separate) {
        forward_ratios.push_back(fused.forward.mean_ms / forward_sum);
        backward_ratios.push_back(fused.backward.mean_ms / backward_sum);
      }
      below += fused.total.mean_ms < sum ? 1 : 0;
    }
    const auto summary = [](std::vector<double> r) {
      std::sort(r.begin(), r.end());
      double mean = 0.0;
      for (const auto x : r)
        mean += x / static_cast<double>(r.size());
      return "mean " + fixed(mean, 3) + ", min " + fixed(r.front(), 3) + ", median " +
             fixed(r[r.size() / 2], 3) + ", max " + fixed(r.back(), 3);
    };
    say() << "(1) multi-table cost vs sum of single-table costs (" << a.sets << " random "
          << a.tables_per_set << "-table sets)\n"
          << "    fused < sum in " << below << " of " << a.sets
          << " sets; fused / sum: " << summary(ratios) << "\n";
    if (mo.separate) {
      say() << "    forward only: " << summary(forward_ratios) << "\n"
            << "    backward only: " << summary(backward_ratios) << "\n";
    }
    say() << '\n';
  }

  // (2) each column half vs half the original, per split dimension.
  {
    text_table table({"split", "tables", "mean half/full", "halves > full/2"});
    for (std::size_t k = 1; k < dims.size(); ++k) {
      double sum = 0.0;
      int above = 0;
      for (std::int32_t i = 0; i < a.halves; ++i) {
        auto t = pool[static_cast<std::size_t>(gen.below(pool.size()))];
        while (t.pooling_factor <= 0.0)
          t = pool[static_cast<std::size_t>(gen.below(pool.size()))];
        const auto seed = embplan::derive_seed(a.seed, 1000 + static_cast<std::uint64_t>(i));
        t.dim = dims[k];
        const double full = measure_total(std::span<const embplan::table_spec>(&t, 1), seed);
        t.dim = dims[k - 1];
        const double half = measure_total(std::span<const embplan::table_spec>(&t, 1), seed);
        sum += half / full;
        above += half > full / 2.0 ? 1 : 0;
      }
      table.add({std::to_string(dims[k]) + " -> 2 x " + std::to_string(dims[k - 1]),
                 std::to_string(a.halves), fixed(sum / a.halves, 3),
                 std::to_string(above) + "/" + std::to_string(a.halves)});
    }
    say() << "(2) column halves: cost of one half / cost of the whole table\n";
    table.print(say());
    say() << '\n';
  }

  // (3) growth with one factor varied around rows 1M, dim 32, pooling 20, all
  // indices unique (bin 0).
  {
    const auto one = [&](const embplan::table_spec& t) {
      return measure_total(std::span<const embplan::table_spec>(&t, 1), a.seed);
    };
    const auto row = [](text_table& tt, const std::string& label, double ms, double base) {
      tt.add({label, fixed(ms, 3), fixed(ms / base, 2)});
    };
    say() << "(3) growth (rows 1,000,000, dim 32, pooling 20, unique indices, varying one)\n";
    text_table by_dim({"dim", "ms", "x dim 4"});
    double base = 0.0;
    for (const auto d : dims) {
      const double ms = one(detail::synthetic_table(1'000'000, d, 20.0, 0));
      if (base == 0.0) base = ms;
      row(by_dim, std::to_string(d), ms, base);
    }
    by_dim.print(say());
    text_table by_pf({"pooling", "ms", "x pooling 1"});
    base = 0.0;
    for (const double pf : {1.0, 5.0, 10.0, 20.0, 50.0, 100.0}) {
      const double ms = one(detail::synthetic_table(1'000'000, 32, pf, 0));
      if (base == 0.0) base = ms;
      row(by_pf, fixed(pf, 0), ms, base);
    }
    by_pf.print(say());
    text_table by_rows({"rows", "ms", "x 1e3 rows"});
    base = 0.0;
    for (const std::int64_t rows : {1'000, 10'000, 100'000, 1'000'000, 10'000'000}) {
      // few rows cannot hold unique indices: reuse follows from rows there
      const double lookups = 20.0 * static_cast<double>(mo.batch_size);
      std::size_t bin = 0;
      while (bin + 1 < embplan::reuse_bin_count &&
             lookups / embplan::reuse_bin_middle(bin) > static_cast<double>(rows))
        ++bin;
      const double ms = one(detail::synthetic_table(rows, 32, 20.0, bin));
      if (base == 0.0) base = ms;
      row(by_rows, std::to_string(rows), ms, base);
    }
    by_rows.print(say());
    text_table by_reuse({"occurrences per unique index", "ms", "x unique"});
    base = 0.0;
    for (std::size_t bin = 0; bin <= 10; bin += 2) {
      const double ms = one(detail::synthetic_table(1'000'000, 32, 20.0, bin));
      if (base == 0.0) base = ms;
      row(by_reuse, "~" + fixed(embplan::reuse_bin_middle(bin), 0), ms, base);
    }
    by_reuse.print(say());
  }
  return 0;
}

}  // namespace embplan_cli
