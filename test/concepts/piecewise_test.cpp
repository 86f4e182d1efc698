#include "embplan/concepts/piecewise.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/core/random.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/nn/compute_cost_net.hpp"
#include "embplan/nn/packed_compute_cost_net.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/column_beam.hpp"
#include "embplan/search/detail/cost_cache.hpp"
#include "embplan/search/detail/piecewise.hpp"
#include "embplan/search/local_search.hpp"

#include "support/random_task.hpp"

namespace {

using embplan::search::detail::multiset_key;
using embplan::search::detail::piece_key;

const embplan::neural_cost& bundled_model() {
  static const auto m = embplan::neural_cost::load(std::string(EMBPLAN_SOURCE_DIR) +
                                                   "/data/cost/cpu_compute_model.safetensors");
  return m;
}

// The same model without a piecewise_compute specialisation: the searchers
// price every device through compute() and cache the result.
template <class Model>
struct whole_groups {
  const Model* m;
  std::string_view name() const noexcept { return "whole_groups"; }
  embplan::compute_cost compute(const embplan::task& t, std::span<const embplan::shard> g,
                                std::size_t d) const {
    return m->compute(t, g, d);
  }
  double shard_cost(const embplan::task& t, const embplan::shard& s) const {
    return m->shard_cost(t, s);
  }
  void communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<embplan::comm_cost> out) const {
    m->communication(t, dim_sum, start_ms, out);
  }
};
static_assert(embplan::cost_model<whole_groups<embplan::analytic_cost>>);
static_assert(!embplan::piecewise_compute<whole_groups<embplan::neural_cost>>::enabled);

// A model outside the library that opts in through the public customisation
// point, as cost/neural.hpp does: the analytic model's compute, counted.
struct counted_analytic {
  embplan::analytic_cost m;
  std::string_view name() const noexcept { return "counted_analytic"; }
  embplan::compute_cost compute(const embplan::task& t, std::span<const embplan::shard> g,
                                std::size_t d) const {
    return m.compute(t, g, d);
  }
  double shard_cost(const embplan::task& t, const embplan::shard& s) const {
    return m.shard_cost(t, s);
  }
  void communication(const embplan::task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<embplan::comm_cost> out) const {
    m.communication(t, dim_sum, start_ms, out);
  }
};
static_assert(embplan::cost_model<counted_analytic>);

int counted_pieces = 0;

using embplan_test::search_task;

}  // namespace

template <>
struct embplan::piecewise_compute<counted_analytic> {
  using base = piecewise_compute<embplan::analytic_cost>;
  static constexpr bool enabled = true;
  static constexpr bool cache_groups = true;
  using term = base::term;
  using sum = base::sum;
  static bool usable(const counted_analytic&) noexcept { return true; }
  static term piece(const counted_analytic& c, const embplan::task& t, const embplan::shard& s,
                    std::size_t d) {
    ++counted_pieces;
    return base::piece(c.m, t, s, d);
  }
  static sum start(const counted_analytic& c) noexcept { return base::start(c.m); }
  static void add(const counted_analytic& c, sum& acc, term v) noexcept { base::add(c.m, acc, v); }
  static embplan::compute_cost finish(const counted_analytic& c, const embplan::task& t, sum acc,
                                      std::size_t pieces, std::size_t d) noexcept {
    return base::finish(c.m, t, acc, pieces, d);
  }
};

// Nets of NeuroShard's shape (head 32-64-1) and of other head depths: one
// layer (32-1: the cost is the first layer's output), and three (32-48-16-1).
TEST_CASE("packed net: finish(start + row terms in order) is bitwise operator(), on every kernel") {
  for (const std::vector<Eigen::Index>& head :
       std::vector<std::vector<Eigen::Index>>{{32, 64}, {32}, {32, 48, 16}}) {
    CAPTURE(head.size());
    embplan::nn::compute_cost_net net({.table_features = 20, .pred_mlp_sizes = head}, 7);
    embplan::rng gen(3);
    for (auto& v : net.feature_norm.mean.reshaped())
      v = static_cast<float>(gen.uniform(-1.0, 1.0));
    for (auto& v : net.feature_norm.stddev.reshaped())
      v = static_cast<float>(gen.uniform(0.5, 2.0));
    for (const auto k : {embplan::nn::simd_kernel::scalar, embplan::nn::simd_kernel::avx2,
                         embplan::nn::simd_kernel::avx512}) {
      if (!embplan::nn::simd_kernel_supported(k)) continue;
      CAPTURE(embplan::nn::to_string(k));
      const embplan::nn::packed_compute_cost_net packed(net, k);
      const std::size_t size = packed.term_size();
      REQUIRE(size >= static_cast<std::size_t>(head.size() > 1 ? head[1] : 1));
      // Row counts across the register blocks (12 / 6 rows) and chunks (16 rows).
      for (const Eigen::Index rows : {1, 5, 6, 7, 12, 13, 16, 17, 40}) {
        CAPTURE(rows);
        embplan::nn::matrix x(rows, 20);
        for (auto& v : x.reshaped())
          v = static_cast<float>(gen.uniform(-3.0, 3.0));
        std::vector<float> z(size);
        packed.start(z.data());
        std::vector<float> one(size);
        for (Eigen::Index r = 0; r < rows; ++r) {
          const Eigen::Matrix<float, 1, Eigen::Dynamic> row = x.row(r);
          packed.term(row.data(), one.data());
          for (std::size_t i = 0; i < size; ++i)
            z[i] += one[i];
        }
        const float folded = packed.finish(z.data());
        CHECK(folded == packed(x));
        // And it is the network's prediction (up to float rounding).
        CHECK(folded == doctest::Approx(net(x)).epsilon(1e-4));
      }
    }
  }
}

TEST_CASE("neural piecewise path is bitwise neural_cost::compute on random groups") {
  using pw = embplan::piecewise_compute<embplan::neural_cost>;
  const auto& model = bundled_model();
  REQUIRE(pw::usable(model));
  const auto t = search_task(5, 24, 2);
  const embplan::search::detail::device_kinds kinds(t);
  embplan::search::detail::group_pricer<embplan::neural_cost> pricer(t, model, kinds);
  REQUIRE(pricer.piecewise());
  embplan::rng gen(11);
  for (int trial = 0; trial < 40; ++trial) {
    CAPTURE(trial);
    std::vector<embplan::shard> group;
    std::vector<multiset_key> keys;
    const auto n = static_cast<std::size_t>(gen.between(0, 20));
    for (std::size_t i = 0; i < n; ++i) {
      auto s = embplan::whole_table(t, static_cast<std::size_t>(gen.between(0, 23)), 1);
      if (gen.between(0, 2) == 0 && s.cols() >= 8) s.col_end = s.col_begin + s.cols() / 2;
      group.push_back(s);
      keys.push_back(piece_key(s));
    }
    const auto slow = model.compute(t, group, 1);
    const auto fast = pricer(group, keys, 1);
    CHECK(fast.fwd_ms == slow.fwd_ms);
    CHECK(fast.bwd_ms == slow.bwd_ms);
    // One piece at a time, as the grid search folds a device.
    auto acc = pricer.start();
    for (std::size_t i = 0; i < n; ++i)
      pricer.add(acc, group[i], keys[i], 1);
    const auto folded = pricer.finish(acc, n, 1);
    CHECK(folded.fwd_ms == slow.fwd_ms);
    CHECK(folded.bwd_ms == slow.bwd_ms);
    // add_finish (neural_cost's one pass) from the fold without the last
    // piece: the same figures, and the fold written to `out`.
    if (n > 0) {
      auto before = pricer.start();
      for (std::size_t i = 0; i + 1 < n; ++i)
        pricer.add(before, group[i], keys[i], 1);
      auto out = pricer.start();
      const auto fused =
          pricer.add_finish(out, before, pricer.term(group[n - 1], keys[n - 1], 1), n, 1);
      CHECK(fused.fwd_ms == slow.fwd_ms);
      CHECK(fused.bwd_ms == slow.bwd_ms);
      CHECK(out.v == acc.v);
    }
  }
}

TEST_CASE("group_pricer::add_finish without the model's own: add() and finish() on a copy") {
  const embplan::analytic_cost model;
  const auto t = search_task(3, 12, 4);
  const embplan::search::detail::device_kinds kinds(t);
  embplan::search::detail::group_pricer<embplan::analytic_cost> pricer(t, model, kinds);
  REQUIRE(pricer.folds());
  auto acc = pricer.start();
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    CAPTURE(i);
    const auto s = embplan::whole_table(t, i, 2);
    const auto key = piece_key(s);
    const double before = acc;
    double out = -1.0;
    const auto fused = pricer.add_finish(out, acc, pricer.term(s, key, 2), i + 1, 2);
    CHECK(acc == before);  // read, not changed
    pricer.add(acc, s, key, 2);
    CHECK(out == acc);
    const auto want = pricer.finish(acc, i + 1, 2);
    CHECK(fused.fwd_ms == want.fwd_ms);
    CHECK(fused.bwd_ms == want.bwd_ms);
    CHECK(fused.fwd_ms > 0.0);
  }
}

TEST_CASE("neuroshard search: the same plan with and without the piecewise path") {
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward reward;
  // Small beam: the tests run under ASan at -O1.
  const embplan::column_beam beam{.candidates = 4, .width = 2, .steps = 4, .grid = 5};
  const embplan::analytic_cost analytic;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    // Tight memory on odd seeds: the constraint refuses devices and forces splits.
    const auto t = search_task(seed, 10 + 3 * seed, seed % 2 ? 4 : 8,
                               seed % 2 ? std::uint64_t{64} << 20 : std::uint64_t{512} << 20);
    const auto a = beam.search(t, analytic, rule, reward, 0);
    const auto a_ref =
        beam.search(t, whole_groups<embplan::analytic_cost>{&analytic}, rule, reward, 0);
    CHECK(a.ok == a_ref.ok);
    CHECK(a.placement == a_ref.placement);
    const auto n = beam.search(t, bundled_model(), rule, reward, 0);
    const auto n_ref =
        beam.search(t, whole_groups<embplan::neural_cost>{&bundled_model()}, rule, reward, 0);
    CHECK(n.ok == n_ref.ok);
    CHECK(n.placement == n_ref.placement);
    if (seed == 0) {
      REQUIRE(a.ok);
      REQUIRE(n.ok);
    }
  }
}

TEST_CASE("a model's own piecewise_compute specialisation is what the searchers use") {
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward reward;
  const embplan::column_beam beam{.candidates = 4, .width = 2, .steps = 4, .grid = 5};
  const auto t = search_task(3, 12, 4);
  const embplan::search::detail::device_kinds kinds(t);
  const counted_analytic model;
  embplan::search::detail::group_pricer<counted_analytic> pricer(t, model, kinds);
  CHECK(pricer.piecewise());
  CHECK(!pricer.folds());  // cache_groups = true
  counted_pieces = 0;
  const auto mine = beam.search(t, model, rule, reward, 0);
  CHECK(counted_pieces > 0);
  const auto ref = beam.search(t, model.m, rule, reward, 0);
  REQUIRE(mine.ok == ref.ok);
  CHECK(mine.placement == ref.placement);
}

// The local search prices a folding model's devices by their folds, with no
// cache (local_improver::device_cost), a cache_groups model's through the
// cache and the fold, and a model without piecewise_compute through
// compute(): the same plans on every path.
TEST_CASE("local search: the same plan by folds, by cached folds and by compute()") {
  const embplan::default_constraint rule;
  const embplan::neg_max_cost_reward reward;
  const embplan::local_search<embplan::column_beam> ls{
      .start = embplan::column_beam{.candidates = 3, .width = 2, .steps = 3, .grid = 4}};
  const counted_analytic cached;
  int moved = 0;  // tasks where the local search changed its start's plan
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    CAPTURE(seed);
    const auto t = search_task(seed, 12 + 4 * seed, seed % 2 ? 4 : 8,
                               seed % 2 ? std::uint64_t{64} << 20 : std::uint64_t{512} << 20);
    const auto folded = ls.search(t, cached.m, rule, reward, 0);
    const auto whole =
        ls.search(t, whole_groups<embplan::analytic_cost>{&cached.m}, rule, reward, 0);
    counted_pieces = 0;
    const auto via_cache = ls.search(t, cached, rule, reward, 0);
    CHECK(counted_pieces > 0);
    REQUIRE(folded.ok == whole.ok);
    REQUIRE(folded.ok == via_cache.ok);
    CHECK(folded.placement == whole.placement);
    CHECK(folded.placement == via_cache.placement);
    const auto start = ls.start.search(t, cached.m, rule, reward, 0);
    moved += folded.ok && start.ok && !(start.placement == folded.placement) ? 1 : 0;
    const auto n = ls.search(t, bundled_model(), rule, reward, 0);
    const auto n_ref =
        ls.search(t, whole_groups<embplan::neural_cost>{&bundled_model()}, rule, reward, 0);
    REQUIRE(n.ok == n_ref.ok);
    CHECK(n.placement == n_ref.placement);
    if (seed == 0) {
      REQUIRE(folded.ok);
      REQUIRE(n.ok);
    }
  }
  CHECK(moved >= 1);
}

TEST_CASE("local search: the analytic all-to-all bound sets candidates aside, the plan unchanged") {
  // A model whose communication is the analytic all-to-all lets the local
  // search bound a candidate by its two changed devices (comm_bound); the
  // same model seen through whole_groups does not say so and prices every
  // candidate's plan. One host, hosts of one device (each device its own
  // host), and hosts of 2 and 3 (a partial last host), where a move between
  // hosts changes other devices' figures and is priced whole.
  using embplan::search::detail::local_improver;
  const embplan::default_constraint rule;
  const embplan::column_beam start_search{.candidates = 3, .width = 2, .steps = 3, .grid = 4};
  const embplan::analytic_cost analytic;
  const whole_groups<embplan::analytic_cost> analytic_whole{&analytic};
  const whole_groups<embplan::neural_cost> neural_whole{&bundled_model()};
  CHECK(!embplan::all_to_all_is_analytic(analytic_whole, embplan::task{}));
  std::uint64_t bounded = 0;
  int improved = 0;
  for (const std::int32_t per_host : {8, 1, 2, 3}) {
    for (std::uint64_t seed = 0; seed < 3; ++seed) {
      CAPTURE(per_host);
      CAPTURE(seed);
      auto t = search_task(seed + 40, 24 + 8 * seed, 8);
      t.cluster.devices_per_host = per_host;
      t.cluster.inter_host_bandwidth_gbps = 6.0;
      const auto run = [&](const auto& model, std::uint64_t* set_aside) {
        const auto start = start_search.search(t, model, rule, embplan::neg_max_cost_reward{}, 0);
        REQUIRE(start.ok);
        local_improver<std::remove_cvref_t<decltype(model)>, embplan::default_constraint> li(
            t, model, rule, start.placement);
        const double first = li.cost();
        int steps = 0;
        while (steps < 40 && li.improve())
          ++steps;
        if (set_aside != nullptr) *set_aside += li.bounded();
        if (set_aside == nullptr) CHECK(li.bounded() == 0);
        if (li.cost() < first) ++improved;
        return std::pair{li.result(), li.cost()};
      };
      const auto [plan, cost] = run(analytic, &bounded);
      const auto [plan_ref, cost_ref] = run(analytic_whole, nullptr);
      CHECK(plan == plan_ref);
      CHECK(cost == cost_ref);
      // result() lists the pieces by table, so evaluate() sums a device's
      // pieces in another order than the search: equal up to rounding.
      CHECK(cost == doctest::Approx(embplan::evaluate(t, plan, analytic).max_ms()).epsilon(1e-12));
      const auto [nplan, ncost] = run(bundled_model(), &bounded);
      const auto [nplan_ref, ncost_ref] = run(neural_whole, nullptr);
      CHECK(nplan == nplan_ref);
      CHECK(ncost == ncost_ref);
    }
  }
  CHECK(bounded > 0);
  CHECK(improved >= 4);
}
