#pragma once
// dreamshard_cost: DreamShard's cost network (NeurIPS'22 §3.2 "Cost network",
// Fig. 4 left; nn/dreamshard_cost_net.hpp) as a cost_model, and the files that
// hold a trained DreamShard model (both networks, one safetensors file).
// Features: the 21 of cost/features.hpp (embplan21 order) with rows, pooling
// factor and size z-scored over the tables of the task, as the authors' code
// does, so a table's features depend on its task (dreamshard_task_features);
// where the authors divide 0 by 0 the column is 0 here, not NaN.
// Heads: per device forward, communication (trained on the device's BACKWARD
// all-to-all, as the authors' collect_data) and backward costs of its fused
// group of tables; per placement the overall head. An empty device is one
// all-zero feature row (its heads are not 0).
// As a cost_model: compute() = {forward head, backward head + communication
// head}; communication() is all zeros (the contract's communication() sees
// only column sums, not tables). So evaluate()'s max_ms() leaves out the
// forward all-to-all: price a plan with overall_ms(), the overall head
// (DreamShard's reward). shard_cost() is the single-table fwd + comm + bwd the
// authors sort tables by (Env.reset).
// Units: milliseconds of the meter it was trained on (metadata().meter); an
// untrained model predicts nothing meaningful.
// Design notes: docs/design/dreamshard.md.
#include <Eigen/Core>

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

#include "embplan/concepts/cost_model.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/detail/metadata.hpp"
#include "embplan/cost/evaluate.hpp"
#include "embplan/cost/features.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/dreamshard_cost_net.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

// Mean and population std of rows, pooling factor and size over a task's tables.
struct dreamshard_feature_stats {
  double mean[3] = {0.0, 0.0, 0.0};  // rows, pooling factor, size (rows x dim)
  double std[3] = {0.0, 0.0, 0.0};
};

inline dreamshard_feature_stats dreamshard_stats(const task& t) {
  dreamshard_feature_stats s;
  const auto n = static_cast<double>(t.tables.size());
  if (t.tables.empty()) return s;
  const auto value = [](const table_spec& x, int k) {
    if (k == 0) return static_cast<double>(x.rows);
    if (k == 1) return x.pooling_factor;
    return static_cast<double>(x.rows) * static_cast<double>(x.dim);
  };
  for (int k = 0; k < 3; ++k) {
    double sum = 0.0;
    for (const auto& x : t.tables)
      sum += value(x, k);
    s.mean[k] = sum / n;
    double sq = 0.0;
    for (const auto& x : t.tables) {
      const double d = value(x, k) - s.mean[k];
      sq += d * d;
    }
    s.std[k] = std::sqrt(sq / n);
  }
  return s;
}

// DreamShard's features of one table (or column / row piece as its own table,
// piece_table) of a task with statistics `s`, into out[0 .. 21).
inline void dreamshard_features(const table_spec& x, const dreamshard_feature_stats& s,
                                std::span<float> out) {
  table_features(x, feature_set::embplan21, out);
  const double raw[3] = {static_cast<double>(x.rows), x.pooling_factor,
                         static_cast<double>(x.rows) * static_cast<double>(x.dim)};
  const int column[3] = {1, 2, 3};
  for (int k = 0; k < 3; ++k) {
    out[static_cast<std::size_t>(column[k])] =
        s.std[k] > 0.0 ? static_cast<float>((raw[k] - s.mean[k]) / s.std[k]) : 0.0f;
  }
}

// The features of every table of t, [tables, 21], row i = table i.
template <class = void>
void dreamshard_task_features(const task& t, nn::matrix& out) {
  const auto s = dreamshard_stats(t);
  const auto f = static_cast<Eigen::Index>(feature_count(feature_set::embplan21));
  out.resize(static_cast<Eigen::Index>(t.tables.size()), f);
  for (std::size_t i = 0; i < t.tables.size(); ++i) {
    dreamshard_features(t.tables[i], s,
                        std::span<float>(out.row(static_cast<Eigen::Index>(i)).data(),
                                         static_cast<std::size_t>(f)));
  }
}

template <class = void>
nn::matrix dreamshard_task_features(const task& t) {
  nn::matrix out;
  dreamshard_task_features(t, out);
  return out;
}

// What a DreamShard model file says about itself (metadata of the safetensors
// file, "embplan.*" keys; `extra` keeps every other key verbatim).
struct dreamshard_cost_metadata {
  feature_set features = feature_set::embplan21;
  std::string meter = "unknown";  // what measured the training data ("cpu", "cuda", ...)
  std::string trained_on{};       // e.g. "dreamshard tasks seed 0, DLRM-20 (4)"
  std::string pool_half{};        // "train", "test", "whole" or empty (not recorded)
  std::uint64_t split_seed = 0;
  std::map<std::string, std::string> extra{};
};

// Per-device heads of one device.
struct dreamshard_device_cost {
  double fwd_ms = 0.0;
  double comm_ms = 0.0;
  double bwd_ms = 0.0;
};

namespace cost::detail {

inline constexpr std::string_view dreamshard_kind = "dreamshard_model";

// The file tensors of a dreamshard_model: every tensor of the authors' Model.
// value_net (64 x devices wide in their code, never trained by their RL loss)
// is kept at whatever width the file has (a positive multiple of 64), or 256
// (their 4 devices, zeros) when the file has none; it never limits the device
// count of a plan.
inline nn::dreamshard_model dreamshard_model_from(io::safetensors_file file,
                                                  const std::string& source) {
  const auto it = file.tensors.find("value_net.weight");
  Eigen::Index value_devices = 4;
  if (it == file.tensors.end()) {
    io::tensor w;
    w.shape = {1, 2 * nn::dreamshard_model::latent * 4};
    w.values.assign(static_cast<std::size_t>(w.shape[1]), 0.0f);
    file.tensors.emplace("value_net.weight", std::move(w));
    io::tensor b;
    b.shape = {1};
    b.values = {0.0f};
    file.tensors.emplace("value_net.bias", std::move(b));
  } else {
    const auto& shape = it->second.shape;
    const std::int64_t width = shape.size() == 2 ? shape[1] : -1;
    if (shape.size() != 2 || shape[0] != 1 || width <= 0 || width % 64 != 0 || width > 64 * 4096) {
      embplan::detail::fail(source + ": tensors[\"value_net.weight\"].shape",
                            nn::detail::shape_text(shape),
                            "[1, 64 x devices] (DreamShard's value_net)");
    }
    value_devices = static_cast<Eigen::Index>(width / 64);
  }
  nn::dreamshard_model m(static_cast<Eigen::Index>(feature_count(feature_set::embplan21)),
                         value_devices);
  file.source = source;
  nn::load_state_dict(m, file);
  return m;
}

// Metadata of a DreamShard file: a file without "embplan.kind" is taken as
// exported from the authors' code (21 features, embplan21 order); one with it
// must be a DreamShard model with the embplan21 feature set.
inline dreamshard_cost_metadata dreamshard_metadata_from(const io::safetensors_file& file,
                                                         const std::string& source) {
  dreamshard_cost_metadata meta;
  const auto& md = file.metadata;
  const auto kind = md.find("embplan.kind");
  if (kind != md.end() && kind->second != dreamshard_kind) {
    embplan::detail::fail(source + ": metadata.embplan.kind", kind->second,
                          "\"" + std::string(dreamshard_kind) + "\" (a DreamShard model file)");
  }
  if (const auto f = md.find("embplan.feature_set"); f != md.end()) {
    meta.features = parse_feature_set(f->second, source + ": metadata.embplan.feature_set");
    if (meta.features != feature_set::embplan21) {
      embplan::detail::fail(source + ": metadata.embplan.feature_set", f->second,
                            "\"embplan21\" (DreamShard's 21 table features)");
    }
  }
  const auto text = [&](const char* key, std::string& out) {
    if (const auto x = md.find(key); x != md.end()) out = x->second;
  };
  text("embplan.meter", meta.meter);
  text("embplan.trained_on", meta.trained_on);
  text("embplan.pool_half", meta.pool_half);
  // The split seed says which half: recorded with the half, never defaulted.
  if (const auto x = md.find("embplan.split_seed"); x != md.end()) {
    meta.split_seed =
        parse_number<std::uint64_t>(x->second, source + ": metadata.embplan.split_seed");
  } else if (!meta.pool_half.empty() && meta.pool_half != "whole") {
    embplan::detail::fail_missing(source + ": metadata.embplan.split_seed",
                                  "the seed that split the pool (recorded with "
                                  "embplan.pool_half \"" +
                                      meta.pool_half + "\")");
  }
  if (!meta.pool_half.empty() && meta.pool_half != "train" && meta.pool_half != "test" &&
      meta.pool_half != "whole") {
    embplan::detail::fail(source + ": metadata.embplan.pool_half", meta.pool_half,
                          "\"train\", \"test\", \"whole\" or empty (not recorded)");
  }
  for (const auto& [k, v] : md)
    if (k.rfind("embplan.", 0) != 0) meta.extra[k] = v;
  return meta;
}

inline std::map<std::string, std::string> dreamshard_metadata_to(
    const dreamshard_cost_metadata& m) {
  std::map<std::string, std::string> out = m.extra;
  out["embplan.kind"] = std::string(dreamshard_kind);
  out["embplan.feature_set"] = std::string(to_string(m.features));
  out["embplan.feature_normalisation"] = "dreamshard_task_zscore";
  out["embplan.meter"] = m.meter;
  out["embplan.trained_on"] = m.trained_on;
  if (!m.pool_half.empty()) {
    out["embplan.pool_half"] = m.pool_half;
    out["embplan.split_seed"] = std::to_string(m.split_seed);
  }
  return out;
}

inline void require_dreamshard_model(const nn::dreamshard_model& m, std::string_view field) {
  const auto f = static_cast<Eigen::Index>(feature_count(feature_set::embplan21));
  if (m.table_fc_0.in_features() != f || m.rl_table_fc_0.in_features() != f) {
    embplan::detail::fail(std::string(field) + ".table_fc_0.in_features",
                          m.table_fc_0.in_features(), "21 (DreamShard's embplan21 features)");
  }
  if (m.policy_net.in_features() != 2 * nn::dreamshard_model::latent ||
      m.cost_fc_0.in_features() != 3) {
    embplan::detail::fail(std::string(field) + ".policy_net.in_features",
                          m.policy_net.in_features(), "64 (DreamShard's policy network)");
  }
  nn::require_finite(m);
}

}  // namespace cost::detail

class dreamshard_cost {
 public:
  // Milliseconds of the meter it was trained on (metadata().meter).
  static constexpr cost_unit unit = cost_unit::ms;

  dreamshard_cost() = default;
  explicit dreamshard_cost(nn::dreamshard_model m, dreamshard_cost_metadata meta = {}) {
    if (meta.features != feature_set::embplan21) {
      embplan::detail::fail("dreamshard_cost.features", to_string(meta.features),
                            "\"embplan21\" (DreamShard's 21 table features)");
    }
    cost::detail::require_dreamshard_model(m, "dreamshard_cost.model");
    state_ = std::make_shared<const state>(state{std::move(m), std::move(meta)});
  }

  std::string_view name() const noexcept { return "dreamshard_cost"; }
  const nn::dreamshard_model& network() const { return require().model; }
  const dreamshard_cost_metadata& metadata() const { return require().meta; }

  // The three heads on each group of rows of features `x` ([rows, 21], task
  // features of dreamshard_task_features); group[r] the group of row r,
  // `groups` groups, each non-empty. out[g] = heads of group g.
  template <class = void>
  void device_costs(const Eigen::Ref<const nn::matrix>& x, std::span<const std::int64_t> group,
                    Eigen::Index groups, std::vector<dreamshard_device_cost>& out) const {
    nn::dreamshard_cost_tape tape;
    std::vector<std::int64_t> placement_of(static_cast<std::size_t>(groups), 0);
    nn::dreamshard_cost_forward(require().model, x, group, placement_of, 1, tape);
    out.resize(static_cast<std::size_t>(groups));
    for (Eigen::Index g = 0; g < groups; ++g) {
      out[static_cast<std::size_t>(g)] = dreamshard_device_cost{.fwd_ms = tape.device_costs(g, 0),
                                                                .comm_ms = tape.device_costs(g, 1),
                                                                .bwd_ms = tape.device_costs(g, 2)};
    }
  }

  // The heads of one device holding `group` (an empty group is a zero row).
  dreamshard_device_cost device_cost(const task& t, std::span<const shard> group) const {
    nn::matrix x;
    std::vector<std::int64_t> rows;
    piece_rows(t, group, x);
    rows.assign(static_cast<std::size_t>(x.rows()), 0);
    std::vector<dreamshard_device_cost> out;
    device_costs(x, rows, 1, out);
    return out[0];
  }

  // The overall head on a plan (DreamShard's estimated plan cost; the reward
  // of its estimated MDP is minus this).
  template <class = void>
  double overall_ms(const task& t, const plan& p) const {
    const auto groups = shards_by_device(t, p);
    nn::matrix x(0, 21);
    std::vector<std::int64_t> group;
    nn::matrix rows;
    for (std::size_t d = 0; d < groups.size(); ++d) {
      piece_rows(t, groups[d], rows);
      const Eigen::Index at = x.rows();
      x.conservativeResize(at + rows.rows(), Eigen::NoChange);
      x.bottomRows(rows.rows()) = rows;
      group.insert(group.end(), static_cast<std::size_t>(rows.rows()),
                   static_cast<std::int64_t>(d));
    }
    nn::dreamshard_cost_tape tape;
    const std::vector<std::int64_t> placement_of(groups.size(), 0);
    nn::dreamshard_cost_forward(require().model, x, group, placement_of, 1, tape);
    return static_cast<double>(tape.out[3](0, 0));
  }

  compute_cost compute(const task& t, std::span<const shard> group, std::size_t /*device*/) const {
    const auto c = device_cost(t, group);
    return compute_cost{.fwd_ms = c.fwd_ms, .bwd_ms = c.bwd_ms + c.comm_ms};
  }

  // DreamShard's sort key (Env.reset): forward + communication + backward heads
  // on a device holding only this piece.
  double shard_cost(const task& t, const shard& s) const {
    const auto c = device_cost(t, std::span<const shard>(&s, 1));
    return c.fwd_ms + c.comm_ms + c.bwd_ms;
  }

  // The communication head is in compute() (see the file comment).
  void communication(const task&, std::span<const std::int64_t>, std::span<const double>,
                     std::span<comm_cost> out) const {
    for (auto& c : out)
      c = comm_cost{};
  }

  // ------------------------------------------------------------ files
  void save(const std::filesystem::path& path) const {
    const state& s = require();
    nn::save_state_dict(path, s.model, cost::detail::dreamshard_metadata_to(s.meta));
  }

  // A file written by save() or rl::dreamshard_policy::save(), or a state_dict
  // exported from the authors' Model (no metadata: embplan21, meter unknown).
  static dreamshard_cost load(const std::filesystem::path& path) {
    const auto file = io::read_safetensors(path);
    nn::require_file_kind(file, path.string(), "a DreamShard cost model",
                          {"a DreamShard cost model", "a DreamShard policy"});
    const auto meta = cost::detail::dreamshard_metadata_from(file, path.string());
    return dreamshard_cost(cost::detail::dreamshard_model_from(file, path.string()), meta);
  }

 private:
  struct state {
    nn::dreamshard_model model;
    dreamshard_cost_metadata meta;
  };

  // The features of the pieces of `group` within task t; one zero row when empty.
  static void piece_rows(const task& t, std::span<const shard> group, nn::matrix& x) {
    const auto f = static_cast<Eigen::Index>(feature_count(feature_set::embplan21));
    if (group.empty()) {
      x = nn::matrix::Zero(1, f);
      return;
    }
    const auto stats = dreamshard_stats(t);
    x.resize(static_cast<Eigen::Index>(group.size()), f);
    for (std::size_t i = 0; i < group.size(); ++i) {
      dreamshard_features(piece_table(t, group[i]), stats,
                          std::span<float>(x.row(static_cast<Eigen::Index>(i)).data(),
                                           static_cast<std::size_t>(f)));
    }
  }

  const state& require() const {
    if (!state_) {
      embplan::detail::fail("dreamshard_cost", "(empty)", "a model (construct or load one)");
    }
    return *state_;
  }

  std::shared_ptr<const state> state_{};
};
static_assert(cost_model<dreamshard_cost>);

}  // namespace embplan::inline EMBPLAN_ABI
