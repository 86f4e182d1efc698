#include "embplan/search/detail/cost_cache.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "embplan/cost/analytic.hpp"
#include "embplan/search/detail/piecewise.hpp"

#include "support/random_task.hpp"

using embplan::search::detail::cost_cache;
using embplan::search::detail::multiset_key;
using embplan::search::detail::piece_key;

TEST_CASE("multiset keys: order-free, count multiplicity, ignore which columns a piece holds") {
  const auto t = embplan_test::random_task(1, {.tables = 4});
  auto a = embplan::whole_table(t, 0, 0);
  auto b = embplan::whole_table(t, 1, 0);
  CHECK(piece_key(a) + piece_key(b) == piece_key(b) + piece_key(a));
  CHECK(piece_key(a) + piece_key(a) != piece_key(a));
  CHECK(piece_key(a) != piece_key(b));
  auto low = a;
  low.col_end = a.cols() / 2;
  auto high = a;
  high.col_begin = low.col_end;
  CHECK(piece_key(low) == piece_key(high));  // same table, same width
  CHECK(piece_key(low) != piece_key(a));
  CHECK((piece_key(a) + piece_key(b)) - piece_key(a) == piece_key(b));
}

TEST_CASE("device kinds: equal hardware shares a kind, other hardware does not") {
  auto t = embplan_test::random_task(2, {.tables = 2, .devices = 3});
  t.cluster.devices[2].memory_bandwidth_gbps *= 2.0;
  const embplan::search::detail::device_kinds kinds(t);
  CHECK(kinds.kind_of[0] == kinds.kind_of[1]);
  CHECK(kinds.kind_of[0] != kinds.kind_of[2]);
  CHECK(kinds.empty(0) == kinds.empty(1));
  CHECK(kinds.empty(0) != kinds.empty(2));
}

TEST_CASE("device kinds: capacities part devices only where whole equality is asked") {
  auto t = embplan_test::random_task(2, {.tables = 2, .devices = 4});
  t.cluster.devices[1].memory_bytes /= 2;
  t.cluster.devices[2].dram_bytes = 1u << 30;
  t.cluster.devices[3].cache_bandwidth_gbps *= 2.0;
  using kinds_by = embplan::search::detail::device_kinds::by;
  const embplan::search::detail::device_kinds price(t);
  CHECK(price.kind_of == std::vector<std::uint32_t>{0, 0, 0, 1});
  CHECK(price.empty(1) == price.empty(0));
  const embplan::search::detail::device_kinds whole(t, kinds_by::whole);
  CHECK(whole.kind_of == std::vector<std::uint32_t>{0, 1, 2, 3});
  CHECK(whole.representative == std::vector<std::size_t>{0, 1, 2, 3});
}

TEST_CASE("the cache returns the priced cost again, and counts hits and lookups") {
  const auto t = embplan_test::random_task(3, {.tables = 20});
  const embplan::analytic_cost model;
  const embplan::search::detail::device_kinds kinds(t);
  cost_cache cache(16);  // small: growth is exercised
  int priced = 0;
  std::vector<embplan::compute_cost> first;
  for (int round = 0; round < 2; ++round) {
    std::vector<embplan::shard> group;
    multiset_key key = kinds.empty(0);
    for (std::size_t i = 0; i < 20; ++i) {
      group.push_back(embplan::whole_table(t, i, 0));
      key += piece_key(group.back());
      const auto c = cache.get(key, [&] {
        ++priced;
        return model.compute(t, group, 0);
      });
      if (round == 0) {
        first.push_back(c);
      } else {
        CHECK(c.fwd_ms == first[i].fwd_ms);
        CHECK(c.bwd_ms == first[i].bwd_ms);
      }
    }
  }
  CHECK(priced == 20);
  CHECK(cache.lookups() == 40);
  CHECK(cache.hits() == 20);
  CHECK(cache.size() == 20);
}

TEST_CASE(
    "a cache with max_slots stays within them, empties when full, and returns the same values") {
  embplan::search::detail::key_map<std::uint64_t> bounded(16, 64);
  embplan::search::detail::key_map<std::uint64_t> unbounded(16);
  std::uint64_t made = 0;
  const auto value_of = [&](std::uint64_t k) {
    return [&made, k] {
      ++made;
      return 3 * k + 1;
    };
  };
  // 200 keys three times over: the bounded map (at most 32 entries at half
  // load of 64 slots) must forget and recompute; every value is the same.
  for (int round = 0; round < 3; ++round) {
    for (std::uint64_t k = 1; k <= 200; ++k) {
      const multiset_key key{k, ~k};
      const auto b = bounded.get(key, value_of(k));
      const auto u = unbounded.get(key, value_of(k));
      REQUIRE(b == 3 * k + 1);
      REQUIRE(u == b);
      REQUIRE(bounded.slots() <= 64);
      REQUIRE(bounded.size() <= 32);
    }
  }
  CHECK(bounded.slots() == 64);
  CHECK(bounded.clears() > 0);
  CHECK(unbounded.clears() == 0);
  CHECK(unbounded.size() == 200);
  CHECK(unbounded.hits() == 400);
  CHECK(bounded.misses() > 200);  // forgotten keys priced again
  CHECK(made == unbounded.misses() + bounded.misses());
  // Right after a clear the new entry is kept: asked again, it hits.
  embplan::search::detail::key_map<std::uint64_t> tiny(16, 16);
  for (std::uint64_t k = 1; k <= 9; ++k)
    tiny.get(multiset_key{k, k}, value_of(k));
  REQUIRE(tiny.clears() == 1);
  const auto hits = tiny.hits();
  CHECK(tiny.get(multiset_key{9, 9}, value_of(9)) == 28);
  CHECK(tiny.hits() == hits + 1);
}

TEST_CASE("the cache stores over-aligned values at their alignment") {
  // The learned model's per-piece terms are alignas(64); code built with
  // -march=native (AVX-512) copies them with aligned 64-byte moves, and
  // crashed when the slots came from a 16-byte-aligned allocation. Many maps,
  // small (heap) and grown, so that one aligned by chance cannot hide it.
  struct alignas(64) wide {
    std::array<float, 16> v;
  };
  for (std::size_t capacity : {16u, 64u, 1024u}) {
    for (int map = 0; map < 8; ++map) {
      embplan::search::detail::key_map<wide> cache(capacity);
      for (std::uint64_t k = 1; k <= 3 * capacity; ++k) {
        const wide& w = cache.ref(multiset_key{k, 7 * k + static_cast<std::uint64_t>(map)},
                                  [&] { return wide{{static_cast<float>(k)}}; });
        REQUIRE(reinterpret_cast<std::uintptr_t>(&w) % alignof(wide) == 0);
        REQUIRE(w.v[0] == static_cast<float>(k));
      }
    }
  }
}

TEST_CASE("the analytic model's piecewise path is bitwise its compute()") {
  const auto t = embplan_test::random_task(4, {.tables = 12, .devices = 2});
  const embplan::analytic_cost model;
  const embplan::search::detail::device_kinds kinds(t);
  embplan::search::detail::group_pricer<embplan::analytic_cost> pricer(t, model, kinds);
  std::vector<embplan::shard> group;
  std::vector<multiset_key> keys;
  for (std::size_t i = 0; i < 12; ++i) {
    group.push_back(embplan::whole_table(t, i, 1));
    if (i % 3 == 0) group.back().col_end = 4;  // a column piece
    keys.push_back(piece_key(group.back()));
    const auto fast = pricer(group, keys, 1);
    const auto slow = model.compute(t, group, 1);
    CHECK(fast.fwd_ms == slow.fwd_ms);
    CHECK(fast.bwd_ms == slow.bwd_ms);
  }
  CHECK(pricer(std::span<const embplan::shard>(), std::span<const multiset_key>(), 0).fwd_ms ==
        model.compute(t, std::span<const embplan::shard>(), 0).fwd_ms);
}
