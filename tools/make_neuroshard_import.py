#!/usr/bin/env python3
"""Golden files for importing a raw NeuroShard ComputeCostNet checkpoint
(embplan::cost::import_neuroshard, include/embplan/cost/import_neuroshard.hpp).

    /usr/bin/python3 tools/make_neuroshard_import.py [--out test/cost/golden]

Writes two files:
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
from make_golden import ComputeCostNet, common_metadata, reset, write  # noqa: E402

TABLES = 24
LENGTHS = [7, 1, 4, 12]  # tables of each of 4 devices


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


if __name__ == "__main__":
    main()
