// The grid engine (search/detail/grid_engine.hpp) against a frozen copy of
// the engine as it stood before its latest speed work (commit 1b8fc91), kept
// here as the reference: the same outcome (plan, cost, score, bound, message)
// bit for bit on random tasks and random column pieces, under the analytic
// and the learned model, two rewards and two constraints, on 1 to 300
// devices. A change to the engine that is meant to be exact must keep this
// test green without touching the reference.
#include "embplan/search/detail/grid_engine.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "embplan/constraint/all_of.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/random.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/neural.hpp"
#include "embplan/reward/balance.hpp"
#include "embplan/reward/neg_max_cost.hpp"
#include "embplan/search/column_beam.hpp"

#include "support/random_task.hpp"

namespace embplan::inline EMBPLAN_ABI::search::detail {
namespace reference {

// The engine of commit 1b8fc91 (every complete plan that passes the compute
// bound given both all-to-alls), unchanged but for its name.
template <cost_model CostModel, constraint Constraint, reward Reward = neg_max_cost_reward>
class grid_engine_v1 {
 public:
  grid_engine_v1(const task& t, const CostModel& model, const Constraint& rule, cost_cache& cache,
                 Reward score = {})
      : t_(t)
      , model_(model)
      , rule_(rule)
      , reward_(std::move(score))
      , cache_(cache)
      , devices_(t.cluster.size())
      , comm_nonnegative_(communication_nonnegative(model, t))
      , kinds_(t)
      , price_(t, model, kinds_) {}

  const device_kinds& kinds() const noexcept { return kinds_; }
  std::uint64_t comm_calls() const noexcept { return pricer_.calls(); }

  // Predicted compute cost of `p` alone on device 0 (NeuroShard's single-table
  // cost, the sort key of Alg. 2 line 3 and the beam's "costly" ranking).
  double single_ms(const piece& p) {
    shard s = p.s;
    s.device = 0;
    return cache_
        .get(kinds_.empty(0) + p.key,
             [&] {
               return price_(std::span<const shard>(&s, 1),
                             std::span<const multiset_key>(&p.key, 1), 0);
             })
        .total_ms();
  }

  // Alg. 2 on `pieces`: the best plan (the Reward's order) over the grid of
  // `grid` bounds.
  grid_outcome run(std::span<const piece> pieces, std::int32_t grid, bool want_message) {
    const std::size_t n = pieces.size();
    const std::size_t devices = t_.cluster.size();
    grid_outcome out;
    prepare_order(pieces);

    std::int64_t total_cols = 0;
    for (const auto& p : pieces)
      total_cols += p.s.cols();
    auto bounds = dim_bounds(total_cols, devices, grid);

    device_at_.assign(n, 0);
    prev_at_.assign(n, -1);
    reset(empty_);
    cur_ = empty_;
    std::size_t from_step = 0;  // cur_ is the state before this step
    binds_.clear();
    std::string failure;
    std::size_t bi = 0;
    for (;;) {
      const std::int64_t bound = bi < bounds.size() ? bounds[bi] : no_dim_bound;
      from_ = cur_;
      bool placed_all = true;
      for (std::size_t step = from_step; step < n; ++step) {
        std::int64_t critical = no_dim_bound;
        std::size_t pos = 0;
        const std::size_t chosen = choose(step, bound, critical, pos);
        if (critical != no_dim_bound) binds_.push_back(bind{step, critical});
        if (chosen == devices) {
          placed_all = false;
          if (want_message) {
            // Name the dim bound only where it refused a device the
            // constraint admits.
            failure = no_device_for_piece(t_, cur_.st, order_shards_[step], rule_,
                                          bound_refused(step, bound) ? bound : no_dim_bound);
          }
          break;
        }
        place(step, chosen, pos);
      }
      if (placed_all) consider(out, bound);
      // A trajectory the bound never changed is that of every looser bound
      // (the unbounded fallback included).
      if (binds_.empty() || bi >= bounds.size()) break;
      std::int64_t least = no_dim_bound;
      for (const auto& b : binds_)
        least = std::min(least, b.critical);
      // Looser bounds below every critical bound repeat this trajectory.
      ++bi;
      while (bi < bounds.size() && bounds[bi] < least)
        ++bi;
      if (bi == bounds.size() && out.ok) break;  // the fallback only when nothing fit
      const std::int64_t next = bi < bounds.size() ? bounds[bi] : no_dim_bound;
      std::size_t r = 0;
      while (binds_[r].critical > next)
        ++r;
      const std::size_t resume = binds_[r].step;
      binds_.resize(r);
      if (resume >= from_step) {
        replay(from_, from_step, resume);
      } else {
        replay(empty_, 0, resume);
      }
      from_step = resume;
    }
    if (!out.ok) out.failure = std::move(failure);
    return out;
  }

 private:
  // Alg. 2 lines 18-19: the complete plan in cur_ replaces out's if the
  // Reward ranks it higher.
  void consider(grid_outcome& out, std::int64_t bound) {
    double cost = 0.0;
    double score = 0.0;
    if constexpr (reward_decreasing_in_max_cost<Reward>) {
      // A plan that cannot beat the best so far is not priced (plan_pricer.hpp).
      if (comm_nonnegative_ && out.ok && compute_bound_ms(cur_.compute) >= out.cost_ms) return;
      cost = pricer_.max_ms(t_, model_, cur_.compute, cur_.st.dim_sum);
      if (!(cost < out.cost_ms)) return;
      score = -cost;
    } else {
      cost = pricer_.max_ms(t_, model_, cur_.compute, cur_.st.dim_sum);
      pricer_.plan_cost_of(cur_.compute, cur_.st.memory_bytes, cur_.st.dim_sum, scored_);
      score = static_cast<double>(reward_.score(t_, scored_));
      if (out.ok && !(score > out.score)) return;
    }
    const std::size_t n = order_.size();
    out.ok = true;
    out.cost_ms = cost;
    out.score = score;
    out.bound = bound;
    out.device.resize(n);
    for (std::size_t k = 0; k < n; ++k)
      out.device[order_[k]] = device_at_[k];
  }

  struct order_key {
    double cost;
    std::uint64_t bytes;
    std::uint32_t table;
    std::int32_t col_begin;
    std::int64_t row_begin;
    std::size_t index;
  };

  struct pass_state {
    placement_state st;
    std::vector<multiset_key> key;
    std::vector<compute_cost> compute;
    std::vector<double> load;         // compute[d].total_ms(), the greedy's device cost
    std::vector<std::int64_t> head;   // last step placed on each device, -1 if none
    std::vector<std::uint32_t> rank;  // the devices in the greedy's order (before())
    std::vector<typename group_pricer<CostModel>::sum_type> sum;  // folds (price_.folds())
  };

  // Strict total order of the greedy's device choice: (cost, memory, index).
  static bool before(const pass_state& ps, std::size_t a, std::size_t b) noexcept {
    const double la = ps.load[a];
    const double lb = ps.load[b];
    if (la != lb) return la < lb;
    if (ps.st.memory_bytes[a] != ps.st.memory_bytes[b])
      return ps.st.memory_bytes[a] < ps.st.memory_bytes[b];
    return a < b;
  }
  bool before(std::size_t a, std::size_t b) const noexcept { return before(cur_, a, b); }

  // The admitted device with the smallest (cost, memory, index) within the
  // bound; `devices` if none; `pos` its place in cur_.rank. `critical`: at
  // most the smallest bound that would have let a device the bound refused
  // and whose key is below the chosen one's win this step (no_dim_bound if
  // there is none).
  // cur_.rank holds the devices in that order, so the walk visits exactly the
  // devices ranked before the choice (those a scan of all devices would find
  // below it) and stops at the first one within the bound that the constraint
  // admits: the same choice as comparing every device, in O(rank of the
  // choice) instead of O(D).
  std::size_t choose(std::size_t step, std::int64_t bound, std::int64_t& critical,
                     std::size_t& pos) {
    const std::size_t devices = devices_;
    shard s = order_shards_[step];
    const std::int64_t room = bound - s.cols();
    const std::int64_t* dim = cur_.st.dim_sum.data();
    const std::uint32_t* rank = cur_.rank.data();
    for (std::size_t p = 0; p < devices; ++p) {
      const std::uint32_t d = rank[p];
      s.device = d;
      if (dim[d] > room) {
        // Refused by the bound (need > bound): a candidate critical bound.
        // The constraint is not asked: a critical bound below the true one
        // (a device the constraint would refuse too) only makes a looser
        // bound rerun steps that it then repeats, never skip one that would
        // change; and the constraint rarely refuses a device the greedy
        // would pick.
        critical = std::min(critical, dim[d] + s.cols());
        continue;
      }
      if (admits_with_bytes(rule_, t_, cur_.st, s, order_bytes_[step])) {
        pos = p;
        return d;
      }
    }
    return devices;
  }

  // Whether the bound refused, at `step`, a device the constraint admits.
  bool bound_refused(std::size_t step, std::int64_t bound) const {
    shard s = order_shards_[step];
    for (std::size_t d = 0; d < t_.cluster.size(); ++d) {
      s.device = static_cast<std::uint32_t>(d);
      if (cur_.st.dim_sum[d] + s.cols() > bound && rule_.admits(t_, cur_.st, s)) return true;
    }
    return false;
  }

  // Device `d`, at cur_.rank[pos], changed its key: move it to its place.
  void rerank(std::size_t d, std::size_t pos) {
    std::uint32_t* r = cur_.rank.data();
    const std::size_t n = cur_.rank.size();
    const auto du = static_cast<std::uint32_t>(d);
    if (pos + 1 < n && before(r[pos + 1], d)) {
      // Moves right: the first entry after pos that d precedes.
      const std::uint32_t* at =
          std::partition_point(r + pos + 1, r + n, [&](std::uint32_t e) { return before(e, d); });
      const auto to = static_cast<std::size_t>(at - r) - 1;
      std::copy(r + pos + 1, r + to + 1, r + pos);
      r[to] = du;
    } else if (pos > 0 && before(d, r[pos - 1])) {
      const std::uint32_t* at =
          std::partition_point(r, r + pos, [&](std::uint32_t e) { return before(e, d); });
      const auto to = static_cast<std::size_t>(at - r);
      std::copy_backward(r + to, r + pos, r + pos + 1);
      r[to] = du;
    }
  }

  static void sort_rank(pass_state& ps) {
    std::sort(ps.rank.begin(), ps.rank.end(),
              [&](std::uint32_t a, std::uint32_t b) { return before(ps, a, b); });
  }

  // cur_ = the trajectory's state before step `to`, from `base`, the state
  // before step `base_step`: the recorded choices applied again, each device
  // priced once at the end (a cache hit: the trajectory priced it).
  void replay(const pass_state& base, std::size_t base_step, std::size_t to) {
    cur_ = base;
    for (std::size_t step = base_step; step < to; ++step) {
      const std::size_t d = device_at_[step];
      cur_.st.memory_bytes[d] += order_bytes_[step];  // no overflow: it was placed before
      cur_.st.dim_sum[d] += order_shards_[step].cols();
      ++cur_.st.shard_count[d];
      cur_.key[d] += order_keys_[step];
      cur_.head[d] = static_cast<std::int64_t>(step);
    }
    const std::size_t devices = t_.cluster.size();
    if (price_.folds()) {
      for (std::size_t step = base_step; step < to; ++step) {
        const std::size_t d = device_at_[step];
        price_.add(cur_.sum[d], order_terms_[kinds_.kind_of[d] * order_.size() + step]);
      }
    }
    for (std::size_t d = 0; d < devices; ++d) {
      if (cur_.key[d] == base.key[d]) continue;
      cur_.compute[d] = price_.folds() ? price_.finish(cur_.sum[d], cur_.st.shard_count[d], d)
                                       : cache_.get(cur_.key[d], [&] { return price_group(d); });
      cur_.load[d] = cur_.compute[d].total_ms();
    }
    sort_rank(cur_);
  }

  // The pieces on device d in cur_, in placement order, priced.
  compute_cost price_group(std::size_t d) {
    group_.clear();
    group_keys_.clear();
    for (std::int64_t k = cur_.head[d]; k >= 0; k = prev_at_[static_cast<std::size_t>(k)]) {
      group_.push_back(order_shards_[static_cast<std::size_t>(k)]);
      group_.back().device = static_cast<std::uint32_t>(d);
      group_keys_.push_back(order_keys_[static_cast<std::size_t>(k)]);
    }
    std::reverse(group_.begin(), group_.end());
    std::reverse(group_keys_.begin(), group_keys_.end());
    return price_(std::span<const shard>(group_), std::span<const multiset_key>(group_keys_), d);
  }

  void prepare_order(std::span<const piece> pieces) {
    const std::size_t n = pieces.size();
    keys_.clear();
    keys_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& s = pieces[i].s;
      keys_.push_back(order_key{single_ms(pieces[i]), shard_bytes(t_, s), s.table, s.col_begin,
                                s.row_begin, i});
    }
    // Descending by the whole tuple (sorted ascending, read from the end).
    std::sort(keys_.begin(), keys_.end(), [](const order_key& a, const order_key& b) {
      return std::tie(b.cost, b.bytes, b.table, b.col_begin, b.row_begin, b.index) <
             std::tie(a.cost, a.bytes, a.table, a.col_begin, a.row_begin, a.index);
    });
    order_.resize(n);
    order_shards_.resize(n);
    order_keys_.resize(n);
    order_bytes_.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      order_[k] = keys_[k].index;
      order_bytes_[k] = keys_[k].bytes;
      order_shards_[k] = pieces[keys_[k].index].s;
      order_keys_[k] = pieces[keys_[k].index].key;
    }
    if (price_.folds()) {
      const std::size_t kinds = kinds_.salt.size();
      order_terms_.resize(kinds * n);
      for (std::size_t kind = 0; kind < kinds; ++kind) {
        const std::size_t device = kinds_.representative[kind];
        for (std::size_t k = 0; k < n; ++k)
          order_terms_[kind * n + k] = price_.term(order_shards_[k], order_keys_[k], device);
      }
    }
  }

  void reset(pass_state& ps) {
    const std::size_t devices = t_.cluster.size();
    ps.st.memory_bytes.assign(devices, 0);
    ps.st.dim_sum.assign(devices, 0);
    ps.st.shard_count.assign(devices, 0);
    ps.key.resize(devices);
    ps.compute.resize(devices);
    ps.load.resize(devices);
    ps.head.assign(devices, -1);
    for (std::size_t d = 0; d < devices; ++d) {
      ps.key[d] = kinds_.empty(d);
      ps.compute[d] =
          cache_.get(ps.key[d], [&] { return model_.compute(t_, std::span<const shard>(), d); });
      ps.load[d] = ps.compute[d].total_ms();
    }
    ps.sum.assign(devices, price_.start());
    ps.rank.resize(devices);
    for (std::size_t d = 0; d < devices; ++d)
      ps.rank[d] = static_cast<std::uint32_t>(d);
    sort_rank(ps);
  }

  void place(std::size_t step, std::size_t d, std::size_t pos) {
    // placement_state::place with the bytes computed once per piece.
    cur_.st.memory_bytes[d] =
        checked_add(cur_.st.memory_bytes[d], order_bytes_[step], "device memory");
    cur_.st.dim_sum[d] += order_shards_[step].cols();
    ++cur_.st.shard_count[d];
    cur_.key[d] += order_keys_[step];
    prev_at_[step] = cur_.head[d];
    cur_.head[d] = static_cast<std::int64_t>(step);
    device_at_[step] = static_cast<std::uint32_t>(d);
    if (price_.folds()) {
      // The device's pieces are always folded in step order, the order
      // price_group() would give them, and the cached cost of a set is the
      // fold in that order too (pieces are placed in one order of their keys
      // in every grid run: prepare_order's, a total order on keys up to
      // pieces with equal keys and terms). So the fold extended by this
      // piece is bitwise the cost the cache would return for the new set.
      price_.add(cur_.sum[d], order_terms_[kinds_.kind_of[d] * order_.size() + step]);
      cur_.compute[d] = price_.finish(cur_.sum[d], cur_.st.shard_count[d], d);
    } else {
      cur_.compute[d] = cache_.get(cur_.key[d], [&] { return price_group(d); });
    }
    cur_.load[d] = cur_.compute[d].total_ms();
    rerank(d, pos);
  }

  const task& t_;
  const CostModel& model_;
  const Constraint& rule_;
  Reward reward_;
  cost_cache& cache_;
  std::size_t devices_;    // t_.cluster.size()
  bool comm_nonnegative_;  // communication_nonnegative(model_, t_)
  device_kinds kinds_;
  group_pricer<CostModel> price_;
  plan_pricer pricer_;
  plan_cost scored_;  // the plan scored by a reward not decreasing in max cost

  std::vector<std::size_t> order_;                                        // step -> input index
  std::vector<shard> order_shards_;                                       // step -> shard
  std::vector<multiset_key> order_keys_;                                  // step -> key
  std::vector<std::uint64_t> order_bytes_;                                // step -> shard_bytes
  std::vector<typename group_pricer<CostModel>::term_type> order_terms_;  // kind x step -> term
  std::vector<std::uint32_t> device_at_;  // step -> device in the current pass
  std::vector<std::int64_t> prev_at_;     // step -> previous step on the same device
  struct bind {
    std::size_t step;       // a step of the current trajectory where the bound bit
    std::int64_t critical;  // the least bound that would change that step
  };
  pass_state cur_;
  pass_state from_;   // the state the current pass started from
  pass_state empty_;  // no piece placed
  std::vector<bind> binds_;
  std::vector<shard> group_;
  std::vector<multiset_key> group_keys_;
  std::vector<order_key> keys_;
};

}  // namespace reference
}  // namespace embplan::inline EMBPLAN_ABI::search::detail

namespace {

using namespace embplan;
using search::detail::grid_engine;
using search::detail::grid_outcome;
using search::detail::piece;
using search::detail::reference::grid_engine_v1;

const neural_cost& learned() {
  static const auto m = neural_cost::load(std::string(EMBPLAN_SOURCE_DIR) +
                                          "/data/cost/cpu_compute_model.safetensors");
  return m;
}

// Whole tables, then `splits` halvings of random splittable pieces (the
// states column_beam prices).
std::vector<piece> random_pieces(const task& t, std::uint64_t seed, int splits) {
  std::vector<piece> out;
  for (std::size_t i = 0; i < t.tables.size(); ++i)
    out.push_back(search::detail::make_piece(t, whole_table(t, i, 0)));
  rng gen(seed);
  for (int k = 0; k < splits; ++k) {
    std::vector<std::size_t> can;
    for (std::size_t i = 0; i < out.size(); ++i)
      if (search::detail::splittable(out[i].s)) can.push_back(i);
    if (can.empty()) break;
    const auto at = can[static_cast<std::size_t>(
        gen.between(std::int64_t{0}, static_cast<std::int64_t>(can.size()) - 1))];
    const auto [low, high] = search::detail::halves(t, out[at]);
    out[at] = low;
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(at) + 1, high);
  }
  return out;
}

// `pieces` as column_beam hands them to the engine: each priced
// (piece::single_ms, by `engine`) and in the grid search's order.
template <class Engine>
std::vector<piece> as_beam_state(std::vector<piece> pieces, Engine& engine) {
  for (auto& p : pieces)
    p.single_ms = engine.single_ms(p);
  std::sort(pieces.begin(), pieces.end(), search::detail::goes_first);
  return pieces;
}

// `state` with its piece at `at` split into halves priced by `engine`, as
// column_beam makes a child.
template <class Engine>
std::vector<piece> split_priced(const task& t, Engine& engine, const std::vector<piece>& state,
                                std::size_t at) {
  auto half = search::detail::halves(t, state[at]);
  half.first.single_ms = engine.single_ms(half.first);
  half.second.single_ms = engine.single_ms(half.second);
  return search::detail::split_piece(state, at, half);
}

void check_same(const grid_outcome& a, const grid_outcome& b) {
  CHECK(a.ok == b.ok);
  CHECK(a.device == b.device);
  CHECK(a.bound == b.bound);
  CHECK(a.failure == b.failure);
  if (a.ok && b.ok) {
    // Bit for bit.
    CHECK(std::bit_cast<std::uint64_t>(a.cost_ms) == std::bit_cast<std::uint64_t>(b.cost_ms));
    CHECK(std::bit_cast<std::uint64_t>(a.score) == std::bit_cast<std::uint64_t>(b.score));
  }
}

// Run `run` of a test on `pieces` by engines `a` and `b` (its grid: 9, 7, 5
// bounds, then one; a message asked for on even runs): the same outcome
// (check_same); a's outcome.
template <class A, class B>
grid_outcome run_both(A& a, B& b, std::span<const piece> pieces, int run) {
  const std::int32_t grid = run == 3 ? 1 : 11 - 2 * run;
  const auto x = a.run(pieces, grid, run % 2 == 0);
  check_same(x, b.run(pieces, grid, run % 2 == 0));
  return x;
}

// Several runs on one engine pair (the engines keep buffers between runs).
template <class Model, class Rule, class Reward>
int compare(const task& t, const Model& model, const Rule& rule, const Reward& reward,
            std::uint64_t seed) {
  search::detail::cost_cache cache_new;
  search::detail::cost_cache cache_old;
  search::detail::cost_cache cache_beam;
  grid_engine<Model, Rule, Reward> fresh(t, model, rule, cache_new, reward);
  grid_engine_v1<Model, Rule, Reward> old(t, model, rule, cache_old, reward);
  // The same states as column_beam gives them (priced, in order), one split
  // apart from run to run as the beam's are, so that the engine also takes
  // its terms from the previous run's (prepare_order).
  grid_engine<Model, Rule, Reward> beam(t, model, rule, cache_beam, reward);
  int ok = 0;
  for (int run = 0; run < 4; ++run) {
    CAPTURE(run);
    const auto pieces = random_pieces(t, seed * 31 + static_cast<std::uint64_t>(run), 3 * run);
    const std::int32_t grid = run == 3 ? 1 : 11 - 2 * run;
    ok += run_both(fresh, old, pieces, run).ok ? 1 : 0;
    auto state = as_beam_state(random_pieces(t, seed * 31 + 7, 0), beam);
    for (int split = 0; split <= run; ++split) {
      CAPTURE(split);
      const auto c = beam.run(state, grid, run % 2 == 0);
      const auto d = old.run(state, grid, run % 2 == 0);
      check_same(c, d);
      // Split the first splittable piece for the next state.
      const auto at = std::find_if(state.begin(), state.end(),
                                   [](const piece& p) { return search::detail::splittable(p.s); });
      if (at == state.end()) break;
      state = split_priced(t, beam, state, static_cast<std::size_t>(at - state.begin()));
      CHECK(std::is_sorted(state.begin(), state.end(), search::detail::goes_first));
    }
  }
  return ok;
}

struct shape {
  std::size_t tables;
  std::size_t devices;
  std::uint64_t memory;
};

constexpr shape shapes[] = {
    {5, 1, 512u << 20},   {12, 3, 512u << 20},    {40, 7, 64u << 20},     {90, 40, 512u << 20},
    {200, 70, 24u << 20}, {500, 130, 512u << 20}, {700, 300, 512u << 20}, {300, 150, 6u << 20},
};

}  // namespace

TEST_CASE("grid engine: the same outcomes as the engine of 1b8fc91, analytic model") {
  const analytic_cost model;
  int ok = 0;
  for (std::uint64_t seed = 0; seed < std::size(shapes); ++seed) {
    CAPTURE(seed);
    const auto& sh = shapes[seed];
    const auto t = embplan_test::search_task(seed, sh.tables, sh.devices, sh.memory);
    ok += compare(t, model, default_constraint{}, neg_max_cost_reward{}, seed);
    ok += compare(t, model, memory_capacity{}, balance_reward{}, seed + 100);
  }
  CHECK(ok > 20);
}

TEST_CASE("grid engine: the same outcomes as the engine of 1b8fc91, learned model") {
  const auto& model = learned();
  int ok = 0;
  for (std::uint64_t seed = 0; seed < std::size(shapes); ++seed) {
    CAPTURE(seed);
    const auto& sh = shapes[seed];
    const auto t = embplan_test::search_task(seed + 7, sh.tables, sh.devices, sh.memory);
    ok += compare(t, model, default_constraint{}, neg_max_cost_reward{}, seed);
  }
  CHECK(ok > 10);
}

namespace {

// default_constraint without room(): the engine asks it about every device.
struct roomless {
  default_constraint rule;
  bool admits(const task& t, const placement_state& st, const shard& s) const {
    return rule.admits(t, st, s);
  }
  bool admits(const task& t, const placement_state& st, const shard& s, std::uint64_t bytes) const {
    return rule.admits(t, st, s, bytes);
  }
  std::string describe() const { return rule.describe(); }
};

}  // namespace

TEST_CASE("grid engine: passing over devices by the constraint's room changes no outcome") {
  // Every third device has room for the smaller pieces only: the walk passes
  // it over for the larger ones (room_bounding_constraint) and must still
  // find it for the smaller ones, with the same plans, costs, bounds and
  // messages as asking the constraint about every device.
  static_assert(room_bounding_constraint<default_constraint>);
  static_assert(!room_bounding_constraint<roomless>);
  const analytic_cost model;
  int ok = 0;
  int small_used = 0;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    auto t = embplan_test::tight_task(seed, 40 + 20 * seed, 6 + seed, 0.4);
    std::vector<std::uint64_t> bytes;
    for (std::size_t i = 0; i < t.tables.size(); ++i)
      bytes.push_back(shard_bytes(t, whole_table(t, i, 0)));
    std::sort(bytes.begin(), bytes.end());
    const std::uint64_t small = bytes[bytes.size() * 3 / 4];  // most pieces fit it
    for (std::size_t d = 0; d < t.cluster.size(); d += 3)
      t.cluster.devices[d].memory_bytes = small;
    REQUIRE(bytes.back() > small);
    search::detail::cost_cache cache_a;
    search::detail::cost_cache cache_b;
    const default_constraint rule;
    const roomless plain{rule};  // the engines keep references to both
    grid_engine<analytic_cost, default_constraint> with_room(t, model, rule, cache_a);
    grid_engine<analytic_cost, roomless> without(t, model, plain, cache_b);
    for (int run = 0; run < 4; ++run) {
      CAPTURE(run);
      const auto pieces = random_pieces(t, seed * 17 + static_cast<std::uint64_t>(run), 4 * run);
      const auto a = run_both(with_room, without, pieces, run);
      if (!a.ok) continue;
      ++ok;
      for (std::size_t i = 0; i < pieces.size(); ++i)
        small_used += a.device[i] % 3 == 0 ? 1 : 0;
    }
  }
  CHECK(ok > 12);
  CHECK(small_used > 0);  // the small devices took pieces
}

TEST_CASE("grid engine: device_order moves, erases and truncates as a plain array would") {
  // Random moves to the back (both ways of shifting: the entries between, or
  // those outside, with the live range sliding and recentring), to the front,
  // erasures near either end, against std::vector.
  for (const std::size_t n : {1u, 2u, 5u, 64u, 300u}) {
    CAPTURE(n);
    rng gen(n);
    search::detail::device_order order;
    std::vector<std::uint32_t> want(n);
    for (std::size_t d = 0; d < n; ++d)
      want[d] = static_cast<std::uint32_t>(n - 1 - d);
    order.sort(n, [](std::uint32_t a, std::uint32_t b) { return a > b; });
    const auto same = [&] {
      REQUIRE(order.size() == want.size());
      CHECK(std::equal(want.begin(), want.end(), order.data()));
    };
    same();
    for (int op = 0; op < 20'000 && !want.empty(); ++op) {
      const auto size = static_cast<std::int64_t>(want.size());
      const auto pos = static_cast<std::size_t>(gen.between(std::int64_t{0}, size - 1));
      const auto kind = gen.between(0, 99);
      if (kind < 70 && pos + 1 < want.size()) {
        const auto to =
            static_cast<std::size_t>(gen.between(static_cast<std::int64_t>(pos) + 1, size - 1));
        order.move_back(pos, to);
        const auto d = want[pos];
        want.erase(want.begin() + static_cast<std::ptrdiff_t>(pos));
        want.insert(want.begin() + static_cast<std::ptrdiff_t>(to), d);
      } else if (kind < 98 && pos > 0) {
        const auto to = static_cast<std::size_t>(
            gen.between(std::int64_t{0}, static_cast<std::int64_t>(pos) - 1));
        order.move_front(pos, to);
        const auto d = want[pos];
        want.erase(want.begin() + static_cast<std::ptrdiff_t>(pos));
        want.insert(want.begin() + static_cast<std::ptrdiff_t>(to), d);
      } else if (kind < 99) {
        order.erase(pos);
        want.erase(want.begin() + static_cast<std::ptrdiff_t>(pos));
      } else {
        order.truncate(pos + 1);
        want.resize(pos + 1);
      }
      same();
    }
  }
}

TEST_CASE("column beam: the plan's shards come by (table, first column, first row)") {
  // The beam keeps its states in the grid search's order; the plan it returns
  // lists shards as every other searcher does.
  const analytic_cost model;
  int split = 0;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    const auto t = embplan_test::search_task(seed, 24, 4);
    const auto r = column_beam{}.search(t, model, default_constraint{}, neg_max_cost_reward{}, 0);
    REQUIRE(r.ok);
    const auto& s = r.placement.shards;
    split += s.size() > t.tables.size() ? 1 : 0;
    CHECK(std::is_sorted(s.begin(), s.end(), [](const shard& a, const shard& b) {
      return std::tie(a.table, a.col_begin, a.row_begin) <
             std::tie(b.table, b.col_begin, b.row_begin);
    }));
  }
  CHECK(split > 0);  // some plans hold split tables
}

namespace {
// The places of `pieces` ordered by (table, first column, first row), which
// is unique within a state.
std::vector<std::size_t> place_order(const std::vector<piece>& pieces) {
  std::vector<std::size_t> out(pieces.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = i;
  std::sort(out.begin(), out.end(), [&](std::size_t a, std::size_t b) {
    const shard& x = pieces[a].s;
    const shard& y = pieces[b].s;
    return std::tie(x.table, x.col_begin, x.row_begin) <
           std::tie(y.table, y.col_begin, y.row_begin);
  });
  return out;
}
}  // namespace

// The engine's outcome depends on the set of pieces, not their order.
TEST_CASE("grid engine: a state's outcome does not depend on the order of its pieces") {
  const auto& model = learned();
  int compared = 0;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    const auto t = embplan_test::search_task(seed, 12 + 6 * seed, 2 + seed % 4);
    search::detail::cost_cache cache;
    const default_constraint rule;  // the engine keeps a reference
    grid_engine<neural_cost, default_constraint, neg_max_cost_reward> engine(t, model, rule, cache);
    const auto state = as_beam_state(random_pieces(t, seed, 6), engine);
    auto shuffled = state;
    rng gen(seed + 11);
    for (std::size_t i = shuffled.size(); i > 1; --i)
      std::swap(shuffled[i - 1], shuffled[static_cast<std::size_t>(gen() % i)]);
    const auto a = engine.run(state, 11, false);
    const auto b = engine.run(shuffled, 11, false);
    REQUIRE(a.ok == b.ok);
    if (!a.ok) continue;
    ++compared;
    CHECK(std::bit_cast<std::uint64_t>(a.cost_ms) == std::bit_cast<std::uint64_t>(b.cost_ms));
    CHECK(a.bound == b.bound);
    // The same device per piece, pieces matched by place_order.
    const auto ao = place_order(state);
    const auto bo = place_order(shuffled);
    for (std::size_t r = 0; r < ao.size(); ++r) {
      REQUIRE(state[ao[r]].s.col_begin == shuffled[bo[r]].s.col_begin);
      REQUIRE(state[ao[r]].s.table == shuffled[bo[r]].s.table);
    }
    for (std::size_t r = 0; r < ao.size(); ++r)
      CHECK(a.device[ao[r]] == b.device[bo[r]]);
  }
  CHECK(compared >= 4);
}

// column_beam searches a repeated child state once (price_children), relying
// on this: states of the same pieces hold them in the same order, however
// they were split, so same_pieces compares them place by place.
TEST_CASE("column beam: states of the same pieces are the same list, whichever split came first") {
  const auto& model = learned();
  int compared = 0;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    CAPTURE(seed);
    const auto t = embplan_test::search_task(seed, 8 + 4 * seed, 2 + seed % 3);
    search::detail::cost_cache cache;
    const default_constraint rule;  // the engine keeps a reference
    grid_engine<neural_cost, default_constraint, neg_max_cost_reward> engine(t, model, rule, cache);
    const auto state = as_beam_state(random_pieces(t, seed, 2), engine);
    // Piece `p` of `from` split, its halves priced by `engine`.
    const auto split = [&](const std::vector<piece>& from, const piece& p) {
      const auto at = std::find_if(from.begin(), from.end(), [&](const piece& q) {
        return std::tie(q.s.table, q.s.col_begin, q.s.col_end) ==
               std::tie(p.s.table, p.s.col_begin, p.s.col_end);
      });
      REQUIRE(at != from.end());
      return split_priced(t, engine, from, static_cast<std::size_t>(at - from.begin()));
    };
    std::vector<piece> can;
    for (const auto& p : state)
      if (search::detail::splittable(p.s)) can.push_back(p);
    if (can.size() < 2) continue;
    const piece& a = can.front();
    const piece& b = can.back();
    const auto ab = split(split(state, a), b);
    const auto ba = split(split(state, b), a);
    CHECK(search::detail::same_pieces(ab, ba));
    REQUIRE(ab.size() == ba.size());
    for (std::size_t i = 0; i < ab.size(); ++i) {
      CHECK(ab[i].s.table == ba[i].s.table);
      CHECK(ab[i].s.col_begin == ba[i].s.col_begin);
      CHECK(std::bit_cast<std::uint64_t>(ab[i].single_ms) ==
            std::bit_cast<std::uint64_t>(ba[i].single_ms));
    }
    // Other states: one piece fewer, or another piece split.
    CHECK_FALSE(search::detail::same_pieces(ab, split(state, a)));
    CHECK_FALSE(search::detail::same_pieces(ab, std::vector<piece>(ab.begin(), ab.end() - 1)));
    if (can.size() >= 3)
      CHECK_FALSE(search::detail::same_pieces(ab, split(split(state, a), can[1])));
    ++compared;
  }
  CHECK(compared >= 3);
}
