#include "embplan/meter/shard_traces.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "embplan/core/random.hpp"
#include "support/message_of.hpp"
#include "support/meter_table.hpp"

namespace eb = embplan::meter;

namespace {
using embplan::test::message_of;

embplan::task three_tables() {
  embplan::task t;
  t.tables = {embplan::test::meter_table(1000, 8, 3.0), embplan::test::meter_table(500, 16, 2.0),
              embplan::test::meter_table(2000, 4, 5.0)};
  t.batch_size = 256;
  return t;
}

embplan::shard whole(std::uint32_t table, std::uint32_t device, const embplan::task& t) {
  return embplan::whole_table(t, table, device);
}

const eb::meter_options small{.batch_size = 128, .seed = 7};

// Table `i`'s bags [bag] of a prepared shard: its lookups, in order.
std::vector<std::int64_t> bag_of(const eb::prepared_shard& p, std::size_t table, std::size_t bag) {
  const auto b = static_cast<std::size_t>(p.trace.batch_size);
  const auto at = table * b + bag;
  return {p.trace.indices.begin() + p.trace.offsets[at],
          p.trace.indices.begin() + p.trace.offsets[at + 1]};
}

}  // namespace

TEST_CASE("shard_traces: table i's trace is generate_trace(piece, derive_seed(seed, i))") {
  const auto t = three_tables();
  eb::shard_traces traces(1);
  const std::vector<embplan::shard> group{whole(2, 0, t), whole(0, 0, t)};
  const auto p = traces.prepare(t, group, small, "CPU meter", 1);
  CHECK(p.trace.batch_size == 128);
  CHECK(p.layout.rows == std::vector<std::int64_t>{2000, 1000});
  CHECK(p.layout.dims == std::vector<std::int32_t>{4, 8});
  CHECK_FALSE(p.fp16);
  std::size_t at = 0;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const auto expected = embplan::data::generate_trace(
        t.tables[group[k].table],
        {.batch_size = 128, .seed = embplan::derive_seed(7, group[k].table)});
    for (std::size_t bag = 0; bag < 128; ++bag) {
      const std::vector<std::int64_t> want(
          expected.indices.begin() + expected.offsets[bag],
          expected.indices.begin() + (bag + 1 < 128
                                          ? expected.offsets[bag + 1]
                                          : static_cast<std::int64_t>(expected.indices.size())));
      REQUIRE(bag_of(p, k, bag) == want);
    }
    at += expected.indices.size();
  }
  CHECK(p.trace.indices.size() == at);
  CHECK(p.trace.offsets.size() == group.size() * 128 + 1);
  CHECK(p.trace.offsets.back() == static_cast<std::int64_t>(at));
}

TEST_CASE("shard_traces: plans of one task share each table's trace; another task draws anew") {
  const auto t = three_tables();
  eb::shard_traces traces(2);
  // Plan A: tables 0, 1 on one device; plan B: table 1 with table 2, and a
  // column piece of table 0 (its trace is the whole table's).
  const std::vector<embplan::shard> a{whole(0, 0, t), whole(1, 0, t)};
  const auto pa = traces.prepare(t, a, small, "CPU meter", 1);
  CHECK(traces.drawn() == 2);
  auto col = whole(0, 1, t);
  col.col_end = 4;
  const std::vector<embplan::shard> b{whole(1, 1, t), col, whole(2, 1, t)};
  const auto pb = traces.prepare(t, b, small, "CPU meter", 1);
  CHECK(traces.drawn() == 3);  // only table 2 was new
  CHECK(traces.held() == 3);
  CHECK(pb.layout.dims == std::vector<std::int32_t>{16, 4, 4});
  for (std::size_t bag = 0; bag < 128; bag += 17) {
    CHECK(bag_of(pa, 1, bag) == bag_of(pb, 0, bag));  // table 1
    CHECK(bag_of(pa, 0, bag) == bag_of(pb, 1, bag));  // table 0 and its column piece
  }
  // A row piece is a table of its own (fewer rows, a share of the lookups).
  auto rows = whole(2, 0, t);
  rows.row_end = 1000;
  const auto pr =
      traces.prepare(t, std::span<const embplan::shard>(&rows, 1), small, "CPU meter", 1);
  CHECK(traces.drawn() == 4);
  CHECK(pr.layout.rows == std::vector<std::int64_t>{1000});
  for (const auto i : pr.trace.indices)
    CHECK((i >= 0 && i < 1000));

  // Another task (one table's pooling changed): every trace drawn again.
  auto other = t;
  other.tables[1].pooling_factor = 4.0;
  (void)traces.prepare(other, a, small, "CPU meter", 1);
  CHECK(traces.drawn() == 6);
  CHECK(traces.held() == 2);
  // Another seed is another draw, too.
  eb::meter_options seeded = small;
  seeded.seed = 8;
  const auto ps = traces.prepare(other, a, seeded, "CPU meter", 1);
  CHECK(traces.drawn() == 8);
  CHECK(ps.trace.indices != pa.trace.indices);
}

TEST_CASE("shard_traces: the same draws whatever the thread count") {
  const auto t = three_tables();
  const std::vector<embplan::shard> all{whole(0, 0, t), whole(1, 0, t), whole(2, 0, t)};
  eb::shard_traces one(1);
  eb::shard_traces four(4);
  const auto p1 = one.prepare(t, all, small, "CPU meter", 1);
  const auto p4 = four.prepare(t, all, small, "CPU meter", 1);
  CHECK(p1.trace.indices == p4.trace.indices);
  CHECK(p1.trace.offsets == p4.trace.offsets);
}

TEST_CASE("shard_traces: a shard shrunk to fit the meter falls back to its own trace") {
  const auto t = three_tables();
  eb::meter_options tight = small;
  tight.max_weight_bytes = std::uint64_t{1} << 20;  // 1 MiB
  auto big = t;
  big.tables[0].rows = 100000;  // 100000 x 8 x 4 B = 3.2 MB > 1 MiB
  eb::shard_traces traces(1);
  const std::vector<embplan::shard> g{whole(0, 0, big)};
  const auto p = traces.prepare(big, g, tight, "CPU meter", 1);
  CHECK(traces.drawn() == 0);
  CHECK(p.layout.rows[0] < 100000);
  const auto direct = eb::detail::prepare_shard(std::vector<embplan::table_spec>{big.tables[0]},
                                                tight, tight.seed, "CPU meter", 1);
  CHECK(p.layout.rows == direct.layout.rows);
  CHECK(p.trace.indices == direct.trace.indices);
}

TEST_CASE("shard_traces: the meter's checks name the piece and the value") {
  auto t = three_tables();
  eb::shard_traces traces(1);
  const std::vector<embplan::shard> g{whole(1, 0, t), whole(0, 0, t)};
  // Dims 16 and 8 are not multiples of 32.
  CHECK(message_of([&] { (void)traces.prepare(t, g, small, "GPU meter", 32); }) ==
        "field 'shard.tables[0].dim' = 16: expected a multiple of 32 (the GPU meter's kernel "
        "loads rows as vectors)");
  t.tables[0].weight_dtype = embplan::dtype::fp16;
  CHECK(message_of([&] { (void)traces.prepare(t, g, small, "GPU meter", 4); }) ==
        "field 'shard.tables[1].dtype' = \"fp16\": expected the dtype of the shard's first table "
        "(fp32)");
  CHECK(traces.drawn() == 0);
}
