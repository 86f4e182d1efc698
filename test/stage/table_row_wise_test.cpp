// Table-row-wise, table-column-wise and grid pieces (docs/sharding.md, sharding
// types): how they are named, priced (table_row_wise_traffic, evaluate) and
// chosen (stage::staged's layouts, stage_settings::layout).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/collectives.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/io/torchrec.hpp"
#include "embplan/presets.hpp"
#include "embplan/stage/staged.hpp"

namespace {

// `devices` devices in hosts of `per_host`; tables of 1,000 rows, dims `dims`.
embplan::task hosts_task(std::size_t devices, std::int32_t per_host,
                         std::vector<std::int32_t> dims) {
  embplan::task t;
  t.name = "hosts";
  t.batch_size = 1024;
  t.cluster = embplan::uniform_topology(devices, {}, per_host);
  t.cluster.intra_host_bandwidth_gbps = 100.0;
  t.cluster.inter_host_bandwidth_gbps = 10.0;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = 1000;
    s.dim = dims[i];
    s.pooling_factor = 8;
    t.tables.push_back(s);
  }
  return t;
}

embplan::shard piece(std::uint32_t table, std::uint32_t device, std::int32_t c0, std::int32_t c1,
                     std::int64_t r0, std::int64_t r1, bool replica = false) {
  return {table, device, c0, c1, r0, r1, replica};
}

struct traffic {
  std::vector<std::int64_t> dim_sum;
  std::vector<double> reduce_ms;
  std::size_t ranges = 0;
};

traffic traffic_of(const embplan::task& t, const embplan::plan& p) {
  traffic out{embplan::state_of(t, p).dim_sum, std::vector<double>(t.cluster.size(), 0.0), 0};
  out.ranges = embplan::table_row_wise_traffic(t, p, std::span<std::int64_t>(out.dim_sum),
                                               std::span<double>(out.reduce_ms));
  return out;
}

// The sharding type of table `ti` in `p`, knowing the hosts.
std::string type_of(const embplan::task& t, const embplan::plan& p, std::uint32_t ti) {
  std::vector<const embplan::shard*> pieces;
  for (const auto& s : p.shards)
    if (s.table == ti && !s.replica) pieces.push_back(&s);
  return std::string(embplan::sharding_type_of(t.cluster, t.tables[ti], pieces));
}

}  // namespace

TEST_CASE("row pieces in one host of several are reduced there: columns and reduce-scatter") {
  // 4 devices in hosts of 2. Table 0 (16 columns) cut by rows on devices 0
  // and 1 (host 0); tables 1 and 2 whole on devices 2 and 3.
  const auto t = hosts_task(4, 2, {16, 8, 12});
  embplan::plan p;
  p.shards = {piece(0, 0, 0, 16, 0, 400), piece(0, 1, 0, 16, 400, 1000),
              embplan::whole_table(t, 1, 2), embplan::whole_table(t, 2, 3)};
  const auto r = traffic_of(t, p);
  CHECK(r.ranges == 1);
  CHECK(r.dim_sum == std::vector<std::int64_t>{8, 8, 8, 12});
  // (k - 1) / k of batch x w fp32 values, at 100 GB/s = 1e8 bytes per ms.
  const double expected = t.cluster.collective_latency_ms + 0.5 * 1024.0 * 16.0 * 4.0 / 1e8;
  CHECK(r.reduce_ms[0] == doctest::Approx(expected).epsilon(1e-12));
  CHECK(r.reduce_ms[1] == r.reduce_ms[0]);
  CHECK(r.reduce_ms[2] == 0.0);
  CHECK(r.reduce_ms[3] == 0.0);

  // evaluate: the all-to-all of the reduced columns, plus the reduce-scatter
  // in both directions.
  const embplan::analytic_cost model;
  const auto cost = embplan::evaluate(t, p, model);
  CHECK(cost.dim_sum == r.dim_sum);
  std::vector<embplan::comm_cost> comm(4);
  const std::vector<double> zero(4, 0.0);
  model.communication(t, std::span<const std::int64_t>(r.dim_sum), std::span<const double>(zero),
                      std::span<embplan::comm_cost>(comm));
  for (std::size_t d = 0; d < 4; ++d) {
    CAPTURE(d);
    CHECK(cost.devices[d].bwd_comm_ms == doctest::Approx(comm[d].bwd_ms + r.reduce_ms[d]));
    CHECK(cost.devices[d].fwd_comm_ms >= r.reduce_ms[d] + comm[d].bwd_ms - 1e-12);
  }

  // The same pieces across hosts (devices 0 and 2): row_wise, nothing reduced.
  embplan::plan spread = p;
  spread.shards[1].device = 2;
  spread.shards[2].device = 1;
  const auto s = traffic_of(t, spread);
  CHECK(s.ranges == 0);
  CHECK(s.dim_sum == embplan::state_of(t, spread).dim_sum);
  CHECK(std::all_of(s.reduce_ms.begin(), s.reduce_ms.end(), [](double v) { return v == 0.0; }));
  CHECK(type_of(t, spread, 0) == "row_wise");
  CHECK(type_of(t, p, 0) == "table_row_wise");

  // One host: row_wise and table_row_wise are one thing; nothing changes.
  auto one = t;
  one.cluster.devices_per_host = 4;
  CHECK(traffic_of(one, p).ranges == 0);
  CHECK(type_of(one, p, 0) == "row_wise");
}

TEST_CASE("reduced columns add up to the range's width, split in integer shares") {
  // 8 devices in hosts of 4: a 10-column table over 3 devices of host 1.
  const auto t = hosts_task(8, 4, {10, 12});
  embplan::plan p;
  p.shards = {piece(0, 4, 0, 10, 0, 300), piece(0, 6, 0, 10, 300, 600),
              piece(0, 5, 0, 10, 600, 1000), piece(0, 6, 0, 10, 0, 50, true),
              embplan::whole_table(t, 1, 0)};
  const auto r = traffic_of(t, p);
  CHECK(r.ranges == 1);
  // Devices 4, 5, 6 get 10 x 1/3, 2/3 - 1/3, 1 - 2/3 (floors): 3, 3, 4; the
  // replica on device 6 keeps its 10 columns, as placement_state counts it.
  CHECK(r.dim_sum[4] == 3);
  CHECK(r.dim_sum[5] == 3);
  CHECK(r.dim_sum[6] == 4 + 10);
  CHECK(r.dim_sum[0] == 12);
  CHECK(r.reduce_ms[5] > 0.0);
  CHECK(r.reduce_ms[7] == 0.0);

  // Random one-host ranges: the shares add up to what the pieces held.
  embplan::rng rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    auto u = hosts_task(8, 4, {4 * static_cast<std::int32_t>(1 + rng.below(16))});
    const std::int32_t w = u.tables[0].dim;
    const std::uint32_t host = static_cast<std::uint32_t>(rng.below(2));
    const std::size_t k = 2 + rng.below(3);
    embplan::plan q;
    for (std::size_t c = 0; c < k; ++c) {
      q.shards.push_back(
          piece(0, host * 4 + static_cast<std::uint32_t>(c), 0, w,
                static_cast<std::int64_t>(c) * 1000 / static_cast<std::int64_t>(k),
                static_cast<std::int64_t>(c + 1) * 1000 / static_cast<std::int64_t>(k)));
    }
    const auto x = traffic_of(u, q);
    CHECK(x.ranges == 1);
    CHECK(std::accumulate(x.dim_sum.begin(), x.dim_sum.end(), std::int64_t{0}) == w);
    const auto [lo, hi] = std::minmax_element(x.dim_sum.begin() + host * 4,
                                              x.dim_sum.begin() + host * 4 + static_cast<long>(k));
    CHECK(*hi - *lo <= 1);
  }
}

TEST_CASE("grid and table-column-wise pieces: names, traffic and the TorchRec export") {
  // 4 devices in hosts of 2; table 0 (16 columns): columns [0, 8) cut by rows
  // in host 0, [8, 16) in host 1 (a grid). Table 1 (8 columns): two column
  // halves in host 1 (table_column_wise); table 2: halves across hosts.
  const auto t = hosts_task(4, 2, {16, 8, 8});
  embplan::plan p;
  p.shards = {piece(0, 0, 0, 8, 0, 500),  piece(0, 1, 0, 8, 500, 1000),
              piece(0, 2, 8, 16, 0, 500), piece(0, 3, 8, 16, 500, 1000),
              piece(1, 2, 0, 4, 0, 1000), piece(1, 3, 4, 8, 0, 1000),
              piece(2, 0, 0, 4, 0, 1000), piece(2, 3, 4, 8, 0, 1000)};
  REQUIRE_NOTHROW(embplan::validate(t, p));
  CHECK(type_of(t, p, 0) == "grid_shard");
  CHECK(type_of(t, p, 1) == "table_column_wise");
  CHECK(type_of(t, p, 2) == "column_wise");
  const auto r = traffic_of(t, p);
  CHECK(r.ranges == 2);
  // Grid: 4 reduced columns per device; column pieces keep their widths.
  CHECK(r.dim_sum == std::vector<std::int64_t>{4 + 4, 4, 4 + 4, 4 + 4 + 4});
  CHECK(r.reduce_ms[0] == doctest::Approx(r.reduce_ms[3]));

  const auto tr = embplan::io::torchrec_sharding(t, p);
  CHECK(tr.at("t0").at("sharding_type") == "grid_shard");
  CHECK(tr.at("t1").at("sharding_type") == "table_column_wise");
  CHECK(tr.at("t2").at("sharding_type") == "column_wise");
  CHECK(tr.at("t0").at("sharding_spec").at("shards").size() == 4);
}

namespace {

// 16 devices of 1 GiB in hosts of 8; forty small tables and two that fit no
// device: `big` (about 1.5 devices) and `huge` (about 10, more than a host).
embplan::task oversized_task(double intra_gbps, double inter_gbps) {
  embplan::task t;
  t.name = "oversized";
  t.batch_size = 65536;
  embplan::device_spec dev;
  dev.memory_bytes = std::uint64_t{1} << 30;
  t.cluster = embplan::uniform_topology(16, dev, 8);
  t.cluster.intra_host_bandwidth_gbps = intra_gbps;
  t.cluster.inter_host_bandwidth_gbps = inter_gbps;
  for (int i = 0; i < 40; ++i) {
    embplan::table_spec s;
    s.name = "t" + std::to_string(i);
    s.rows = 50'000;
    s.dim = 64;
    s.pooling_factor = 10;
    t.tables.push_back(s);
  }
  embplan::table_spec big;
  big.name = "big";
  big.rows = 3'000'000;
  big.dim = 128;
  big.pooling_factor = 20;
  t.tables.push_back(big);
  big.name = "huge";
  big.rows = 20'000'000;
  t.tables.push_back(big);
  return t;
}

embplan::plan_result plan_with(const embplan::task& t, embplan::stage::row_layout layout) {
  using base = embplan::torchrec_like_planner;
  using wrapped = embplan::rowwise_planner_of<base>;
  const base b;
  const wrapped p(b.cost(),
                  {.inner = b.searcher(), .settings = {.split_rows = true, .layout = layout}},
                  b.rule(), b.scorer());
  return p(t, 0);
}

std::vector<embplan::shard> pieces_of(const embplan::plan& p, std::uint32_t ti) {
  std::vector<embplan::shard> out;
  for (const auto& s : p.shards)
    if (s.table == ti) out.push_back(s);
  return out;
}

}  // namespace

TEST_CASE("split layouts: table_row_wise and grid on fast host links, row_wise on slow ones") {
  using embplan::stage::row_layout;
  const std::uint32_t big = 40;
  const std::uint32_t huge = 41;
  // NVLink-class links inside a host, a slower network between.
  const auto fast = oversized_task(150.0, 12.5);
  const auto host_first = plan_with(fast, row_layout::host_first);
  const auto by_cost = plan_with(fast, row_layout::by_cost);
  const auto spread = plan_with(fast, row_layout::row_wise);
  for (const auto* r : {&host_first, &by_cost, &spread}) {
    REQUIRE(r->ok);
    CHECK_NOTHROW(embplan::validate(fast, r->placement, {.dim_multiple = 4, .memory = true}));
  }
  CHECK(type_of(fast, host_first.placement, big) == "table_row_wise");
  CHECK(type_of(fast, host_first.placement, huge) == "grid_shard");
  CHECK(type_of(fast, spread.placement, huge) == "row_wise");
  // by_cost takes the layout whose estimate is the lower, per table.
  CHECK(by_cost.placement == host_first.placement);
  CHECK(embplan::stage::detail::layout_comm_ms(fast, pieces_of(host_first.placement, huge)) <
        embplan::stage::detail::layout_comm_ms(fast, pieces_of(spread.placement, huge)));
  CHECK(by_cost.cost_ms.max_ms() < spread.cost_ms.max_ms());

  // Host links 25x slower than the network: the reduce-scatter costs more
  // than what it saves; by_cost keeps row_wise where host_first does not.
  const auto slow = oversized_task(0.5, 12.5);
  const auto slow_first = plan_with(slow, row_layout::host_first);
  const auto slow_cost = plan_with(slow, row_layout::by_cost);
  REQUIRE(slow_first.ok);
  REQUIRE(slow_cost.ok);
  CHECK(type_of(slow, slow_first.placement, huge) == "grid_shard");
  CHECK(type_of(slow, slow_first.placement, big) == "table_row_wise");
  CHECK(type_of(slow, slow_cost.placement, huge) == "row_wise");
  CHECK(type_of(slow, slow_cost.placement, big) == "row_wise");
  CHECK(embplan::stage::detail::layout_comm_ms(slow, pieces_of(slow_cost.placement, big)) <
        embplan::stage::detail::layout_comm_ms(slow, pieces_of(slow_first.placement, big)));
  CHECK(slow_cost.cost_ms.max_ms() < slow_first.cost_ms.max_ms());

  // One host of 16: every layout is the row_wise split.
  auto one = fast;
  one.cluster.devices_per_host = 16;
  const auto one_first = plan_with(one, row_layout::host_first);
  REQUIRE(one_first.ok);
  CHECK(one_first.placement == plan_with(one, row_layout::row_wise).placement);
  CHECK(type_of(one, one_first.placement, huge) == "row_wise");
}

TEST_CASE("a split that fits no layout says so") {
  auto t = oversized_task(150.0, 12.5);
  t.tables[41].rows = 40'000'000;  // more than all 16 GiB
  for (const auto layout :
       {embplan::stage::row_layout::by_cost, embplan::stage::row_layout::host_first,
        embplan::stage::row_layout::row_wise}) {
    const auto r = plan_with(t, layout);
    CHECK_FALSE(r.ok);
    CHECK(r.failure.find("'huge'") != std::string::npos);
    CHECK(r.failure.find("split by rows across all 16 devices it still does not fit") !=
          std::string::npos);
  }
}
