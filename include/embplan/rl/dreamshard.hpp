#pragma once
// DreamShard's trained policy as a value (NeurIPS'22 §3.3, Algorithm 2), and
// its estimated MDP's cost source (§3.2).
//
// rl::dreamshard_policy holds an nn::dreamshard_model (cost and RL branches,
// the authors' parameter names) and its metadata. Per task it computes the
// tables' features (dreamshard_task_features: the authors' per-task
// z-scores), orders the tables by the cost branch's single-table cost,
// descending and stable (Env.reset), and scores the legal devices of an MDP
// state with the policy network (rl/dreamshard_policy_net.hpp; the incremental
// dreamshard_policy_state, which runs the table MLPs once per task). As
// rl::policy_searcher<rl::dreamshard_policy> it places tables as the authors'
// sharders.py `dreamshard` does: argmax over the legal devices.
//
// Any device count works: the policy scores each device alone. The authors'
// value_net (Linear(64 x 4, 1), "we consider 4 devices") is never used by
// their RL loss nor by inference; it is loaded when a file has it, at
// whatever width, saved back unchanged, and never read.
//
// Files: one safetensors file holds both networks (state_dict names of the
// authors' Model, so their exported checkpoint loads, and a file saved here
// loads in PyTorch with strict=False for a non-256 value_net) and metadata:
// feature set, meter, pool half, hyperparameters ("embplan.hp.<name>"), the
// measured learning curve ("embplan.learning_curve", mean measured ms per
// iteration). A file of another feature set or architecture, or with a NaN
// weight, is refused with an embplan::error naming the field and the value.

#include <Eigen/Core>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/detail/metadata.hpp"
#include "embplan/cost/dreamshard_cost.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/dreamshard_cost_net.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/rl/dreamshard_policy_net.hpp"
#include "embplan/rl/placement_mdp.hpp"
#include "embplan/rl/policy_searcher.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

namespace detail {

// The overall head on the devices' tables (rows of `features` listed per
// device in placement order; an empty device is one zero row).
template <class = void>
double mdp_overall_head(const nn::dreamshard_model& m, const Eigen::Ref<const nn::matrix>& features,
                        const std::vector<std::vector<std::uint32_t>>& tables_on) {
  std::size_t rows = 0;
  for (const auto& v : tables_on)
    rows += v.empty() ? 1 : v.size();
  nn::matrix x(static_cast<Eigen::Index>(rows), features.cols());
  std::vector<std::int64_t> group(rows);
  Eigen::Index r = 0;
  for (std::size_t d = 0; d < tables_on.size(); ++d) {
    if (tables_on[d].empty()) {
      x.row(r).setZero();
      group[static_cast<std::size_t>(r++)] = static_cast<std::int64_t>(d);
    }
    for (const auto t : tables_on[d]) {
      x.row(r) = features.row(t);
      group[static_cast<std::size_t>(r++)] = static_cast<std::int64_t>(d);
    }
  }
  nn::dreamshard_cost_tape tape;
  const std::vector<std::int64_t> placement_of(tables_on.size(), 0);
  nn::dreamshard_cost_forward(m, x, group, placement_of, 1, tape);
  return static_cast<double>(tape.out[3](0, 0));
}

}  // namespace detail

// The estimated MDP's costs (DreamShard §3.2): tables ordered by the cost
// network's single-table cost, the finished plan priced by its overall head
// (tables on each device in task order; the training loop passes placement
// order through detail::mdp_overall_head).
struct dreamshard_estimate {
  dreamshard_cost cost{};

  std::string_view name() const noexcept { return "dreamshard_estimate"; }
  void order_keys(const task& t, std::vector<double>& keys) const {
    dreamshard_single_table_costs(cost.network(), dreamshard_task_features(t), keys);
  }
  double final_cost(const task& t, std::span<const std::uint32_t> device_of) const {
    std::vector<std::vector<std::uint32_t>> tables_on(t.cluster.size());
    for (std::size_t i = 0; i < device_of.size(); ++i)
      tables_on.at(device_of[i]).push_back(static_cast<std::uint32_t>(i));
    return detail::mdp_overall_head(cost.network(), dreamshard_task_features(t), tables_on);
  }
};
static_assert(cost_source<dreamshard_estimate>);

struct dreamshard_policy_metadata {
  dreamshard_cost_metadata cost{};                       // feature set, meter, pool half, ...
  std::map<std::string, std::string> hyperparameters{};  // name -> value, as trained
  std::vector<double> learning_curve{};                  // mean measured ms per iteration
};

// Per-task state of a dreamshard_policy: the task's features and the
// incremental policy state of the episode being played (it follows one MDP's
// episodes: a step index below the last one seen starts a new episode).
struct dreamshard_context {
  nn::matrix features{};
  dreamshard_policy_state fresh{};  // after reset: latents, nothing placed
  dreamshard_policy_state state{};
  dreamshard_policy_tape tape{};
  std::vector<std::int64_t> devices{};
  std::size_t applied = 0;  // steps of the current episode folded into `state`
};

class dreamshard_policy {
 public:
  using context = dreamshard_context;

  dreamshard_policy() = default;
  explicit dreamshard_policy(nn::dreamshard_model m, dreamshard_policy_metadata meta = {})
      : cost_(std::move(m), meta.cost)
      , meta_(std::make_shared<const dreamshard_policy_metadata>(std::move(meta))) {}

  // An untrained policy with PyTorch's default init from `seed`.
  static dreamshard_policy untrained(std::uint64_t seed) {
    return dreamshard_policy(nn::make_dreamshard_model(21, 4, seed));
  }

  std::string_view name() const noexcept { return "dreamshard"; }
  const nn::dreamshard_model& network() const { return cost_.network(); }
  const dreamshard_policy_metadata& metadata() const {
    if (!meta_)
      embplan::detail::fail("dreamshard_policy", "(empty)", "a policy (construct or load one)");
    return *meta_;
  }
  // The cost branch as a cost_model (shares the network).
  const dreamshard_cost& cost_model() const noexcept { return cost_; }
  // The estimated MDP's cost source on this policy's cost branch.
  dreamshard_estimate estimate() const { return dreamshard_estimate{cost_}; }

  void prepare(const task& t, context& ctx) const {
    dreamshard_task_features(t, ctx.features);
    ctx.fresh.reset(network(), ctx.features, static_cast<Eigen::Index>(t.cluster.size()));
    ctx.state = ctx.fresh;
    ctx.applied = 0;
  }

  // Env.reset: descending single-table cost, stable.
  void order(const context& ctx, std::vector<std::uint32_t>& out) const {
    std::vector<double> keys;
    dreamshard_single_table_costs(network(), ctx.features, keys);
    out = descending_order(keys);
  }

  // One logit per legal device of the state (view.legal order).
  void logits(const mdp_view& v, context& ctx, std::vector<double>& out) const {
    if (v.step < ctx.applied) {
      ctx.state = ctx.fresh;
      ctx.applied = 0;
    }
    if (ctx.state.tables() != static_cast<Eigen::Index>(v.order.size()) ||
        ctx.state.devices() != static_cast<Eigen::Index>(v.devices())) {
      embplan::detail::fail("dreamshard_policy.context", ctx.state.tables(),
                            "a context prepared for this task (" + std::to_string(v.order.size()) +
                                " tables, " + std::to_string(v.devices()) + " devices)");
    }
    for (; ctx.applied < v.step; ++ctx.applied) {
      const auto table = v.order[ctx.applied];
      ctx.state.place(static_cast<Eigen::Index>(table),
                      static_cast<Eigen::Index>(v.device_of[table]));
    }
    ctx.devices.assign(v.legal.begin(), v.legal.end());
    ctx.state.score(network(), ctx.devices, ctx.tape);
    out.resize(ctx.devices.size());
    for (std::size_t k = 0; k < out.size(); ++k)
      out[k] = static_cast<double>(ctx.tape.logits(static_cast<Eigen::Index>(k), 0));
  }

  // ------------------------------------------------------------ files
  void save(const std::filesystem::path& path) const {
    const auto& m = metadata();
    auto md = cost::detail::dreamshard_metadata_to(m.cost);
    md["embplan.policy"] = "dreamshard";
    for (const auto& [k, v] : m.hyperparameters)
      md["embplan.hp." + k] = v;
    md["embplan.learning_curve"] = detail::mdp_curve_text(m.learning_curve);
    nn::save_state_dict(path, network(), std::move(md));
  }

  static dreamshard_policy load(const std::filesystem::path& path) {
    const auto file = io::read_safetensors(path);
    const std::string source = path.string();
    // DreamShard's one network holds both branches: a cost model's file loads too.
    nn::require_file_kind(file, source, "a DreamShard policy",
                          {"a DreamShard policy", "a DreamShard cost model"});
    dreamshard_policy_metadata meta;
    meta.cost = cost::detail::dreamshard_metadata_from(file, source);
    detail::mdp_read_training_metadata(file.metadata, source, meta.hyperparameters,
                                       meta.learning_curve);
    return dreamshard_policy(cost::detail::dreamshard_model_from(file, source), std::move(meta));
  }

 private:
  dreamshard_cost cost_{};
  std::shared_ptr<const dreamshard_policy_metadata> meta_{};
};
static_assert(placement_policy<dreamshard_policy>);
static_assert(searcher<policy_searcher<dreamshard_policy>>);

}  // namespace embplan::inline EMBPLAN_ABI::rl
