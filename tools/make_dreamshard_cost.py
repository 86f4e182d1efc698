#!/usr/bin/env python3
"""Golden file for DreamShard's cost network (include/embplan/nn/dreamshard_cost_net.hpp).

    /usr/bin/python3 tools/make_dreamshard_cost.py [--out test/nn/golden]

dreamshard_cost_golden.safetensors holds a randomly initialised DreamShard
Model (the layout of tools/make_golden.py's DreamShardModel, 5 table features,
4 devices) under "model.*" with its PyTorch names, and its cost-network
outputs on 3 placements of 4 devices, computed as DreamShard's
Model.kernel_forward / overall_forward do (table MLP with ReLU after each layer,
index_add_ sum per device, heads ReLU(fc_0) -> fc_1; overall: max over the
devices of a placement):
  features [T, 5], lengths (I64) [12] (tables per device, device-major:
  placement p owns devices 4p .. 4p+3; one device is empty), forward [12],
  communication [12], backward [12], overall [3].
CPU, float32, one thread, fixed seed.
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import DreamShardModel, common_metadata, reset, write  # noqa: E402

LENGTHS = [3, 1, 2, 4, 0, 5, 1, 2, 2, 2, 3, 1]


def head(model, name, x):
    return getattr(model, f"{name}_fc_1")(F.relu(getattr(model, f"{name}_fc_0")(x))).flatten()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "test", "nn", "golden"))
    args = parser.parse_args()
    reset(13)
    model = DreamShardModel(5, devices=4)
    lengths = torch.tensor(LENGTHS, dtype=torch.int64)
    features = torch.randn(int(lengths.sum()), 5)
    with torch.no_grad():
        t = F.relu(model.table_fc_1(F.relu(model.table_fc_0(features))))
        ind = torch.repeat_interleave(torch.arange(len(LENGTHS)), lengths)
        device = torch.zeros(len(LENGTHS), t.shape[1]).index_add_(0, ind, t)
        overall = torch.max(device.view(-1, 4, t.shape[1]), dim=1)[0]
        tensors = {f"model.{k}": v.detach().clone() for k, v in model.state_dict().items()}
        tensors.update({
            "features": features,
            "lengths": lengths,
            "forward": head(model, "forward", device),
            "communication": head(model, "communication", device),
            "backward": head(model, "backward", device),
            "overall": head(model, "overall", overall),
        })
    metadata = common_metadata("DreamShard cost network: model, 3 placements of 4 devices, "
                               "per-device head outputs and the overall cost")
    metadata["generator"] = "tools/make_dreamshard_cost.py"
    write(args.out, "dreamshard_cost_golden.safetensors", tensors, metadata)


if __name__ == "__main__":
    main()
