#pragma once
// neural_cost: a cost model whose compute part is a trained NeuroShard
// ComputeCostNet (nn::compute_cost_net: per-table MLP 128-32, sum over the
// device's pieces, head 32-64-1; MLSys'23 §3.2) run through the packed
// inference kernels (nn/packed_compute_cost_net.hpp), and whose communication
// is the analytic all-to-all model (cost/analytic.hpp) or, when given one,
// NeuroShard's learned forward / backward communication models (neural_comm,
// cost/neural_comm.hpp) — say which where figures are shown
// (communication_name()).
//
// A model predicts forward + backward compute of the fused pieces at the
// batch size it was measured at (`metadata.batch_size`); a task's batch scales
// the prediction linearly, as the CPU meter's own scaling does. The split into
// forward and backward uses the forward share of the training data.
//
// Files: safetensors with the net's state_dict (t_hidden.*, c_hidden.*,
// feature_means, feature_stds) and string metadata (see save/load below), so
// one file says what it is, how it was trained and on what meter.
#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "embplan/concepts/cost_model.hpp"
#include "embplan/concepts/piecewise.hpp"
#include "embplan/core/costs.hpp"
#include "embplan/core/error.hpp"
#include "embplan/core/plan.hpp"
#include "embplan/core/task.hpp"
#include "embplan/cost/analytic.hpp"
#include "embplan/cost/detail/metadata.hpp"
#include "embplan/cost/features.hpp"
#include "embplan/cost/neural_comm.hpp"
#include "embplan/io/safetensors.hpp"
#include "embplan/nn/compute_cost_net.hpp"
#include "embplan/nn/packed_compute_cost_net.hpp"
#include "embplan/nn/serialize.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI {

struct neural_cost_metadata {
  feature_set features = feature_set::embplan21;
  std::string meter = "unknown";  // what measured the training data ("cpu", "cuda", ...)
  std::int64_t batch_size = 0;    // bags per table the measurements ran
  double forward_share = 0.5;     // forward / (forward + backward) in the training data
  std::string trained_on;         // e.g. "synthetic pool seed 0, train half (split seed 0)"
  // Which half of the pool split with split_seed held every table of the
  // training data (data::half_holding): "train", "test" or "whole"; empty
  // where not recorded (older files, imports). `embplan compare` draws its
  // tasks from the other half, so the model is judged on tables it never saw.
  std::string pool_half;
  std::uint64_t split_seed = 0;
  std::map<std::string, std::string> extra;  // metrics and anything else, kept verbatim
};

class neural_cost {
 public:
  neural_cost() = default;
  neural_cost(const nn::compute_cost_net& net, neural_cost_metadata meta, analytic_cost comm = {})
      : state_(std::make_shared<const state>(net, std::move(meta))), comm_(comm) {
    const auto& m = state_->meta;
    if (net.table_features() != static_cast<Eigen::Index>(feature_count(m.features))) {
      embplan::detail::fail("neural_cost.features", to_string(m.features),
                            "a feature set of " + std::to_string(net.table_features()) +
                                " features (the network's input size)");
    }
    if (m.batch_size < 1) {
      embplan::detail::fail("neural_cost.batch_size", m.batch_size, "a positive batch size");
    }
    if (!(m.forward_share >= 0.0 && m.forward_share <= 1.0)) {
      embplan::detail::fail("neural_cost.forward_share", m.forward_share, "a fraction in [0, 1]");
    }
    if (!m.pool_half.empty() && m.pool_half != "train" && m.pool_half != "test" &&
        m.pool_half != "whole") {
      embplan::detail::fail("neural_cost.pool_half", m.pool_half,
                            "\"train\", \"test\", \"whole\" or empty (not recorded)");
    }
  }

  // Learned compute and learned communication (a task whose device count is
  // not the comm model's is refused by communication()).
  neural_cost(const nn::compute_cost_net& net, neural_cost_metadata meta, neural_comm comm)
      : neural_cost(net, std::move(meta)) {
    comm_ = std::move(comm);
  }

  // This model with another communication model, e.g.
  // neural_cost::load(compute_path).with_communication(neural_comm::load(comm_path)).
  neural_cost with_communication(neural_comm comm) const {
    neural_cost out = *this;
    out.comm_ = std::move(comm);
    return out;
  }

  // This model on another kernel of the packed networks (nn::simd_kernel;
  // automatic, the default: the widest this CPU runs), the learned
  // communication's too where it has one. Every kernel gives the same costs,
  // bit for bit (nn/packed_compute_cost_net.hpp, nn/packed_comm_cost_net.hpp),
  // so this changes speed only; tests use it to check that plans do not
  // depend on it. A kernel this CPU cannot run throws, naming it.
  neural_cost with_kernel(nn::simd_kernel kernel) const {
    const state& s = require();
    neural_cost out = *this;
    out.state_ = std::make_shared<const state>(s.net, s.meta, kernel);
    if (const auto* learned = std::get_if<neural_comm>(&comm_)) {
      out.comm_ = learned->with_kernel(kernel);
    }
    return out;
  }

  // The packed network's kernel (never automatic).
  nn::simd_kernel kernel() const { return require().packed.kernel(); }

  // "analytic" or "neural_comm".
  std::string_view communication_name() const noexcept {
    return std::visit([](const auto& c) -> std::string_view { return c.name(); }, comm_);
  }

  std::string_view name() const noexcept { return "neural"; }
  const neural_cost_metadata& metadata() const { return require().meta; }
  const nn::compute_cost_net& network() const { return require().net; }

  compute_cost compute(const task& t, std::span<const shard> group, std::size_t /*device*/) const {
    const state& s = require();
    const auto f = static_cast<Eigen::Index>(feature_count(s.meta.features));
    nn::matrix x(static_cast<Eigen::Index>(group.size()), f);
    std::vector<float> row(static_cast<std::size_t>(f));
    for (std::size_t i = 0; i < group.size(); ++i) {
      table_features(embplan::piece_table(t, group[i]), s.meta.features, row);
      for (Eigen::Index c = 0; c < f; ++c)
        x(static_cast<Eigen::Index>(i), c) = row[static_cast<std::size_t>(c)];
    }
    return scaled(s, t, group.empty() ? 0.0f : s.packed(x), group.empty());
  }

  // compute() as a fold, for a planner that adds a device's pieces one at a
  // time (concepts/piecewise.hpp, specialised below; nn::packed_compute_cost_net::term):
  // compute(t, group, d) is bitwise from_fold(t, z, group.size()),
  // z = fold_start() + piece_term(group[0]) + piece_term(group[1]) + ... in
  // float, element by element, in group order.
  std::size_t term_size() const { return require().packed.term_size(); }
  // out: term_size() floats.
  void fold_start(float* out) const { require().packed.start(out); }
  // z += term, element by element (term_size() floats each).
  void fold_add(float* z, const float* term) const { require().packed.add(z, term); }
  void piece_term(const task& t, const shard& piece, float* out) const {
    const state& s = require();
    std::vector<float> row(feature_count(s.meta.features));
    table_features(embplan::piece_table(t, piece), s.meta.features, row);
    s.packed.term(row.data(), out);
  }
  compute_cost from_fold(const task& t, const float* z, std::size_t pieces) const {
    const state& s = require();
    return scaled(s, t, pieces == 0 ? 0.0f : s.packed.finish(z), pieces == 0);
  }
  // out = z + term, then from_fold(t, out, pieces), bitwise (out may be z;
  // the packed net's add_finish: one pass for NeuroShard's head).
  compute_cost from_fold_add(const task& t, float* out, const float* z, const float* term,
                             std::size_t pieces) const {
    const state& s = require();
    const float y = s.packed.add_finish(out, z, term);
    return scaled(s, t, pieces == 0 ? 0.0f : y, pieces == 0);
  }

  // As analytic_cost's with the analytic communication; a learned one
  // (an MLP) promises nothing.
  bool communication_nonnegative(const task& t) const noexcept {
    const auto* analytic = std::get_if<analytic_cost>(&comm_);
    return analytic != nullptr && analytic->communication_nonnegative(t);
  }

  double shard_cost(const task& t, const shard& s) const {
    return compute(t, std::span<const shard>(&s, 1), s.device).total_ms();
  }

  // A template so that only a TU pricing with it instantiates neural_comm's
  // networks (nn/tensor.hpp).
  template <class = void>
  void communication(const task& t, std::span<const std::int64_t> dim_sum,
                     std::span<const double> start_ms, std::span<comm_cost> out) const {
    std::visit([&](const auto& c) { c.communication(t, dim_sum, start_ms, out); }, comm_);
  }

  // With the analytic communication, as analytic_cost's.
  bool forward_is_skew_plus_backward(const task&) const noexcept {
    return std::holds_alternative<analytic_cost>(comm_);
  }
  bool all_to_all_is_analytic(const task&) const noexcept {
    return std::holds_alternative<analytic_cost>(comm_);
  }

  // The halves of communication() (split_communication,
  // concepts/cost_model.hpp): a learned communication runs only the network
  // asked for (neural_comm::backward_communication / forward_communication;
  // clamp = false gives its raw outputs); the analytic one computes both
  // halves and copies one, never clamped, as communication() gives them (on
  // a valid topology they are never negative; clamp changes nothing). The
  // backward half is communication()'s with every start at 0, as a pricer
  // asks for it before the starts are known.
  template <class = void>
  void backward_communication(const task& t, std::span<const std::int64_t> dim_sum,
                              std::span<double> bwd_ms, bool clamp = true) const {
    if (const auto* learned = std::get_if<neural_comm>(&comm_)) {
      learned->backward_communication(t, dim_sum, bwd_ms, clamp);
      return;
    }
    analytic_half(t, dim_sum, nullptr, bwd_ms, "bwd_ms.size", &comm_cost::bwd_ms);
  }

  template <class = void>
  void forward_communication(const task& t, std::span<const std::int64_t> dim_sum,
                             std::span<const double> start_ms, std::span<double> fwd_ms,
                             bool clamp = true) const {
    if (const auto* learned = std::get_if<neural_comm>(&comm_)) {
      learned->forward_communication(t, dim_sum, start_ms, fwd_ms, clamp);
      return;
    }
    analytic_half(t, dim_sum, &start_ms, fwd_ms, "fwd_ms.size", &comm_cost::fwd_ms);
  }

  // The halves of several plans (batched_communication,
  // concepts/cost_model.hpp): a learned communication evaluates its network
  // on all rows at once (neural_comm::*_rows); the analytic one prices row
  // after row, as the one-plan methods do.
  template <class = void>
  void backward_communication_rows(const task& t, std::span<const std::int64_t> dim_sums,
                                   std::span<double> bwd_ms, bool clamp = true) const {
    if (const auto* learned = std::get_if<neural_comm>(&comm_)) {
      learned->backward_communication_rows(t, dim_sums, bwd_ms, clamp);
      return;
    }
    for_rows(t, dim_sums.size(), bwd_ms.size(), "bwd_ms.size", [&](std::size_t at, std::size_t n) {
      backward_communication(t, dim_sums.subspan(at, n), bwd_ms.subspan(at, n), clamp);
    });
  }

  template <class = void>
  void forward_communication_rows(const task& t, std::span<const std::int64_t> dim_sums,
                                  std::span<const double> start_ms, std::span<double> fwd_ms,
                                  bool clamp = true) const {
    if (const auto* learned = std::get_if<neural_comm>(&comm_)) {
      learned->forward_communication_rows(t, dim_sums, start_ms, fwd_ms, clamp);
      return;
    }
    if (start_ms.size() != dim_sums.size()) {
      embplan::detail::fail("start_ms.size", start_ms.size(),
                            "one entry per dim sum (" + std::to_string(dim_sums.size()) + ")");
    }
    for_rows(t, dim_sums.size(), fwd_ms.size(), "fwd_ms.size", [&](std::size_t at, std::size_t n) {
      forward_communication(t, dim_sums.subspan(at, n), start_ms.subspan(at, n),
                            fwd_ms.subspan(at, n), clamp);
    });
  }

  // ------------------------------------------------------------ files
  void save(const std::filesystem::path& path) const {
    const state& s = require();
    std::map<std::string, std::string> meta = s.meta.extra;
    meta["embplan.kind"] = "compute_cost_net";
    meta["embplan.feature_set"] = std::string(to_string(s.meta.features));
    meta["embplan.meter"] = s.meta.meter;
    meta["embplan.batch_size"] = std::to_string(s.meta.batch_size);
    meta["embplan.forward_share"] = std::to_string(s.meta.forward_share);
    meta["embplan.trained_on"] = s.meta.trained_on;
    if (!s.meta.pool_half.empty()) {
      meta["embplan.pool_half"] = s.meta.pool_half;
      meta["embplan.split_seed"] = std::to_string(s.meta.split_seed);
    }
    meta["embplan.table_mlp_sizes"] = cost::detail::sizes_text(s.net.t_hidden);
    meta["embplan.pred_mlp_sizes"] = cost::detail::sizes_text(s.net.c_hidden);
    nn::save_state_dict(path, s.net, std::move(meta));
  }

  static neural_cost load(const std::filesystem::path& path) {
    const auto file = io::read_safetensors(path);
    nn::require_file_kind(file, path.string(), "a compute cost model", {"a compute cost model"});
    const auto get = [&](const std::string& key) -> std::string {
      const auto it = file.metadata.find(key);
      if (it == file.metadata.end()) {
        embplan::detail::fail(path.string() + ": metadata." + key, "(missing)",
                              "a neural_cost file written by neural_cost::save");
      }
      return it->second;
    };
    if (get("embplan.kind") != "compute_cost_net") {
      embplan::detail::fail(path.string() + ": metadata.embplan.kind", get("embplan.kind"),
                            "\"compute_cost_net\"");
    }
    neural_cost_metadata meta;
    meta.features = parse_feature_set(get("embplan.feature_set"),
                                      path.string() + ": metadata.embplan.feature_set");
    meta.meter = get("embplan.meter");
    meta.batch_size = cost::detail::parse_number<std::int64_t>(
        get("embplan.batch_size"), path.string() + ": metadata.embplan.batch_size");
    meta.forward_share = cost::detail::parse_number<double>(
        get("embplan.forward_share"), path.string() + ": metadata.embplan.forward_share");
    meta.trained_on = get("embplan.trained_on");
    if (file.metadata.count("embplan.pool_half")) {  // optional: files before it lack it
      meta.pool_half = get("embplan.pool_half");
      meta.split_seed = cost::detail::parse_number<std::uint64_t>(
          get("embplan.split_seed"), path.string() + ": metadata.embplan.split_seed");
    }
    for (const auto& [k, v] : file.metadata)
      if (k.rfind("embplan.", 0) != 0) meta.extra[k] = v;
    nn::compute_cost_net_options o;
    o.table_features = static_cast<Eigen::Index>(feature_count(meta.features));
    o.table_mlp_sizes = cost::detail::parse_sizes(
        get("embplan.table_mlp_sizes"), path.string() + ": metadata.embplan.table_mlp_sizes");
    o.pred_mlp_sizes = cost::detail::parse_sizes(
        get("embplan.pred_mlp_sizes"), path.string() + ": metadata.embplan.pred_mlp_sizes");
    // The table MLP's first size is the input (feature count); the head's last is 1.
    if (o.table_mlp_sizes.size() < 2 || o.table_mlp_sizes.front() != o.table_features) {
      embplan::detail::fail(
          path.string() + ": metadata.embplan.table_mlp_sizes", get("embplan.table_mlp_sizes"),
          "sizes starting at the feature count (" + std::to_string(o.table_features) + ")");
    }
    const auto table_sizes = o.table_mlp_sizes;
    o.table_mlp_sizes.erase(o.table_mlp_sizes.begin());
    if (o.pred_mlp_sizes.size() < 2 || o.pred_mlp_sizes.back() != 1) {
      embplan::detail::fail(path.string() + ": metadata.embplan.pred_mlp_sizes",
                            get("embplan.pred_mlp_sizes"), "sizes ending in 1 (one cost)");
    }
    const auto pred_sizes = o.pred_mlp_sizes;
    // The file's tensors must back the declared sizes before the net is built.
    nn::require_declared_weights(
        file,
        nn::mlp::weight_shapes({.sizes = table_sizes, .naming = nn::mlp_naming::module_list},
                               "t_hidden"),
        path.string() + ": metadata.embplan.table_mlp_sizes", get("embplan.table_mlp_sizes"));
    nn::require_declared_weights(
        file,
        nn::mlp::weight_shapes({.sizes = pred_sizes, .naming = nn::mlp_naming::module_list},
                               "c_hidden"),
        path.string() + ": metadata.embplan.pred_mlp_sizes", get("embplan.pred_mlp_sizes"));
    o.pred_mlp_sizes.pop_back();
    nn::compute_cost_net net(o);
    nn::load_state_dict(net, file);
    return neural_cost(net, std::move(meta));
  }

 private:
  struct state {
    state(const nn::compute_cost_net& n, neural_cost_metadata m,
          nn::simd_kernel kernel = nn::simd_kernel::automatic)
        : net(n), packed(n, kernel), meta(std::move(m)) {}
    nn::compute_cost_net net;
    nn::packed_compute_cost_net packed;
    neural_cost_metadata meta;
  };

  // The net's prediction at the training batch -> this task's compute cost.
  static compute_cost scaled(const state& s, const task& t, float predicted, bool empty) {
    const double scale = static_cast<double>(t.batch_size) / static_cast<double>(s.meta.batch_size);
    const double total = empty ? 0.0 : static_cast<double>(predicted) * scale;
    return compute_cost{.fwd_ms = total * s.meta.forward_share,
                        .bwd_ms = total * (1.0 - s.meta.forward_share)};
  }

  const state& require() const {
    if (!state_) {
      embplan::detail::fail("neural_cost", "(empty)", "a model (construct or load one)");
    }
    return *state_;
  }

  // f(offset, devices) for each row of a rows x devices layout of `size`
  // entries whose output span (named out_field) has out_size; both checked.
  template <class F>
  static void for_rows(const task& t, std::size_t size, std::size_t out_size, const char* out_field,
                       F&& f) {
    const std::size_t n = t.cluster.size();
    if (n == 0 || size % n != 0) {
      embplan::detail::fail(
          "dim_sums.size", size,
          "a multiple of the device count " + std::to_string(n) + " (rows x devices)");
    }
    if (out_size != size) {
      embplan::detail::fail(out_field, out_size,
                            "one entry per dim sum (" + std::to_string(size) + ")");
    }
    for (std::size_t at = 0; at < size; at += n)
      f(at, n);
  }

  // One half of the analytic communication: analytic_cost::communication on
  // the given starts (all 0 where start_ms is null), its `half` copied to out.
  // Checks the lengths in analytic_cost's order and words (dim_sum, start_ms,
  // then the output span, named by out_field).
  void analytic_half(const task& t, std::span<const std::int64_t> dim_sum,
                     const std::span<const double>* start_ms, std::span<double> out,
                     const char* out_field, double comm_cost::*half) const {
    const std::size_t n = t.cluster.size();
    const auto check_length = [n](const char* field, std::size_t got) {
      if (got != n) {
        embplan::detail::fail(field, got, "one entry per device (" + std::to_string(n) + ")");
      }
    };
    check_length("dim_sum.size", dim_sum.size());
    if (start_ms != nullptr) check_length("start_ms.size", start_ms->size());
    check_length(out_field, out.size());
    // Up to 16 devices without writing a buffer per call (a search prices
    // thousands of plans): the zero starts are constant, the figures go to
    // a buffer kept per thread.
    static constexpr std::array<double, 16> no_skew{};
    thread_local std::vector<comm_cost> both;
    thread_local std::vector<double> zeros;
    both.resize(n);
    std::span<const double> starts(no_skew.data(), std::min(n, no_skew.size()));
    if (start_ms != nullptr) {
      starts = *start_ms;
    } else if (n > no_skew.size()) {
      zeros.assign(n, 0.0);
      starts = zeros;
    }
    std::get<analytic_cost>(comm_).communication(t, dim_sum, starts, both);
    for (std::size_t d = 0; d < n; ++d)
      out[d] = both[d].*half;
  }

  std::shared_ptr<const state> state_;
  std::variant<analytic_cost, neural_comm> comm_{};
};
static_assert(cost_model<neural_cost>);
static_assert(split_communication<neural_cost>);
static_assert(batched_communication<neural_cost>);

// neural_cost::compute: the head's first layer is linear in the sum of the
// pieces' table-MLP latents, so a device's pre-activation is that layer's
// bias plus each piece's latent through its weight (a term: 64 floats for
// NeuroShard's head 32-64-1, up to max_term), added in group order
// (neural_cost::piece_term / fold_start / from_fold; the packed net's
// operator() adds them the same way, so the fold is bitwise compute()).
// A term is computed once per piece; placing a piece then costs a 64-float
// add and the rest of the head (ReLU and a 64-float dot), where folding
// latents would cost the 32x64 layer as well. Finishing is cheaper than a
// look-up in the search's cache, so device costs are folded, not cached
// (cache_groups = false; bench_nn's bm_packed_finish measures it, and
// docs/design/learned-cost-models.md keeps the figures).
template <>
struct piecewise_compute<neural_cost> {
  static constexpr bool enabled = true;
  static constexpr bool cache_groups = false;
  static constexpr std::size_t max_term = 64;
  struct term {
    alignas(64) std::array<float, max_term> v{};
  };
  using sum = term;

  // A net with a wider first head layer is priced by compute() (no piecewise path).
  static bool usable(const neural_cost& m) { return m.term_size() <= max_term; }

  static term piece(const neural_cost& m, const task& t, const shard& s, std::size_t) {
    term out;
    m.piece_term(t, s, out.v.data());
    return out;
  }

  static sum start(const neural_cost& m) {
    sum out;
    m.fold_start(out.v.data());
    return out;
  }
  static void add(const neural_cost& m, sum& acc, const term& x) {
    m.fold_add(acc.v.data(), x.v.data());
  }

  static compute_cost finish(const neural_cost& m, const task& t, const sum& acc,
                             std::size_t pieces, std::size_t) {
    return m.from_fold(t, acc.v.data(), pieces);
  }
  // out = acc + x, then finish(out): add() and finish() in one call.
  static compute_cost add_finish(const neural_cost& m, const task& t, sum& out, const sum& acc,
                                 const term& x, std::size_t pieces, std::size_t) {
    return m.from_fold_add(t, out.v.data(), acc.v.data(), x.v.data(), pieces);
  }
};

}  // namespace embplan::inline EMBPLAN_ABI
