#!/usr/bin/python3
"""Run TorchRec v0.3.2's EmbeddingShardingPlanner on embplan tasks; write golden JSON.

The C++ port of TorchRec's planner is tested against the files this writes under
test/torchrec/golden/. Nothing here is needed to build or test the project.

TorchRec is not installed: it is extracted at run time from a git mirror
(--torchrec-git, tag v0.3.2) into a temporary folder and put first on sys.path.
Its missing third-party imports (fbgemm_gpu) are served by the placeholder modules
in tools/torchrec/placeholders/, and one shim (below) lets Debian's torch 1.13 load
under Python 3.11. See tools/torchrec/README.md.

Run with Debian's Python (it has torch): /usr/bin/python3 tools/torchrec/make_golden.py
--tasks TASKS.json --source "embplan tasks ..." --out GOLDEN.json [options]
The script re-executes itself with PYTHONHASHSEED=0 when that is not already set.
"""

import argparse
import contextlib
import copy
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_GIT = "/work/.mirror/pytorch+torchrec/repo"
TAG = "v0.3.2"

# Short names accepted by --sharding-types / --kernels, mapped to TorchRec's values.
SHARDING_ALIASES = {
    "dp": "data_parallel",
    "tw": "table_wise",
    "cw": "column_wise",
    "twcw": "table_column_wise",
    "rw": "row_wise",
    "twrw": "table_row_wise",
}
KERNEL_ALIASES = {"uvm": "fused_uvm", "uvm_caching": "fused_uvm_caching"}
PLAN_LAYOUT = (
    "result.plan: [[table, sharding_type, compute_kernel, shards]] in _best_plan order; "
    "shard: [rank, rows, cols, row_offset, col_offset, perf, hbm_bytes, ddr_bytes]"
)
TABLE_LAYOUT = "tables: [[name, rows, dim, pooling_factor, dtype]] in the task's order"


def parse_list(text, aliases):
    if text is None:
        return None
    values = [aliases.get(v.strip(), v.strip()) for v in text.split(",") if v.strip()]
    if not values:
        raise SystemExit(f"error: empty list {text!r}")
    return values


@contextlib.contextmanager
def hashable_dataclass_defaults():
    """Shim for Debian's torch 1.13 under Python 3.11.

    torch/distributed/_shard/sharded_tensor/metadata.py declares
    `tensor_properties: TensorProperties = field(default=TensorProperties())`.
    TensorProperties is a non-frozen dataclass, so its __hash__ is None, and Python
    3.11's dataclasses reject such a default as mutable (ValueError at import time;
    Python <= 3.10 only rejected list/dict/set). While that one module loads, this
    replaces dataclasses.field by a wrapper that turns a default whose type is
    unhashable into default_factory returning a deep copy of it. The field then
    behaves as before except that each instance gets its own copy of the default,
    which nothing in the planner can observe. dataclasses.field is restored at once.
    """
    original = dataclasses.field

    def field(*args, **kwargs):
        default = kwargs.get("default", dataclasses.MISSING)
        if default is not dataclasses.MISSING and type(default).__hash__ is None:
            del kwargs["default"]
            kwargs["default_factory"] = lambda d=default: copy.deepcopy(d)
        return original(*args, **kwargs)

    dataclasses.field = field
    try:
        yield
    finally:
        dataclasses.field = original


def load_torchrec(git_dir, workdir):
    """Extract TorchRec at TAG from the mirror into workdir and import the planner."""
    commit = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", f"{TAG}^{{commit}}"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    archive = subprocess.Popen(
        ["git", f"--git-dir={git_dir}", "archive", TAG, "torchrec"], stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", workdir], stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait() != 0:
        raise SystemExit(f"error: git archive {TAG} failed in {git_dir}")
    sys.path.insert(0, os.path.join(HERE, "placeholders"))
    sys.path.insert(0, workdir)

    with hashable_dataclass_defaults():
        import torch.distributed._shard.sharded_tensor.metadata  # noqa: F401
    import torch
    import torchrec.optim
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
    from torchrec.distributed.planner.types import ParameterConstraints, PlannerError
    from torchrec.modules.embedding_configs import DataType, EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    import torchrec.distributed.planner as planner_pkg

    if not os.path.abspath(planner_pkg.__file__).startswith(os.path.abspath(workdir)):
        raise SystemExit(f"error: torchrec was imported from {planner_pkg.__file__}")
    return dict(
        commit=commit,
        torch=torch,
        EmbeddingBagCollectionSharder=EmbeddingBagCollectionSharder,
        EmbeddingShardingPlanner=EmbeddingShardingPlanner,
        Topology=Topology,
        ParameterConstraints=ParameterConstraints,
        PlannerError=PlannerError,
        DataType=DataType,
        EmbeddingBagConfig=EmbeddingBagConfig,
        EmbeddingBagCollection=EmbeddingBagCollection,
        optimizers={
            "sgd": torch.optim.SGD,
            "adam": torch.optim.Adam,
            "rowwise_adagrad": torchrec.optim.RowWiseAdagrad,
        },
    )


def make_sharder(tr, sharding_types, kernels):
    """EmbeddingBagCollectionSharder, its lists filtered to the given values (order kept)."""
    base = tr["EmbeddingBagCollectionSharder"]
    if sharding_types is None and kernels is None:
        return base()

    class FilteredSharder(base):
        def sharding_types(self, compute_device_type):
            types = super().sharding_types(compute_device_type)
            return types if sharding_types is None else [t for t in types if t in sharding_types]

        def compute_kernels(self, sharding_type, compute_device_type):
            ks = super().compute_kernels(sharding_type, compute_device_type)
            return ks if kernels is None else [k for k in ks if k in kernels]

    return FilteredSharder()


def task_case(task, args):
    """The TorchRec inputs of one embplan task, as stored in the golden file."""
    cluster = task["cluster"]
    if "devices" in cluster:
        devices = cluster["devices"]
    else:
        devices = [cluster.get("device", {})] * cluster["count"]
    world_size = len(devices)
    caps = {d.get("memory_bytes", 4294967296) for d in devices}
    if any("memory_gib" in d for d in devices):
        raise SystemExit(f"error: task {task['name']}: memory_gib not supported, use memory_bytes")
    if len(caps) != 1:
        raise SystemExit(f"error: task {task['name']}: devices' memory_bytes differ: {sorted(caps)}")
    tables = []
    for t in task["tables"]:
        dtype = args.dtype or t.get("dtype", "fp32")
        tables.append([t["name"], t["rows"], t["dim"], t.get("pooling_factor", 1.0), dtype])
    name = task["name"] + (args.name_suffix or "")
    return {
        "name": name,
        "source": args.source,
        "tables": tables,
        "world_size": world_size,
        "local_world_size": min(cluster.get("devices_per_host", 8), world_size),
        "hbm_cap": caps.pop(),
        "ddr_cap": args.ddr_cap,
        "batch_size": task.get("batch_size", 65536) // world_size,
        "optimizer": args.optimizer or task.get("optimizer", "none"),
        "options": {
            "min_partition": args.min_partition,
            "sharding_types": args.sharding_types,
            "kernels": args.kernels,
        },
    }


def run_case(tr, case):
    torch = tr["torch"]
    dtypes = {"fp32": tr["DataType"].FP32, "fp16": tr["DataType"].FP16}
    configs = [
        tr["EmbeddingBagConfig"](
            name=name, embedding_dim=dim, num_embeddings=rows, feature_names=[name],
            data_type=dtypes[dtype],
        )
        for name, rows, dim, _, dtype in case["tables"]
    ]
    ebc = tr["EmbeddingBagCollection"](tables=configs, device=torch.device("meta"))
    if case["optimizer"] != "none":
        optimizer_class = tr["optimizers"][case["optimizer"]]
        for param in ebc.parameters():
            param._optimizer_class = optimizer_class  # read by calculate_shard_storages
    options = case["options"]
    constraints = {
        name: tr["ParameterConstraints"](
            pooling_factors=[pf], min_partition=options["min_partition"]
        )
        for name, _, _, pf, _ in case["tables"]
    }
    topology_args = dict(
        world_size=case["world_size"], compute_device="cuda", hbm_cap=case["hbm_cap"],
        local_world_size=case["local_world_size"],
    )
    if case["ddr_cap"] is not None:
        topology_args["ddr_cap"] = case["ddr_cap"]
    topology = tr["Topology"](**topology_args)
    case["ddr_cap"] = topology.devices[0].storage.ddr  # recorded: TorchRec's default if unset
    planner = tr["EmbeddingShardingPlanner"](
        topology=topology, batch_size=case["batch_size"], constraints=constraints
    )
    # Record the storage reservation's output (the planner keeps it only locally).
    reserved = []
    reserve = planner._storage_reservation.reserve

    def recording_reserve(**kwargs):
        result = reserve(**kwargs)
        reserved.append(result)
        return result

    planner._storage_reservation.reserve = recording_reserve
    sharder = make_sharder(tr, options["sharding_types"], options["kernels"])

    result = {}
    start = time.perf_counter()
    try:
        planner.plan(ebc, [sharder])
        error = None
    except tr["PlannerError"] as e:
        error = e
    wall = time.perf_counter() - start

    if reserved:
        storages = {(d.storage.hbm, d.storage.ddr) for d in reserved[0].devices}
        assert len(storages) == 1, storages
        hbm, ddr = storages.pop()
        sr = planner._storage_reservation
        result["reserved"] = {
            "hbm": hbm, "ddr": ddr,
            "dense_hbm": sr._dense_storage.hbm, "kjt_hbm": sr._kjt_storage.hbm,
        }
    if error is not None:
        result["error"] = error.error_type.value
        result["message"] = str(error).split("\n", 1)[0].strip()
    else:
        plan = planner._best_plan
        result["rating"] = planner._perf_model.rate(plan=plan)
        # Compact layout (PLAN_LAYOUT): one row per ShardingOption, in _best_plan's order.
        result["plan"] = [
            [
                option.name,
                option.sharding_type,
                option.compute_kernel,
                [
                    [shard.rank, *shard.size, *shard.offset, shard.perf,
                     shard.storage.hbm, shard.storage.ddr]
                    for shard in option.shards
                ],
            ]
            for option in plan
        ]
    result["num_proposals"] = planner._num_proposals
    result["num_plans"] = planner._num_plans
    result["wall_s"] = round(wall, 3)
    case["result"] = result
    return case


def case_line(case):
    return json.dumps(case, separators=(",", ":"))


def write_golden(path, header, cases):
    lines = [case_line(c) for c in cases]
    with open(path, "w") as f:
        f.write("{" + json.dumps(header, separators=(",", ":"))[1:-1] + ',"cases":[\n')
        f.write(",\n".join(lines))
        f.write("\n]}\n")


def summary(case):
    r = case["result"]
    if "error" in r:
        what = "error " + r["error"]
    else:
        kinds = {}
        for o in r["plan"]:
            key = o[1] + "/" + o[2]
            kinds[key] = kinds.get(key, 0) + 1
        what = f"rating {r['rating']:.4g} " + " ".join(f"{k}:{v}" for k, v in sorted(kinds.items()))
    return f"{case['name']}: {r['wall_s']:.2f}s proposals {r['num_proposals']} plans {r['num_plans']} {what}"


def main():
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable] + sys.argv, env)

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--torchrec-git", default=DEFAULT_GIT, help="bare git mirror of TorchRec")
    p.add_argument("--tasks", required=True, help="embplan tasks JSON")
    p.add_argument("--source", required=True, help="the command that made --tasks (recorded)")
    p.add_argument("--out", required=True, help="golden JSON to write")
    p.add_argument("--append", action="store_true", help="add the cases to --out's")
    p.add_argument("--only", type=int, nargs="*", help="task indices to run (default: all)")
    p.add_argument("--name-suffix", help="appended to each task's name")
    p.add_argument("--min-partition", type=int, help="ParameterConstraints.min_partition")
    p.add_argument("--sharding-types", help="comma list (dp,tw,cw,twcw,rw,twrw or TorchRec's names)")
    p.add_argument("--kernels", help="comma list (dense,fused,fused_uvm,fused_uvm_caching)")
    p.add_argument("--ddr-cap", type=int, help="Topology ddr_cap in bytes (default TorchRec's)")
    p.add_argument("--dtype", choices=["fp32", "fp16"], help="override every table's dtype")
    p.add_argument("--optimizer", choices=["none", "sgd", "adam", "rowwise_adagrad"],
                   help="override the task's optimizer")
    args = p.parse_args()
    args.sharding_types = parse_list(args.sharding_types, SHARDING_ALIASES)
    args.kernels = parse_list(args.kernels, KERNEL_ALIASES)

    with open(args.tasks) as f:
        tasks = json.load(f)["tasks"]
    if args.only is not None:
        tasks = [tasks[i] for i in args.only]

    cases = []
    if args.append and os.path.exists(args.out):
        with open(args.out) as f:
            cases = json.load(f)["cases"]
    with tempfile.TemporaryDirectory(prefix="torchrec-") as workdir:
        tr = load_torchrec(args.torchrec_git, workdir)
        header = {
            "generator": "tools/torchrec/make_golden.py",
            "torchrec": f"{TAG} {tr['commit']}",
            "torch": tr["torch"].__version__,
            "python": sys.version.split()[0],
            "tables_layout": TABLE_LAYOUT,
            "plan_layout": PLAN_LAYOUT,
        }
        for task in tasks:
            case = task_case(task, args)
            if any(t[4] not in ("fp32", "fp16") for t in case["tables"]):
                print(f"{case['name']}: skipped (a table is neither fp32 nor fp16)", flush=True)
                continue
            names = [c["name"] for c in cases]
            if case["name"] in names:
                cases[names.index(case["name"])] = run_case(tr, case)
            else:
                cases.append(run_case(tr, case))
            print(summary(case), flush=True)
            write_golden(args.out, header, cases)  # after each case: long runs keep progress
    write_golden(args.out, header, cases)


if __name__ == "__main__":
    main()
