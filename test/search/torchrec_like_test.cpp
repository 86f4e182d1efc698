#include "embplan/search/torchrec_like.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/error.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/infeasible.hpp"

#include "support/random_task.hpp"

TEST_CASE("TorchRec's block rule: smallest multiple of 4 dividing dim, at least the bound") {
  using embplan::search::detail::find_base_dim;
  CHECK(find_base_dim(32, 128) == 32);
  CHECK(find_base_dim(32, 64) == 32);
  CHECK(find_base_dim(32, 32) == 32);  // the whole dim: no column-wise option
  CHECK(find_base_dim(32, 16) == 16);
  CHECK(find_base_dim(128, 128) == 128);
  CHECK(find_base_dim(32, 96) == 32);
  CHECK(find_base_dim(40, 96) == 48);
}

TEST_CASE("torchrec_like: valid plans, column blocks of the rule, memory respected") {
  const embplan::analytic_cost model;
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    const auto t = embplan_test::random_task(
        seed, {.tables = 30, .device_memory_bytes = 512u << 20, .max_rows = 400'000});
    const auto r = embplan::torchrec_like{}.search(t, model, embplan::default_constraint{},
                                                   embplan::neg_max_cost_reward{}, 0);
    REQUIRE(r.ok);
    CHECK_NOTHROW(embplan::validate(t, r.placement, {.dim_multiple = 4, .memory = true}));
    for (const auto& s : r.placement.shards) {
      const auto dim = t.tables[s.table].dim;
      CHECK((s.cols() == dim || s.cols() == embplan::search::detail::find_base_dim(32, dim)));
    }
  }
}

TEST_CASE("torchrec_like: bad block bound, infeasible task named") {
  const auto t = embplan_test::random_task(1, {.tables = 5, .devices = 2});
  const embplan::analytic_cost model;
  CHECK_THROWS_WITH_AS(
      embplan::torchrec_like{.min_block_dim = 6}.search(t, model, embplan::default_constraint{},
                                                        embplan::neg_max_cost_reward{}, 0),
      doctest::Contains("torchrec_like.min_block_dim' = 6"), embplan::error);
  auto huge = t;
  huge.tables[2].name = "enormous";
  huge.tables[2].rows = 2'000'000'000;
  huge.tables[2].dim = 16;
  const auto r = embplan::torchrec_like{}.search(huge, model, embplan::default_constraint{},
                                                 embplan::neg_max_cost_reward{}, 0);
  CHECK_FALSE(r.ok);
  CHECK(r.failure.find("enormous") != std::string::npos);
}

namespace {

// torchrec_like as it was before proposals were streamed:
// every proposal kept, each partitioned in full by scanning all devices. The
// reference the streaming search must match plan for plan.
template <class Constraint, class Reward>
embplan::search_result torchrec_like_reference(const embplan::task& t, const Constraint& rule,
                                               const Reward& score,
                                               std::int32_t min_block_dim = 32) {
  using embplan::search::detail::sharding_option;
  const embplan::analytic_cost model;
  const std::size_t tables = t.tables.size();
  const std::size_t devices = t.cluster.size();
  embplan::search_result out;
  std::vector<std::vector<sharding_option>> options(tables);
  const auto option_of = [&](std::vector<embplan::shard> shards) {
    sharding_option o;
    o.shards = std::move(shards);
    for (const auto& s : o.shards) {
      const double perf = static_cast<double>(model.shard_cost(t, s));
      o.perf.push_back(perf);
      o.total_perf += perf;
      o.depth_perf = std::max(o.depth_perf, perf);
      o.storage += embplan::shard_bytes(t, s);
    }
    return o;
  };
  for (std::size_t i = 0; i < tables; ++i) {
    const auto whole = embplan::whole_table(t, i, 0);
    options[i].push_back(option_of({whole}));
    const auto block = embplan::search::detail::find_base_dim(min_block_dim, whole.cols());
    if (block < whole.cols()) {
      std::vector<embplan::shard> blocks;
      for (std::int32_t c = 0; c < whole.cols(); c += block) {
        auto s = whole;
        s.col_begin = c;
        s.col_end = c + block;
        blocks.push_back(s);
      }
      options[i].push_back(option_of(blocks));
    }
  }
  std::vector<std::vector<std::size_t>> proposals;
  for (const bool use_depth : {true, false}) {
    std::vector<std::vector<std::size_t>> order(tables);
    for (std::size_t i = 0; i < tables; ++i) {
      for (std::size_t k = 0; k < options[i].size(); ++k)
        order[i].push_back(k);
      std::stable_sort(order[i].begin(), order[i].end(), [&](std::size_t a, std::size_t b) {
        const auto& x = options[i][a];
        const auto& y = options[i][b];
        return use_depth ? x.depth_perf < y.depth_perf : x.total_perf < y.total_perf;
      });
    }
    std::vector<std::size_t> at(tables, 0);
    for (;;) {
      std::vector<std::size_t> proposal(tables);
      for (std::size_t i = 0; i < tables; ++i)
        proposal[i] = order[i][at[i]];
      proposals.push_back(std::move(proposal));
      std::size_t largest = tables;
      for (std::size_t i = 0; i < tables; ++i) {
        if (at[i] + 1 >= order[i].size()) continue;
        if (largest == tables || options[i][order[i][at[i]]].storage >
                                     options[largest][order[largest][at[largest]]].storage)
          largest = i;
      }
      if (largest == tables) break;
      ++at[largest];
    }
  }
  proposals.emplace_back(tables, 0);
  std::vector<std::size_t> column_wise(tables);
  for (std::size_t i = 0; i < tables; ++i)
    column_wise[i] = options[i].size() - 1;
  proposals.push_back(column_wise);

  double best_rating = std::numeric_limits<double>::infinity();
  double best_score = 0.0;
  std::string first_failure;
  for (const auto& proposal : proposals) {
    std::vector<std::size_t> by_perf(tables);
    for (std::size_t i = 0; i < tables; ++i)
      by_perf[i] = i;
    std::stable_sort(by_perf.begin(), by_perf.end(), [&](std::size_t a, std::size_t b) {
      const auto& x = options[a][proposal[a]];
      const auto& y = options[b][proposal[b]];
      return std::tie(y.total_perf, y.storage, a) < std::tie(x.total_perf, x.storage, b);
    });
    embplan::placement_state st(devices);
    std::vector<double> load(devices, 0.0);
    embplan::plan p;
    std::string failure;
    for (const std::size_t i : by_perf) {
      const auto& o = options[i][proposal[i]];
      for (std::size_t k = 0; k < o.shards.size() && failure.empty(); ++k) {
        std::size_t chosen = devices;
        auto s = o.shards[k];
        for (std::size_t d = 0; d < devices; ++d) {
          if (chosen != devices && std::tie(load[d], st.memory_bytes[d], d) >=
                                       std::tie(load[chosen], st.memory_bytes[chosen], chosen))
            continue;
          s.device = static_cast<std::uint32_t>(d);
          if (rule.admits(t, st, s)) chosen = d;
        }
        if (chosen == devices) {
          failure = embplan::no_device_for(t, st, i, rule);
          break;
        }
        s.device = static_cast<std::uint32_t>(chosen);
        st.place(t, s);
        load[chosen] += o.perf[k];
        p.shards.push_back(s);
      }
      if (!failure.empty()) break;
    }
    if (!failure.empty()) {
      if (first_failure.empty()) first_failure = failure;
      continue;
    }
    const double rating = *std::max_element(load.begin(), load.end());
    if constexpr (embplan::reward_decreasing_in_max_cost<Reward>) {
      if (!(rating < best_rating)) continue;
      best_rating = rating;
    } else {
      embplan::plan_cost perf;
      perf.devices.assign(devices, embplan::device_cost{});
      for (std::size_t d = 0; d < devices; ++d)
        perf.devices[d].fwd_compute_ms = load[d];
      perf.memory_bytes = st.memory_bytes;
      perf.dim_sum = st.dim_sum;
      const double value = static_cast<double>(score.score(t, perf));
      if (out.ok && !(value > best_score)) continue;
      best_score = value;
    }
    out.placement = std::move(p);
    out.ok = true;
  }
  if (!out.ok) out.failure = first_failure;
  return out;
}

template <class Reward>
void check_same_as_reference(const embplan::task& t, const Reward& score,
                             std::int32_t min_block_dim = 32) {
  const embplan::analytic_cost model;
  const embplan::default_constraint rule;
  const auto want = torchrec_like_reference(t, rule, score, min_block_dim);
  const auto got =
      embplan::torchrec_like{.min_block_dim = min_block_dim}.search(t, model, rule, score, 0);
  REQUIRE(got.ok == want.ok);
  CHECK(got.failure == want.failure);
  REQUIRE(got.placement.shards.size() == want.placement.shards.size());
  for (std::size_t k = 0; k < want.placement.shards.size(); ++k) {
    const auto& a = got.placement.shards[k];
    const auto& b = want.placement.shards[k];
    CHECK(std::tie(a.table, a.col_begin, a.col_end, a.row_begin, a.row_end, a.device) ==
          std::tie(b.table, b.col_begin, b.col_end, b.row_begin, b.row_end, b.device));
  }
}

}  // namespace

TEST_CASE("torchrec_like: the plan of partitioning and rating every proposal in full") {
  // Memory loose and tight (the constraint refuses devices, some proposals
  // fail), both kinds of reward, blocks of 8 (up to 16 per table).
  for (std::uint64_t seed = 0; seed < 12; ++seed) {
    CAPTURE(seed);
    const auto loose = embplan_test::search_task(seed, 60, 8, std::uint64_t{1} << 34);
    check_same_as_reference(loose, embplan::neg_max_cost_reward{});
    check_same_as_reference(loose, embplan::balance_reward{});
    check_same_as_reference(loose, embplan::neg_max_cost_reward{}, 8);
    const auto tight = embplan_test::search_task(seed, 60, 4, 40u << 20);
    check_same_as_reference(tight, embplan::neg_max_cost_reward{});
    check_same_as_reference(tight, embplan::balance_reward{});
  }
}

TEST_CASE("torchrec_like: the same plan on many devices (the device heap's ties)") {
  // Equal devices start with equal keys: ties go to less memory, then the lower index.
  for (std::uint64_t seed = 0; seed < 3; ++seed) {
    CAPTURE(seed);
    check_same_as_reference(embplan_test::search_task(seed, 300, 64, std::uint64_t{1} << 34),
                            embplan::neg_max_cost_reward{});
    check_same_as_reference(embplan_test::search_task(seed, 200, 48, 160u << 20),
                            embplan::neg_max_cost_reward{});
  }
}

TEST_CASE("torchrec_like: a task no proposal fits fails as before") {
  const auto t = embplan_test::search_task(3, 30, 2, 8u << 20);
  check_same_as_reference(t, embplan::neg_max_cost_reward{});
  check_same_as_reference(t, embplan::balance_reward{});
}

namespace {

// default_constraint counting its admits() calls, with room() (Room) or
// without: the partitioner parks the devices the room refuses only with it.
template <bool Room>
struct counting_rule {
  embplan::default_constraint rule;
  std::size_t* asked;
  bool admits(const embplan::task& t, const embplan::placement_state& st,
              const embplan::shard& s) const {
    ++*asked;
    return rule.admits(t, st, s);
  }
  std::uint64_t room(const embplan::task& t, const embplan::placement_state& st,
                     std::size_t device) const noexcept requires Room {
    return rule.room(t, st, device);
  }
  std::string describe() const { return rule.describe(); }
};

}  // namespace

TEST_CASE("torchrec_like: devices parked by their room change no plan") {
  // Every third device holds only the smaller tables: the partitioner takes
  // it out of its heap for a larger shard and must bring it back for a
  // smaller one. The same plans (and failures) as asking the constraint about
  // every device in key order, and the reference's; fewer questions.
  static_assert(embplan::room_bounding_constraint<counting_rule<true>>);
  static_assert(!embplan::room_bounding_constraint<counting_rule<false>>);
  const embplan::analytic_cost model;
  int ok = 0;
  int small_used = 0;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    auto t = embplan_test::tight_task(seed, 60 + 20 * seed, 12 + 2 * seed, 0.5);
    std::vector<std::uint64_t> bytes;
    for (std::size_t i = 0; i < t.tables.size(); ++i)
      bytes.push_back(embplan::shard_bytes(t, embplan::whole_table(t, i, 0)));
    std::sort(bytes.begin(), bytes.end());
    const std::uint64_t small = bytes[bytes.size() / 2];
    for (std::size_t d = 0; d < t.cluster.size(); d += 3)
      t.cluster.devices[d].memory_bytes = small;
    REQUIRE(bytes.back() > small);
    std::size_t asked_with = 0;
    std::size_t asked_without = 0;
    const counting_rule<true> with_room{{}, &asked_with};
    const counting_rule<false> without{{}, &asked_without};
    const embplan::neg_max_cost_reward score;
    const auto a = embplan::torchrec_like{}.search(t, model, with_room, score, 0);
    const auto b = embplan::torchrec_like{}.search(t, model, without, score, 0);
    const auto want = torchrec_like_reference(t, embplan::default_constraint{}, score);
    REQUIRE(a.ok == b.ok);
    REQUIRE(a.ok == want.ok);
    CHECK(a.failure == b.failure);
    REQUIRE(a.placement.shards.size() == b.placement.shards.size());
    REQUIRE(a.placement.shards.size() == want.placement.shards.size());
    for (std::size_t k = 0; k < a.placement.shards.size(); ++k) {
      const auto& x = a.placement.shards[k];
      const auto& y = b.placement.shards[k];
      const auto& z = want.placement.shards[k];
      CHECK(std::tie(x.table, x.col_begin, x.col_end, x.device) ==
            std::tie(y.table, y.col_begin, y.col_end, y.device));
      CHECK(std::tie(x.table, x.col_begin, x.col_end, x.device) ==
            std::tie(z.table, z.col_begin, z.col_end, z.device));
      small_used += x.device % 3 == 0 ? 1 : 0;
    }
    CHECK(asked_with < asked_without);
    ok += a.ok ? 1 : 0;
  }
  CHECK(ok >= 3);
  CHECK(small_used > 0);  // the small devices took shards
}
