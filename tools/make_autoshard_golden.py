#!/usr/bin/env python3
"""Golden file for AutoShard's policy-value network at inference
(include/embplan/rl/autoshard_net.hpp).

    /usr/bin/python3 tools/make_autoshard_golden.py [--out test/rl/golden]

autoshard_net_golden.safetensors holds a seeded network with the parameter
names of the authors' `Net` (t_fc_0/1, s_fc_0, a_fc_0, core = nn.LSTM(64, 64,
2), p_fc_0..3, b_fc_0/1, c_fc_0/1; 21 table features, 1 state_other feature,
1 actions_other feature), under "net.*", the weights rounded to F16 and back
before anything is computed and stored as F16 (small, and the floats the C++
side loads are those PyTorch used); and one episode of 7 steps placing 7
tables on 4 shards:
  tables [7, 21]              the tables' raw features, in placement order
  state_other [7, 1]          the share of tables still to place
  actions_other [7, 4]        each shard's "predicted cost" before each step
  assignment (I64) [7]        the shard each table goes to (fixed, not sampled)
  logits [7, 4], value [7]    the policy logits and the value head per step
  cost [4]                    the cost head on each shard's summed table
                              latents at the end
  w_logits [7, 4], w_value [7]
                              weights of a loss sum(w_logits * logits) +
                              sum(w_value * value) over the episode
  grad_index.<param> (I64) [16], grad_value.<param> [16]
                              16 entries (flat indices) of d loss / d param
                              for every parameter but the cost head's
The forward is written here from the paper (Appendix, "Architecture of the
policy-value network") following the structure of the authors' Net.forward
(state = [table latent, relu(s_fc_0)], LSTM, baseline from its output; an
action = [summed table latents of the shard, relu(a_fc_0)], the policy MLP on
[state, action, state * action]); no code of theirs is copied. CPU, float32,
one thread, fixed seed: a rerun gives the same bytes.
"""

import argparse
import os
import sys

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_state_dict import write_safetensors  # noqa: E402
from make_golden import AutoShardNet, common_metadata, reset  # noqa: E402

FEATURES = 21
SHARDS = 4
STEPS = 7


class PolicyValueNet(AutoShardNet):
    """make_golden.py's parameter layout with the forward of one step."""

    def latent(self, x):
        return F.relu(self.t_fc_1(F.relu(self.t_fc_0(x))))

    def step(self, table, other, held, counts, actions_other, core_state):
        state = torch.cat((self.latent(table), F.relu(self.s_fc_0(other))), -1)  # [1, 64]
        out, core_state = self.core(state.unsqueeze(0), core_state)
        h = out.flatten(0, 1)  # [1, 64]
        value = self.b_fc_1(F.relu(self.b_fc_0(h))).view(())
        sums = torch.zeros(SHARDS, 32)
        if held.shape[0] > 0:
            ind = torch.repeat_interleave(torch.arange(SHARDS), counts)
            sums.index_add_(0, ind, self.latent(held))
        actions = torch.cat((sums, F.relu(self.a_fc_0(actions_other))), -1)  # [A, 64]
        state = h.repeat(SHARDS, 1)
        x = torch.cat((state, actions, state * actions), -1)
        x = F.relu(self.p_fc_0(x))
        x = F.relu(self.p_fc_1(x))
        x = F.relu(self.p_fc_2(x))
        logits = self.p_fc_3(x).view(-1)
        return logits, value, core_state


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="test/rl/golden")
    args = p.parse_args()
    reset(2021)
    net = PolicyValueNet(FEATURES, 1, 1)
    with torch.no_grad():
        for prm in net.parameters():
            prm.copy_(prm.half().float())
    gen = torch.Generator().manual_seed(7)
    tables = torch.randn(STEPS, FEATURES, generator=gen).half().float()
    assignment = torch.tensor([2, 0, 2, 3, 1, 2, 0], dtype=torch.int64)
    state_other = torch.tensor([[(STEPS - t) / STEPS] for t in range(STEPS)]).half().float()
    actions_other = (torch.rand(STEPS, SHARDS, generator=gen) * 5.0).half().float()

    def episode():
        """Per step: the logits and the value, the LSTM from zero state."""
        out = []
        core_state = (torch.zeros(2, 1, 64), torch.zeros(2, 1, 64))
        for t in range(STEPS):
            held = [[i for i in range(t) if int(assignment[i]) == s] for s in range(SHARDS)]
            rows = [i for s in range(SHARDS) for i in held[s]]
            counts = torch.tensor([len(h) for h in held], dtype=torch.int64)
            held_x = tables[rows] if rows else torch.zeros(0, FEATURES)
            lg, v, core_state = net.step(tables[t:t + 1], state_other[t:t + 1], held_x, counts,
                                         actions_other[t].view(SHARDS, 1), core_state)
            out.append((lg, v))
        return out

    with torch.no_grad():
        steps = episode()
        logits = [lg for lg, _ in steps]
        values = [v for _, v in steps]
        final = torch.zeros(SHARDS, 32)
        final.index_add_(0, assignment, net.latent(tables))
        cost = net.c_fc_1(F.relu(net.c_fc_0(final))).view(-1)

    # Gradients of loss = sum(w_logits * logits) + sum(w_value * value) over
    # the episode (the LSTM from zero state), 16 entries of each parameter
    # (the cost head gets none): flat indices and values.
    w_logits = torch.randn(STEPS, SHARDS, generator=gen).half().float()
    w_value = torch.randn(STEPS, generator=gen).half().float()
    loss = 0.0
    for t, (lg, v) in enumerate(episode()):
        loss = loss + (w_logits[t] * lg).sum() + w_value[t] * v
    net.zero_grad()
    loss.backward()
    grads = {}
    for name, prm in net.named_parameters():
        if name.startswith("c_fc"):
            continue
        flat = prm.grad.reshape(-1)
        idx = torch.randperm(flat.numel(), generator=gen)[:16]
        grads[f"grad_index.{name}"] = idx.to(torch.int64)
        grads[f"grad_value.{name}"] = flat[idx].detach().clone()

    tensors = {f"net.{k}": v.half() for k, v in net.state_dict().items()}
    tensors.update(grads)
    tensors["w_logits"] = w_logits.half()
    tensors["w_value"] = w_value.half()
    tensors.update({
        "tables": tables.half(),
        "state_other": state_other.half(),
        "actions_other": actions_other.half(),
        "assignment": assignment,
        "logits": torch.stack(logits),
        "value": torch.stack(values),
        "cost": cost,
    })
    meta = common_metadata("AutoShard policy-value network, one 7-step episode on 4 shards")
    meta["generator"] = "tools/make_autoshard_golden.py"
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "autoshard_net_golden.safetensors"), tensors, meta)
    print("wrote", os.path.join(args.out, "autoshard_net_golden.safetensors"))


if __name__ == "__main__":
    main()
