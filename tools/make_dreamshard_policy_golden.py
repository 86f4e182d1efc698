#!/usr/bin/env python3
"""Golden file for DreamShard's policy network (include/embplan/rl/dreamshard_policy_net.hpp,
rl/ragged_softmax.hpp, rl/reinforce.hpp).

    /usr/bin/python3 tools/make_dreamshard_policy_golden.py [--out test/rl/golden]

dreamshard_policy_golden.safetensors holds a seeded DreamShard Model (21 table
features, 4 devices; the layout of tools/make_golden.py's DreamShardModel;
PyTorch's init, then the heads' last layers and policy_net times 10 so the
logits spread) under "model.*", stored as F16 with the weights rounded to F16 before anything
is computed (so the float32 values the C++ side loads are the ones PyTorch
used, and the file stays small), and:
  features [10, 21]          the tables' raw features
  rows [R, 21]               the observations' feature rows, stacked: for each
                             observation, for each legal device in order, the
                             rows of the tables it holds (one all-zero row when
                             it holds none)
  slot_of (I64) [R]          slot of every row; group_of (I64) [S] observation
                             of every slot; slot_device (I64) [S] its device
  logits [S], probs [S]      policy_net outputs and the softmax over each
                             observation's legal devices (Model.forward, then the
                             authors' F.softmax over the devices they pass)
  cost_features [S, 3]       the cost heads fed to cost_fc_0, in kernel_forward's
                             order (forward, communication, backward)
  actions (I64) [G]          a chosen slot per observation (global slot index)
  rewards [G], entropy_weight [1], loss [1]
                             train_rl's loss on that batch: rewards normalised
                             (r - mean) / (std + 1e-8), mean(-log pi(a) r') +
                             entropy_weight * mean(sum pi log pi)
  grad.<param> [...]         d loss / d parameter for policy_net, cost_fc_*,
                             rl_table_fc_* (the cost branch gets none: its
                             features are taken under no_grad)
  single_table_cost [10]     forward + communication + backward heads on a
                             one-table device (Env.reset's sort key)
  table_order (I64) [10]     the tables sorted by that cost, descending, stable
The network is written out here from the paper's description (App. B.2), not
taken from the authors' code; it follows their Model's forward. CPU, float32,
one thread, fixed seed.
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import DreamShardModel, common_metadata, reset, write  # noqa: E402

FEATURES = 21
DEVICES = 4
# Observations: the tables on each of the 4 devices, and the legal devices.
OBSERVATIONS = [
    ([[], [], [], []], [0, 1, 2, 3]),
    ([[0], [], [1, 2], []], [0, 1, 2, 3]),
    ([[0, 3], [4], [1, 2], []], [1, 3]),
    ([[0, 3, 5], [4, 6], [1, 2, 7], [8]], [0, 2, 3]),
    ([[0, 3, 5], [4, 6, 9], [1, 2, 7], [8]], [2]),
]
ACTIONS_BY_DEVICE = [2, 0, 3, 2, 2]  # the device chosen in each observation
REWARDS = [-3.5, -3.5, -2.0, -2.0, -2.75]
ENTROPY_WEIGHT = 0.05
SCALE = 10.0  # applied to the heads' last layers and policy_net after init
GRADS = ["policy_net.weight", "policy_net.bias", "cost_fc_1.bias", "cost_fc_0.weight",
         "cost_fc_0.bias", "rl_table_fc_1.bias", "rl_table_fc_0.weight", "rl_table_fc_0.bias"]


def mlp2(first, second, x):
    """Two linear layers, ReLU after both (the table MLPs, the cost-feature MLP)."""
    return F.relu(second(F.relu(first(x))))


def heads(model, device_latent):
    """Forward, communication, backward cost of each device latent, as columns."""
    cols = [getattr(model, f"{h}_fc_1")(F.relu(getattr(model, f"{h}_fc_0")(device_latent)))
            for h in ("forward", "communication", "backward")]
    return torch.cat(cols, dim=1)


def stack_observations(features):
    rows, slot_of, group_of, slot_device = [], [], [], []
    for g, (tables, legal) in enumerate(OBSERVATIONS):
        for d in legal:
            slot = len(group_of)
            group_of.append(g)
            slot_device.append(d)
            held = tables[d]
            block = features[held] if held else torch.zeros(1, FEATURES)
            rows.append(block)
            slot_of += [slot] * block.shape[0]
    return (torch.cat(rows), torch.tensor(slot_of, dtype=torch.int64),
            torch.tensor(group_of, dtype=torch.int64), torch.tensor(slot_device, dtype=torch.int64))


def policy_logits(model, rows, slot_of, slots):
    """One logit per slot: [summed RL table latents, cost-feature latent] -> policy_net."""
    with torch.no_grad():  # DreamShard computes the cost features without gradient
        cost_latent = torch.zeros(slots, 32).index_add_(
            0, slot_of, mlp2(model.table_fc_0, model.table_fc_1, rows))
        cost_features = heads(model, cost_latent)
    cost_part = mlp2(model.cost_fc_0, model.cost_fc_1, cost_features)
    table_part = torch.zeros(slots, 32).index_add_(
        0, slot_of, mlp2(model.rl_table_fc_0, model.rl_table_fc_1, rows))
    logits = model.policy_net(torch.cat([table_part, cost_part], dim=1)).flatten()
    return logits, cost_features


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "test", "rl", "golden"))
    args = parser.parse_args()
    reset(20)
    model = DreamShardModel(FEATURES, devices=DEVICES)
    with torch.no_grad():
        # PyTorch's init gives near-equal logits; spread them so the
        # probabilities say something.
        for name in ("forward_fc_1", "communication_fc_1", "backward_fc_1", "policy_net"):
            for p in getattr(model, name).parameters():
                p.mul_(SCALE)
        for p in model.parameters():
            p.copy_(p.half().float())
    features = torch.randn(10, FEATURES)
    rows, slot_of, group_of, slot_device = stack_observations(features)
    slots, groups = len(group_of), len(OBSERVATIONS)

    logits, cost_features = policy_logits(model, rows, slot_of, slots)
    log_probs = torch.empty(slots)
    for g in range(groups):
        members = (group_of == g).nonzero().flatten()
        log_probs[members] = F.log_softmax(logits[members], dim=0)
    probs = log_probs.exp()

    actions = []
    for g, d in enumerate(ACTIONS_BY_DEVICE):
        actions.append(int(((group_of == g) & (slot_device == d)).nonzero().flatten()[0]))
    actions = torch.tensor(actions, dtype=torch.int64)
    rewards = torch.tensor(REWARDS, dtype=torch.float32)
    normalised = (rewards - rewards.mean()) / (rewards.std() + 1e-8)
    policy_term = torch.mean(-log_probs[actions] * normalised)
    neg_entropy = torch.zeros(groups).index_add_(0, group_of, probs * log_probs)
    loss = policy_term + ENTROPY_WEIGHT * torch.mean(neg_entropy)
    model.zero_grad()
    loss.backward()
    params = dict(model.named_parameters())
    for name in ("table_fc_0.weight", "forward_fc_1.weight", "backward_fc_0.bias"):
        assert params[name].grad is None, name  # the cost branch gets no gradient

    with torch.no_grad():
        single = heads(model, mlp2(model.table_fc_0, model.table_fc_1, features))
        single_cost = torch.tensor([float(r[0]) + float(r[1]) + float(r[2]) for r in single],
                                   dtype=torch.float64)
        order = sorted(range(10), key=lambda t: float(single_cost[t]), reverse=True)

    tensors = {f"model.{k}": v.detach().clone().half() for k, v in model.state_dict().items()}
    tensors.update({
        "features": features,
        "rows": rows,
        "slot_of": slot_of,
        "group_of": group_of,
        "slot_device": slot_device,
        "logits": logits.detach(),
        "probs": probs.detach(),
        "cost_features": cost_features,
        "actions": actions,
        "rewards": rewards,
        "entropy_weight": torch.tensor([ENTROPY_WEIGHT], dtype=torch.float32),
        "loss": loss.detach().reshape(1),
        "single_table_cost": single_cost.float(),
        "table_order": torch.tensor(order, dtype=torch.int64),
    })
    for name in GRADS:
        tensors[f"grad.{name}"] = params[name].grad.detach().clone()
    metadata = common_metadata("DreamShard policy network: model (F16), 5 observations of "
                               "4 devices, logits, probabilities, cost features, the REINFORCE "
                               "loss and RL-branch gradients, single-table costs")
    metadata["generator"] = "tools/make_dreamshard_policy_golden.py"
    os.makedirs(args.out, exist_ok=True)
    write(args.out, "dreamshard_policy_golden.safetensors", tensors, metadata)


if __name__ == "__main__":
    main()
