#pragma once
// AutoShard's trained policy as a value (KDD'22 §4.2-4.3; the authors'
// bench.py GymWrapper and sharders.py inference), usable as
// rl::policy_searcher<rl::autoshard_policy> and as the actors' policy in
// training (rl/autoshard_train.hpp).
// The MDP as the authors build it (§4.3): tables as their 21 features (dim,
// rows and pooling factor z-scored with the TRAINING tables' statistics,
// autoshard_feature_stats, kept in the policy file; size in GiB; bins raw),
// placed in descending order of the cost head's single-table cost (stable);
// the state the upcoming table and the share of tables already placed; the
// actions the shards (devices), each its tables plus one all-zero row and
// [the cost head's prediction, its size in GiB]; reward 0 until the last step
// (autoshard_train.hpp measures the plan).
// Inference is incremental, O(tables x devices) per task: each table's latent
// once, each shard's sums kept, the policy MLP's first layer split by its
// input blocks — the same function as rl::autoshard_inference in another
// order (float rounding differs in the last bits). The per-step layers run on
// nn's packed micro-kernels (nn/detail/packed_layers.hpp); a step allocates
// nothing.
// Which devices are scored: the MDP's legal devices (the planner's
// Constraint), so a plan it returns is valid, where the authors' argmax over
// every device may overflow memory.
// A context may record the episode it plays (autoshard_context::record) in
// the learner's format (rl::autoshard_episode): the actors' trajectories.
// Design notes: docs/design/autoshard.md.

#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <cmath>
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
#include "embplan/core/random.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/detail/metadata.hpp"
#include "embplan/cost/features.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/activation.hpp"
#include "embplan/nn/detail/packed_kernels_x86.hpp"
#include "embplan/nn/detail/packed_layers.hpp"
#include "embplan/nn/detail/packed_mlp.hpp"
#include "embplan/nn/linear.hpp"
#include "embplan/nn/lstm.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/nn/simd_kernel.hpp"
#include "embplan/rl/autoshard_net.hpp"
#include "embplan/rl/placement_mdp.hpp"
#include "embplan/rl/policy_searcher.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

inline constexpr Eigen::Index autoshard_table_features = 21;
inline constexpr Eigen::Index autoshard_state_features = 1;   // share of tables placed
inline constexpr Eigen::Index autoshard_action_features = 2;  // predicted cost, size (GiB)

// An autoshard_net with PyTorch's default init, layer by layer in the
// declaration order of the authors' Net, from rng(seed).
inline nn::autoshard_net make_autoshard_net(std::uint64_t seed) {
  nn::autoshard_net n(autoshard_table_features, autoshard_state_features,
                      autoshard_action_features);
  rng gen(seed);
  const auto init = [&](nn::linear& l) { l = nn::linear(l.in_features(), l.out_features(), gen); };
  init(n.t_fc_0);
  init(n.t_fc_1);
  init(n.s_fc_0);
  init(n.a_fc_0);
  n.core = nn::lstm(64, 64, 2, gen);
  for (nn::linear* l :
       {&n.p_fc_0, &n.p_fc_1, &n.p_fc_2, &n.p_fc_3, &n.b_fc_0, &n.b_fc_1, &n.c_fc_0, &n.c_fc_1})
    init(*l);
  return n;
}

// z-score statistics of dim, rows and pooling factor over the training
// tables (the authors' GymWrapper: numpy mean and population std over every
// table of every training task; a zero std only subtracts the mean).
struct autoshard_feature_stats {
  std::array<double, 3> mean{0.0, 0.0, 0.0};
  std::array<double, 3> stdev{1.0, 1.0, 1.0};

  static constexpr std::array<const char*, 3> names{"dim", "rows", "pooling_factor"};

  static autoshard_feature_stats of(std::span<const task> tasks) {
    autoshard_feature_stats s;
    std::array<double, 3> sum{}, sq{};
    double n = 0.0;
    for (const auto& t : tasks) {
      for (const auto& tab : t.tables) {
        const std::array<double, 3> x{static_cast<double>(tab.dim), static_cast<double>(tab.rows),
                                      tab.pooling_factor};
        for (std::size_t k = 0; k < 3; ++k)
          sum[k] += x[k];
        n += 1.0;
      }
    }
    if (n == 0.0) embplan::detail::fail("autoshard_feature_stats.tables", 0, "at least one table");
    for (std::size_t k = 0; k < 3; ++k)
      s.mean[k] = sum[k] / n;
    for (const auto& t : tasks) {
      for (const auto& tab : t.tables) {
        const std::array<double, 3> x{static_cast<double>(tab.dim), static_cast<double>(tab.rows),
                                      tab.pooling_factor};
        for (std::size_t k = 0; k < 3; ++k)
          sq[k] += (x[k] - s.mean[k]) * (x[k] - s.mean[k]);
      }
    }
    for (std::size_t k = 0; k < 3; ++k)
      s.stdev[k] = std::sqrt(sq[k] / n);
    return s;
  }

  void validate() const {
    for (std::size_t k = 0; k < 3; ++k) {
      if (!std::isfinite(mean[k])) {
        embplan::detail::fail(std::string("autoshard_feature_stats.mean.") + names[k], mean[k],
                              "a finite number");
      }
      if (!std::isfinite(stdev[k]) || stdev[k] < 0.0) {
        embplan::detail::fail(std::string("autoshard_feature_stats.stdev.") + names[k], stdev[k],
                              "a finite number >= 0");
      }
    }
  }
};

// The tables' features [tables, 21] of the MDP (see the header comment).
inline void autoshard_task_features(const task& t, const autoshard_feature_stats& stats,
                                    nn::matrix& out) {
  stats.validate();
  out.resize(static_cast<Eigen::Index>(t.tables.size()), autoshard_table_features);
  std::array<float, 21> row{};
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    table_features(t.tables[i], feature_set::embplan21, row);
    for (std::size_t k = 0; k < 3; ++k) {
      const double centred = static_cast<double>(row[k]) - stats.mean[k];
      row[k] = static_cast<float>(stats.stdev[k] == 0.0 ? centred : centred / stats.stdev[k]);
    }
    row[3] = static_cast<float>(static_cast<double>(table_bytes(t.tables[i])) /
                                (1024.0 * 1024.0 * 1024.0));
    for (Eigen::Index k = 0; k < autoshard_table_features; ++k)
      out(static_cast<Eigen::Index>(i), k) = row[static_cast<std::size_t>(k)];
  }
}

namespace detail {

// A one-output layer as nn's dot kernel takes it: w [k_pad] (the input
// layer's padded width, zeros past the weights), then + bias.
struct autoshard_packed_dot {
  std::size_t w = 0, k_pad = 0;
  float bias = 0.0f;
};

// The layers a step runs, packed once per policy (nn/detail/packed_layers.hpp:
// weights [in][out_pad] in one cache-aligned buffer). p_fc_0 is split by its
// input blocks (h, u, h*u: see the file comment), the h block carrying
// p_fc_0's bias; an LSTM layer is one layer over [x, h_prev] with weights
// [W_ih | W_hh] and bias b_ih + b_hh.
struct autoshard_packed_net {
  nn::simd_kernel kernel = nn::simd_kernel::scalar;
  nn::detail::packed_storage data{};
  nn::detail::packed_layer h_block{}, u_block{}, hu_block{}, p_fc_1{}, p_fc_2{};
  autoshard_packed_dot p_fc_3{};
  std::vector<nn::detail::packed_layer> core{};
  nn::detail::packed_layer s_fc_0{}, b_fc_0{}, c_fc_0{}, a_fc_0{};
  autoshard_packed_dot b_fc_1{}, c_fc_1{};

  nn::detail::layer_view view(const nn::detail::packed_layer& l) const noexcept {
    return l.view(data);
  }
  template <class Ops>
  float dot(const autoshard_packed_dot& d, const float* in) const {
    return Ops::dot(in, data.data() + d.w, d.k_pad) + d.bias;
  }
};

inline nn::detail::packed_layer pack_autoshard_block(nn::detail::packed_storage& data,
                                                     const Eigen::Ref<const nn::matrix>& weight,
                                                     const Eigen::Ref<const nn::matrix>& bias,
                                                     bool relu) {
  nn::linear l;
  l.weight = weight;
  l.bias = bias;
  return nn::detail::pack_linear(data, l, relu);
}

// `l` (one output) reading the outputs of `input`, a packed layer.
inline autoshard_packed_dot pack_autoshard_dot(nn::detail::packed_storage& data,
                                               const nn::linear& l,
                                               const nn::detail::packed_layer& input) {
  autoshard_packed_dot d{.w = nn::detail::reserve_packed(data, input.n_pad),
                         .k_pad = input.n_pad,
                         .bias = l.bias(0, 0)};
  for (Eigen::Index i = 0; i < l.in_features(); ++i)
    data[d.w + static_cast<std::size_t>(i)] = l.weight(0, i);
  return d;
}

// n's step layers on the widest kernel this CPU runs (n's shapes checked by
// the caller: autoshard_inference's constructor).
inline autoshard_packed_net pack_autoshard_net(const nn::autoshard_net& n) {
  autoshard_packed_net p;
  p.kernel = nn::detail::resolve_simd_kernel(nn::simd_kernel::automatic,
                                             nn::simd_kernel_supported(nn::simd_kernel::avx2),
                                             nn::simd_kernel_supported(nn::simd_kernel::avx512));
  auto& d = p.data;
  const Eigen::Index width = n.core.hidden_size();
  const auto& w0 = n.p_fc_0.weight;  // [128, 192]: [W_h | W_u | W_p]
  const nn::matrix no_bias = nn::matrix::Zero(1, w0.rows());
  p.h_block = pack_autoshard_block(d, w0.leftCols(width), n.p_fc_0.bias, false);
  p.u_block = pack_autoshard_block(d, w0.middleCols(width, width), no_bias, false);
  p.hu_block = pack_autoshard_block(d, w0.rightCols(width), no_bias, false);
  p.p_fc_1 = nn::detail::pack_linear(d, n.p_fc_1, true);
  p.p_fc_2 = nn::detail::pack_linear(d, n.p_fc_2, true);
  p.p_fc_3 = pack_autoshard_dot(d, n.p_fc_3, p.p_fc_2);
  for (const auto& l : n.core.layers) {
    nn::matrix w(l.weight_ih.rows(), l.weight_ih.cols() + l.weight_hh.cols());
    w << l.weight_ih, l.weight_hh;
    p.core.push_back(pack_autoshard_block(d, w, l.bias_ih + l.bias_hh, false));
  }
  p.s_fc_0 = nn::detail::pack_linear(d, n.s_fc_0, true);
  p.b_fc_0 = nn::detail::pack_linear(d, n.b_fc_0, true);
  p.b_fc_1 = pack_autoshard_dot(d, n.b_fc_1, p.b_fc_0);
  p.c_fc_0 = nn::detail::pack_linear(d, n.c_fc_0, true);
  p.c_fc_1 = pack_autoshard_dot(d, n.c_fc_1, p.c_fc_0);
  p.a_fc_0 = nn::detail::pack_linear(d, n.a_fc_0, true);
  return p;
}

}  // namespace detail

struct autoshard_policy_metadata {
  autoshard_feature_stats stats{};
  std::string meter{};                                   // what measured the training rewards
  std::map<std::string, std::string> hyperparameters{};  // name -> value, as trained
  std::vector<double> learning_curve{};  // mean degree of balance per learner update
};

// Per-task state of an autoshard_policy (see the file comment). Set `record`
// to have logits() append every step's network inputs to `episode` (the
// learner's format), the scored devices being the actions.
struct autoshard_context {
  nn::matrix features{};     // [T, 21]
  nn::matrix latent{};       // [T, 32] e(x)
  nn::matrix zero_latent{};  // [1, 32] e(0)
  std::vector<double> single_cost{};
  std::vector<double> sizes{};  // GiB per table
  // Per device.
  nn::matrix sums{};       // [D, 32] e(0) + sum of e(x) (the action's m_a)
  nn::matrix cost_sums{};  // [D, 32] sum of e(x) (the cost head's input)
  nn::matrix other{};      // [D, 2] predicted cost, size GiB
  nn::matrix u{};          // [D, 64] [m_a, q_a]
  std::vector<std::int64_t> count{};
  // The episode.
  std::size_t applied = 0;  // steps folded into the per-device state
  std::size_t lstm_steps = 0;
  nn::lstm_state lstm{};
  nn::matrix h{};      // the LSTM output of the last step fed
  float value = 0.0f;  // its value head
  // Scratch: prepare()'s, and a step's (packed layout, nn/detail/packed_layers.hpp).
  nn::matrix tmp{}, tmp2{};
  nn::detail::packed_storage mix{}, bias{}, gathered{}, p0{}, p1{}, p2{}, lstm_in{}, gates{},
      hidden{};
  std::vector<std::uint32_t> scored{};
  // Recording.
  bool record = false;
  autoshard_episode episode{};
};

class autoshard_policy {
 public:
  using context = autoshard_context;

  autoshard_policy() = default;
  explicit autoshard_policy(nn::autoshard_net n, autoshard_policy_metadata meta = {})
      : net_(std::make_shared<const nn::autoshard_net>(std::move(n)))
      , meta_(std::make_shared<const autoshard_policy_metadata>(std::move(meta))) {
    autoshard_inference check(*net_);  // refuses a network whose layers do not chain
    (void)check;
    if (net_->t_fc_0.in_features() != autoshard_table_features ||
        net_->s_fc_0.in_features() != autoshard_state_features ||
        net_->a_fc_0.in_features() != autoshard_action_features) {
      embplan::detail::fail("autoshard_policy.net.(t_fc_0, s_fc_0, a_fc_0).in_features",
                            std::to_string(net_->t_fc_0.in_features()) + ", " +
                                std::to_string(net_->s_fc_0.in_features()) + ", " +
                                std::to_string(net_->a_fc_0.in_features()),
                            "21, 1, 2 (table, state and action features of AutoShard's MDP)");
    }
    meta_->stats.validate();
    packed_ =
        std::make_shared<const detail::autoshard_packed_net>(detail::pack_autoshard_net(*net_));
  }

  // An untrained policy: PyTorch's default init from `seed`.
  static autoshard_policy untrained(std::uint64_t seed, autoshard_feature_stats stats = {}) {
    return autoshard_policy(make_autoshard_net(seed), {.stats = stats});
  }

  std::string_view name() const noexcept { return "autoshard"; }
  const nn::autoshard_net& network() const { return *require().first; }
  const autoshard_policy_metadata& metadata() const { return *require().second; }

  void prepare(const task& t, context& ctx) const {
    const nn::autoshard_net& n = network();
    autoshard_task_features(t, metadata().stats, ctx.features);
    latent_of(n, ctx.features, ctx.latent, ctx.tmp);
    latent_of(n, nn::matrix::Zero(1, autoshard_table_features), ctx.zero_latent, ctx.tmp);
    cost_of(n, ctx.latent, ctx.tmp2, ctx.tmp);
    ctx.single_cost.resize(t.tables.size());
    for (std::size_t i = 0; i < t.tables.size(); ++i)
      ctx.single_cost[i] = static_cast<double>(ctx.tmp2(static_cast<Eigen::Index>(i), 0));
    ctx.sizes.resize(t.tables.size());
    for (std::size_t i = 0; i < t.tables.size(); ++i)
      ctx.sizes[i] = static_cast<double>(table_bytes(t.tables[i])) / (1024.0 * 1024.0 * 1024.0);
    start_episode(n, ctx, static_cast<Eigen::Index>(t.cluster.size()));
  }

  // Descending single-table cost, stable.
  void order(const context& ctx, std::vector<std::uint32_t>& out) const {
    out = descending_order(ctx.single_cost);
  }

  // One logit per legal device of the state (view.legal order).
  void logits(const mdp_view& v, context& ctx, std::vector<double>& out) const {
    const nn::autoshard_net& n = network();
    const auto devices = static_cast<Eigen::Index>(v.devices());
    if (ctx.latent.rows() != static_cast<Eigen::Index>(v.order.size()) ||
        ctx.sums.rows() != devices) {
      embplan::detail::fail("autoshard_policy.context", ctx.latent.rows(),
                            "a context prepared for this task (" + std::to_string(v.order.size()) +
                                " tables, " + std::to_string(devices) + " devices)");
    }
    if (v.step < ctx.applied || v.step < ctx.lstm_steps) start_episode(n, ctx, devices);
    ctx.scored.assign(v.legal.begin(), v.legal.end());
    switch (packed_->kernel) {
#ifdef EMBPLAN_NN_X86_KERNELS
      case nn::simd_kernel::avx512:
        step<nn::detail::avx512_ops>(*packed_, ctx, v, out);
        break;
      case nn::simd_kernel::avx2:
        step<nn::detail::avx2_ops>(*packed_, ctx, v, out);
        break;
#endif
      default:
        step<nn::detail::scalar_ops>(*packed_, ctx, v, out);
    }
    if (ctx.record) record_step(ctx, v);
  }

  // ------------------------------------------------------------ files
  // One safetensors file: the network (the authors' Net names, so their
  // checkpoint's state_dict loads) and metadata: "embplan.policy" =
  // "autoshard", the feature statistics ("embplan.autoshard.mean.<name>",
  // ".stdev.<name>"), the meter, hyperparameters ("embplan.hp.<name>") and the
  // learning curve.
  void save(const std::filesystem::path& path) const {
    nn::save_state_dict(path, network(), metadata_text(metadata()));
  }

  static autoshard_policy load(const std::filesystem::path& path) {
    return from_file(io::read_safetensors(path), path.string());
  }

  static std::map<std::string, std::string> metadata_text(const autoshard_policy_metadata& m) {
    std::map<std::string, std::string> md;
    md["embplan.policy"] = "autoshard";
    for (std::size_t k = 0; k < 3; ++k) {
      md[std::string("embplan.autoshard.mean.") + autoshard_feature_stats::names[k]] =
          detail::mdp_number_text(m.stats.mean[k]);
      md[std::string("embplan.autoshard.stdev.") + autoshard_feature_stats::names[k]] =
          detail::mdp_number_text(m.stats.stdev[k]);
    }
    md["embplan.meter"] = m.meter;
    for (const auto& [k, v] : m.hyperparameters)
      md["embplan.hp." + k] = v;
    md["embplan.learning_curve"] = detail::mdp_curve_text(m.learning_curve);
    return md;
  }

  // A policy from a file's tensors and metadata (`source` names it in errors).
  // A file of another kind ("<file>: this is a DreamShard policy, expected an
  // AutoShard policy"), policy or architecture is refused naming it. The six
  // feature statistics are required: the features are normalised by them, so
  // a file without one (an exported state_dict, a hand-edited file) would
  // place tables otherwise; the meter, hyperparameters and learning curve are
  // labels, optional (docs/formats.md).
  static autoshard_policy from_file(const io::safetensors_file& file, const std::string& source) {
    nn::require_file_kind(file, source, "an AutoShard policy", {"an AutoShard policy"});
    const auto policy = file.metadata.find("embplan.policy");
    if (policy != file.metadata.end() && policy->second != "autoshard") {
      embplan::detail::fail(source + ": metadata.embplan.policy", policy->second,
                            "\"autoshard\" (a file of `embplan train autoshard`)");
    }
    autoshard_policy_metadata meta;
    for (std::size_t k = 0; k < 3; ++k) {
      const auto read = [&](const std::string& key, double& out) {
        const auto it = file.metadata.find(key);
        if (it == file.metadata.end()) {
          embplan::detail::fail_missing(
              source + ": metadata." + key,
              "the feature statistic the policy was trained with (a file of `embplan train "
              "autoshard` records all six)");
        }
        out = cost::detail::parse_number<double>(it->second, source + ": metadata." + key);
      };
      read(std::string("embplan.autoshard.mean.") + autoshard_feature_stats::names[k],
           meta.stats.mean[k]);
      read(std::string("embplan.autoshard.stdev.") + autoshard_feature_stats::names[k],
           meta.stats.stdev[k]);
    }
    if (const auto it = file.metadata.find("embplan.meter"); it != file.metadata.end())
      meta.meter = it->second;
    detail::mdp_read_training_metadata(file.metadata, source, meta.hyperparameters,
                                       meta.learning_curve);
    nn::autoshard_net n(autoshard_table_features, autoshard_state_features,
                        autoshard_action_features);
    nn::load_state_dict(n, file);
    for (const auto& [name, p] : n.named_parameters()) {
      for (Eigen::Index i = 0; i < p->size(); ++i) {
        if (!std::isfinite(p->data()[i])) {
          embplan::detail::fail(source + ": " + name + "[" + std::to_string(i) + "]", p->data()[i],
                                "a finite weight");
        }
      }
    }
    return autoshard_policy(std::move(n), std::move(meta));
  }

 private:
  std::pair<const nn::autoshard_net*, const autoshard_policy_metadata*> require() const {
    if (!net_ || !meta_) {
      embplan::detail::fail("autoshard_policy", "(empty)",
                            "a policy (autoshard_policy::load, untrained, or a trained one)");
    }
    return {net_.get(), meta_.get()};
  }

  // e(x) = relu(t_fc_1(relu(t_fc_0(x)))) per row.
  static void latent_of(const nn::autoshard_net& n, const Eigen::Ref<const nn::matrix>& x,
                        nn::matrix& out, nn::matrix& hidden) {
    n.t_fc_0.forward(x, hidden);
    nn::relu_inplace(hidden);
    n.t_fc_1.forward(hidden, out);
    nn::relu_inplace(out);
  }
  // The cost head c_fc_1(relu(c_fc_0(s))) per row of summed latents.
  static void cost_of(const nn::autoshard_net& n, const Eigen::Ref<const nn::matrix>& sums,
                      nn::matrix& out, nn::matrix& hidden) {
    n.c_fc_0.forward(sums, hidden);
    nn::relu_inplace(hidden);
    n.c_fc_1.forward(hidden, out);
  }

  static void start_episode(const nn::autoshard_net& n, context& ctx, Eigen::Index devices) {
    const Eigen::Index latent = n.t_fc_1.out_features();
    ctx.sums = ctx.zero_latent.replicate(devices, 1);
    ctx.cost_sums = nn::matrix::Zero(devices, latent);
    ctx.other = nn::matrix::Zero(devices, autoshard_action_features);
    ctx.count.assign(static_cast<std::size_t>(devices), 0);
    ctx.u.resize(devices, 2 * latent);
    n.a_fc_0.forward(ctx.other, ctx.tmp);
    nn::relu_inplace(ctx.tmp);
    ctx.u << ctx.sums, ctx.tmp;
    ctx.applied = 0;
    ctx.lstm_steps = 0;
    ctx.lstm = n.core.initial_state(1);
    if (ctx.record) {
      ctx.episode = autoshard_episode{};
      ctx.episode.tables.resize(0, autoshard_table_features);
      ctx.episode.state_other.resize(0, autoshard_state_features);
      ctx.episode.held_tables.resize(0, autoshard_table_features);
      ctx.episode.actions_other.resize(0, autoshard_action_features);
    }
  }

  // The step's state feature: the share of tables already placed.
  static float share_placed(const mdp_view& v) {
    return static_cast<float>(static_cast<double>(v.step) / static_cast<double>(v.order.size()));
  }

  // Folds the steps taken since the last call into the per-device state,
  // feeds this step's state to the LSTM, then scores ctx.scored.
  template <class Ops>
  static void step(const detail::autoshard_packed_net& pk, context& ctx, const mdp_view& v,
                   std::vector<double>& out) {
    for (; ctx.applied < v.step; ++ctx.applied) {
      const auto table = v.order[ctx.applied];
      place<Ops>(pk, ctx, static_cast<Eigen::Index>(table),
                 static_cast<Eigen::Index>(v.device_of[table]));
    }
    if (ctx.lstm_steps == v.step) feed_lstm<Ops>(pk, ctx, v);
    score<Ops>(pk, ctx, out);
  }

  // Table `table` went to device `d`: that shard's sums, cost, size and u.
  template <class Ops>
  static void place(const detail::autoshard_packed_net& pk, context& ctx, Eigen::Index table,
                    Eigen::Index d) {
    ctx.sums.row(d) += ctx.latent.row(table);
    ctx.cost_sums.row(d) += ctx.latent.row(table);
    ++ctx.count[static_cast<std::size_t>(d)];
    ctx.hidden.resize(std::max(pk.c_fc_0.n_pad, pk.a_fc_0.n_pad));
    Ops::vecmat(&ctx.cost_sums(d, 0), pk.view(pk.c_fc_0), ctx.hidden.data());
    ctx.other(d, 0) = pk.dot<Ops>(pk.c_fc_1, ctx.hidden.data());
    ctx.other(d, 1) = static_cast<float>(static_cast<double>(ctx.other(d, 1)) +
                                         ctx.sizes[static_cast<std::size_t>(table)]);
    Ops::vecmat(&ctx.other(d, 0), pk.view(pk.a_fc_0), ctx.hidden.data());
    const Eigen::Index latent = ctx.sums.cols();
    ctx.u.block(d, 0, 1, latent) = ctx.sums.row(d);
    for (Eigen::Index k = latent; k < ctx.u.cols(); ++k)
      ctx.u(d, k) = ctx.hidden[static_cast<std::size_t>(k - latent)];
  }

  // The step's state through the LSTM, and the value head.
  template <class Ops>
  static void feed_lstm(const detail::autoshard_packed_net& pk, context& ctx, const mdp_view& v) {
    const auto latent = static_cast<std::size_t>(ctx.latent.cols());
    const auto table = static_cast<Eigen::Index>(v.order[v.step]);
    const auto hidden = static_cast<std::size_t>(ctx.lstm.h.front().cols());
    std::size_t in_size = 0, gates_size = std::max(pk.s_fc_0.n_pad, pk.b_fc_0.n_pad);
    for (const auto& l : pk.core) {
      in_size = std::max(in_size, l.k);
      gates_size = std::max(gates_size, l.n_pad);
    }
    ctx.lstm_in.resize(in_size);
    ctx.gates.resize(gates_size);
    float* in = ctx.lstm_in.data();
    // Layer 0's x: [e(table), relu(s_fc_0(share))].
    const float share = share_placed(v);
    Ops::vecmat(&share, pk.view(pk.s_fc_0), ctx.gates.data());
    std::copy_n(&ctx.latent(table, 0), latent, in);
    std::copy_n(ctx.gates.data(), pk.core.front().k - hidden - latent, in + latent);
    for (std::size_t l = 0; l < pk.core.size(); ++l) {
      // [x, h_prev]; layer l > 0 reads layer l - 1's new h.
      const std::size_t x_size = pk.core[l].k - hidden;
      if (l > 0) std::copy_n(ctx.lstm.h[l - 1].data(), x_size, in);
      std::copy_n(ctx.lstm.h[l].data(), hidden, in + x_size);
      Ops::vecmat(in, pk.view(pk.core[l]), ctx.gates.data());
      Eigen::Map<nn::matrix> gates(ctx.gates.data(), 1, static_cast<Eigen::Index>(4 * hidden));
      nn::detail::lstm_cell(gates, ctx.lstm.c[l], ctx.lstm.c[l], ctx.lstm.h[l]);
    }
    ctx.h = ctx.lstm.h.back();
    Ops::vecmat(ctx.h.data(), pk.view(pk.b_fc_0), ctx.gates.data());
    ctx.value = pk.dot<Ops>(pk.b_fc_1, ctx.gates.data());
    ++ctx.lstm_steps;
  }

  // The policy head over the devices ctx.scored.
  template <class Ops>
  static void score(const detail::autoshard_packed_net& pk, context& ctx,
                    std::vector<double>& out) {
    const std::size_t rows = ctx.scored.size();
    const auto u_width = static_cast<std::size_t>(ctx.u.cols());
    const std::size_t width = pk.u_block.n_pad;
    const float* h = ctx.h.data();
    // W_h h + b, then W_u + W_p diag(h) (transposed, [64][128]): its row k
    // is a one-input layer, input h_k, weight row k of W_p^T, bias row k of W_u^T.
    ctx.bias.resize(width);
    Ops::vecmat(h, pk.view(pk.h_block), ctx.bias.data());
    ctx.mix.resize(u_width * width);
    const float* packed = pk.data.data();
    for (std::size_t k = 0; k < u_width; ++k) {
      const nn::detail::layer_view row{.w = packed + pk.hu_block.w + k * width,
                                       .b = packed + pk.u_block.w + k * width,
                                       .k = 1,
                                       .n_pad = width,
                                       .relu = false};
      Ops::vecmat(h + k, row, ctx.mix.data() + k * width);
    }
    const float* u = ctx.u.data();
    bool all = rows == static_cast<std::size_t>(ctx.u.rows());
    for (std::size_t a = 0; all && a < rows; ++a)
      all = ctx.scored[a] == a;
    if (!all) {
      ctx.gathered.resize(rows * u_width);
      for (std::size_t a = 0; a < rows; ++a)
        std::copy_n(u + ctx.scored[a] * u_width, u_width, ctx.gathered.data() + a * u_width);
      u = ctx.gathered.data();
    }
    ctx.p0.resize(rows * width);
    Ops::layer(
        u, u_width, rows,
        {.w = ctx.mix.data(), .b = ctx.bias.data(), .k = u_width, .n_pad = width, .relu = true},
        ctx.p0.data(), width);
    ctx.p1.resize(rows * pk.p_fc_1.n_pad);
    Ops::layer(ctx.p0.data(), width, rows, pk.view(pk.p_fc_1), ctx.p1.data(), pk.p_fc_1.n_pad);
    ctx.p2.resize(rows * pk.p_fc_2.n_pad);
    Ops::layer(ctx.p1.data(), pk.p_fc_1.n_pad, rows, pk.view(pk.p_fc_2), ctx.p2.data(),
               pk.p_fc_2.n_pad);
    out.resize(rows);
    for (std::size_t a = 0; a < rows; ++a)
      out[a] = static_cast<double>(pk.dot<Ops>(pk.p_fc_3, ctx.p2.data() + a * pk.p_fc_2.n_pad));
  }

  static void append_row(nn::matrix& m, const Eigen::Ref<const nn::matrix>& row) {
    m.conservativeResize(m.rows() + 1, Eigen::NoChange);
    m.row(m.rows() - 1) = row;
  }

  // The step's inputs in the learner's format (rl::autoshard_episode).
  void record_step(context& ctx, const mdp_view& v) const {
    auto& ep = ctx.episode;
    const auto table = static_cast<Eigen::Index>(v.order[v.step]);
    if (static_cast<std::size_t>(ep.tables.rows()) != v.step) {
      embplan::detail::fail("autoshard_context.episode.steps", ep.tables.rows(),
                            "one recorded step per MDP step (" + std::to_string(v.step) +
                                "): logits() once per step");
    }
    append_row(ep.tables, ctx.features.row(table));
    ep.state_other.conservativeResize(ep.state_other.rows() + 1, Eigen::NoChange);
    ep.state_other(ep.state_other.rows() - 1, 0) = share_placed(v);
    ep.action_count.push_back(static_cast<std::int64_t>(ctx.scored.size()));
    Eigen::Index rows = ep.held_tables.rows();
    for (const auto d : ctx.scored)
      rows += static_cast<Eigen::Index>((*v.tables_on)[d].size()) + 1;
    ep.held_tables.conservativeResize(rows, autoshard_table_features);
    Eigen::Index r = rows;
    for (const auto d : ctx.scored)
      r -= static_cast<Eigen::Index>((*v.tables_on)[d].size()) + 1;
    for (const auto d : ctx.scored) {
      for (const auto tab : (*v.tables_on)[d])
        ep.held_tables.row(r++) = ctx.features.row(tab);
      ep.held_tables.row(r++).setZero();
      ep.held_count.push_back(static_cast<std::int64_t>((*v.tables_on)[d].size()) + 1);
      append_row(ep.actions_other, ctx.other.row(d));
    }
  }

  std::shared_ptr<const nn::autoshard_net> net_{};
  std::shared_ptr<const autoshard_policy_metadata> meta_{};
  std::shared_ptr<const detail::autoshard_packed_net> packed_{};  // net_'s step layers
};

}  // namespace embplan::inline EMBPLAN_ABI::rl
