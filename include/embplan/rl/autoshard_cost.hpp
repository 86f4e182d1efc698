#pragma once
// AutoShard's neural cost model and its training (KDD'22 §4.1 "neural cost
// model", §4.5 / Algorithm 1 lines 7-9; the authors' Net.cost_forward,
// compute_cost_loss and utils.RingBuffer). The cost head shares the policy's
// table MLP: for a shard (a group of tables) its predicted latency is
//   e(x) = relu(t_fc_1(relu(t_fc_0(x))))     per table,      F -> 128 -> 32
//   m    = sum of e(x) over the group's tables                32
//   cost = c_fc_1(relu(c_fc_0(m)))                            32 -> 64 -> 1
// (the same figure as autoshard_inference::cost on summed table latents), and
// the loss of a batch of measured shards is the mean squared error between
// prediction and measured milliseconds. One step: forward, backward into the
// four layers the loss reaches (t_fc_*, c_fc_*), a global-norm clip (the
// Appendix's 40) and one Adam step on those layers only.
// autoshard_cost_buffer is the replay the steps draw from: a ring of the
// latest measured shards (the authors' 5000), batches of 512 drawn uniformly
// with replacement (embplan::rng: the same distribution as numpy's randint,
// another stream).
// Where this differs from the authors' code in the last float bit, and which
// torch's zero_grad it follows: docs/design/autoshard.md.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <Eigen/Core>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/core/random.hpp"
#include "embplan/nn/adam.hpp"
#include "embplan/nn/clip.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/nn/tensor.hpp"
#include "embplan/rl/autoshard_net.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

// Measured shards: their tables stacked group after group, and each group's
// latency.
struct autoshard_cost_batch {
  nn::matrix tables{};                 // [sum of offset, table features]
  std::vector<std::int64_t> offset{};  // tables per group, each >= 1
  std::vector<double> cost{};          // measured ms per group
};

// The forward record autoshard_cost_backward reads.
struct autoshard_cost_tape {
  nn::matrix t0;    // [rows, 128]: relu(t_fc_0(x))
  nn::matrix e;     // [rows, 32]: table latents
  nn::matrix sums;  // [groups, 32]: latents summed per group
  nn::matrix c0;    // [groups, 64]: relu(c_fc_0(sums))
  nn::matrix pred;  // [groups, 1]: predicted ms
};

struct autoshard_cost_stats {
  double loss = 0.0;       // mean squared error of the batch, before the step
  double grad_norm = 0.0;  // global L2 norm before clipping
  std::size_t groups = 0;  // shards in the batch
};

namespace detail {

// The network has its layers; `offset` is >= 1 per group and `tables` has
// its rows and the table features.
inline void require_cost_input(const nn::autoshard_net& n,
                               const Eigen::Ref<const nn::matrix>& tables,
                               std::span<const std::int64_t> offset) {
  if (n.t_fc_0.weight.size() == 0 || n.c_fc_1.weight.size() == 0) {
    embplan::detail::fail("autoshard_cost_forward.net", "(empty)",
                          "a network with its layers (nn::autoshard_net(features, state_other, "
                          "actions_other), then load_state_dict)");
  }
  if (offset.empty()) {
    embplan::detail::fail("autoshard_cost_batch.offset.size", offset.size(), "at least one group");
  }
  std::int64_t rows = 0;
  for (std::size_t k = 0; k < offset.size(); ++k) {
    if (offset[k] < 1) {
      embplan::detail::fail("autoshard_cost_batch.offset[" + std::to_string(k) + "]", offset[k],
                            "a table count >= 1");
    }
    rows += offset[k];
  }
  require_shape("autoshard_cost_batch.tables", tables.rows(), tables.cols(), rows,
                n.t_fc_0.weight.cols());
}

}  // namespace detail

// Predicted latency per group (tape.pred), recorded for autoshard_cost_backward.
// Bad input names the field (autoshard_cost_batch.offset[k], .tables.shape).
template <class = void>
void autoshard_cost_forward(const nn::autoshard_net& n, const Eigen::Ref<const nn::matrix>& tables,
                            std::span<const std::int64_t> offset, autoshard_cost_tape& tp) {
  detail::require_cost_input(n, tables, offset);
  detail::relu_layer(n.t_fc_0, tables, tp.t0);
  detail::relu_layer(n.t_fc_1, tp.t0, tp.e);
  const auto groups = static_cast<Eigen::Index>(offset.size());
  tp.sums.setZero(groups, tp.e.cols());
  Eigen::Index row = 0;
  for (Eigen::Index g = 0; g < groups; ++g)
    for (std::int64_t k = 0; k < offset[static_cast<std::size_t>(g)]; ++k, ++row)
      tp.sums.row(g) += tp.e.row(row);  // index_add_ order: row by row
  detail::relu_layer(n.c_fc_0, tp.sums, tp.c0);
  n.c_fc_1.forward(tp.c0, tp.pred);
}

// Backpropagation of dL/dpred [groups, 1] through the pass recorded in `tp`
// (by autoshard_cost_forward on the same network, tables and offset):
// gradients accumulate into grad's t_fc_0, t_fc_1, c_fc_0 and c_fc_1 (`grad`:
// a network of the same shape, e.g. nn::zeros_like(net)); the rest is left.
template <class = void>
void autoshard_cost_backward(const nn::autoshard_net& n, const Eigen::Ref<const nn::matrix>& tables,
                             std::span<const std::int64_t> offset, const autoshard_cost_tape& tp,
                             const Eigen::Ref<const nn::matrix>& dpred, nn::autoshard_net& grad) {
  const auto groups = static_cast<Eigen::Index>(offset.size());
  if (tp.pred.rows() != groups) {
    embplan::detail::fail(
        "autoshard_cost_backward.tape.pred.rows", tp.pred.rows(),
        std::to_string(groups) + " (one per group: autoshard_cost_forward's tape of this offset)");
  }
  if (tp.e.rows() != tables.rows()) {
    embplan::detail::fail("autoshard_cost_backward.tape.e.rows", tp.e.rows(),
                          std::to_string(tables.rows()) +
                              " (one per table: autoshard_cost_forward's tape of these tables)");
  }
  if (dpred.rows() != groups || dpred.cols() != 1) {
    embplan::detail::fail("autoshard_cost_backward.dpred.rows", dpred.rows(),
                          std::to_string(groups) + " (one per group), 1 column");
  }
  nn::matrix dc0, dsums;
  n.c_fc_1.backward(tp.c0, dpred, grad.c_fc_1, &dc0);
  detail::relu_layer_backward(n.c_fc_0, tp.sums, tp.c0, std::move(dc0), grad.c_fc_0, &dsums);
  nn::matrix de(tp.e.rows(), tp.e.cols());
  Eigen::Index row = 0;
  for (Eigen::Index g = 0; g < groups; ++g)
    for (std::int64_t k = 0; k < offset[static_cast<std::size_t>(g)]; ++k, ++row)
      de.row(row) = dsums.row(g);
  nn::matrix dt0;
  detail::relu_layer_backward(n.t_fc_1, tp.t0, tp.e, std::move(de), grad.t_fc_1, &dt0);
  detail::relu_layer_backward(n.t_fc_0, tables, tp.t0, std::move(dt0), grad.t_fc_0, nullptr);
}

// One cost-model update on `b` (Algorithm 1, line 9): loss = mean over groups
// of (pred - cost)^2, its gradients clipped to a global norm of
// max_grad_norm (0: no clipping), one Adam step on t_fc_* and c_fc_* (the
// other parameters, their moments and step counts are left as they are).
// Returns the loss before the step. Bad input names the field
// (autoshard_cost_batch.*, autoshard_cost_step.max_grad_norm).
template <class = void>
autoshard_cost_stats autoshard_cost_step(nn::autoshard_net& net, nn::adam& opt,
                                         const autoshard_cost_batch& b,
                                         double max_grad_norm = 40.0) {
  if (!(max_grad_norm >= 0.0) || !std::isfinite(max_grad_norm)) {
    embplan::detail::fail("autoshard_cost_step.max_grad_norm", max_grad_norm,
                          "a finite number >= 0 (0: no clipping)");
  }
  if (b.cost.size() != b.offset.size()) {
    embplan::detail::fail("autoshard_cost_batch.cost.size", b.cost.size(),
                          std::to_string(b.offset.size()) + ", one per group (offset.size)");
  }
  for (std::size_t k = 0; k < b.cost.size(); ++k) {
    if (!(b.cost[k] >= 0.0) || !std::isfinite(b.cost[k])) {
      embplan::detail::fail("autoshard_cost_batch.cost[" + std::to_string(k) + "]", b.cost[k],
                            "a finite latency >= 0 (ms)");
    }
  }
  autoshard_cost_tape tape;
  autoshard_cost_forward(net, b.tables, b.offset, tape);
  const auto groups = static_cast<Eigen::Index>(b.offset.size());
  const double count = static_cast<double>(groups);
  autoshard_cost_stats stats{.groups = b.offset.size()};
  nn::matrix dpred(groups, 1);
  for (Eigen::Index g = 0; g < groups; ++g) {
    const double diff = static_cast<double>(tape.pred(g, 0)) - b.cost[static_cast<std::size_t>(g)];
    stats.loss += diff * diff / count;
    dpred(g, 0) = static_cast<float>(2.0 * diff / count);
  }
  auto grad = nn::zeros_like(net);
  autoshard_cost_backward(net, b.tables, b.offset, tape, dpred, grad);
  stats.grad_norm = max_grad_norm > 0.0 ? nn::clip_grad_norm(grad, max_grad_norm)
                                        : std::sqrt(nn::squared_norm(grad));
  opt.step(net, grad, [](std::string_view name) {
    return name.rfind("t_fc", 0) == 0 || name.rfind("c_fc", 0) == 0;
  });
  return stats;
}

// The authors' RingBuffer: the latest `capacity` measured shards (a group of
// tables [k, F] and its latency), the oldest overwritten once full; sample()
// draws batch_size of them uniformly with replacement. Slot i (0 <= i <
// size()) is where the i-th append went, modulo capacity: after capacity + j
// appends, slots 0 .. j-1 hold the newest j.
class autoshard_cost_buffer {
 public:
  static constexpr std::size_t default_capacity = 5000;
  static constexpr std::size_t default_batch_size = 512;

  autoshard_cost_buffer() : autoshard_cost_buffer(default_capacity, default_batch_size) {}

  explicit autoshard_cost_buffer(std::size_t capacity, std::size_t batch_size = default_batch_size)
      : capacity_(capacity), batch_size_(batch_size) {
    if (capacity < 1) {
      embplan::detail::fail("autoshard_cost_buffer.capacity", capacity,
                            "at least 1 group (the authors' 5000)");
    }
    if (batch_size < 1) {
      embplan::detail::fail("autoshard_cost_buffer.batch_size", batch_size,
                            "at least 1 group (the authors' 512)");
    }
  }

  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t batch_size() const noexcept { return batch_size_; }
  std::size_t size() const noexcept { return cost_ms_.size(); }
  bool empty() const noexcept { return cost_ms_.empty(); }
  // Table features of the groups held (0 before the first append).
  Eigen::Index features() const noexcept { return features_; }

  // The slot the next append writes (0 until the ring is full and wraps).
  std::size_t next_slot() const noexcept { return next_; }

  // A buffer as saved: slot i holds tables[i] and cost_ms[i], `next` the slot
  // the next append writes (a checkpoint's exact state). Bad contents name the
  // field, as append() would.
  static autoshard_cost_buffer restore(std::size_t capacity, std::size_t batch_size,
                                       std::vector<nn::matrix> tables, std::vector<double> cost_ms,
                                       std::size_t next) {
    autoshard_cost_buffer b(capacity, batch_size);
    if (tables.size() != cost_ms.size() || tables.size() > capacity) {
      embplan::detail::fail("autoshard_cost_buffer.restore.size", tables.size(),
                            std::to_string(cost_ms.size()) + " groups (one per cost), at most " +
                                "the capacity " + std::to_string(capacity));
    }
    const std::size_t want_next = tables.size() < capacity ? tables.size() % capacity : next;
    if (next >= capacity || next != want_next) {
      embplan::detail::fail("autoshard_cost_buffer.restore.next", next,
                            tables.size() < capacity
                                ? std::to_string(want_next) + " (the buffer is not full)"
                                : "a slot below the capacity " + std::to_string(capacity));
    }
    for (std::size_t k = 0; k < tables.size(); ++k)
      b.append(tables[k], cost_ms[k]);
    b.next_ = next;
    return b;
  }

  // Slot i's group and latency.
  const nn::matrix& tables(std::size_t slot) const {
    require_slot(slot);
    return tables_[slot];
  }
  double cost_ms(std::size_t slot) const {
    require_slot(slot);
    return cost_ms_[slot];
  }

  // One measured shard: at least one table, the features of earlier groups,
  // a finite latency >= 0 (else refused, naming the field; nothing is kept).
  template <class = void>
  void append(const Eigen::Ref<const nn::matrix>& group_tables, double cost_ms) {
    if (group_tables.rows() < 1) {
      embplan::detail::fail("autoshard_cost_buffer.append.tables.rows", group_tables.rows(),
                            "at least one table in the group");
    }
    const Eigen::Index want = features_ > 0 ? features_ : group_tables.cols();
    if (group_tables.cols() < 1 || group_tables.cols() != want) {
      embplan::detail::fail("autoshard_cost_buffer.append.tables.cols", group_tables.cols(),
                            features_ > 0
                                ? std::to_string(features_) + " table features, as earlier groups"
                                : std::string("at least one table feature"));
    }
    if (!(cost_ms >= 0.0) || !std::isfinite(cost_ms)) {
      embplan::detail::fail("autoshard_cost_buffer.append.cost_ms", cost_ms,
                            "a finite latency >= 0 (ms)");
    }
    features_ = group_tables.cols();
    if (cost_ms_.size() < capacity_) {
      tables_.emplace_back(group_tables);
      cost_ms_.push_back(cost_ms);
    } else {
      tables_[next_] = group_tables;
      cost_ms_[next_] = cost_ms;
    }
    next_ = (next_ + 1) % capacity_;
  }

  // batch_size() groups drawn uniformly with replacement into `out` (its
  // memory reused); the same generator state gives the same batch. An empty
  // buffer is refused.
  template <class = void>
  void sample(rng& gen, autoshard_cost_batch& out) const {
    if (empty()) {
      embplan::detail::fail("autoshard_cost_buffer.size", size(),
                            "at least one group appended before sample()");
    }
    std::vector<std::size_t> picks(batch_size_);
    Eigen::Index rows = 0;
    for (auto& pick : picks) {
      pick = static_cast<std::size_t>(gen.below(size()));
      rows += tables_[pick].rows();
    }
    out.tables.resize(rows, features_);
    out.offset.resize(batch_size_);
    out.cost.resize(batch_size_);
    Eigen::Index row = 0;
    for (std::size_t k = 0; k < batch_size_; ++k) {
      const nn::matrix& group = tables_[picks[k]];
      out.tables.middleRows(row, group.rows()) = group;
      row += group.rows();
      out.offset[k] = static_cast<std::int64_t>(group.rows());
      out.cost[k] = cost_ms_[picks[k]];
    }
  }

 private:
  void require_slot(std::size_t slot) const {
    if (slot >= size()) {
      embplan::detail::fail("autoshard_cost_buffer.slot", slot,
                            "a slot < size() = " + std::to_string(size()));
    }
  }

  std::size_t capacity_;
  std::size_t batch_size_;
  std::size_t next_ = 0;  // the slot the next append writes
  Eigen::Index features_ = 0;
  std::vector<nn::matrix> tables_{};
  std::vector<double> cost_ms_{};
};

}  // namespace embplan::inline EMBPLAN_ABI::rl
