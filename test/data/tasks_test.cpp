#include "embplan/data/tasks.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "embplan/data/synthetic_pool.hpp"

namespace {

using embplan::data::generate_tasks;
using embplan::data::pool_half;
using embplan::data::protocol;
using embplan::data::task_options;

std::set<std::string> names_of(const std::vector<embplan::table_spec>& tables) {
  std::set<std::string> out;
  for (const auto& t : tables)
    out.insert(t.name);
  return out;
}

std::uint64_t total_bytes(const embplan::task& t) {
  std::uint64_t sum = 0;
  for (const auto& table : t.tables)
    sum += embplan::table_bytes(table);
  return sum;
}

// The pool table a task table was copied from: copies are named "t5#2", "t5#3".
std::string pool_name(const std::string& name) {
  return name.substr(0, name.find('#'));
}

bool has_duplicate(const embplan::task& t) {
  std::set<std::string> seen;
  for (const auto& table : t.tables)
    seen.insert(pool_name(table.name));
  return seen.size() != t.tables.size();
}

// Each task table is its pool table with only the dim (and dtype) changed.
void check_from_pool(const embplan::task& t, const std::vector<embplan::table_spec>& pool) {
  std::map<std::string, const embplan::table_spec*> by_name;
  for (const auto& p : pool)
    by_name[p.name] = &p;
  // Table names stay unique inside a task even when a pool table repeats.
  CHECK(names_of(t.tables).size() == t.tables.size());
  for (const auto& table : t.tables) {
    REQUIRE(by_name.count(pool_name(table.name)) == 1);
    const auto& p = *by_name[pool_name(table.name)];
    CHECK(table.rows == p.rows);
    CHECK(table.pooling_factor == p.pooling_factor);
    CHECK(table.reuse_hist == p.reuse_hist);
  }
}

}  // namespace

TEST_CASE("protocol names parse and print") {
  for (auto p : {protocol::neuroshard, protocol::dreamshard, protocol::autoshard})
    CHECK(embplan::data::parse_protocol(embplan::data::to_string(p)) == p);
  CHECK(embplan::data::to_string(protocol::dreamshard) == "dreamshard");
  CHECK_THROWS_WITH_AS(embplan::data::parse_protocol("deepshard"),
                       doctest::Contains("'protocol' = \"deepshard\""), embplan::error);
  CHECK_THROWS_WITH_AS(embplan::data::parse_protocol("x"),
                       doctest::Contains("\"neuroshard\", \"dreamshard\", \"autoshard\""),
                       embplan::error);
  for (auto h : {pool_half::protocol_default, pool_half::whole, pool_half::train, pool_half::test})
    CHECK(embplan::data::parse_pool_half(embplan::data::to_string(h)) == h);
  CHECK_THROWS_WITH_AS(embplan::data::parse_pool_half("half"),
                       doctest::Contains("'pool_half' = \"half\""), embplan::error);
}

TEST_CASE("neuroshard: 4 GPUs, 10-60 tables, dims 4..128, 15 GiB fit rule (NeuroShard Table 5)") {
  const auto pool = embplan::data::synthetic_pool();
  const auto tasks = generate_tasks(pool, {});
  REQUIRE(tasks.size() == 100);
  CHECK(tasks[7].name == "neuroshard-4dev-128dim-007");
  std::size_t smallest = 1000;
  std::size_t largest = 0;
  std::set<std::int32_t> dims;
  bool any_duplicate = false;
  for (const auto& t : tasks) {
    CAPTURE(t.name);
    CHECK(t.tables.size() >= 10);
    CHECK(t.tables.size() <= 60);
    smallest = std::min(smallest, t.tables.size());
    largest = std::max(largest, t.tables.size());
    for (const auto& table : t.tables)
      dims.insert(table.dim);
    CHECK(total_bytes(t) <= 15 * embplan::gib);
    REQUIRE(t.cluster.size() == 4);
    for (const auto& d : t.cluster.devices)
      CHECK(d.memory_bytes == 4 * embplan::gib);
    CHECK(t.batch_size == 65536);
    CHECK_NOTHROW(embplan::validate(t));
    check_from_pool(t, pool);
    any_duplicate = any_duplicate || has_duplicate(t);
  }
  CHECK(smallest <= 12);
  CHECK(largest >= 25);  // the fit rule keeps the largest T out at max_dim 128
  CHECK(dims == std::set<std::int32_t>{4, 8, 16, 32, 64, 128});
  CHECK(any_duplicate);  // drawn with replacement, as gen_tasks.py's np.random.randint
}

TEST_CASE("neuroshard: where everything fits, T spans the whole 10-60 range") {
  const auto pool = embplan::data::synthetic_pool();
  std::map<std::size_t, int> seen;
  for (const auto& t : generate_tasks(pool, {.max_dim = 4, .count = 300})) {
    CHECK(t.tables.size() >= 10);
    CHECK(t.tables.size() <= 60);
    ++seen[t.tables.size()];
  }
  CHECK(seen.begin()->first <= 11);
  CHECK(seen.rbegin()->first >= 59);
  CHECK(seen.size() > 40);  // of the 51 possible sizes
}

TEST_CASE("neuroshard: 8 GPUs take 20-120 tables; max_dim bounds the dims") {
  const auto pool = embplan::data::synthetic_pool();
  const auto tasks = generate_tasks(pool, {.devices = 8, .max_dim = 16, .count = 40});
  REQUIRE(tasks.size() == 40);
  CHECK(tasks[0].name == "neuroshard-8dev-16dim-000");
  std::set<std::int32_t> dims;
  for (const auto& t : tasks) {
    CHECK(t.tables.size() >= 20);
    CHECK(t.tables.size() <= 120);
    CHECK(t.cluster.size() == 8);
    CHECK(total_bytes(t) <= 31 * embplan::gib);
    for (const auto& table : t.tables)
      dims.insert(table.dim);
  }
  CHECK(dims == std::set<std::int32_t>{4, 8, 16});
}

TEST_CASE("neuroshard: a cluster too small for any draw fails clearly") {
  const auto pool = embplan::data::synthetic_pool({.tables = 100});
  CHECK_THROWS_WITH_AS(
      generate_tasks(pool, {.devices = 1, .count = 1, .device_memory_bytes = embplan::gib}),
      doctest::Contains("'device_memory_bytes' = 1073741824"), embplan::error);
  CHECK_THROWS_WITH_AS(
      generate_tasks(pool, {.devices = 1, .count = 1, .device_memory_bytes = embplan::gib}),
      doctest::Contains("cannot draw a task that fits"), embplan::error);
}

TEST_CASE("a request no draw can fit is refused before drawing, not after 10,000 draws") {
  const auto pool = embplan::data::synthetic_pool({.tables = 100});
  // 20,000 tables of this pool average far more than 4 devices of 4 GiB:
  // refused from the pool's statistics (before: 10,000 draws of 20,000).
  embplan::data::task_options o{.devices = 4, .count = 1, .device_memory_bytes = 4 * embplan::gib};
  o.min_tables = o.max_tables = 20'000;
  CHECK_THROWS_WITH_AS(generate_tasks(pool, o), doctest::Contains("8 standard deviations"),
                       embplan::error);
  // The smallest task: 3 tables of at least 16 bytes each on no memory left
  // after the protocol's 1 GiB reserve.
  CHECK_THROWS_WITH_AS(
      generate_tasks(pool, {.devices = 1, .count = 1, .device_memory_bytes = embplan::gib}),
      doctest::Contains("the smallest task the protocol can draw"), embplan::error);
  // What can fit still draws.
  o.min_tables = o.max_tables = 10;
  CHECK(generate_tasks(pool, o).size() == 1);
}

TEST_CASE("dreamshard: disjoint halves that cover the pool (DreamShard §4.1)") {
  const auto pool = embplan::data::synthetic_pool();
  const auto [train, test] = embplan::data::split_pool(pool, 0);
  CHECK(train.size() == 428);
  CHECK(test.size() == 428);
  const auto train_names = names_of(train);
  const auto test_names = names_of(test);
  std::vector<std::string> overlap;
  std::set_intersection(train_names.begin(), train_names.end(), test_names.begin(),
                        test_names.end(), std::back_inserter(overlap));
  CHECK(overlap.empty());
  auto all = train_names;
  all.insert(test_names.begin(), test_names.end());
  CHECK(all == names_of(pool));
  CHECK(embplan::data::split_pool(pool, 0) == std::make_pair(train, test));
  CHECK(names_of(embplan::data::split_pool(pool, 1).first) != train_names);
  const auto odd = embplan::data::split_pool(embplan::data::synthetic_pool({.tables = 7}), 3);
  CHECK(odd.first.size() == 3);
  CHECK(odd.second.size() == 4);
}

TEST_CASE("half_holding: which half of a split holds every table; other_half") {
  const std::size_t n = 856;
  const auto [train, test] = embplan::data::detail::split_indices(n, 0);
  using embplan::data::half_holding;
  CHECK(half_holding(std::vector<std::size_t>{train[0], train[5], train.back()}, n, 0) ==
        pool_half::train);
  CHECK(half_holding(test, n, 0) == pool_half::test);
  CHECK(half_holding(std::vector<std::size_t>{train[0], test[0]}, n, 0) == pool_half::whole);
  CHECK(half_holding(std::vector<std::size_t>{}, n, 0) == pool_half::whole);
  // All of one half under seed 0 is split between both halves under seed 1.
  CHECK(half_holding(train, n, 1) == pool_half::whole);
  CHECK_THROWS_WITH_AS(half_holding(std::vector<std::size_t>{3, 856}, n, 0),
                       doctest::Contains("'tables[1]' = 856: expected a pool index below 856"),
                       embplan::error);
  CHECK(embplan::data::other_half(pool_half::train) == pool_half::test);
  CHECK(embplan::data::other_half(pool_half::test) == pool_half::train);
  CHECK(embplan::data::other_half(pool_half::whole) == pool_half::whole);
  CHECK(embplan::data::other_half(pool_half::protocol_default) == pool_half::whole);
}

TEST_CASE("dreamshard: DLRM-50 (4) tasks of dim 16 from one half, without replacement") {
  const auto pool = embplan::data::synthetic_pool();
  const auto [train, test] = embplan::data::split_pool(pool, 0);
  const auto train_names = names_of(train);
  const auto test_names = names_of(test);
  const auto train_tasks = generate_tasks(pool, {.proto = protocol::dreamshard});
  REQUIRE(train_tasks.size() == 50);
  CHECK(train_tasks[3].name == "dreamshard-4dev-16dim-train-003");
  // Test tasks drawn with another seed still come from the other half.
  const auto test_tasks =
      generate_tasks(pool, {.proto = protocol::dreamshard, .seed = 9, .half = pool_half::test});
  REQUIRE(test_tasks.size() == 50);
  for (const auto& t : train_tasks) {
    CHECK(t.tables.size() == 50);
    CHECK_FALSE(has_duplicate(t));
    for (const auto& table : t.tables) {
      CHECK(table.dim == 16);
      CHECK(train_names.count(table.name) == 1);
    }
    CHECK(total_bytes(t) <= 16 * embplan::gib);
    check_from_pool(t, pool);
  }
  for (const auto& t : test_tasks) {
    CHECK_FALSE(has_duplicate(t));
    for (const auto& table : t.tables)
      CHECK(test_names.count(table.name) == 1);
  }
}

TEST_CASE("dreamshard: 8 devices default to 100 tables; min/max_tables set the range") {
  const auto pool = embplan::data::synthetic_pool();
  for (const auto& t :
       generate_tasks(pool, {.proto = protocol::dreamshard, .devices = 8, .count = 5}))
    CHECK(t.tables.size() == 100);
  std::set<std::size_t> sizes;
  for (const auto& t : generate_tasks(pool, {.proto = protocol::dreamshard,
                                            .count = 30,
                                            .min_tables = 10,
                                            .max_tables = 20,
                                            .half = pool_half::whole})) {
    CHECK(t.tables.size() >= 10);
    CHECK(t.tables.size() <= 20);
    sizes.insert(t.tables.size());
  }
  CHECK(sizes.size() > 3);
}

TEST_CASE("autoshard: T = 10 x devices, dims 4..32, fp16, without replacement (AutoShard §5.1)") {
  const auto pool = embplan::data::synthetic_pool();
  const auto tasks = generate_tasks(pool, {.proto = protocol::autoshard, .devices = 8});
  REQUIRE(tasks.size() == 100);
  CHECK(tasks[42].name == "autoshard-8dev-32dim-042");
  std::set<std::int32_t> dims;
  for (const auto& t : tasks) {
    CHECK(t.tables.size() == 80);
    CHECK(t.cluster.size() == 8);
    CHECK_FALSE(has_duplicate(t));
    for (const auto& table : t.tables) {
      dims.insert(table.dim);
      CHECK(table.weight_dtype == embplan::dtype::fp16);
    }
    check_from_pool(t, pool);
  }
  CHECK(dims == std::set<std::int32_t>{4, 8, 16, 32});
  std::set<std::int32_t> small_dims;
  for (const auto& t :
       generate_tasks(pool, {.proto = protocol::autoshard, .devices = 2, .max_dim = 8, .count = 5}))
    for (const auto& table : t.tables)
      small_dims.insert(table.dim);
  CHECK(small_dims == std::set<std::int32_t>{4, 8});
}

TEST_CASE("same options, same tasks; another seed, other tasks; more tasks keep the first") {
  const auto pool = embplan::data::synthetic_pool({.tables = 200});
  for (auto p : {protocol::neuroshard, protocol::dreamshard, protocol::autoshard}) {
    CAPTURE(embplan::data::to_string(p));
    const task_options o{.proto = p, .count = 10, .seed = 4};
    const auto a = generate_tasks(pool, o);
    CHECK(a == generate_tasks(pool, o));
    auto other = o;
    other.seed = 5;
    const auto b = generate_tasks(pool, other);
    std::size_t same = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
      same += a[i].tables == b[i].tables ? 1 : 0;
    CHECK(same == 0);
    auto more = o;
    more.count = 20;
    const auto c = generate_tasks(pool, more);
    for (std::size_t i = 0; i < a.size(); ++i)
      CHECK(c[i] == a[i]);
  }
}

TEST_CASE("bad task options name the field and the value") {
  const auto pool = embplan::data::synthetic_pool({.tables = 100});
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.devices = 0}), doctest::Contains("'devices' = 0"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.count = 0}), doctest::Contains("'count' = 0"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.max_dim = 100}), doctest::Contains("'max_dim' = 100"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.max_dim = 2048}),
                       doctest::Contains("'max_dim' = 2048"), embplan::error);
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.max_dim = 2}), doctest::Contains("'max_dim' = 2"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.min_tables = 30, .max_tables = 20}),
                       doctest::Contains("'min_tables' = 30"), embplan::error);
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.device_memory_bytes = 0}),
                       doctest::Contains("'device_memory_bytes' = 0"), embplan::error);
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.batch_size = -1}),
                       doctest::Contains("'batch_size' = -1"), embplan::error);
  CHECK_THROWS_WITH_AS(generate_tasks({}, {}), doctest::Contains("'pool' = 0"), embplan::error);
  // Without replacement a task cannot hold more tables than its source.
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.proto = protocol::autoshard, .devices = 11}),
                       doctest::Contains("'max_tables' = 110"), embplan::error);
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.proto = protocol::dreamshard, .max_tables = 60}),
                       doctest::Contains("at most the 50 tables of the train half"),
                       embplan::error);
  auto bad = pool;
  bad[3].rows = -5;
  CHECK_THROWS_WITH_AS(generate_tasks(bad, {}), doctest::Contains("'pool[3].rows' = -5"),
                       embplan::error);
}

namespace {

// FNV-1a over every task's name and its tables' names, dims, rows and dtypes.
std::uint64_t fingerprint(const std::vector<embplan::task>& tasks) {
  std::uint64_t h = 1469598103934665603ULL;
  const auto mix = [&](const std::string& s) {
    for (const unsigned char c : s + '\xff') {
      h ^= c;
      h *= 1099511628211ULL;
    }
  };
  for (const auto& t : tasks) {
    mix(t.name);
    for (const auto& table : t.tables) {
      mix(table.name);
      mix(std::to_string(table.dim));
      mix(std::to_string(table.rows));
      mix(std::to_string(static_cast<int>(table.weight_dtype)));
    }
  }
  return h;
}

}  // namespace

TEST_CASE("tasks without unseen_share are those drawn before it existed") {
  // Recorded before unseen_share was added: the draws of the other options
  // must not move (golden data and trained policies depend on them).
  const auto pool = embplan::data::synthetic_pool();
  const auto of = [&](protocol p, pool_half h) {
    return fingerprint(
        generate_tasks(pool, {.proto = p, .count = 20, .seed = 7, .half = h, .split_seed = 3}));
  };
  CHECK(of(protocol::neuroshard, pool_half::protocol_default) == 0x5ef25882cf1c5f30ULL);
  CHECK(of(protocol::neuroshard, pool_half::test) == 0x99a903a87d5b4848ULL);
  CHECK(of(protocol::dreamshard, pool_half::protocol_default) == 0x58c7144cc55621c1ULL);
  CHECK(of(protocol::dreamshard, pool_half::whole) == 0xa4b8ba32c8447db1ULL);
  CHECK(of(protocol::dreamshard, pool_half::test) == 0xfa01e582617da4f0ULL);
  CHECK(of(protocol::autoshard, pool_half::protocol_default) == 0xae10f73b4b4549b3ULL);
  CHECK(of(protocol::autoshard, pool_half::train) == 0x1361a0c6c79d2443ULL);
}

TEST_CASE(
    "unseen_share: round(share x T) tables from the test half, the rest from the train "
    "half (AutoShard §5.5)") {
  const auto pool = embplan::data::synthetic_pool();
  const auto [train, test] = embplan::data::split_pool(pool, 3);
  const auto train_names = names_of(train);
  const auto test_names = names_of(test);
  for (auto p : {protocol::autoshard, protocol::dreamshard, protocol::neuroshard}) {
    for (const double share : {0.0, 0.25, 0.5, 0.75, 1.0}) {
      CAPTURE(embplan::data::to_string(p));
      CAPTURE(share);
      const task_options o{.proto = p,
                           .max_dim = 32,
                           .count = 20,
                           .seed = 2,
                           .split_seed = 3,
                           .unseen_share = share};
      const auto tasks = generate_tasks(pool, o);
      REQUIRE(tasks.size() == 20);
      CHECK(tasks == generate_tasks(pool, o));
      bool unseen_not_first = false;
      for (const auto& t : tasks) {
        CAPTURE(t.name);
        std::size_t unseen = 0;
        for (const auto& table : t.tables) {
          const std::string name = pool_name(table.name);
          CHECK(train_names.count(name) + test_names.count(name) == 1);
          unseen += test_names.count(name);
        }
        CHECK(unseen == static_cast<std::size_t>(std::round(share * double(t.tables.size()))));
        unseen_not_first =
            unseen_not_first || (unseen > 0 && !test_names.count(pool_name(t.tables[0].name)));
        if (p != protocol::neuroshard) CHECK_FALSE(has_duplicate(t));
        const std::uint64_t cluster_bytes = 4 * 4 * embplan::gib;
        CHECK(total_bytes(t) <=
              (p == protocol::neuroshard ? cluster_bytes - embplan::gib : cluster_bytes));
        check_from_pool(t, pool);
      }
      CHECK(unseen_not_first == (share > 0.0 && share < 1.0));
    }
  }
  const auto named = generate_tasks(
      pool, {.proto = protocol::autoshard, .devices = 2, .count = 4, .unseen_share = 0.25});
  CHECK(named[3].name == "autoshard-2dev-32dim-unseen0.25-003");
  CHECK(generate_tasks(pool, {.proto = protocol::dreamshard, .count = 1, .unseen_share = 1.0})[0]
            .name == "dreamshard-4dev-16dim-unseen1-000");
  // Task i depends only on (options, i); another share, other tasks.
  const task_options o{.proto = protocol::autoshard, .count = 5, .unseen_share = 0.5};
  auto more = o;
  more.count = 10;
  const auto first = generate_tasks(pool, o);
  const auto longer = generate_tasks(pool, more);
  for (std::size_t i = 0; i < first.size(); ++i)
    CHECK(longer[i] == first[i]);
  auto other = o;
  other.unseen_share = 0.75;
  CHECK(generate_tasks(pool, other)[0].tables != first[0].tables);
}

TEST_CASE("unseen_share rounds half away from zero") {
  using embplan::data::detail::unseen_tables;
  CHECK(unseen_tables(0.5, 5) == 3);
  CHECK(unseen_tables(0.5, 3) == 2);
  CHECK(unseen_tables(0.5, 1) == 1);
  CHECK(unseen_tables(0.25, 10) == 3);
  CHECK(unseen_tables(0.25, 2) == 1);
  CHECK(unseen_tables(0.25, 4) == 1);
  CHECK(unseen_tables(0.75, 2) == 2);
  CHECK(unseen_tables(0.0, 7) == 0);
  CHECK(unseen_tables(1.0, 7) == 7);
  const auto pool = embplan::data::synthetic_pool();
  const auto test_names = names_of(embplan::data::split_pool(pool, 0).second);
  for (const auto& t : generate_tasks(pool, {.proto = protocol::autoshard,
                                            .count = 5,
                                            .min_tables = 5,
                                            .max_tables = 5,
                                            .unseen_share = 0.5})) {
    std::size_t unseen = 0;
    for (const auto& table : t.tables)
      unseen += test_names.count(table.name);
    CHECK(unseen == 3);  // 2.5 -> 3
  }
}

TEST_CASE("bad unseen_share names the field and the value") {
  const auto pool = embplan::data::synthetic_pool({.tables = 100});
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.unseen_share = -0.5}),
                       doctest::Contains("'unseen_share' = -0.5: expected a share in [0, 1]"),
                       embplan::error);
  CHECK_THROWS_WITH_AS(generate_tasks(pool, {.unseen_share = 1.5}),
                       doctest::Contains("'unseen_share' = 1.5"), embplan::error);
  CHECK_THROWS_WITH_AS(
      generate_tasks(pool, {.unseen_share = std::numeric_limits<double>::quiet_NaN()}),
      doctest::Contains("'unseen_share' = nan"), embplan::error);
  CHECK_THROWS_WITH_AS(
      generate_tasks(
          pool, {.proto = protocol::dreamshard, .half = pool_half::train, .unseen_share = 0.5}),
      doctest::Contains("'unseen_share' = 0.5: expected half left at \"default\", not \"train\""),
      embplan::error);
  // Without replacement each half must hold its part of max_tables (50 each).
  CHECK_THROWS_WITH_AS(
      generate_tasks(pool, {.proto = protocol::autoshard, .devices = 8, .unseen_share = 0.75}),
      doctest::Contains("'max_tables' = 80: expected at most the 50 tables of the test half for "
                        "the round(unseen_share x max_tables) = 60"),
      embplan::error);
  CHECK_THROWS_WITH_AS(
      generate_tasks(pool, {.proto = protocol::autoshard, .devices = 8, .unseen_share = 0.25}),
      doctest::Contains("'max_tables' = 80: expected at most the 50 tables of the train half"),
      embplan::error);
  CHECK_NOTHROW(
      generate_tasks(pool, {.proto = protocol::autoshard, .devices = 8, .unseen_share = 0.5}));
  // With replacement (neuroshard) any share of any T draws.
  CHECK_NOTHROW(generate_tasks(pool, {.max_dim = 4, .max_tables = 80, .unseen_share = 1.0}));
  CHECK_THROWS_WITH_AS(
      generate_tasks(embplan::data::synthetic_pool({.tables = 1}), {.unseen_share = 1.0}),
      doctest::Contains("'pool' = 1"), embplan::error);
}

TEST_CASE("task_generator: one task at a time, the same tasks as generate_tasks") {
  const auto pool = embplan::data::synthetic_pool();
  struct drawn {
    task_options options;
    std::uint64_t fingerprint;  // of the tasks generate_tasks drew before task_generator existed
  };
  const std::vector<drawn> cases{
      {{.count = 30, .seed = 7}, 0x6fd6a20621424ed2ULL},
      {{.devices = 8, .max_dim = 16, .count = 12, .seed = 1}, 0xb181e4771c894dfaULL},
      {{.proto = protocol::dreamshard,
        .count = 15,
        .seed = 2,
        .half = pool_half::test,
        .split_seed = 3},
       0x893c3c28460f6f60ULL},
      {{.proto = protocol::autoshard, .count = 15, .seed = 4, .unseen_share = 0.25},
       0xc9c06fee5019f0a0ULL},
      // 150 of 856 tables with replacement: copies ("t5#2") in every task,
      // numbered afresh in each.
      {{.max_dim = 4, .count = 20, .min_tables = 150, .max_tables = 150}, 0xfbcd0077db59c04eULL}};
  for (const auto& c : cases) {
    CAPTURE(embplan::data::to_string(c.options.proto));
    CAPTURE(*c.options.count);
    embplan::data::task_generator tasks(pool, c.options);
    REQUIRE(tasks.count() == *c.options.count);
    std::vector<embplan::task> one_by_one;
    while (tasks.remaining() > 0) {
      CHECK(tasks.remaining() == tasks.count() - one_by_one.size());
      one_by_one.push_back(tasks.next());
    }
    CHECK(fingerprint(one_by_one) == c.fingerprint);
    CHECK(one_by_one == generate_tasks(pool, c.options));
    CHECK_THROWS_WITH_AS(tasks.next(), doctest::Contains("'task_generator.next' = "),
                         embplan::error);
  }
  // The protocol's count where the options leave it unset.
  CHECK(embplan::data::task_generator(pool, {.proto = protocol::dreamshard}).count() == 50);
  CHECK(embplan::data::task_generator(pool, {}).remaining() == 100);
}

TEST_CASE("task_generator refuses, when constructed, what generate_tasks refuses") {
  const auto pool = embplan::data::synthetic_pool({.tables = 100});
  auto bad_pool = pool;
  bad_pool[3].rows = -5;
  embplan::data::task_options too_many{.count = 1};
  too_many.min_tables = too_many.max_tables = 20'000;
  struct refused {
    std::vector<embplan::table_spec> pool;
    task_options options;
  };
  const std::vector<refused> cases{
      {pool, {.devices = 0}},
      {pool, {.max_dim = 100}},
      {pool, {.min_tables = 30, .max_tables = 20}},
      {{}, {}},
      {bad_pool, {}},
      {pool, {.proto = protocol::autoshard, .devices = 11}},
      {pool, {.proto = protocol::dreamshard, .max_tables = 60}},
      {pool, {.proto = protocol::autoshard, .devices = 8, .unseen_share = 0.75}},
      {pool, too_many},
      {pool, {.devices = 1, .count = 1, .device_memory_bytes = embplan::gib}},
      {embplan::data::synthetic_pool({.tables = 1}), {.unseen_share = 1.0}}};
  for (const auto& c : cases) {
    std::string expected;
    try {
      (void)generate_tasks(c.pool, c.options);
    } catch (const embplan::error& e) {
      expected = e.what();
    }
    REQUIRE_FALSE(expected.empty());
    CAPTURE(expected);
    CHECK_THROWS_WITH_AS(embplan::data::task_generator(c.pool, c.options), expected.c_str(),
                         embplan::error);
  }
}
