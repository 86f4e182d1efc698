// `embplan skew`: the embedding-tables chapter's demo (§5, Code 38.2.2) and its
// exercise: a table hash-partitioned by rows, a Zipf batch of requests, rows
// and lookups per shard, the skew factor, the hottest IDs, and the routed
// gather checked bit for bit against a single-table gather; with --replicate,
// the skew as a function of the number k of replicated hot IDs (gather checked
// at every k) and the gradient pushes with and without per-worker
// pre-aggregation; with --target-skew, the smallest k that reaches it. Reads of
// a replicated ID are routed by --routing: balanced (default; water-filling
// onto the least-loaded holder, so the curve is non-increasing in k) or random
// (the chapter's exercise: uniformly at random, seeded).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "commands.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/rowwise/gather.hpp"
#include "embplan/rowwise/load.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/rowwise/replication.hpp"
#include "embplan/rowwise/sizing.hpp"
#include "embplan/rowwise/zipf.hpp"
#include "options.hpp"
#include "text_table.hpp"

namespace embplan_cli {

namespace {

struct skew_args {
  std::int64_t rows = 20'000;
  std::int32_t dim = 16;
  std::uint64_t shards = 4;
  std::uint64_t requests = 50'000;
  double zipf = 1.3;
  std::uint64_t seed = 7;
  std::uint64_t multiplier = embplan::rowwise::hash_partition::knuth_multiplier;
  std::optional<std::int64_t> replicate;  // largest k of the curve
  std::optional<double> target_skew;
  std::uint32_t replicas = 0;        // 0: all shards
  std::string routing = "balanced";  // of replicated reads: balanced | random
  std::uint32_t workers = 8;
  std::uint64_t top = 3;
};

// Each requested ID is held in memory (8 bytes) and drawn: 10^8 is 800 MB.
inline constexpr long double max_requests = 1e8;

namespace detail {

// The gather is checked on a materialised table up to this many values (1 GiB).
inline constexpr std::uint64_t max_demo_values = std::uint64_t{1} << 28;

template <class T>
std::string list_text(std::span<const T> v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i)
    out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

inline std::string skew_text(double s) {
  return fixed(s, 2) + "x";
}

inline std::string routing_text(embplan::rowwise::replica_routing r, std::uint64_t seed) {
  if (r == embplan::rowwise::replica_routing::random) {
    return "reads routed uniformly at random (routing random, seed " + std::to_string(seed) + ")";
  }
  return "reads water-filled onto the least-loaded holder (routing balanced; skew non-increasing "
         "in k)";
}

}  // namespace detail

int run_skew(const skew_args& a) {
  namespace rw = embplan::rowwise;
  if (a.dim <= 0) embplan::detail::fail("--dim", a.dim, "a positive dimension");
  if (a.requests == 0 || a.requests > static_cast<std::uint64_t>(max_requests)) {
    embplan::detail::fail("--requests", a.requests,
                          "a request count in " + range_text(1, max_requests));
  }
  if (a.replicate && (*a.replicate < 0 || *a.replicate > a.rows)) {
    embplan::detail::fail("--replicate", *a.replicate,
                          "a k in [0, rows = " + std::to_string(a.rows) + "]");
  }
  if (a.target_skew && !(std::isfinite(*a.target_skew) && *a.target_skew >= 1.0)) {
    embplan::detail::fail("--target-skew", *a.target_skew,
                          "a skew factor >= 1 (1 = perfect balance)");
  }
  const rw::hash_partition part(a.rows, a.shards, a.multiplier);
  const auto ids = rw::zipf_ids(a.rows, a.zipf, a.requests, a.seed);
  const auto freq = rw::id_frequency(ids, a.rows);
  const auto load = rw::analyze_load(part, ids, a.top);
  const auto routing = rw::replica_routing_from(a.routing, "--routing");
  const rw::replication_options ro{.replicas = a.replicas, .seed = a.seed, .routing = routing};
  const std::uint32_t holders = a.replicas == 0 ? part.shards() : a.replicas;
  if (a.replicas > part.shards()) {
    embplan::detail::fail("--replicas", a.replicas,
                          "at most --shards = " + std::to_string(part.shards()) + " (0 = all)");
  }

  std::cout << "rows N                 : " << a.rows << "\n"
            << "dim d                  : " << a.dim << "\n"
            << "shards S               : " << a.shards << " (hash: shard = (id * " << a.multiplier
            << ") mod " << a.shards << ")\n"
            << "requests in batch      : " << a.requests << " (Zipf(" << a.zipf << "), seed "
            << a.seed << ")\n"
            << "rows per shard (store) : "
            << detail::list_text(std::span<const std::int64_t>(load.rows_per_shard)) << "\n"
            << "lookups per shard      : "
            << detail::list_text(std::span<const std::uint64_t>(load.lookups_per_shard)) << "\n"
            << "skew (max/mean load)   : " << detail::skew_text(load.skew) << "\n";
  std::vector<std::int64_t> hot_ids;
  std::vector<std::uint64_t> hot_hits;
  for (const auto& h : load.hottest) {
    hot_ids.push_back(h.id);
    hot_hits.push_back(h.hits);
  }
  std::cout << "hottest " << hot_ids.size()
            << " IDs          : " << detail::list_text(std::span<const std::int64_t>(hot_ids))
            << " -> hits " << detail::list_text(std::span<const std::uint64_t>(hot_hits)) << "\n";

  // The routed gather against a single-table gather, on a seeded N(0, 1) table.
  const auto d = static_cast<std::uint64_t>(a.dim);
  const bool gather = static_cast<std::uint64_t>(a.rows) <= detail::max_demo_values / d;
  std::optional<rw::sharded_table<rw::hash_partition>> table;
  std::vector<float> reference;
  std::vector<float> out;
  rw::gather_workspace ws;
  auto check = [&](const std::optional<rw::hot_replicas<rw::hash_partition>>& rep) {
    std::fill(out.begin(), out.end(), 0.f);
    if (rep) {
      table->replicate(*rep);
      (void)table->gather(ids, out, *rep, ws);
    } else {
      (void)table->gather(ids, out, ws);
    }
    float max_diff = 0.f;
    for (std::size_t i = 0; i < out.size(); ++i)
      max_diff = std::max(max_diff, std::abs(out[i] - reference[i]));
    const bool same = std::memcmp(out.data(), reference.data(), out.size() * sizeof(float)) == 0;
    return std::pair{same, max_diff};
  };
  if (gather) {
    embplan::rng g(embplan::derive_seed(a.seed, 1));
    std::vector<float> full(static_cast<std::size_t>(a.rows) * static_cast<std::size_t>(d));
    for (auto& v : full)
      v = static_cast<float>(g.normal());
    reference.resize(ids.size() * d);
    for (std::size_t j = 0; j < ids.size(); ++j)
      std::memcpy(&reference[j * d], &full[static_cast<std::size_t>(ids[j]) * d],
                  d * sizeof(float));
    out.resize(reference.size());
    table.emplace(part, full, a.dim);
    const auto [same, diff] = check(std::nullopt);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2e", static_cast<double>(diff));
    std::cout << "gathered == reference  : " << (same ? "true" : "false") << "\n"
              << "max abs difference     : " << buf << "\n";
  } else {
    std::cout << "gathered == reference  : skipped (table of " << a.rows << " x " << a.dim
              << " is too large to materialise for the check)\n";
  }
  for (const std::uint64_t c : {10ull, 100ull, 1000ull}) {
    if (c > static_cast<std::uint64_t>(a.rows)) break;
    std::cout << "hot-row cache of " << c << " rows serves "
              << fixed(100.0 * rw::cache_hit_fraction(freq, c), 1) << "% of lookups ("
              << embplan::rowwise::row_bytes(a.dim, embplan::dtype::fp32) * c
              << " bytes at fp32)\n";
  }

  if (a.replicate) {
    const auto max_k = static_cast<std::size_t>(*a.replicate);
    const auto curve = rw::loads_by_k(part, ids, freq, max_k, ro);
    std::vector<std::size_t> grid{0};  // 0, 1, 2, 5, 10, 20, 50, ... and max_k
    for (std::size_t base = 1; base <= max_k; base *= 10)
      for (const std::size_t step : {1, 2, 5})
        if (step * base <= max_k) grid.push_back(step * base);
    if (grid.back() != max_k) grid.push_back(max_k);
    std::cout << "\nhot-row replication: the k hottest IDs on " << holders << " of "
              << part.shards() << " shards, " << detail::routing_text(routing, a.seed) << "\n";
    text_table t(
        {"k", "skew", "lookups per shard", "replica rows per shard", "gathered == reference"});
    for (const std::size_t k : grid) {
      const auto hot = rw::hottest_ids(freq, k);
      const rw::hot_replicas<rw::hash_partition> rep(part, hot, ro);
      std::string ok = "skipped";
      if (gather) ok = check(rep).first ? "true" : "false";
      t.add({std::to_string(k), detail::skew_text(rw::skew_factor(curve[k])),
             detail::list_text(std::span<const std::uint64_t>(curve[k])),
             detail::list_text(std::span<const std::int64_t>(rep.replica_rows_per_shard())), ok});
    }
    t.print(std::cout);
    const auto pushes = rw::gradient_pushes(part, ids, freq, max_k, a.workers);
    std::cout << "gradient pushes per shard, batch split over " << a.workers
              << " workers (replication alone leaves them as they are):\n"
              << "  one push per lookup            : "
              << detail::list_text(std::span<const std::uint64_t>(pushes.without)) << ", skew "
              << detail::skew_text(rw::skew_factor(pushes.without)) << "\n"
              << "  k = " << max_k << " hot rows pre-aggregated : "
              << detail::list_text(std::span<const std::uint64_t>(pushes.with)) << ", skew "
              << detail::skew_text(rw::skew_factor(pushes.with)) << "\n";
  }
  if (a.target_skew) {
    const std::size_t limit = std::min(freq.size(), static_cast<std::size_t>(a.rows));
    const auto curve = rw::skew_by_k(part, ids, freq, limit, ro);
    const auto k = rw::smallest_k_for(curve, *a.target_skew);
    std::cout << "\ntarget skew " << fixed(*a.target_skew, 2) << "x (routing "
              << rw::to_string(routing) << "): ";
    if (k) {
      std::cout << "smallest k = " << *k << " (skew " << detail::skew_text(curve[*k]) << ")\n";
    } else {
      std::cout << "not reached by replicating any number of the " << freq.size()
                << " IDs requested (best " << detail::skew_text(curve.back()) << ")\n";
    }
  }
  return 0;
}

}  // namespace

command add_skew(CLI::App& app) {
  auto a = std::make_shared<skew_args>();
  auto* sub = app.add_subcommand(
      "skew", "Row-wise hash sharding of one table: load skew, hot-row replication, gather check");
  add_int_option(sub, "--rows", a->rows, "table rows N", 1, 1e12)->capture_default_str();
  add_int_option(sub, "--dim", a->dim, "embedding dimension d", 1, 65536)->capture_default_str();
  add_int_option(sub, "--shards", a->shards, "shards S", 1, max_devices)->capture_default_str();
  add_int_option(sub, "--requests", a->requests, "requested IDs in the batch", 1, max_requests)
      ->capture_default_str();
  add_real_option(sub, "--zipf", a->zipf, "Zipf exponent of the requests", 0, 100)
      ->capture_default_str();
  add_seed_option(sub, a->seed);
  add_int_option(sub, "--multiplier", a->multiplier, "hash multiplier A: shard = (id * A) mod S", 1,
                 max_seed)
      ->capture_default_str();
  add_int_option(sub, "--replicate", a->replicate,
                 "replicate the k hottest IDs; prints the skew for k = 0, 1, 2, 5, ... K (at "
                 "most --rows)",
                 0, 1e12);
  add_real_option(sub, "--target-skew", a->target_skew, "print the smallest k reaching this skew",
                  1, 1e12);
  sub->add_option("--routing", a->routing,
                  "reads of replicated IDs: balanced (least-loaded holder) | random")
      ->capture_default_str();
  add_int_option(sub, "--replicas", a->replicas, "shards holding each hot row (0 = all)", 0,
                 max_devices)
      ->capture_default_str();
  add_int_option(sub, "--workers", a->workers, "workers the batch is split over (gradient pushes)",
                 1, max_devices)
      ->capture_default_str();
  add_int_option(sub, "--top", a->top, "hottest IDs listed", 0, 1000)->capture_default_str();
  return {sub, [a] { return run_skew(*a); }};
}

}  // namespace embplan_cli
