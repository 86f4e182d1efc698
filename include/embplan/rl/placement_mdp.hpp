#pragma once
// The placement MDP (DreamShard §3.1; AutoShard §4.1 places the same way):
// the tables of a task in a fixed order, one table placed per step, the action
// a device, the legal actions those the planner's Constraint admits for the
// current table given what is placed so far (the constraint's device-state
// protocol, as the searchers use it: placement_state + admits), the reward 0
// until the last step and then minus the finished plan's cost.
// One type, parameterised by where costs come from (a CostSource):
//  - the estimated MDP (§3.2): DreamShard's cost network orders the tables and
//    prices the finished plan with its overall head (rl::dreamshard_estimate);
//  - a real MDP: a meter or any cost_model orders the tables by shard_cost
//    and prices the finished plan with embplan::evaluate (model_cost_source).
// The MDP keeps only what every policy needs: the order (the caller's, or the
// CostSource's keys sorted descending, stable, as DreamShard's Env.reset),
// the step, the legal devices, each device's tables in placement order and
// the constraint's device state; the policy reads view().
// A transition is O(devices) constraint checks plus appending one index; the
// MDP allocates only in its constructor and reset().
// A table that no legal action can place makes try_reset / try_step return
// false with failure() naming the table, the rule and every device's free
// memory (no_device_for); reset() and step() throw that message as an
// embplan::error.
// Design notes: docs/design/dreamshard.md.

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/detail/metadata.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/search/infeasible.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

// Where an MDP's costs come from: keys that order the tables (higher first) and
// the cost of a finished plan (device_of[i] = the device of table i), whose
// negative is the episode's reward.
template <class S>
concept cost_source = std::copy_constructible<S> &&
    requires(const S& s, const task& t, std::span<const std::uint32_t> device_of,
             std::vector<double>& keys) {
  { s.name() } -> std::convertible_to<std::string_view>;
  { s.order_keys(t, keys) } -> std::same_as<void>;
  { s.final_cost(t, device_of) } -> std::convertible_to<double>;
};

// A real MDP's costs: a cost model (a meter, analytic_cost, neural_cost, ...)
// orders the tables by shard_cost (the whole table on device 0) and prices the
// finished plan with evaluate(...).max_ms(). Holds a pointer: the model must
// outlive the source.
template <cost_model CostModel>
struct model_cost_source {
  const CostModel* model = nullptr;

  std::string_view name() const { return require().name(); }
  void order_keys(const task& t, std::vector<double>& keys) const {
    keys.resize(t.tables.size());
    for (std::size_t i = 0; i < t.tables.size(); ++i)
      keys[i] = static_cast<double>(require().shard_cost(t, whole_table(t, i, 0)));
  }
  double final_cost(const task& t, std::span<const std::uint32_t> device_of) const {
    std::vector<std::size_t> assignment(device_of.begin(), device_of.end());
    return evaluate(t, table_wise_plan(t, assignment), require()).max_ms();
  }

 private:
  const CostModel& require() const {
    if (model == nullptr) {
      embplan::detail::fail("model_cost_source.model", "(null)", "a cost model");
    }
    return *model;
  }
};

// No costs: task order, every plan costs 0. For a searcher that orders the
// tables itself and prices plans with the planner's model.
struct no_cost_source {
  std::string_view name() const noexcept { return "none"; }
  void order_keys(const task& t, std::vector<double>& keys) const {
    keys.assign(t.tables.size(), 0.0);
  }
  double final_cost(const task&, std::span<const std::uint32_t>) const noexcept { return 0.0; }
};
static_assert(cost_source<no_cost_source>);

// Indices sorted by descending key, equal keys in index order (a stable sort,
// as Python's sorted(reverse=True)). A NaN key is refused, naming the table.
inline std::vector<std::uint32_t> descending_order(std::span<const double> keys) {
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!(keys[i] == keys[i])) {
      embplan::detail::fail(embplan::detail::path("order_keys", i), keys[i], "a number (not NaN)");
    }
  }
  std::vector<std::uint32_t> order(keys.size());
  std::iota(order.begin(), order.end(), std::uint32_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return keys[a] > keys[b]; });
  return order;
}

namespace detail {

// A double as text that reads back to the same double (%.17g): policy files'
// metadata.
inline std::string mdp_number_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A learning curve as policy files keep it: numbers joined by commas.
inline std::string mdp_curve_text(std::span<const double> curve) {
  std::string out;
  for (std::size_t i = 0; i < curve.size(); ++i)
    out += (i ? "," : "") + mdp_number_text(curve[i]);
  return out;
}

// A policy file's "embplan.hp.<name>" entries and "embplan.learning_curve"
// (absent or empty: no curve); a bad number names `source` and the key.
inline void mdp_read_training_metadata(const std::map<std::string, std::string>& metadata,
                                       const std::string& source,
                                       std::map<std::string, std::string>& hyperparameters,
                                       std::vector<double>& curve) {
  for (const auto& [k, v] : metadata) {
    if (k.rfind("embplan.hp.", 0) == 0) hyperparameters[k.substr(11)] = v;
  }
  const auto it = metadata.find("embplan.learning_curve");
  if (it == metadata.end() || it->second.empty()) return;
  const std::string& text = it->second;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const auto end = std::min(text.find(',', begin), text.size());
    curve.push_back(cost::detail::parse_number<double>(
        text.substr(begin, end - begin), source + ": metadata.embplan.learning_curve"));
    begin = end + 1;
  }
}

}  // namespace detail

inline constexpr std::uint32_t unplaced = std::numeric_limits<std::uint32_t>::max();

// What a policy reads of an MDP's state (valid until the next transition).
struct mdp_view {
  const task* problem = nullptr;
  std::span<const std::uint32_t> order{};      // tables (task indices) in placement order
  std::size_t step = 0;                        // tables placed so far; order[step] is next
  std::span<const std::uint32_t> legal{};      // legal devices for order[step], ascending
  std::span<const std::uint32_t> device_of{};  // device of each table, or `unplaced`
  const std::vector<std::vector<std::uint32_t>>* tables_on = nullptr;  // per device, in order
  const placement_state* state = nullptr;  // the constraint's device state

  std::size_t devices() const noexcept { return tables_on ? tables_on->size() : 0; }
  std::uint32_t table() const noexcept { return order[step]; }
};

template <cost_source CostSource, constraint Constraint>
class placement_mdp {
 public:
  using cost_source_type = CostSource;
  using constraint_type = Constraint;

  // Tables in the CostSource's order. `t` must outlive the MDP.
  placement_mdp(const task& t, CostSource source, Constraint rule)
      : placement_mdp(t, source, std::move(rule), order_from(t, source)) {}

  // Tables in `order` (a permutation of the task's table indices).
  placement_mdp(const task& t, CostSource source, Constraint rule, std::vector<std::uint32_t> order)
      : task_(&t)
      , source_(std::move(source))
      , rule_(std::move(rule))
      , order_(std::move(order))
      , bytes_(t.tables.size())
      , device_of_(t.tables.size(), unplaced)
      , tables_on_(t.cluster.size())
      , state_(t) {
    if (order_.size() != t.tables.size()) {
      embplan::detail::fail("placement_mdp.order.size", order_.size(),
                            "one entry per table (" + std::to_string(t.tables.size()) + ")");
    }
    std::vector<bool> seen(t.tables.size(), false);
    for (std::size_t k = 0; k < order_.size(); ++k) {
      if (order_[k] >= t.tables.size() || seen[order_[k]]) {
        embplan::detail::fail(
            embplan::detail::path("placement_mdp.order", k), order_[k],
            "a permutation of the table indices 0 .. " + std::to_string(t.tables.size() - 1));
      }
      seen[order_[k]] = true;
    }
    if (t.cluster.size() == 0) {
      embplan::detail::fail("placement_mdp.devices", 0, "at least one device");
    }
    for (std::size_t i = 0; i < t.tables.size(); ++i)
      bytes_[i] = shard_bytes(t, whole_table(t, i, 0));
    legal_.reserve(t.cluster.size());
    for (auto& v : tables_on_)
      v.reserve(t.tables.size());
    try_reset();  // ready at step 0; failure() says when the first table fits nowhere
  }

  // Back to step 0, nothing placed (the constructor already did this). False
  // when the first table has no legal device.
  bool try_reset() {
    step_ = 0;
    std::fill(device_of_.begin(), device_of_.end(), unplaced);
    for (auto& v : tables_on_)
      v.clear();
    state_ = placement_state(*task_);
    failure_.clear();
    return update_legal();
  }
  void reset() {
    if (!try_reset()) throw error(failure_);
  }

  // Places the current table on `device` (which must be legal). False when the
  // next table has no legal device (the episode cannot go on).
  bool try_step(std::size_t device) {
    require_running("placement_mdp.step");
    if (!std::binary_search(legal_.begin(), legal_.end(), static_cast<std::uint32_t>(device))) {
      std::string list = "[";
      for (std::size_t k = 0; k < legal_.size(); ++k)
        list += (k ? ", " : "") + std::to_string(legal_[k]);
      embplan::detail::fail(
          "placement_mdp.action", device,
          "a legal device for table " + std::to_string(order_[step_]) + ": " + list + "]");
    }
    const std::uint32_t table = order_[step_];
    const shard s = whole_table(*task_, table, device);
    state_.place(*task_, s);
    device_of_[table] = static_cast<std::uint32_t>(device);
    tables_on_[device].push_back(table);
    ++step_;
    return update_legal();
  }
  void step(std::size_t device) {
    if (!try_step(device)) throw error(failure_);
  }

  bool done() const noexcept { return step_ >= order_.size(); }
  std::size_t step_index() const noexcept { return step_; }
  std::size_t devices() const noexcept { return tables_on_.size(); }
  // The table (task index) placed at this step.
  std::uint32_t table() const {
    require_running("placement_mdp.table");
    return order_[step_];
  }
  std::span<const std::uint32_t> order() const noexcept { return order_; }
  std::span<const std::uint32_t> legal() const noexcept { return legal_; }
  std::span<const std::uint32_t> device_of() const noexcept { return device_of_; }
  std::span<const std::uint32_t> tables_on(std::size_t device) const {
    return tables_on_.at(device);
  }
  const placement_state& state() const noexcept { return state_; }
  const task& problem() const noexcept { return *task_; }
  const CostSource& source() const noexcept { return source_; }
  const Constraint& rule() const noexcept { return rule_; }
  // Why the episode cannot go on; empty while it can.
  const std::string& failure() const noexcept { return failure_; }

  mdp_view view() const noexcept {
    return mdp_view{.problem = task_,
                    .order = order_,
                    .step = step_,
                    .legal = legal_,
                    .device_of = device_of_,
                    .tables_on = &tables_on_,
                    .state = &state_};
  }

  // The finished plan's cost under the CostSource (computed on each call).
  double final_cost() const {
    require_done("placement_mdp.final_cost");
    return static_cast<double>(source_.final_cost(*task_, device_of_));
  }
  // 0 before the last step, then minus final_cost() (DreamShard §3.1).
  double reward() const { return done() ? -final_cost() : 0.0; }

  // The finished episode as a table-wise plan.
  plan to_plan() const {
    require_done("placement_mdp.to_plan");
    std::vector<std::size_t> assignment(device_of_.begin(), device_of_.end());
    return table_wise_plan(*task_, assignment);
  }

 private:
  static std::vector<std::uint32_t> order_from(const task& t, const CostSource& source) {
    std::vector<double> keys;
    source.order_keys(t, keys);
    if (keys.size() != t.tables.size()) {
      embplan::detail::fail("placement_mdp.order_keys.size", keys.size(),
                            "one key per table (" + std::to_string(t.tables.size()) + ")");
    }
    return descending_order(keys);
  }

  void require_done(std::string_view field) const {
    if (!done()) embplan::detail::fail(field, step_, "a finished episode");
  }
  void require_running(std::string_view field) const {
    if (done()) embplan::detail::fail(field, step_, "an unfinished episode (a table to place)");
  }

  // The legal devices for the current table; false (failure_ set) when none.
  bool update_legal() {
    legal_.clear();
    if (done()) return true;
    const std::uint32_t table = order_[step_];
    for (std::size_t d = 0; d < tables_on_.size(); ++d) {
      if (admits_with_bytes(rule_, *task_, state_, whole_table(*task_, table, d), bytes_[table]))
        legal_.push_back(static_cast<std::uint32_t>(d));
    }
    if (!legal_.empty()) return true;
    failure_ = no_device_for(*task_, state_, table, rule_);
    return false;
  }

  const task* task_ = nullptr;
  CostSource source_{};
  Constraint rule_{};
  std::vector<std::uint32_t> order_{};
  std::vector<std::uint64_t> bytes_{};  // shard_bytes of each whole table
  std::size_t step_ = 0;
  std::vector<std::uint32_t> legal_{};
  std::vector<std::uint32_t> device_of_{};
  std::vector<std::vector<std::uint32_t>> tables_on_{};
  placement_state state_{};
  std::string failure_{};
};

}  // namespace embplan::inline EMBPLAN_ABI::rl
