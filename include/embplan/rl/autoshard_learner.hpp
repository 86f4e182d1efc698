#pragma once
// One learner update of AutoShard's policy-value network (KDD'22 §4.4-4.5,
// Algorithm 1 line 6): for a batch of trajectories that actors recorded with
// a possibly stale policy, the learner's logits and values
// (rl::autoshard_forward), the V-trace targets against the actors' recorded
// log-probabilities and IMPALA's loss (rl/impala.hpp), its gradients
// (rl::autoshard_backward) summed over the batch, clipped to a global norm
// (AutoShard's Appendix: 40) and one Adam step (1e-3). The cost head is not
// on this loss: Adam skips its parameters (as PyTorch skips parameters
// without a gradient), and the cost model's own updates train it.
// Deterministic: the same network, optimizer state and batch give the same
// network, bit for bit.
//
// `template <class = void>` on a function: instantiated only where called (nn/tensor.hpp).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "embplan/core/error.hpp"
#include "embplan/nn/adam.hpp"
#include "embplan/nn/clip.hpp"
#include "embplan/nn/module.hpp"
#include "embplan/nn/paper_models.hpp"
#include "embplan/rl/autoshard_net.hpp"
#include "embplan/rl/impala.hpp"
#include "embplan/version.hpp"

namespace embplan::inline EMBPLAN_ABI::rl {

// One episode as an actor recorded it: the network's inputs, and per step
// the action taken (within the step), its log-probability under the actor's
// policy, and the reward (AutoShard: 0 but at the last step).
struct autoshard_trajectory {
  autoshard_episode inputs;
  std::vector<std::int64_t> action;
  std::vector<double> behaviour_logp;
  std::vector<double> reward;
};

struct autoshard_learner_options {
  impala_options impala{};
  double max_grad_norm = 40.0;  // global L2 norm; 0: no clipping
};

struct autoshard_learner_stats {
  double loss = 0.0;  // summed over the batch
  double policy = 0.0;
  double baseline = 0.0;
  double entropy = 0.0;
  double grad_norm = 0.0;  // before clipping
  std::size_t steps = 0;   // placement steps in the batch
};

// The update on `batch` (at least one trajectory): net changes in place,
// `opt` keeps Adam's state. Bad input names the field (autoshard_episode.*,
// impala_episode.*, autoshard_learner_options.*).
template <class = void>
autoshard_learner_stats autoshard_learner_step(nn::autoshard_net& net, nn::adam& opt,
                                               std::span<const autoshard_trajectory> batch,
                                               const autoshard_learner_options& o = {}) {
  if (!(o.max_grad_norm >= 0.0) || !std::isfinite(o.max_grad_norm)) {
    embplan::detail::fail("autoshard_learner_options.max_grad_norm", o.max_grad_norm,
                          "a finite number >= 0 (0: no clipping)");
  }
  if (batch.empty()) {
    embplan::detail::fail("autoshard_learner_step.batch.size", batch.size(),
                          "at least one trajectory");
  }
  autoshard_learner_stats stats;
  auto grad = nn::zeros_like(net);
  autoshard_tape tape;
  nn::matrix dlogits, dvalues;
  for (const auto& traj : batch) {
    autoshard_forward(net, traj.inputs, tape);
    const impala_episode ep{traj.inputs.action_count, traj.action, traj.behaviour_logp,
                            traj.reward};
    const auto targets = impala_vtrace(tape.logits, tape.values, ep, o.impala);
    const auto parts =
        impala_loss(tape.logits, tape.values, ep, targets, o.impala, dlogits, dvalues);
    autoshard_backward(net, traj.inputs, tape, dlogits, dvalues, grad);
    stats.loss += parts.total;
    stats.policy += parts.policy;
    stats.baseline += parts.baseline;
    stats.entropy += parts.entropy;
    stats.steps += traj.action.size();
  }
  if (o.max_grad_norm > 0.0) {
    stats.grad_norm = nn::clip_grad_norm(grad, o.max_grad_norm);
  } else {
    stats.grad_norm = std::sqrt(nn::squared_norm(grad));
  }
  opt.step(net, grad, [](std::string_view name) { return name.rfind("c_fc", 0) != 0; });
  return stats;
}

}  // namespace embplan::inline EMBPLAN_ABI::rl
