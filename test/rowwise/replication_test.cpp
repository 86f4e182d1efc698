#include "embplan/rowwise/replication.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/rowwise/load.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/rowwise/zipf.hpp"

using embplan::rowwise::hash_partition;
using embplan::rowwise::replica_routing;

namespace {

// The balanced routing's loads by definition: every request on its owner, then
// for each hot ID (hottest first) its requests taken off the owner and placed
// one at a time on the least-loaded holder, ties to the lowest shard id.
std::vector<std::vector<std::uint64_t>> one_at_a_time(
    const hash_partition& part, const std::vector<std::int64_t>& ids,
    const std::vector<embplan::rowwise::id_hits>& freq, std::size_t max_k, std::uint32_t r) {
  const std::uint32_t shards = part.shards();
  std::vector<std::uint64_t> load(shards, 0);
  for (const auto id : ids)
    ++load[part.shard_of(id)];
  std::vector<std::vector<std::uint64_t>> out{load};
  for (std::size_t k = 1; k <= max_k; ++k) {
    if (k <= freq.size()) {
      const auto owner = part.shard_of(freq[k - 1].id);
      load[owner] -= freq[k - 1].hits;
      for (std::uint64_t u = 0; u < freq[k - 1].hits; ++u) {
        std::uint32_t best = owner;
        for (std::uint32_t i = 1; i < r; ++i) {
          const auto s = (owner + i) % shards;
          if (load[s] < load[best] || (load[s] == load[best] && s < best)) best = s;
        }
        ++load[best];
      }
    }
    out.push_back(load);
  }
  return out;
}

std::uint64_t max_of(std::span<const std::uint64_t> v) {
  return *std::max_element(v.begin(), v.end());
}

}  // namespace

TEST_CASE("the chapter's setting, random routing: skew > 1.3 unreplicated, <= 1.1 by k = 1,000") {
  // 20,000 rows, 4 shards, 50,000 Zipf(1.3) requests (embedding-tables chapter §5).
  const hash_partition part(20'000, 4);
  const auto ids = embplan::rowwise::zipf_ids(20'000, 1.3, 50'000, 7);
  const auto freq = embplan::rowwise::id_frequency(ids, 20'000);
  const auto curve = embplan::rowwise::skew_by_k(part, ids, freq, 1'000, {.seed = 7});
  REQUIRE(curve.size() == 1'001);
  CHECK(curve[0] > 1.3);
  CHECK(curve[0] == embplan::rowwise::analyze_load(part, ids).skew);
  const auto k = embplan::rowwise::smallest_k_for(curve, 1.1);
  REQUIRE(k.has_value());
  CHECK(*k <= 1'000);
  CHECK(curve[*k] <= 1.1);
  for (std::size_t j = 0; j < *k; ++j)
    CHECK(curve[j] > 1.1);
  // Down to the target the curve falls; beyond it, reads of a replicated ID
  // are spread at random, so the skew moves only by routing noise (~1%) and
  // never back above the target.
  for (std::size_t j = 1; j <= *k; ++j)
    CHECK(curve[j] <= curve[j - 1]);
  for (std::size_t j = *k; j < curve.size(); ++j)
    CHECK(curve[j] <= 1.1);
}

TEST_CASE("the chapter's setting, balanced routing: skew non-increasing at every k, <= 1.1") {
  const hash_partition part(20'000, 4);
  const auto ids = embplan::rowwise::zipf_ids(20'000, 1.3, 50'000, 7);
  const auto freq = embplan::rowwise::id_frequency(ids, 20'000);
  const embplan::rowwise::replication_options o{.seed = 7, .routing = replica_routing::balanced};
  const auto loads = embplan::rowwise::loads_by_k(part, ids, freq, 1'000, o);
  const auto curve = embplan::rowwise::skew_by_k(part, ids, freq, 1'000, o);
  REQUIRE(curve.size() == 1'001);
  CHECK(curve[0] > 1.3);
  // Claim 2: with replicas everywhere the max load is max(max cold load,
  // ceil(T / S)) at every k; the cold load drops as IDs become hot.
  std::vector<std::uint64_t> cold = loads[0];
  const std::uint64_t ceil_mean = (ids.size() + 3) / 4;
  std::size_t violations = 0;
  for (std::size_t k = 0; k <= 1'000; ++k) {
    if (k > 0) cold[part.shard_of(freq[k - 1].id)] -= freq[k - 1].hits;
    if (max_of(loads[k]) != std::max(max_of(cold), ceil_mean)) ++violations;
    if (k > 0 && curve[k] > curve[k - 1]) ++violations;
    CHECK(std::accumulate(loads[k].begin(), loads[k].end(), std::uint64_t{0}) == ids.size());
  }
  CHECK(violations == 0);
  const auto k = embplan::rowwise::smallest_k_for(curve, 1.1);
  REQUIRE(k.has_value());
  CHECK(*k <= 1'000);
  // Once balanced, it stays balanced: ceil(T / S) is the floor of the max.
  CHECK(max_of(loads.back()) == ceil_mean);
  // Balanced never does worse than random here.
  const auto random = embplan::rowwise::skew_by_k(part, ids, freq, 1'000, {.seed = 7});
  CHECK(*k <= *embplan::rowwise::smallest_k_for(random, 1.1));
}

TEST_CASE("balanced routing: non-increasing skew over every k, several seeds, exponents, r") {
  // Claim 1 (any r) and Claim 2 (r = S) of replication.hpp, and the closed-form
  // water-filling against placing the reads one at a time.
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    for (const double s : {0.6, 1.05, 1.3, 2.0}) {
      for (const std::uint64_t shards : {3u, 4u, 8u}) {
        for (const std::uint32_t r : {0u, 2u}) {
          CAPTURE(seed);
          CAPTURE(s);
          CAPTURE(shards);
          CAPTURE(r);
          const hash_partition part(3'000, shards);
          const auto ids = embplan::rowwise::zipf_ids(3'000, s, 6'000, seed);
          const auto freq = embplan::rowwise::id_frequency(ids, 3'000);
          const std::size_t max_k = std::min<std::size_t>(1'000, freq.size() + 5);
          const auto loads = embplan::rowwise::loads_by_k(
              part, ids, freq, max_k,
              {.replicas = r, .seed = seed, .routing = replica_routing::balanced});
          const auto curve = embplan::rowwise::skew_by_k(
              part, ids, freq, max_k,
              {.replicas = r, .seed = seed, .routing = replica_routing::balanced});
          CHECK(loads == one_at_a_time(part, ids, freq, max_k,
                                       r == 0 ? static_cast<std::uint32_t>(shards) : r));
          std::size_t rises = 0;
          for (std::size_t k = 1; k <= max_k; ++k)
            if (curve[k] > curve[k - 1]) ++rises;
          CHECK(rises == 0);
          if (r == 0) {
            const std::uint64_t ceil_mean = (ids.size() + shards - 1) / shards;
            std::vector<std::uint64_t> cold = loads[0];
            std::size_t off = 0;
            for (std::size_t k = 1; k <= max_k; ++k) {
              if (k <= freq.size()) cold[part.shard_of(freq[k - 1].id)] -= freq[k - 1].hits;
              if (max_of(loads[k]) != std::max(max_of(cold), ceil_mean)) ++off;
            }
            CHECK(off == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("balanced routing with r < S: non-increasing, but not always down to the mean") {
  // One hot ID with 100 reads on shard 0 of 4, replicas on 2 shards: its reads
  // can only go to shards 0 and 1, so the best max is 50, above ceil(T / S) =
  // 25 (Claim 2 is for r = S only).
  const hash_partition part(100, 4, 1);  // shard = id mod 4
  const std::vector<std::int64_t> ids(100, 8);
  const auto freq = embplan::rowwise::id_frequency(ids, 100);
  const auto loads = embplan::rowwise::loads_by_k(
      part, ids, freq, 1, {.replicas = 2, .routing = replica_routing::balanced});
  CHECK(loads[0] == std::vector<std::uint64_t>{100, 0, 0, 0});
  CHECK(loads[1] == std::vector<std::uint64_t>{50, 50, 0, 0});
  const auto all =
      embplan::rowwise::loads_by_k(part, ids, freq, 1, {.routing = replica_routing::balanced});
  CHECK(all[1] == std::vector<std::uint64_t>{25, 25, 25, 25});
}

TEST_CASE("water-filling ties go to the lowest shard id") {
  // 3 units onto 4 shards at equal load: shards 0, 1, 2 get one each,
  // whichever holder is the owner.
  std::vector<std::uint64_t> load{5, 5, 5, 5};
  std::vector<std::uint64_t> quota;
  std::vector<std::uint32_t> order;
  embplan::rowwise::detail::water_fill(load, 2, 4, 3, quota, order);
  CHECK(load == std::vector<std::uint64_t>{6, 6, 6, 5});
  CHECK(quota == std::vector<std::uint64_t>{1, 0, 1, 1});  // holders 2, 3, 0, 1
  // Uneven: 6 units onto {9, 2, 4, 2}: shards 1 and 3 rise to 4 (4 units),
  // the last 2 go to the lowest ids at 4, shards 1 and 2.
  load = {9, 2, 4, 2};
  embplan::rowwise::detail::water_fill(load, 0, 4, 6, quota, order);
  CHECK(load == std::vector<std::uint64_t>{9, 5, 5, 4});
  CHECK(quota == std::vector<std::uint64_t>{0, 3, 1, 2});
}

TEST_CASE("replication moves load but never loses it; all-shard replication of every ID balances") {
  const hash_partition part(500, 5);
  const auto ids = embplan::rowwise::zipf_ids(500, 1.2, 20'000, 3);
  const auto freq = embplan::rowwise::id_frequency(ids, 500);
  const auto loads = embplan::rowwise::loads_by_k(part, ids, freq, 500, {.seed = 1});
  for (const auto& l : loads)
    CHECK(std::accumulate(l.begin(), l.end(), std::uint64_t{0}) == ids.size());
  CHECK(embplan::rowwise::skew_factor(loads.back()) < 1.05);
  CHECK(loads[freq.size()] == loads.back());  // IDs beyond the trace change nothing
  // Different seeds route differently.
  const auto other = embplan::rowwise::loads_by_k(part, ids, freq, 3, {.seed = 2});
  CHECK(other[3] != loads[3]);
  CHECK(other[0] == loads[0]);
}

TEST_CASE("replicas on r < S shards: the owner and the r-1 shards after it") {
  const hash_partition part(100, 4, 1);  // shard = id mod 4
  const std::vector<std::int64_t> hot{3, 5};
  const embplan::rowwise::hot_replicas rep(part, hot, {.replicas = 2, .seed = 0});
  CHECK(rep.replicas() == 2);
  CHECK(rep.replica_rows_per_shard() == std::vector<std::int64_t>{1, 0, 1, 0});  // 3 -> 0, 5 -> 2
  std::vector<int> served(4, 0);
  for (std::size_t j = 0; j < 2'000; ++j)
    ++served[rep.route(3, j).shard];
  CHECK(served[1] == 0);
  CHECK(served[2] == 0);
  CHECK(served[3] > 900);
  CHECK(served[0] > 900);
  const auto cold = rep.route(4, 0);
  CHECK(cold.shard == 0);
  CHECK(cold.local == 1);
  CHECK_FALSE(cold.replica);
}

TEST_CASE("gradient pre-aggregation: one push per worker per hot row") {
  const hash_partition part(10, 2, 1);  // shard = id mod 2
  // Worker 0: {0, 0, 0, 1}, worker 1: {0, 0, 2, 3}.
  const std::vector<std::int64_t> ids{0, 0, 0, 1, 0, 0, 2, 3};
  const auto freq = embplan::rowwise::id_frequency(ids, 10);
  const auto r = embplan::rowwise::gradient_pushes(part, ids, freq, 1, 2);
  CHECK(r.without == std::vector<std::uint64_t>{6, 2});
  CHECK(r.with == std::vector<std::uint64_t>{3, 2});  // 0 pushed twice, 2 once; 1 and 3
  const auto none = embplan::rowwise::gradient_pushes(part, ids, freq, 0, 2);
  CHECK(none.with == none.without);
}

TEST_CASE("bad input: k above rows, target skew below 1 or NaN, too many replicas, workers 0") {
  const hash_partition part(10, 2);
  const std::vector<std::int64_t> ids{1, 2};
  const auto freq = embplan::rowwise::id_frequency(ids, 10);
  CHECK_THROWS_WITH_AS((void)embplan::rowwise::skew_by_k(part, ids, freq, 11),
                       doctest::Contains("field 'k' = 11: expected at most the table's rows (10)"),
                       embplan::error);
  const std::vector<double> curve{1.5, 1.2};
  CHECK_THROWS_WITH_AS((void)embplan::rowwise::smallest_k_for(curve, 0.9),
                       doctest::Contains("field 'target_skew' = 0.9"), embplan::error);
  CHECK_THROWS_WITH_AS(
      (void)embplan::rowwise::smallest_k_for(curve, std::numeric_limits<double>::quiet_NaN()),
      doctest::Contains("field 'target_skew' = nan"), embplan::error);
  CHECK_FALSE(embplan::rowwise::smallest_k_for(curve, 1.1).has_value());
  CHECK(embplan::rowwise::smallest_k_for(curve, 1.2) == 1u);
  const std::vector<std::int64_t> hot{1};
  CHECK_THROWS_WITH_AS(embplan::rowwise::hot_replicas(part, hot, {.replicas = 3}),
                       doctest::Contains("field 'replicas' = 3"), embplan::error);
  const std::vector<std::int64_t> dup{1, 1};
  CHECK_THROWS_WITH_AS(embplan::rowwise::hot_replicas(part, dup),
                       doctest::Contains("field 'hot[1]' = 1"), embplan::error);
  CHECK_THROWS_WITH_AS((void)embplan::rowwise::gradient_pushes(part, ids, freq, 1, 0),
                       doctest::Contains("field 'workers' = 0"), embplan::error);
  CHECK_THROWS_WITH_AS((void)embplan::rowwise::replica_routing_from("fastest", "--routing"),
                       doctest::Contains("field '--routing' = \"fastest\": expected random or "
                                         "balanced"),
                       embplan::error);
  CHECK(embplan::rowwise::replica_routing_from("balanced") == replica_routing::balanced);
  CHECK(embplan::rowwise::replica_routing_from("random") == replica_routing::random);
  const embplan::rowwise::hot_replicas bal(part, hot, {.routing = replica_routing::balanced});
  CHECK_THROWS_WITH_AS((void)bal.route(1, 0), doctest::Contains("field 'routing' = \"balanced\""),
                       embplan::error);
  std::vector<embplan::rowwise::row_route> routes(1);
  CHECK_THROWS_WITH_AS(bal.routes(ids, routes), doctest::Contains("field 'routes.size' = 1"),
                       embplan::error);
  const std::vector<std::int64_t> bad{1, 10};
  routes.resize(2);
  CHECK_THROWS_WITH_AS(bal.routes(bad, routes), doctest::Contains("field 'ids[1]' = 10"),
                       embplan::error);
}
