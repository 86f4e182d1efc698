#!/usr/bin/env python3
"""torch.nn.EmbeddingBag on the shapes of bench/kernel/bench_embedding_bag.cpp.

T = 8 tables of 1,000,000 rows, dim 16 / 64 / 128, batch 2048, bags of exactly
32 lookups drawn uniformly, sum pooling, four batches cycled; one
nn.EmbeddingBag per table, called table by table (the way a model without
FBGEMM's TBE runs), and also torch.nn.functional.embedding_bag with 1-D
indices + offsets. Forward under torch.no_grad(); the backward row is
forward + backward + an SGD step with sparse gradients (torch has no fused
exact-SGD backward on the CPU, so this is what a user would run instead).
Prints the best of --repetitions timed runs (wall and process CPU time per call)
and lookups/s in the units of Google Benchmark's items_per_second (M/s).

    /usr/bin/python3 tools/bench_torch_embedding_bag.py              # 1 thread
    /usr/bin/python3 tools/bench_torch_embedding_bag.py --threads 0  # torch's default

With --device cuda it runs the shapes of bench/kernel/bench_embedding_bag_cuda.cu
instead (batches 2048 and 65536, one batch per shape) and times each call the
way that benchmark does: CUDA events around the call, the L2 cache flushed
before it (a write of 4x the L2, outside the events), median of --calls calls.
It adds "forward one F.embedding_bag": the 8 tables stacked into one weight
and one call over table-major bags, the single-kernel layout a TBE uses.
"""

import argparse
import time

import torch

TABLES = 8
ROWS = 1_000_000
BATCH = 2048
BAG = 32
BATCHES = 4


def make_batches(gen):
    out = []
    for _ in range(BATCHES):
        per_table = [torch.randint(0, ROWS, (BATCH * BAG,), generator=gen) for _ in range(TABLES)]
        offsets = torch.arange(0, BATCH * BAG, BAG, dtype=torch.int64)
        out.append((per_table, offsets))
    return out


def timed(fn, min_seconds, warmup, repetitions):
    """Best of `repetitions` runs of at least min_seconds each: (wall, cpu) seconds per call."""
    for i in range(warmup):
        fn(i)
    best = None
    for _ in range(repetitions):
        n = 0
        start, cpu_start = time.perf_counter(), time.process_time()
        while True:
            fn(n)
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds and n >= 5:
                break
        result = (elapsed / n, (time.process_time() - cpu_start) / n)
        if best is None or result[0] < best[0]:
            best = result
    return best


def report(lookups, wall_cpu):
    wall, cpu = wall_cpu
    return (f"{wall * 1e3:9.2f} ms (cpu {cpu * 1e3:8.2f} ms)  "
            f"{lookups / wall / 1e6:8.2f} M lookups/s")


def fill(weight):
    # the same deterministic pattern as the C++ bench (the values do not matter)
    with torch.no_grad():
        idx = torch.arange(weight.numel(), dtype=torch.int64) % 2039 - 1019
        weight.copy_((idx.to(torch.float32) * 1e-3).view_as(weight))


def run(dim, dtype, args, gen):
    lookups = TABLES * BATCH * BAG
    batches = make_batches(gen)
    bags = [torch.nn.EmbeddingBag(ROWS, dim, mode="sum", sparse=True) for _ in range(TABLES)]
    try:
        for bag in bags:
            fill(bag.weight)
            bag.to(dtype)
    except (RuntimeError, TypeError) as e:
        return {"error": str(e).splitlines()[0]}
    results = {}

    def forward_module(i):
        per_table, offsets = batches[i % BATCHES]
        with torch.no_grad():
            outs = [bags[t](per_table[t], offsets) for t in range(TABLES)]
            return torch.cat(outs, dim=1)

    def forward_functional(i):
        per_table, offsets = batches[i % BATCHES]
        with torch.no_grad():
            outs = [
                torch.nn.functional.embedding_bag(per_table[t], bags[t].weight, offsets, mode="sum")
                for t in range(TABLES)
            ]
            return torch.cat(outs, dim=1)

    for name, fn in (("forward nn.EmbeddingBag", forward_module),
                     ("forward F.embedding_bag", forward_functional)):
        try:
            fn(0)
        except RuntimeError as e:
            results[name] = "not supported: " + str(e).splitlines()[0]
            continue
        results[name] = report(lookups, timed(fn, args.min_seconds, args.warmup, args.repetitions))

    if dtype == torch.float32 and not args.no_backward:
        opt = torch.optim.SGD([b.weight for b in bags], lr=0.01)
        grad = torch.empty(BATCH, dim * TABLES).uniform_(-1e-3, 1e-3, generator=gen)

        def train_step(i):
            per_table, offsets = batches[i % BATCHES]
            opt.zero_grad(set_to_none=True)
            out = torch.cat([bags[t](per_table[t], offsets) for t in range(TABLES)], dim=1)
            out.backward(grad)
            opt.step()

        results["fwd+bwd+SGD (sparse)"] = report(
            lookups, timed(train_step, args.min_seconds, args.warmup, args.repetitions))
    return results


def run_cuda(dim, dtype, batch, args, gen):
    """The CUDA shapes; returns {name: report} with median ms per call."""
    dev = torch.device("cuda")
    lookups = TABLES * batch * BAG
    props = torch.cuda.get_device_properties(dev)
    flush = torch.empty(4 * max(getattr(props, "L2_cache_size", 50 << 20), 1 << 20),
                        dtype=torch.uint8, device=dev)
    per_table = [torch.randint(0, ROWS, (batch * BAG,), generator=gen).to(dev) for _ in range(TABLES)]
    offsets = torch.arange(0, batch * BAG, BAG, dtype=torch.int64, device=dev)
    try:
        bags = [torch.nn.EmbeddingBag(ROWS, dim, mode="sum", sparse=True).to(dev, dtype)
                for _ in range(TABLES)]
    except (RuntimeError, TypeError) as e:
        return {"error": str(e).splitlines()[0]}
    stacked = torch.cat([b.weight.detach() for b in bags], dim=0)
    flat = torch.cat([per_table[t] + t * ROWS for t in range(TABLES)])
    flat_offsets = torch.arange(0, TABLES * batch * BAG, BAG, dtype=torch.int64, device=dev)

    def timed_cuda(fn):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(args.warmup):
            fn()
        times = []
        for _ in range(args.calls):
            flush.add_(1)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        times.sort()
        ms = times[len(times) // 2]
        return f"{ms * 1e3:10.1f} us  {lookups / ms / 1e3:9.1f} M lookups/s"

    results = {}
    with torch.no_grad():
        results["forward nn.EmbeddingBag x8"] = timed_cuda(
            lambda: torch.cat([bags[t](per_table[t], offsets) for t in range(TABLES)], dim=1))
        results["forward one F.embedding_bag"] = timed_cuda(
            lambda: torch.nn.functional.embedding_bag(flat, stacked, flat_offsets, mode="sum")
            .view(TABLES, batch, dim).permute(1, 0, 2).reshape(batch, TABLES * dim))
    if not args.no_backward:
        opt = torch.optim.SGD([b.weight for b in bags], lr=1e-6)
        grad = torch.empty(batch, dim * TABLES, device=dev, dtype=dtype).uniform_(-1e-3, 1e-3)

        def train_step():
            opt.zero_grad(set_to_none=True)
            out = torch.cat([bags[t](per_table[t], offsets) for t in range(TABLES)], dim=1)
            out.backward(grad)
            opt.step()

        try:
            results["fwd+bwd+SGD (sparse) x8"] = timed_cuda(train_step)
        except RuntimeError as e:
            results["fwd+bwd+SGD (sparse) x8"] = "not supported: " + str(e).splitlines()[0]
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads; 0 = torch's default")
    parser.add_argument("--dims", type=int, nargs="+", default=[16, 64, 128])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float16"])
    parser.add_argument("--min-seconds", type=float, default=1.0)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repetitions", type=int, default=3, help="best of this many timed runs")
    parser.add_argument("--no-backward", action="store_true")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--batches", type=int, nargs="+", default=[2048, 65536],
                        help="--device cuda: batch sizes")
    parser.add_argument("--calls", type=int, default=50, help="--device cuda: timed calls")
    args = parser.parse_args()
    if args.device == "cuda":
        gen = torch.Generator().manual_seed(2024)
        print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; T={TABLES} rows={ROWS} "
              f"L={BAG} sum pooling; median of {args.calls} calls, L2 flushed before each")
        for dtype_name in args.dtypes:
            dtype = getattr(torch, dtype_name)
            for batch in args.batches:
                for dim in args.dims:
                    res = run_cuda(dim, dtype, batch, args, gen)
                    for name, value in res.items():
                        print(f"{dtype_name:8s} B {batch:6d} dim {dim:4d}  {name:28s} {value}")
                    torch.cuda.empty_cache()
        return
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"CPU capability {torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, 'cpu') else '?'}; "
          f"T={TABLES} rows={ROWS} B={BATCH} L={BAG} sum pooling")
    gen = torch.Generator().manual_seed(2024)
    for dtype_name in args.dtypes:
        dtype = getattr(torch, dtype_name)
        for dim in args.dims:
            res = run(dim, dtype, args, gen)
            for name, value in res.items():
                print(f"{dtype_name:8s} dim {dim:4d}  {name:26s} {value}")


if __name__ == "__main__":
    main()
