#!/usr/bin/env python3
"""Golden plans of NeuroShard's own search, for embplan's faithful mode
(test/search/neuroshard_parity_test.cpp).

    git --git-dir=<snapshot of daochenzha/neuroshard> archive HEAD | tar -x -C /tmp/neuroshard
    /usr/bin/python3 tools/make_neuroshard_parity.py --neuroshard /tmp/neuroshard \\
        --embplan build/bin/embplan [--out test/search/golden/neuroshard_parity]

The authors' code is imported from the checkout given (never copied here);
this script only drives it. It:
  1. draws NeuroShard-protocol tasks with `embplan tasks` (4 devices: 7 at max
     dim 32, 7 at 64, 6 at 128; 8 devices: 5 at 64, 5 at 128; seeds below),
     and turns each table into the authors' config dict {row, pooling_factor,
     bin_0 .. bin_16, dim};
  2. trains the authors' ComputeCostModel briefly (their train(), 10 epochs)
     on a synthetic cost of random device groups of the tasks' tables, and a
     CommCostModel pair for 4 and for 8 devices on a synthetic all-to-all
     cost (dim sums and sleep times). Synthetic, small and short on purpose:
     the test is about the search, not the models;
  3. exports the models with tools/export_state_dict.py's writer
     (compute.safetensors, comm{4,8}_{forward,backward}.safetensors);
  4. runs NeurSharder(...).shard(k=3, n=10, max_length=10, search_steps=11)
     on every task, --repeat times (default 3, each on a fresh NeurSharder;
     the plans must agree), timing each call (wall and CPU; a task's seconds
     are the least of its runs), and writes plans.json:
     per task the generation parameters, the table names, the authors' plan
     (per device the (task table index, dim) of each piece, or null where
     their search found none), their cost, and their seconds; and
     argpartition.json: np.argpartition's permutations of 60 arrays full of
     ties (what the faithful mode's candidate picks must reproduce).
CPU, one thread, fixed seeds: a rerun on the same PyTorch and NumPy gives the
same files (timings aside).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_state_dict import checkpoint_to_tensors, write_safetensors  # noqa: E402

# (devices, max_dim, count, seed) of each batch of tasks.
TASK_SETS = [
    (4, 32, 7, 101),
    (4, 64, 7, 102),
    (4, 128, 6, 103),
    (8, 64, 5, 201),
    (8, 128, 5, 202),
]
SEARCH = dict(k=3, n=10, max_length=10, search_steps=11)  # the paper's defaults


def draw_tasks(embplan, devices, max_dim, count, seed, tmp):
    path = os.path.join(tmp, f"tasks_{devices}_{max_dim}_{seed}.json")
    subprocess.run([embplan, "tasks", "--protocol", "neuroshard", "--devices", str(devices),
                    "--max-dim", str(max_dim), "--count", str(count), "--seed", str(seed),
                    "--out", path], check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)["tasks"]


def config_of(table):
    """The authors' table config: the keys their dict2tensor sorts."""
    config = {"row": int(table["rows"]), "pooling_factor": float(table["pooling_factor"])}
    for k, b in enumerate(table["reuse_hist"]):
        config[f"bin_{k}"] = float(b)
    config["dim"] = int(table["dim"])
    return config


def synthetic_compute_ms(configs):
    """A made-up device cost: lookups x dim with a cache effect, plus a per-table launch."""
    ms = 0.05 * len(configs)
    for c in configs:
        cold = 1.0 - c["bin_0"] * 0.5
        ms += 1e-3 * c["pooling_factor"] * c["dim"] * cold * (1.0 + 0.1 * np.log1p(c["row"] / 1e5))
    return ms


def synthetic_comm_ms(dims, sleep, rng):
    """Made-up all-to-all costs: bytes out and in, and (forward) waiting for the latest start."""
    dims = np.asarray(dims, dtype=np.float64)
    sleep = np.asarray(sleep, dtype=np.float64)
    total = dims.sum()
    bw = 0.2 + 0.004 * dims + 0.001 * total + rng.normal(0.0, 0.02, dims.shape)
    fw = 0.2 + 0.003 * dims + 0.0015 * total + (sleep.max() - sleep) * 0.9 + \
        rng.normal(0.0, 0.02, dims.shape)
    return fw, bw


def export(model_dict_path, out_path, note):
    obj = torch.load(model_dict_path, map_location="cpu")
    tensors, metadata, skipped = checkpoint_to_tensors(obj)
    if skipped:
        raise SystemExit(f"unexpected entries in {model_dict_path}: {skipped}")
    metadata["generator"] = "tools/make_neuroshard_parity.py"
    metadata["contents"] = note
    write_safetensors(out_path, tensors, metadata)


def argpartition_cases():
    """np.argpartition on float64 arrays full of ties: the permutations the
    faithful mode's numpy_argpartition must give (search/column_beam.hpp)."""
    rng = np.random.default_rng(1)
    cases = []
    for i in range(60):
        n = int(rng.integers(1, 131))
        distinct = [2, 3, 5, 20, 1000][i % 5]
        values = rng.integers(0, distinct, n).astype(np.float64) * 0.25
        top = min(n, [1, 3, 10][i % 3])
        cases.append({"values": values.tolist(), "kth": n - top,
                      "numpy": np.argpartition(values, -top).tolist()})
    return cases


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--neuroshard", required=True, help="a checkout of daochenzha/neuroshard")
    p.add_argument("--embplan", required=True, help="the embplan CLI (to draw the tasks)")
    p.add_argument("--out", default="test/search/golden/neuroshard_parity")
    p.add_argument("--compute-samples", type=int, default=4000)
    p.add_argument("--comm-samples", type=int, default=4000)
    p.add_argument("--repeat", type=int, default=3,
                   help="searches per task; its seconds are the least of them (wall and CPU "
                        "apart), as bench_neuroshard's bm_parity takes the least of its runs")
    args = p.parse_args()

    sys.path.insert(0, os.path.abspath(args.neuroshard))
    from neuroshard.comm_cost_model import CommCostModel
    from neuroshard.compute_cost_model import ComputeCostModel
    from neuroshard.neurosharder import NeurSharder
    from neuroshard.utils import dict2tensor

    torch.manual_seed(0)
    np.random.seed(0)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    os.makedirs(args.out, exist_ok=True)

    with tempfile.TemporaryDirectory() as tmp:
        sets = [(d, m, c, s, draw_tasks(args.embplan, d, m, c, s, tmp)) for d, m, c, s in TASK_SETS]

        # --- compute model: random device groups of the tasks' tables (dims as drawn)
        configs = [config_of(t) for *_, tasks in sets for task in tasks for t in task["tables"]]
        features = dict2tensor(configs)
        X, y = [], []
        for _ in range(args.compute_samples):
            n = int(rng.integers(1, 21))
            group = rng.choice(len(configs), size=n, replace=False).tolist()
            X.append(group)
            y.append(synthetic_compute_ms([configs[i] for i in group]))
        compute = ComputeCostModel()
        compute.train(X, y, features, epochs=10)
        compute.save(os.path.join(tmp, "compute", "model.pt"))
        export(os.path.join(tmp, "compute", "model.pt"), os.path.join(args.out, "compute.safetensors"),
               "NeuroShard ComputeCostNet (authors' code), 10 epochs on a synthetic cost")

        # --- comm models per device count
        comm = {}
        for devices in sorted({d for d, *_ in TASK_SETS}):
            fw_X, fw_y, bw_X, bw_y = [], [], [], []
            for _ in range(args.comm_samples):
                dims = rng.integers(0, 129, devices) * 4
                sleep = rng.uniform(0.0, 20.0, devices) * (rng.uniform() < 0.8)
                sleep = sleep - sleep.min()
                fw, bw = synthetic_comm_ms(dims, sleep, rng)
                fw_X.append(np.concatenate([dims, sleep]))
                fw_y.append(fw)
                bw_X.append(dims.astype(np.float64))
                bw_y.append(bw)
            pair = {}
            for name, cx, cy in [("forward", fw_X, fw_y), ("backward", bw_X, bw_y)]:
                m = CommCostModel(devices)
                m.train(np.array(cx), np.array(cy), epochs=5)
                path = os.path.join(tmp, f"comm{devices}", f"{name}.pt")
                m.save(path)
                export(path, os.path.join(args.out, f"comm{devices}_{name}.safetensors"),
                       f"NeuroShard CommCostNet ({name}, {devices} devices; authors' code), "
                       "5 epochs on a synthetic cost")
                pair[name] = m
            comm[devices] = pair

        # --- the authors' search on every task
        records = []
        for devices, max_dim, count, seed, tasks in sets:
            for task in tasks:
                cfgs = [config_of(t) for t in task["tables"]]
                max_mem = task["cluster"]["devices"][0]["memory_bytes"] / (1024 ** 3)
                walls, cpus, runs = [], [], []
                for _ in range(max(1, args.repeat)):
                    # A fresh sharder per search: shard() splits its table configs.
                    sharder = NeurSharder(compute, comm[devices]["forward"],
                                          comm[devices]["backward"], cfgs, devices, max_mem)
                    wall0, cpu0 = time.perf_counter(), time.process_time()
                    steps, shards = sharder.shard(**SEARCH)
                    walls.append(time.perf_counter() - wall0)
                    cpus.append(time.process_time() - cpu0)
                    runs.append(([int(x) for x in steps],
                                 None if shards is None else [[int(i) for i in d] for d in shards]))
                if any(r != runs[0] for r in runs):
                    sys.exit(f"{task['name']}: the authors' search gave different plans on repeats")
                wall, cpu = min(walls), min(cpus)
                plan, cost = None, None
                if shards is not None:
                    now = sharder.get_table_configs()
                    raw = sharder._index2raw  # piece index -> task table index
                    plan = [[[int(raw[i]), int(now[i]["dim"])] for i in shard] for shard in shards]
                    cost = float(sharder.get_final_cost(shards))
                records.append({
                    "name": task["name"], "devices": devices, "max_dim": max_dim, "count": count,
                    "seed": seed, "tables": [t["name"] for t in task["tables"]],
                    "split_steps": [int(s) for s in steps], "plan": plan, "cost_ms": cost,
                    "seconds": wall, "cpu_seconds": cpu, "seconds_runs": walls,
                })
                print(f"{task['name']}: {len(cfgs)} tables, {len(steps)} splits, "
                      f"cost {cost}, {wall:.2f} s", flush=True)

    meta = {
        "generator": "tools/make_neuroshard_parity.py",
        "search": SEARCH,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "task_sets": [list(s) for s in TASK_SETS],
        "tasks": records,
    }
    with open(os.path.join(args.out, "argpartition.json"), "w") as f:
        json.dump({"generator": "tools/make_neuroshard_parity.py", "numpy_version": np.__version__,
                   "cases": argpartition_cases()}, f)
        f.write("\n")
    with open(os.path.join(args.out, "plans.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"wrote {len(records)} tasks to {args.out}")


if __name__ == "__main__":
    main()
