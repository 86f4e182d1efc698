#!/usr/bin/env python3
"""Golden files for importing raw NeuroShard cost-model checkpoints
(embplan::learn::import_neuroshard / import_neuroshard_comm,
include/embplan/learn/import_neuroshard.hpp).

    /usr/bin/python3 tools/make_neuroshard_import.py [--out test/cost/golden]

Writes five files. For ComputeCostNet:
  neuroshard_state_dict.safetensors   ONLY the state_dict of a small random
      ComputeCostNet (20 table features as NeuroShard reads them, t_hidden
      20-128-32, c_hidden 32-64-1), as tools/export_state_dict.py exports it:
      t_hidden.{0,1}.{weight,bias}, c_hidden.{0,1}.{weight,bias}; no metadata
      tensors, no embplan keys.
  neuroshard_import_golden.safetensors
      tables.row [T], tables.dim [T], tables.pooling_factor [T],
      tables.bins [T, 17] (column k = bin_k), devices.lengths (I64) [D]
      (consecutive tables per device), feature_means [20], feature_stds [20]
      (NeuroShard's: mean and std + 1e-6 of the table features), output [D]
      (the network's cost of each device).
The features are built the way NeuroShard builds them (utils.dict2tensor):
each table's config dict {row, pooling_factor, bin_0..bin_16, dim} read in
sorted-key order, so bin_10 comes before bin_2.

For the two CommCostNets of 4 devices (MLP 128-64-32-16, one output per
device), with inputs built as NeuroShard's simulator builds them (backward:
per-device dim sums; forward: dim sums, then sleep times = start minus the
earliest start):
  neuroshard_comm_forward.safetensors   CommCostModel.save()'s dict for the
      forward net, exported as export_state_dict does: hidden.{0..4}.*,
      feature_means [8], feature_stds [8], metadata ndevices / num_features /
      mlp_sizes (JSON text).
  neuroshard_comm_backward.safetensors  ONLY the backward net's state_dict.
  neuroshard_comm_golden.safetensors    dims [S, 4], sleep [S, 4],
      backward.feature_means [4], backward.feature_stds [4] (mean and std +
      1e-6 over the S samples, as CommCostModel.train computes them),
      forward_output [S, 4], backward_output [S, 4] (the networks' raw
      per-device costs, not clamped).
CPU, float32, one thread, fixed seed: a rerun on the same PyTorch gives the
same bytes.
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_state_dict import checkpoint_to_tensors  # noqa: E402
from make_golden import CommCostNet, ComputeCostNet, common_metadata, reset, write  # noqa: E402

TABLES = 24
LENGTHS = [7, 1, 4, 12]  # tables of each of 4 devices
DEVICES = 4
COMM_SIZES = [128, 64, 32, 16]  # NeuroShard's CommCostModel default
COMM_SAMPLES = 32


def table_configs(gen):
    configs = []
    for _ in range(TABLES):
        row = int(torch.randint(100, 5_000_000, (1,), generator=gen))
        dim = int([4, 8, 16, 32, 64, 128][int(torch.randint(0, 6, (1,), generator=gen))])
        pooling = float(torch.rand(1, generator=gen) * 40.0 + 1.0)
        bins = torch.rand(17, generator=gen) ** 3
        bins = (bins / bins.sum()).tolist()
        config = {"row": row, "pooling_factor": pooling}
        for k, b in enumerate(bins):
            config[f"bin_{k}"] = b
        config["dim"] = dim
        configs.append(config)
    return configs


def dict2tensor(configs):
    """NeuroShard's feature order: the config keys sorted as strings."""
    return torch.tensor(
        [[float(v) for _, v in sorted(c.items(), key=lambda kv: kv[0])] for c in configs],
        dtype=torch.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "test", "cost", "golden"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    reset(11)
    gen = torch.Generator().manual_seed(11)
    net = ComputeCostNet(20)
    configs = table_configs(gen)
    features = dict2tensor(configs)
    means = features.mean(dim=0)
    stds = features.std(dim=0) + 1e-6
    lengths = torch.tensor(LENGTHS, dtype=torch.int64)
    assert int(lengths.sum()) == TABLES
    with torch.no_grad():
        output = net((features - means) / stds, lengths)

    # The raw checkpoint: the state_dict alone, exported as export_state_dict does.
    state, state_meta, skipped = checkpoint_to_tensors(net.state_dict())
    assert not state_meta and not skipped and sorted(state) == sorted(net.state_dict())
    write(args.out, "neuroshard_state_dict.safetensors", state, {})

    golden = {
        "tables.row": torch.tensor([c["row"] for c in configs], dtype=torch.float32),
        "tables.dim": torch.tensor([c["dim"] for c in configs], dtype=torch.float32),
        "tables.pooling_factor": torch.tensor([c["pooling_factor"] for c in configs],
                                              dtype=torch.float32),
        "tables.bins": torch.tensor([[c[f"bin_{k}"] for k in range(17)] for c in configs],
                                    dtype=torch.float32),
        "devices.lengths": lengths,
        "feature_means": means,
        "feature_stds": stds,
        "output": output.detach().clone(),
    }
    metadata = common_metadata("NeuroShard ComputeCostNet import: tables, normalisation, "
                               "per-device costs of neuroshard_state_dict.safetensors")
    metadata["generator"] = "tools/make_neuroshard_import.py"
    metadata["feature_order"] = json.dumps(sorted(configs[0].keys()))
    write(args.out, "neuroshard_import_golden.safetensors", golden, metadata)
    make_comm(args.out)


def make_comm(out):
    reset(12)
    gen = torch.Generator().manual_seed(12)
    forward = CommCostNet(2 * DEVICES, COMM_SIZES, DEVICES)
    backward = CommCostNet(DEVICES, COMM_SIZES, DEVICES)
    with torch.no_grad():  # costs of a few ms, as trained nets give (all above 0 here)
        forward.hidden[-1].bias += 3.0
        backward.hidden[-1].bias += 2.0
    dims = torch.randint(4, 1025, (COMM_SAMPLES, DEVICES), generator=gen).float()
    starts = torch.rand(COMM_SAMPLES, DEVICES, generator=gen) * 20.0
    sleep = starts - starts.min(dim=1, keepdim=True).values
    forward_x = torch.cat([dims, sleep], dim=1)
    stats = {}
    for name, x in [("forward", forward_x), ("backward", dims)]:
        stats[name] = (x.mean(dim=0), x.std(dim=0) + 1e-6)
    with torch.no_grad():
        forward_output = forward((forward_x - stats["forward"][0]) / stats["forward"][1])
        backward_output = backward((dims - stats["backward"][0]) / stats["backward"][1])

    # The forward checkpoint as CommCostModel.save() writes it; the backward one bare.
    saved = {
        "state_dict": forward.state_dict(),
        "feature_means": stats["forward"][0],
        "feature_stds": stats["forward"][1],
        "num_features": 2 * DEVICES,
        "mlp_sizes": COMM_SIZES,
        "ndevices": DEVICES,
    }
    tensors, meta, skipped = checkpoint_to_tensors(saved)
    assert not skipped and meta["ndevices"] == str(DEVICES)
    write(out, "neuroshard_comm_forward.safetensors", tensors, meta)
    tensors, meta, skipped = checkpoint_to_tensors(backward.state_dict())
    assert not meta and not skipped
    write(out, "neuroshard_comm_backward.safetensors", tensors, {})

    golden = {
        "dims": dims,
        "sleep": sleep,
        "backward.feature_means": stats["backward"][0],
        "backward.feature_stds": stats["backward"][1],
        "forward_output": forward_output.detach().clone(),
        "backward_output": backward_output.detach().clone(),
    }
    metadata = common_metadata("NeuroShard CommCostNet import: inputs, backward normalisation, "
                               "raw per-device costs of neuroshard_comm_{forward,backward}")
    metadata["generator"] = "tools/make_neuroshard_import.py"
    write(out, "neuroshard_comm_golden.safetensors", golden, metadata)


if __name__ == "__main__":
    main()
