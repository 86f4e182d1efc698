// `embplan size`: the embedding-tables chapter's sizing questions (§1, §2, §6):
// table bytes N d b at each dtype with each optimizer's state, the shards a
// per-server budget needs, and quotient-remainder compression (the optimal m,
// the compressed size and ratio, the chance two IDs share a remainder row).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "commands.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/table_spec.hpp"
#include "embplan/core/topology.hpp"
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
};

int run_size(const size_args& a) {
  namespace rw = embplan::rowwise;
  if (a.rows <= 0) embplan::detail::fail("--rows", a.rows, "a positive number of rows");
  if (a.dim <= 0) embplan::detail::fail("--dim", a.dim, "a positive dimension");
  const auto t = embplan::parse_dtype(a.dtype, "--dtype");
  const auto opt = embplan::parse_optimizer(a.optimizer, "--optimizer");
  const auto gib = static_cast<double>(embplan::gib);
  auto bytes_and_gib = [&](std::uint64_t b) {
    return std::to_string(b) + " (" + fixed(static_cast<double>(b) / gib, 3) + " GiB)";
  };

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
  return 0;
}

}  // namespace

command add_size(CLI::App& app) {
  auto a = std::make_shared<size_args>();
  auto* sub = app.add_subcommand(
      "size", "Table bytes per dtype and optimizer, shards per server budget, QR compression");
  add_int_option(sub, "--rows", a->rows, "table rows N", 1, 1e15)->required();
  add_int_option(sub, "--dim", a->dim, "embedding dimension d", 1, 65536)->required();
  sub->add_option("--dtype", a->dtype, "fp32 | fp16 | int8")->capture_default_str();
  sub->add_option("--optimizer", a->optimizer, "none | sgd | adam | rowwise_adagrad")
      ->capture_default_str();
  add_real_option(sub, "--budget-gib", a->budget_gib, "per-server memory budget, GiB", 0, 1e9);
  add_int_option(sub, "--qr-m", a->qr_m, "remainder-table size m (default: the optimal m)", 1,
                 1e15);
  return {sub, [a] { return run_size(*a); }};
}

}  // namespace embplan_cli
