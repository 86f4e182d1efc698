// `embplan size`: the embedding-tables chapter's sizing questions (§1, §2, §6):
// table bytes N d b at each dtype with each optimizer's state, the shards a
// per-server budget needs, and quotient-remainder compression (the optimal m,
// the compressed size and ratio, the chance two IDs share a remainder row);
// and, given the table's reuse histogram, its miss-ratio curve, the smallest
// cache for a target miss ratio and the cheapest memory tier within an HBM
// budget, with each item of its storage in HBM and host DRAM (§6).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/memory_tier.hpp"
#include "embplan/core/storage.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/topology.hpp"
#include "embplan/rowwise/cache_sizing.hpp"
#include "embplan/rowwise/sizing.hpp"
#include "options.hpp"
#include "text_table.hpp"

namespace embplan_cli {

namespace {

struct size_args {
  std::int64_t rows = 0;
  std::int32_t dim = 0;
  std::string dtype = "fp32";
  std::string optimizer = "none";
  std::optional<double> budget_gib;
  std::optional<std::int64_t> qr_m;
  // Memory tiers.
  std::vector<double> reuse_hist;
  double pooling_factor = 1.0;
  std::int64_t batch_size = 65536;
  std::optional<double> target_miss_ratio;
  std::optional<double> hbm_budget_gib;
  std::string cache_policy = "lru";
};

// "N (x.xxx GiB)": exact bytes and GiB, as every figure of `embplan size`.
std::string bytes_and_gib(std::uint64_t b) {
  return std::to_string(b) + " (" +
         fixed(static_cast<double>(b) / static_cast<double>(embplan::gib), 3) + " GiB)";
}

void print_storage(const embplan::storage_items& s) {
  text_table table({"item", "HBM", "host DRAM"});
  for (const auto& [name, m] : s.items())
    table.add({std::string(name), bytes_and_gib(m.hbm_bytes), bytes_and_gib(m.host_bytes)});
  const auto total = s.total();
  table.add({"total", bytes_and_gib(total.hbm_bytes), bytes_and_gib(total.host_bytes)});
  table.print(std::cout);
}

// The table the cache questions are about, every option checked.
embplan::table_spec cache_table(const size_args& a, embplan::dtype t) {
  if (a.reuse_hist.size() != embplan::reuse_bin_count) {
    embplan::detail::fail("--reuse-hist", a.reuse_hist.size(),
                          "17 comma-separated fractions bin_0..bin_16 with --target-miss-ratio "
                          "or --hbm-budget-gib");
  }
  embplan::table_spec spec;
  spec.name = "table";
  spec.rows = a.rows;
  spec.dim = a.dim;
  spec.weight_dtype = t;
  spec.pooling_factor = a.pooling_factor;
  for (std::size_t k = 0; k < embplan::reuse_bin_count; ++k)
    spec.reuse_hist[k] = a.reuse_hist[k];
  embplan::validate(spec, "--reuse-hist");
  return spec;
}

// The cache questions' answers, all computed before the first line is printed.
struct cache_answers {
  embplan::table_spec spec{};
  std::optional<embplan::rowwise::miss_ratio_curve> curve;
  std::optional<embplan::rowwise::cache_size> target;
  std::optional<embplan::rowwise::tier_choice> choice;
  std::uint64_t budget = 0;
  embplan::storage_options storage{};
};

cache_answers answer_cache_questions(const size_args& a, embplan::dtype t, embplan::optimizer opt) {
  namespace rw = embplan::rowwise;
  cache_answers out;
  out.spec = cache_table(a, t);
  if (a.cache_policy != "lru" && a.cache_policy != "lfu") {
    embplan::detail::fail("--cache-policy", a.cache_policy, "\"lru\" or \"lfu\"");
  }
  out.storage.policy =
      a.cache_policy == "lfu" ? embplan::cache_policy::lfu : embplan::cache_policy::lru;
  out.curve = rw::table_miss_ratio_curve(out.spec, a.batch_size);
  // Refused here, naming the flags, what the library would refuse naming its
  // parameters.
  if (a.target_miss_ratio) {
    const double lowest = out.curve->miss_ratio(static_cast<double>(a.rows));
    if (*a.target_miss_ratio < lowest) {
      embplan::detail::fail("--target-miss-ratio", *a.target_miss_ratio,
                            "at least " + fixed(lowest, 4) +
                                ", this table's lowest miss ratio (every row cached; a cached "
                                "row's first touch in a batch misses)");
    }
    out.target = rw::smallest_cache_for_miss_ratio(out.spec, a.batch_size, *a.target_miss_ratio);
  }
  if (a.hbm_budget_gib) {
    out.budget = static_cast<std::uint64_t>(*a.hbm_budget_gib * static_cast<double>(embplan::gib));
    const auto least = embplan::table_storage(out.spec, a.batch_size, opt,
                                              {.tier = embplan::memory_tier::host}, out.storage)
                           .total()
                           .hbm_bytes;
    if (out.budget < least) {
      embplan::detail::fail("--hbm-budget-gib", *a.hbm_budget_gib,
                            "at least " + bytes_and_gib(least) +
                                ", what the table needs in HBM in any tier (the inputs and "
                                "outputs of a batch)");
    }
    out.choice =
        rw::cheapest_tier_within_budget(out.spec, a.batch_size, opt, out.budget, out.storage);
  }
  return out;
}

void print_cache_answers(const cache_answers& c, const size_args& a, embplan::optimizer opt) {
  namespace rw = embplan::rowwise;
  const auto& curve = *c.curve;
  std::cout << "cache: a batch of " << a.batch_size << " bags x pooling " << fixed(a.pooling_factor)
            << " = " << fixed(curve.lookups(), 0) << " lookups touching "
            << fixed(curve.unique_rows(), 0)
            << " unique rows; the cache holds the hottest rows, a cached row misses on its first "
               "touch\n";
  text_table table({"cached rows", "load factor", "miss ratio"});
  for (const auto& p : curve.points()) {
    table.add({fixed(p.cache_rows, 0), fixed(p.cache_rows / static_cast<double>(a.rows), 6),
               fixed(p.miss_ratio, 4)});
  }
  table.print(std::cout);
  if (c.target) {
    std::cout << "target miss ratio " << fixed(*a.target_miss_ratio, 4) << ": "
              << c.target->cache_rows << " rows cached, load factor "
              << fixed(c.target->load_factor, 6) << ", miss ratio "
              << fixed(c.target->miss_ratio, 4) << "\n";
    if (c.target->cache_rows > 0) {
      print_storage(embplan::table_storage(
          c.spec, a.batch_size, opt,
          {.tier = embplan::memory_tier::uvm_caching, .load_factor = c.target->load_factor},
          c.storage));
    }
  }
  if (c.choice) {
    std::cout << "HBM budget " << bytes_and_gib(c.budget) << ", optimizer "
              << embplan::to_string(opt) << ", " << embplan::to_string(c.storage.policy)
              << " cache: tier " << embplan::to_string(c.choice->placement.tier);
    if (c.choice->placement.tier == embplan::memory_tier::uvm_caching) {
      std::cout << ", load factor " << fixed(c.choice->cache.load_factor, 6) << " ("
                << c.choice->cache.cache_rows << " rows)";
    }
    std::cout << ", miss ratio " << fixed(c.choice->cache.miss_ratio, 4) << "\n";
    print_storage(c.choice->storage);
  }
}

int run_size(const size_args& a) {
  namespace rw = embplan::rowwise;
  if (a.rows <= 0) embplan::detail::fail("--rows", a.rows, "a positive number of rows");
  if (a.dim <= 0) embplan::detail::fail("--dim", a.dim, "a positive dimension");
  const auto t = embplan::parse_dtype(a.dtype, "--dtype");
  const auto opt = embplan::parse_optimizer(a.optimizer, "--optimizer");
  const auto gib = static_cast<double>(embplan::gib);

  // Every option checked before the first line of output.
  const auto row = rw::row_bytes(a.dim, t, opt);
  std::uint64_t budget = 0;
  std::optional<decltype(rw::shards_needed(a.rows, a.dim, t, opt, 1))> shards;
  if (a.budget_gib) {
    if (!(*a.budget_gib > 0.0) || *a.budget_gib > 1e9) {
      embplan::detail::fail("--budget-gib", *a.budget_gib, "a positive number of GiB");
    }
    budget = static_cast<std::uint64_t>(*a.budget_gib * gib);
    if (budget < row) {
      embplan::detail::fail(
          "--budget-gib", *a.budget_gib,
          "a per-server budget of at least one row (" + std::to_string(row) + " bytes)");
    }
    shards = rw::shards_needed(a.rows, a.dim, t, opt, budget);
  }
  const auto q = a.qr_m ? rw::quotient_remainder(a.rows, a.dim, t, *a.qr_m)
                        : rw::optimal_quotient_remainder(a.rows, a.dim, t);
  std::optional<cache_answers> cache;
  if (a.target_miss_ratio || a.hbm_budget_gib) cache = answer_cache_questions(a, t, opt);

  std::cout << "table: " << a.rows << " rows x " << a.dim << " dims\n";
  text_table table({"dtype", "weights", "+ sgd", "+ adam", "+ rowwise_adagrad"});
  for (const auto d : {embplan::dtype::fp32, embplan::dtype::fp16, embplan::dtype::int8}) {
    table.add({std::string(embplan::to_string(d)),
               bytes_and_gib(rw::rowwise_table_bytes(a.rows, a.dim, d, embplan::optimizer::none)),
               bytes_and_gib(rw::rowwise_table_bytes(a.rows, a.dim, d, embplan::optimizer::sgd)),
               bytes_and_gib(rw::rowwise_table_bytes(a.rows, a.dim, d, embplan::optimizer::adam)),
               bytes_and_gib(rw::rowwise_table_bytes(a.rows, a.dim, d,
                                                     embplan::optimizer::rowwise_adagrad))});
  }
  table.print(std::cout);
  std::cout << "bytes (GiB); Adam keeps two fp32 moments per weight, row-wise Adagrad one fp32 "
               "per row\n";
  std::cout << "at " << embplan::to_string(t) << ", optimizer " << embplan::to_string(opt) << ": "
            << row << " bytes per row, "
            << bytes_and_gib(rw::rowwise_table_bytes(a.rows, a.dim, t, opt)) << " in all\n";
  if (shards) {
    std::cout << "per-server budget " << bytes_and_gib(budget) << ": " << shards->rows_per_shard
              << " rows per shard, " << shards->shards << " shards\n";
  }
  std::cout << "quotient-remainder at " << embplan::to_string(t) << (a.qr_m ? "" : " (optimal m)")
            << ": m = " << q.m << ", tables of " << q.m << " + " << q.quotient_rows << " rows, "
            << bytes_and_gib(q.compressed_bytes) << " instead of " << bytes_and_gib(q.full_bytes)
            << ", ratio " << fixed(q.ratio, 1)
            << "x; P(two distinct random IDs share the remainder row) = " <<
      [&] {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3e", q.remainder_collision_probability);
        return std::string(buf);
      }() << " (~1/m)\n";
  if (cache) print_cache_answers(*cache, a, opt);
  return 0;
}

}  // namespace

command add_size(CLI::App& app) {
  auto a = std::make_shared<size_args>();
  auto* sub = app.add_subcommand("size",
                                 "Table bytes per dtype and optimizer, shards per server budget, "
                                 "QR compression, cache sizing");
  add_int_option(sub, "--rows", a->rows, "table rows N", 1, 1e15)->required();
  add_int_option(sub, "--dim", a->dim, "embedding dimension d", 1, 65536)->required();
  sub->add_option("--dtype", a->dtype, "fp32 | fp16 | int8")->capture_default_str();
  sub->add_option("--optimizer", a->optimizer, "none | sgd | adam | rowwise_adagrad")
      ->capture_default_str();
  add_real_option(sub, "--budget-gib", a->budget_gib, "per-server memory budget, GiB", 0, 1e9);
  add_int_option(sub, "--qr-m", a->qr_m, "remainder-table size m (default: the optimal m)", 1,
                 1e15);
  sub->add_option("--reuse-hist", a->reuse_hist,
                  "the table's reuse histogram: 17 comma-separated fractions bin_0..bin_16")
      ->delimiter(',');
  add_real_option(sub, "--pooling-factor", a->pooling_factor, "mean lookups per bag", 0, 1e6)
      ->capture_default_str();
  add_int_option(sub, "--batch-size", a->batch_size, "bags per batch", 1, 1e9)
      ->capture_default_str();
  add_real_option(sub, "--target-miss-ratio", a->target_miss_ratio,
                  "print the smallest cache (load factor) reaching this miss ratio", 0, 1);
  add_real_option(sub, "--hbm-budget-gib", a->hbm_budget_gib,
                  "print the cheapest tier (hbm, uvm_caching + load factor, host) within this HBM "
                  "budget, GiB, and its storage item by item",
                  0, 1e9);
  sub->add_option("--cache-policy", a->cache_policy, "lru | lfu (the cache state charged)")
      ->capture_default_str();
  return {sub, [a] { return run_size(*a); }};
}

}  // namespace embplan_cli
