#pragma once
// DreamShard's training, Algorithm 1 (NeurIPS'22 §3, App. B.4; the authors'
// training.py train / collect_data / train_cost / train_rl), as a library
// function. Per iteration it:
//  1. collects N_collect placements with the current policy (actions sampled
//     among the legal devices), each on a task drawn uniformly, and MEASURES
//     them with the caller's Meter (per-device forward, communication,
//     backward ms and the plan's overall ms) into the buffer;
//  2. updates the cost network N_cost times on N_batch placements and N_batch
//     devices drawn from the whole buffer, loss = the four heads' MSEs summed
//     (App. B.4.1 Eq. 1; train_cost);
//  3. updates the policy N_RL times on the ESTIMATED MDP: N_episode sampled
//     episodes of a task, REINFORCE with normalised rewards and an entropy
//     bonus (rl/reinforce.hpp; train_rl).
// One Adam (lr 5e-4, decayed linearly as the authors' LambdaLR) serves both
// networks; which parameters each step moves follows torch 1.13's
// zero_grad (fidelity notes: docs/design/dreamshard.md).
// Invariants: same seed, same policy, bit for bit (iteration i samples from
// rng(derive_seed(seed, i + 1)), the model starts on rng(derive_seed(seed,
// 0)); single-threaded, no global state). dreamshard_train_state is everything
// a run carries between iterations, so training on from a copy taken after
// iteration k, or from its checkpoint file (save_checkpoint /
// load_checkpoint), gives the same policy as an uninterrupted run.
// Design notes: docs/design/dreamshard.md.

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/concepts/constraint.hpp"
#include "embplan/concepts/cost_model.hpp"
#include "embplan/constraint/memory_capacity.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/dreamshard_cost.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/adam.hpp"
#include "embplan/nn/dreamshard_cost_net.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/rl/detail/checkpoint.hpp"
#include "embplan/rl/dreamshard.hpp"
#include "embplan/rl/dreamshard_policy_net.hpp"
#include "embplan/rl/placement_mdp.hpp"
#include "embplan/rl/ragged_softmax.hpp"
#include "embplan/rl/reinforce.hpp"
#include "embplan/rl/train_inputs.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

// How the policy head (policy_net: the linear layer that scores each device
// from its table and cost latents) starts. The rest of the model starts as
// PyTorch's default initialisation either way.
//  - zero (the default, embplan's): weights and bias 0, so the untrained
//    policy picks uniformly among the legal devices — a random placement —
//    and REINFORCE moves it from there (the head's gradient is not 0: the
//    devices' latents differ).
//  - torch: PyTorch's default, as the authors' Model. The untrained policy
//    then scores a device by a random projection of the SUM of its tables'
//    latents (non-negative after ReLU), which grows with the tables it holds;
//    where the projection favours the fuller device, every table goes to the
//    first device that got one. Its episodes are then all alike, the
//    normalised rewards carry no signal, and Algorithm 1 does not recover on
//    some seeds (the figures, for both heads: docs/design/dreamshard.md and
//    docs/results/dreamshard.md).
enum class policy_head_init : std::uint8_t { zero, torch };

inline std::string_view to_string(policy_head_init h) {
  return h == policy_head_init::zero ? "zero" : "torch";
}
inline policy_head_init parse_policy_head_init(std::string_view s, std::string_view field) {
  if (s == "zero") return policy_head_init::zero;
  if (s == "torch") return policy_head_init::torch;
  embplan::detail::fail(field, s, "\"zero\" or \"torch\"");
}

// Paper defaults (App. B.4.2; the authors' train.py), but for head_init.
struct dreamshard_train_options {
  std::int64_t iterations = 10;
  std::int64_t collect = 10;      // N_collect: placements measured per iteration
  std::int64_t cost_steps = 300;  // N_cost: cost-network updates per iteration
  std::int64_t cost_batch = 64;   // N_batch
  std::int64_t rl_steps = 10;     // N_RL: policy updates per iteration
  std::int64_t episodes = 10;     // N_episode: episodes per policy update
  double lr = 5e-4;
  double entropy_weight = 0.001;  // >= 0
  double max_grad_norm = 0.0;     // 0: no clipping (the authors'); else clip_grad_norm_
  std::uint64_t seed = 0;
  policy_head_init head_init = policy_head_init::zero;
};

// What a Meter returns for one placement: per device (forward, communication,
// backward) ms, and the plan's overall ms (the max over devices of their sum,
// for a meter that adds them).
struct dreamshard_measurement {
  std::vector<dreamshard_device_cost> devices{};
  double overall_ms = 0.0;
};

// A measured plan_cost as DreamShard's training targets: per device forward
// compute, backward all-to-all and backward compute; overall = the plan's
// max_ms() (see cost_model_meter for why the forward all-to-all is left out of
// the device targets). For a meter that yields plan_costs itself (the MPI plan
// meter, meter/mpi/plan_meter.hpp).
inline dreamshard_measurement dreamshard_measurement_of(const plan_cost& c) {
  dreamshard_measurement out;
  out.devices.reserve(c.devices.size());
  for (const auto& d : c.devices) {
    out.devices.push_back(dreamshard_device_cost{
        .fwd_ms = d.fwd_compute_ms, .comm_ms = d.bwd_comm_ms, .bwd_ms = d.bwd_compute_ms});
  }
  out.overall_ms = c.max_ms();
  return out;
}

// A Meter made of a cost model (the CPU meter, analytic_cost, ...): the plan
// priced by evaluate(). A device's communication target is its backward
// all-to-all only, as the authors' collect_data (communication_y = latency[:, 2]):
// the forward all-to-all includes the wait for the slowest device (cost/analytic.hpp),
// which depends on the other devices' tables and falls as this device's load
// rises, so a head that sees only this device's tables cannot fit it (§3.1,
// App. A.4 leave it out). The overall target keeps every term (max_ms()).
// Holds a pointer: the model must outlive the meter.
template <cost_model CostModel>
struct cost_model_meter {
  const CostModel* model = nullptr;

  dreamshard_measurement operator()(const task& t, const plan& p) const {
    if (model == nullptr) embplan::detail::fail("cost_model_meter.model", "(null)", "a cost model");
    return dreamshard_measurement_of(evaluate(t, p, *model));
  }
};

// One measured placement of the buffer.
struct dreamshard_record {
  std::uint32_t task = 0;                               // index into the training tasks
  std::vector<std::vector<std::uint32_t>> tables_on{};  // per device, in placement order
  dreamshard_measurement measured{};
};

struct dreamshard_progress {
  std::int64_t iteration = 0;     // the iteration just finished, from 0
  std::int64_t iterations = 0;    // of the schedule
  double mean_measured_ms = 0.0;  // mean overall ms of its N_collect measured placements
  double cost_loss = 0.0;         // mean loss of its cost-network updates
  double mean_reward = 0.0;       // mean estimated reward of its RL episodes
};

struct dreamshard_train_state {
  nn::dreamshard_model model{};
  nn::adam optimizer{};
  std::int64_t iteration = 0;  // iterations done
  std::vector<dreamshard_record> buffer{};
  std::vector<double> learning_curve{};  // mean measured ms per finished iteration
};

namespace detail {

inline void mdp_require_options(const dreamshard_train_options& o) {
  const auto positive = [](std::int64_t v, const char* field) {
    if (v <= 0) embplan::detail::fail(field, v, "a positive integer");
  };
  positive(o.iterations, "dreamshard_train_options.iterations");
  positive(o.collect, "dreamshard_train_options.collect");
  positive(o.cost_steps, "dreamshard_train_options.cost_steps");
  positive(o.cost_batch, "dreamshard_train_options.cost_batch");
  positive(o.rl_steps, "dreamshard_train_options.rl_steps");
  positive(o.episodes, "dreamshard_train_options.episodes");
  if (!(o.lr > 0.0) || !std::isfinite(o.lr)) {
    embplan::detail::fail("dreamshard_train_options.lr", o.lr, "a positive finite number");
  }
  if (!(o.entropy_weight >= 0.0) || !std::isfinite(o.entropy_weight)) {
    embplan::detail::fail("dreamshard_train_options.entropy_weight", o.entropy_weight,
                          "a finite number >= 0");
  }
  if (!(o.max_grad_norm >= 0.0) || !std::isfinite(o.max_grad_norm)) {
    embplan::detail::fail("dreamshard_train_options.max_grad_norm", o.max_grad_norm,
                          "a finite number >= 0 (0: no clipping)");
  }
  if (o.head_init != policy_head_init::zero && o.head_init != policy_head_init::torch) {
    embplan::detail::fail("dreamshard_train_options.head_init", static_cast<int>(o.head_init),
                          "policy_head_init::zero or policy_head_init::torch");
  }
}

// The parameters each loss reaches (see the file comment).
enum class mdp_branch : std::uint8_t { cost, policy };

inline bool mdp_in_branch(std::string_view name, mdp_branch branch) {
  constexpr std::string_view cost[] = {"table_fc_", "forward_fc_", "communication_fc_",
                                       "backward_fc_", "overall_fc_"};
  constexpr std::string_view policy[] = {"rl_table_fc_", "cost_fc_", "policy_net."};
  const auto starts = [&](std::span<const std::string_view> prefixes) {
    for (const auto p : prefixes)
      if (name.starts_with(p)) return true;
    return false;
  };
  return branch == mdp_branch::cost ? starts(cost) : starts(policy);
}

// One Adam step after a backward of `branch`'s loss: a parameter has a
// gradient (PyTorch: .grad is not None) when this backward reached it or an
// earlier one did (zero_grad keeps it as zeros).
template <class = void>
void mdp_adam_step(nn::dreamshard_model& m, const nn::dreamshard_model& grad, nn::adam& opt,
                   mdp_branch branch) {
  const auto names = std::as_const(m).named_parameters(std::string_view{});
  const auto& counts = opt.parameter_steps();
  opt.step(m, grad, [&](std::string_view name) {
    if (mdp_in_branch(name, branch)) return true;
    for (std::size_t i = 0; i < names.size() && i < counts.size(); ++i)
      if (names[i].first == name) return counts[i] > 0;
    return false;
  });
}

// Scratch of sampled episodes on one task.
struct mdp_episode_scratch {
  dreamshard_policy_state fresh{}, state{};
  dreamshard_policy_tape tape{};
  std::vector<std::int64_t> devices{}, group{}, pick{};
};

// One episode of the policy `m` on mdp (actions sampled from the softmax over
// the legal devices); actions[k] = device of step k. Throws when a table fits
// nowhere (the MDP's message).
template <class Mdp>
void mdp_sample_episode(const nn::dreamshard_model& m, Mdp& mdp, mdp_episode_scratch& s, rng& gen,
                        std::vector<std::uint32_t>& actions) {
  mdp.reset();
  s.state = s.fresh;
  actions.clear();
  while (!mdp.done()) {
    s.devices.assign(mdp.legal().begin(), mdp.legal().end());
    s.state.score(m, s.devices, s.tape);
    s.group.assign(s.devices.size(), 0);
    ragged_sample(s.tape.logits, s.group, 1, gen, s.pick);
    const auto device = static_cast<std::uint32_t>(s.devices[static_cast<std::size_t>(s.pick[0])]);
    s.state.place(static_cast<Eigen::Index>(mdp.table()), static_cast<Eigen::Index>(device));
    actions.push_back(device);
    mdp.step(device);
  }
}

inline std::vector<std::uint32_t> mdp_order(const nn::dreamshard_model& m,
                                            const nn::matrix& features) {
  std::vector<double> keys;
  dreamshard_single_table_costs(m, features, keys);
  return descending_order(keys);
}

inline void mdp_require_measurement(const dreamshard_measurement& x, const task& t,
                                    std::size_t record) {
  const std::string at = embplan::detail::path("dreamshard_train.measurement", record);
  if (x.devices.size() != t.cluster.size()) {
    embplan::detail::fail(at + ".devices.size", x.devices.size(),
                          "one entry per device (" + std::to_string(t.cluster.size()) + ")");
  }
  for (std::size_t d = 0; d < x.devices.size(); ++d) {
    const auto& c = x.devices[d];
    if (!std::isfinite(c.fwd_ms) || !std::isfinite(c.comm_ms) || !std::isfinite(c.bwd_ms)) {
      embplan::detail::fail(embplan::detail::path(at + ".devices", d),
                            std::to_string(c.fwd_ms) + ", " + std::to_string(c.comm_ms) + ", " +
                                std::to_string(c.bwd_ms),
                            "finite forward, communication and backward ms");
    }
  }
  if (!std::isfinite(x.overall_ms)) {
    embplan::detail::fail(at + ".overall_ms", x.overall_ms, "a finite number");
  }
}

// Appends the rows of one device (one zero row when empty) under `group_id`.
inline void mdp_append_device(const nn::matrix& features, const std::vector<std::uint32_t>& tables,
                              std::vector<float>& rows, std::vector<std::int64_t>& group,
                              std::int64_t group_id) {
  const auto f = static_cast<std::size_t>(features.cols());
  if (tables.empty()) {
    rows.insert(rows.end(), f, 0.0f);
    group.push_back(group_id);
  }
  for (const auto t : tables) {
    const float* p = features.row(static_cast<Eigen::Index>(t)).data();
    rows.insert(rows.end(), p, p + f);
    group.push_back(group_id);
  }
}

// train_cost's step: N_batch placements for the overall head, N_batch devices
// for the three device heads, drawn with replacement; the four MSEs summed.
template <class = void>
double mdp_cost_step(dreamshard_train_state& st, std::span<const nn::matrix> features,
                     std::span<const std::pair<std::uint32_t, std::uint32_t>> kernels,
                     std::int64_t batch, const reinforce_options& clip, rng& gen,
                     nn::dreamshard_model& grad, nn::dreamshard_cost_tape& tape) {
  const auto b = static_cast<std::size_t>(batch);
  std::vector<float> rows;
  std::vector<std::int64_t> group, placement_of;
  std::vector<float> overall_y(b);
  std::vector<std::uint32_t> overall_pick(b), kernel_pick(b);
  for (std::size_t i = 0; i < b; ++i)
    overall_pick[i] = static_cast<std::uint32_t>(gen.below(st.buffer.size()));
  for (std::size_t i = 0; i < b; ++i)
    kernel_pick[i] = static_cast<std::uint32_t>(gen.below(kernels.size()));
  std::int64_t device = 0;
  for (std::size_t i = 0; i < b; ++i) {
    const auto& rec = st.buffer[overall_pick[i]];
    for (const auto& tables : rec.tables_on) {
      mdp_append_device(features[rec.task], tables, rows, group, device++);
      placement_of.push_back(static_cast<std::int64_t>(i));
    }
    overall_y[i] = static_cast<float>(rec.measured.overall_ms);
  }
  const std::int64_t overall_devices = device;
  nn::matrix device_y(static_cast<Eigen::Index>(b), 3);
  for (std::size_t i = 0; i < b; ++i) {
    const auto [r, d] = kernels[kernel_pick[i]];
    const auto& rec = st.buffer[r];
    mdp_append_device(features[rec.task], rec.tables_on[d], rows, group, device++);
    placement_of.push_back(static_cast<std::int64_t>(b + i));  // alone: no overall loss
    const auto& y = rec.measured.devices[d];
    device_y(static_cast<Eigen::Index>(i), 0) = static_cast<float>(y.fwd_ms);
    device_y(static_cast<Eigen::Index>(i), 1) = static_cast<float>(y.comm_ms);
    device_y(static_cast<Eigen::Index>(i), 2) = static_cast<float>(y.bwd_ms);
  }
  const Eigen::Index f = features[0].cols();
  const Eigen::Map<const nn::matrix> x(rows.data(), static_cast<Eigen::Index>(group.size()), f);
  nn::dreamshard_cost_forward(st.model, x, group, placement_of, static_cast<Eigen::Index>(2 * b),
                              tape);
  // MSE means over the batch, as the authors' ((y - pred) ** 2).mean().
  nn::matrix ddev = nn::matrix::Zero(device, 3);
  nn::matrix dall = nn::matrix::Zero(static_cast<Eigen::Index>(2 * b), 1);
  const auto inv = static_cast<float>(1.0 / static_cast<double>(b));
  double loss = 0.0;
  for (std::size_t i = 0; i < b; ++i) {
    const auto p = static_cast<Eigen::Index>(i);
    const float e = tape.out[3](p, 0) - overall_y[i];
    loss += static_cast<double>(e) * e / static_cast<double>(b);
    dall(p, 0) = 2.0f * e * inv;
    const auto row = static_cast<Eigen::Index>(overall_devices) + p;
    for (Eigen::Index h = 0; h < 3; ++h) {
      const float eh = tape.device_costs(row, h) - device_y(p, h);
      loss += static_cast<double>(eh) * eh / static_cast<double>(b);
      ddev(row, h) = 2.0f * eh * inv;
    }
  }
  nn::set_zero(grad);
  nn::dreamshard_cost_backward(st.model, x, tape, ddev, dall, grad);
  clip_policy_gradient(grad, clip);
  mdp_adam_step(st.model, grad, st.optimizer, mdp_branch::cost);
  return loss;
}

}  // namespace detail

// A fresh run: the model at PyTorch's default init from the seed, Adam at o.lr.
inline dreamshard_train_state dreamshard_train_start(const dreamshard_train_options& o) {
  detail::mdp_require_options(o);
  dreamshard_train_state st;
  st.model = nn::make_dreamshard_model(21, 4, derive_seed(o.seed, 0));
  if (o.head_init == policy_head_init::zero) {
    st.model.policy_net.weight.setZero();
    st.model.policy_net.bias.setZero();
  }
  st.optimizer = nn::adam(nn::adam_options{.lr = o.lr});
  return st;
}

// Runs Algorithm 1 from st.iteration up to o.iterations (or max_iterations of
// them when > 0). Meter: (const task&, const plan&) -> dreamshard_measurement
// (cost_model_meter wraps a cost model). Legal devices are `rule`'s. A task
// no legal action can complete throws the MDP's error (table, free memory).
template <class Meter, constraint Constraint = memory_capacity>
void dreamshard_train(std::span<const task> tasks, const Meter& meter,
                      const dreamshard_train_options& o, dreamshard_train_state& st,
                      const Constraint& rule = {},
                      const std::function<void(const dreamshard_progress&)>& progress = {},
                      std::int64_t max_iterations = 0) {
  detail::mdp_require_options(o);
  if (tasks.empty()) embplan::detail::fail("dreamshard_train.tasks.size", 0, "at least one task");
  if (max_iterations < 0) {
    embplan::detail::fail("dreamshard_train.max_iterations", max_iterations,
                          "a non-negative count (0: the rest of the schedule)");
  }
  if (st.iteration < 0 || st.iteration > o.iterations) {
    embplan::detail::fail("dreamshard_train_state.iteration", st.iteration,
                          "an iteration in [0, " + std::to_string(o.iterations) + "]");
  }
  std::vector<nn::matrix> features(tasks.size());
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    validate(tasks[i], embplan::detail::path("dreamshard_train.tasks", i));
    dreamshard_task_features(tasks[i], features[i]);
  }
  cost::detail::require_dreamshard_model(st.model, "dreamshard_train_state.model");
  for (std::size_t r = 0; r < st.buffer.size(); ++r) {
    const auto& rec = st.buffer[r];
    const std::string at = embplan::detail::path("dreamshard_train_state.buffer", r);
    if (rec.task >= tasks.size()) {
      embplan::detail::fail(at + ".task", rec.task,
                            "a task index below " + std::to_string(tasks.size()));
    }
    const task& t = tasks[rec.task];
    if (rec.tables_on.size() != t.cluster.size()) {
      embplan::detail::fail(at + ".tables_on.size", rec.tables_on.size(),
                            "the device count of task " + std::to_string(rec.task));
    }
    for (const auto& on : rec.tables_on) {
      for (const auto i : on) {
        if (i >= t.tables.size()) {
          embplan::detail::fail(at + ".tables_on", i,
                                "table indices of task " + std::to_string(rec.task));
        }
      }
    }
    detail::mdp_require_measurement(rec.measured, t, r);
  }
  const reinforce_options ro{.entropy_weight = o.entropy_weight, .max_grad_norm = o.max_grad_norm};
  nn::dreamshard_model grad = nn::zeros_like(st.model);
  nn::dreamshard_cost_tape cost_tape;
  detail::mdp_episode_scratch scratch;
  dreamshard_policy_tape policy_tape;
  std::vector<std::uint32_t> actions;
  const std::int64_t last =
      max_iterations > 0 ? std::min(o.iterations, st.iteration + max_iterations) : o.iterations;

  for (; st.iteration < last; ++st.iteration) {
    const std::int64_t it = st.iteration;
    rng gen(derive_seed(o.seed, static_cast<std::uint64_t>(it) + 1));
    // LambdaLR(lr_lambda = 1 - epoch / num_iterations): group["lr"] = base_lr * lambda, in double.
    st.optimizer.set_lr(o.lr * (1.0 - static_cast<double>(it) / static_cast<double>(o.iterations)));
    dreamshard_progress report{.iteration = it, .iterations = o.iterations};

    // 1. Collect N_collect measured placements with the current policy.
    for (std::int64_t c = 0; c < o.collect; ++c) {
      const auto ti = static_cast<std::uint32_t>(gen.below(tasks.size()));
      const task& t = tasks[ti];
      placement_mdp mdp(t, no_cost_source{}, rule, detail::mdp_order(st.model, features[ti]));
      scratch.fresh.reset(st.model, features[ti], static_cast<Eigen::Index>(t.cluster.size()));
      detail::mdp_sample_episode(st.model, mdp, scratch, gen, actions);
      dreamshard_record rec;
      rec.task = ti;
      rec.tables_on.resize(t.cluster.size());
      for (std::size_t d = 0; d < t.cluster.size(); ++d)
        rec.tables_on[d].assign(mdp.tables_on(d).begin(), mdp.tables_on(d).end());
      rec.measured = meter(t, mdp.to_plan());
      detail::mdp_require_measurement(rec.measured, t, st.buffer.size());
      report.mean_measured_ms += rec.measured.overall_ms / static_cast<double>(o.collect);
      st.buffer.push_back(std::move(rec));
    }

    // 2. N_cost cost-network updates on the whole buffer.
    std::vector<std::pair<std::uint32_t, std::uint32_t>> kernels;
    for (std::size_t r = 0; r < st.buffer.size(); ++r)
      for (std::size_t d = 0; d < st.buffer[r].tables_on.size(); ++d)
        kernels.emplace_back(static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(d));
    for (std::int64_t s = 0; s < o.cost_steps; ++s) {
      report.cost_loss +=
          detail::mdp_cost_step(st, features, kernels, o.cost_batch, ro, gen, grad, cost_tape) /
          static_cast<double>(o.cost_steps);
    }

    // 3. N_RL policy updates on the estimated MDP.
    for (std::int64_t r = 0; r < o.rl_steps; ++r) {
      const auto ti = static_cast<std::uint32_t>(gen.below(tasks.size()));
      const task& t = tasks[ti];
      const nn::matrix& x = features[ti];
      const auto devices = t.cluster.size();
      placement_mdp mdp(t, no_cost_source{}, rule, detail::mdp_order(st.model, x));
      scratch.fresh.reset(st.model, x, static_cast<Eigen::Index>(devices));
      dreamshard_obs_builder builder(x.cols());
      std::vector<std::int64_t> all_devices(devices);
      for (std::size_t d = 0; d < devices; ++d)
        all_devices[d] = static_cast<std::int64_t>(d);
      std::vector<std::int64_t> chosen;
      std::vector<double> returns;
      std::vector<std::vector<std::int64_t>> replay(devices);
      for (std::int64_t e = 0; e < o.episodes; ++e) {
        detail::mdp_sample_episode(st.model, mdp, scratch, gen, actions);
        std::vector<std::vector<std::uint32_t>> tables_on(devices);
        for (std::size_t d = 0; d < devices; ++d)
          tables_on[d].assign(mdp.tables_on(d).begin(), mdp.tables_on(d).end());
        const double reward = -detail::mdp_overall_head(st.model, x, tables_on);
        report.mean_reward += reward / static_cast<double>(o.rl_steps * o.episodes);
        for (auto& v : replay)
          v.clear();
        for (std::size_t k = 0; k < actions.size(); ++k) {
          const auto group = builder.add(x, replay, all_devices);
          chosen.push_back(group * static_cast<std::int64_t>(devices) + actions[k]);
          returns.push_back(reward);
          replay[actions[k]].push_back(static_cast<std::int64_t>(mdp.order()[k]));
        }
      }
      dreamshard_obs_batch batch;
      builder.build(batch);
      dreamshard_policy_forward(st.model, batch, policy_tape);
      nn::matrix dlogits;
      reinforce_loss(policy_tape.logits, batch.group_of, batch.groups, chosen, returns, ro,
                     &dlogits);
      nn::set_zero(grad);
      dreamshard_policy_backward(st.model, batch, policy_tape, dlogits, grad);
      clip_policy_gradient(grad, ro);
      detail::mdp_adam_step(st.model, grad, st.optimizer, detail::mdp_branch::policy);
    }

    st.learning_curve.push_back(report.mean_measured_ms);
    if (progress) progress(report);
  }
}

// The options of a run and its iterations done, as text (policy and
// checkpoint metadata).
inline std::map<std::string, std::string> dreamshard_hyperparameters(
    const dreamshard_train_options& o, std::int64_t iterations_done) {
  std::map<std::string, std::string> hp;
  hp["iterations"] = std::to_string(o.iterations);
  hp["iterations_done"] = std::to_string(iterations_done);
  hp["collect"] = std::to_string(o.collect);
  hp["cost_steps"] = std::to_string(o.cost_steps);
  hp["cost_batch"] = std::to_string(o.cost_batch);
  hp["rl_steps"] = std::to_string(o.rl_steps);
  hp["episodes"] = std::to_string(o.episodes);
  hp["lr"] = detail::mdp_number_text(o.lr);
  hp["entropy_weight"] = detail::mdp_number_text(o.entropy_weight);
  hp["max_grad_norm"] = detail::mdp_number_text(o.max_grad_norm);
  hp["seed"] = std::to_string(o.seed);
  hp["head_init"] = std::string(to_string(o.head_init));
  return hp;
}

// The trained policy of a run, with its hyperparameters and learning curve in
// the metadata (`cost` says feature set, meter, pool half, ...).
inline dreamshard_policy dreamshard_trained_policy(const dreamshard_train_state& st,
                                                   const dreamshard_train_options& o,
                                                   dreamshard_cost_metadata cost = {}) {
  dreamshard_policy_metadata meta;
  meta.cost = std::move(cost);
  meta.hyperparameters = dreamshard_hyperparameters(o, st.iteration);
  meta.learning_curve = st.learning_curve;
  return dreamshard_policy(st.model, std::move(meta));
}

// ------------------------------------------------------------ checkpoints
// One safetensors file: the model's tensors; Adam's moments as F32 tensors
// "adam.exp_avg.<parameter>" and "adam.exp_avg_sq.<parameter>" (none before
// the first step); and metadata "embplan.train.*" holding the options it ran
// with, the iterations done, the learning curve, the buffer and Adam's step
// counts ("adam_steps", "adam_parameter_steps"; JSON, doubles round-trip
// exactly), and the caller's `inputs` ("inputs", rl/train_inputs.hpp). A
// file of the model alone (nn::load_state_dict, dreamshard_cost) is what
// dreamshard_trained_policy(...).save writes, not this.
inline void save_checkpoint(const std::filesystem::path& path, const dreamshard_train_state& st,
                            const dreamshard_train_options& o, const train_inputs& inputs = {}) {
  auto md = cost::detail::dreamshard_metadata_to(dreamshard_cost_metadata{});
  const auto hp = dreamshard_hyperparameters(o, st.iteration);
  for (const auto& [k, v] : hp)
    md["embplan.train." + k] = v;
  nlohmann::json curve = st.learning_curve;
  md["embplan.train.learning_curve"] = curve.dump();
  nlohmann::json buffer = nlohmann::json::array();
  for (const auto& r : st.buffer) {
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : r.measured.devices)
      devices.push_back({d.fwd_ms, d.comm_ms, d.bwd_ms});
    buffer.push_back({{"task", r.task},
                      {"tables_on", r.tables_on},
                      {"devices", devices},
                      {"overall_ms", r.measured.overall_ms}});
  }
  md["embplan.train.buffer"] = buffer.dump();
  detail::put_train_inputs(md, inputs);
  const nn::adam_state adam = st.optimizer.state();
  auto file = nn::state_dict(st.model, {}, std::move(md));
  detail::mdp_put_adam_tensors(file, st.model, adam, "dreamshard_train_state.optimizer");
  io::write_safetensors(path, file);
}

// A state saved by save_checkpoint, to train on with the same options `o`
// and `inputs` (every option and input the file records must match; a
// mismatch names the option or input and both values).
inline dreamshard_train_state load_checkpoint(const std::filesystem::path& path,
                                              const dreamshard_train_options& o,
                                              const train_inputs& inputs = {}) {
  detail::mdp_require_options(o);
  auto file = io::read_safetensors(path);
  const std::string source = path.string();
  const auto get = [&](const std::string& key) -> const std::string& {
    return cost::detail::require_key(file.metadata, source, "embplan.train." + key,
                                     "a checkpoint written by rl::save_checkpoint");
  };
  // The inputs first: a resume with another tasks file or meter is named as
  // such before any option is compared.
  detail::require_train_inputs(file.metadata, source, inputs);
  dreamshard_train_state st;
  st.iteration = cost::detail::parse_number<std::int64_t>(
      get("iterations_done"), source + ": metadata.embplan.train.iterations_done");
  // Checkpoints from before the option started the head as PyTorch does.
  file.metadata.try_emplace("embplan.train.head_init", to_string(policy_head_init::torch));
  const auto expected = dreamshard_hyperparameters(o, st.iteration);
  for (const auto& [k, v] : expected) {
    if (k == "iterations_done") continue;
    if (get(k) != v) {
      embplan::detail::fail(source + ": metadata.embplan.train." + k, get(k),
                            "\"" + v + "\", as dreamshard_train_options." + k + " now");
    }
  }
  if (st.iteration < 0 || st.iteration > o.iterations) {
    embplan::detail::fail(source + ": metadata.embplan.train.iterations_done", st.iteration,
                          "an iteration in [0, " + std::to_string(o.iterations) + "]");
  }
  try {
    st.learning_curve =
        io::parse_json(get("learning_curve"), source + ": metadata.embplan.train.learning_curve")
            .get<std::vector<double>>();
    for (const auto& r :
         io::parse_json(get("buffer"), source + ": metadata.embplan.train.buffer")) {
      dreamshard_record rec;
      rec.task = r.at("task").get<std::uint32_t>();
      rec.tables_on = r.at("tables_on").get<std::vector<std::vector<std::uint32_t>>>();
      for (const auto& d : r.at("devices")) {
        rec.measured.devices.push_back(dreamshard_device_cost{.fwd_ms = d.at(0).get<double>(),
                                                              .comm_ms = d.at(1).get<double>(),
                                                              .bwd_ms = d.at(2).get<double>()});
      }
      rec.measured.overall_ms = r.at("overall_ms").get<double>();
      if (rec.measured.devices.size() != rec.tables_on.size()) {
        embplan::detail::fail(source + ": metadata.embplan.train.buffer",
                              rec.measured.devices.size(),
                              "one measurement per device of each record");
      }
      st.buffer.push_back(std::move(rec));
    }
  } catch (const nlohmann::json::exception& e) {
    embplan::detail::fail(source + ": metadata.embplan.train.buffer", std::string(e.what()),
                          "the JSON rl::save_checkpoint writes");
  }
  if (static_cast<std::int64_t>(st.learning_curve.size()) != st.iteration) {
    embplan::detail::fail(source + ": metadata.embplan.train.learning_curve",
                          st.learning_curve.size(),
                          "one entry per iteration done (" + std::to_string(st.iteration) + ")");
  }
  const auto adam_tensors = detail::mdp_take_adam_tensors(file);
  const auto metadata = file.metadata;
  st.model = cost::detail::dreamshard_model_from(std::move(file), source);
  cost::detail::require_dreamshard_model(st.model, source);
  st.optimizer = nn::adam(nn::adam_options{.lr = o.lr});
  try {
    st.optimizer.load_state(detail::mdp_adam_state_from(adam_tensors, metadata, st.model, source));
  } catch (const error& e) {
    throw error(source + ": Adam's state: " + e.what());
  }
  return st;
}

}  // namespace embplan::inline EMBPLAN_ABI::rl
