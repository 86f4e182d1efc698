#include "embplan/rowwise/gather.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/rowwise/load.hpp"
#include "embplan/rowwise/partition.hpp"
#include "embplan/rowwise/replication.hpp"
#include "embplan/rowwise/zipf.hpp"

using embplan::rowwise::gather_workspace;
using embplan::rowwise::hash_partition;
using embplan::rowwise::range_partition;
using embplan::rowwise::sharded_table;

namespace {

std::vector<float> random_table(std::int64_t rows, std::int32_t dim, std::uint64_t seed) {
  embplan::rng g(seed);
  std::vector<float> t(static_cast<std::size_t>(rows) * static_cast<std::size_t>(dim));
  for (auto& v : t)
    v = static_cast<float>(g.normal());
  return t;
}

std::vector<float> reference(const std::vector<float>& table, std::int32_t dim,
                             const std::vector<std::int64_t>& ids) {
  const auto d = static_cast<std::size_t>(dim);
  std::vector<float> out(ids.size() * d);
  for (std::size_t j = 0; j < ids.size(); ++j)
    std::memcpy(&out[j * d], &table[static_cast<std::size_t>(ids[j]) * d], d * sizeof(float));
  return out;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("routed gather equals a single-table gather, bit for bit (hash and range)") {
  const std::int64_t rows = 2'000;
  const std::int32_t dim = 16;
  const auto table = random_table(rows, dim, 7);
  const auto ids = embplan::rowwise::zipf_ids(rows, 1.3, 5'000, 7);
  const auto ref = reference(table, dim, ids);
  gather_workspace ws;
  std::vector<float> out(ids.size() * dim);

  const sharded_table hashed(hash_partition(rows, 4), table, dim);
  const auto load = hashed.gather(ids, out, ws);
  CHECK(bit_identical(out, ref));
  CHECK(load == embplan::rowwise::lookups_per_shard(hashed.partition(), ids));
  std::size_t stored = 0;
  for (std::uint32_t s = 0; s < 4; ++s)
    stored += hashed.shard_rows(s).size();
  CHECK(stored == table.size());

  const std::vector<std::uint64_t> memory{3, 1, 2};
  const sharded_table ranged(range_partition::proportional(rows, memory), table, dim);
  std::fill(out.begin(), out.end(), 0.f);
  (void)ranged.gather(ids, out, ws);
  CHECK(bit_identical(out, ref));
}

TEST_CASE("gather under hot-row replication: same rows, load spread, routed as the curve says") {
  const std::int64_t rows = 1'000;
  const std::int32_t dim = 8;
  const auto table = random_table(rows, dim, 1);
  const auto ids = embplan::rowwise::zipf_ids(rows, 1.3, 4'000, 2);
  const auto ref = reference(table, dim, ids);
  const hash_partition part(rows, 4);
  const auto freq = embplan::rowwise::id_frequency(ids, rows);
  const auto curve = embplan::rowwise::loads_by_k(part, ids, freq, 20, {.replicas = 3, .seed = 5});
  sharded_table st(part, table, dim);
  gather_workspace ws;
  std::vector<float> out(ids.size() * dim);
  for (const std::size_t k : {0u, 1u, 5u, 20u}) {
    CAPTURE(k);
    const auto hot = embplan::rowwise::hottest_ids(freq, k);
    const embplan::rowwise::hot_replicas rep(part, hot, {.replicas = 3, .seed = 5});
    st.replicate(rep);
    std::fill(out.begin(), out.end(), 0.f);
    const auto load = st.gather(ids, out, rep, ws);
    CHECK(bit_identical(out, ref));
    CHECK(load == curve[k]);
  }
}

TEST_CASE("gather under balanced routing: same rows at every k, loads as the curve says") {
  const std::int64_t rows = 1'000;
  const std::int32_t dim = 8;
  const auto table = random_table(rows, dim, 3);
  const auto ids = embplan::rowwise::zipf_ids(rows, 1.3, 4'000, 4);
  const auto ref = reference(table, dim, ids);
  const hash_partition part(rows, 4);
  const auto freq = embplan::rowwise::id_frequency(ids, rows);
  sharded_table st(part, table, dim);
  gather_workspace ws;
  std::vector<float> out(ids.size() * dim);
  for (const std::uint32_t r : {0u, 2u}) {
    const embplan::rowwise::replication_options o{
        .replicas = r, .routing = embplan::rowwise::replica_routing::balanced};
    const auto curve = embplan::rowwise::loads_by_k(part, ids, freq, 60, o);
    std::size_t mismatches = 0;
    std::size_t replica_reads = 0;
    for (std::size_t k = 0; k <= 60; ++k) {  // every k
      const auto hot = embplan::rowwise::hottest_ids(freq, k);
      const embplan::rowwise::hot_replicas rep(part, hot, o);
      st.replicate(rep);
      std::fill(out.begin(), out.end(), -1.f);
      const auto load = st.gather(ids, out, rep, ws);
      if (!bit_identical(out, ref) || load != curve[k]) ++mismatches;
      for (const auto& route : ws.routes)
        replica_reads += route.replica ? 1 : 0;
    }
    CAPTURE(r);
    CHECK(mismatches == 0);
    CHECK(replica_reads > 0);
  }
}

TEST_CASE("bad input: IDs out of range, wrong output size, a hot set not replicated") {
  const auto table = random_table(10, 4, 1);
  const hash_partition part(10, 2);
  sharded_table st(part, table, 4);
  gather_workspace ws;
  std::vector<float> out(2 * 4);
  const std::vector<std::int64_t> bad{1, 10};
  CHECK_THROWS_WITH_AS((void)st.gather(bad, out, ws), doctest::Contains("field 'ids[1]' = 10"),
                       embplan::error);
  const std::vector<std::int64_t> ok{1, 2, 3};
  CHECK_THROWS_WITH_AS((void)st.gather(ok, out, ws), doctest::Contains("field 'out.size' = 8"),
                       embplan::error);
  const std::vector<std::int64_t> hot{1, 2};
  const embplan::rowwise::hot_replicas rep(part, hot);
  const std::vector<std::int64_t> two{1, 2};
  CHECK_THROWS_WITH_AS((void)st.gather(two, out, rep, ws), doctest::Contains("field 'replicas'"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(sharded_table(part, table, 3), doctest::Contains("field 'table.size' = 40"),
                       embplan::error);
}
