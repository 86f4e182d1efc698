#!/usr/bin/env python3
"""Split Meta's dlrm_datasets into per-table .npy traces and a table_configs.json.

Input: a file such as dlrm_datasets/embedding_bag/2021/fbgemm_t856_bs65536.pt,
which torch.load()s to (indices, offsets, lengths): indices flat int64; offsets
T*B+1, table-major (bag (t, b) is indices[offsets[t*B+b] : offsets[t*B+b+1]]);
lengths [T, B].

Output, in --out:
  table_<t>_indices.npy   int64, the lookups of table t
  table_<t>_offsets.npy   int64, B+1 entries, rebased to start at 0
  table_configs.json      {"tables": [{"index", "name", "row", "pooling_factor",
                           "bin_0".."bin_16"}, ...]} (no "dim": the dataset has none)

The statistics are those of embplan::data::extract_table_spec
(include/embplan/data/features.hpp), which follows DreamShard / NeuroShard
tools/gen_dlrm_data.py:
  row            = max(index) + 1, floored at --min-rows (the papers use 100);
  pooling_factor = lookups / B (the papers truncate it to an int; we do not);
  bin_k          = share of the table's unique indices whose occurrence count
                   lies in (0,1], (1,2], (2,4], ..., (16384,32768], (32768,inf);
                   all zero for a table without lookups.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

BINS = 17


def parse_tables(text, num_tables):
    """'0,3,10-12' -> [0, 3, 10, 11, 12]; None -> every table."""
    if text is None:
        return list(range(num_tables))
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-", 1))
            out.extend(range(lo, hi + 1))
        else:
            out.append(int(part))
    for t in out:
        if t < 0 or t >= num_tables:
            sys.exit(f"--tables: table {t} is not in [0, {num_tables})")
    return sorted(set(out))


def reuse_bins(indices):
    """Fractions of unique indices per occurrence-count bin (NeuroShard's bin_0..bin_16)."""
    if indices.size == 0:
        return [0.0] * BINS
    _, counts = np.unique(indices, return_counts=True)
    unique = counts.size
    bins = []
    start, end = 0, 1
    for _ in range(BINS - 1):
        bins.append(int(np.count_nonzero((counts > start) & (counts <= end))))
        start, end = end, end * 2
    bins.append(int(np.count_nonzero(counts > start)))
    return [b / unique for b in bins]


def table_config(t, indices, batch_size, min_rows):
    rows = int(indices.max()) + 1 if indices.size else 0
    config = {
        "index": t,
        "name": f"t{t}",
        "row": max(min_rows, rows),
        "pooling_factor": indices.size / batch_size,
    }
    for k, v in enumerate(reuse_bins(indices)):
        config[f"bin_{k}"] = v
    return config


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="fbgemm_t856_bs65536.pt or similar")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--tables", help="subset, e.g. '0,5,10-20' (default: all)")
    parser.add_argument("--min-rows", type=int, default=1,
                        help="floor of 'row' (1; the papers' preprocessing uses 100)")
    parser.add_argument("--configs-only", action="store_true",
                        help="write table_configs.json only, no .npy files")
    args = parser.parse_args()
    if args.min_rows < 1:
        sys.exit(f"--min-rows: {args.min_rows}: expected a positive row floor")

    # weights_only: the file holds three tensors; nothing to unpickle beyond that.
    indices, offsets, lengths = torch.load(args.dataset, weights_only=True)
    num_tables, batch_size = (int(x) for x in lengths.shape)
    indices = indices.numpy().astype(np.int64, copy=False)
    offsets = offsets.numpy().astype(np.int64, copy=False)
    if offsets.size != num_tables * batch_size + 1:
        sys.exit(f"offsets: {offsets.size} entries: expected T*B+1 = "
                 f"{num_tables * batch_size + 1} (T = {num_tables}, B = {batch_size})")
    if offsets[0] != 0 or offsets[-1] != indices.size or np.any(np.diff(offsets) < 0):
        sys.exit("offsets: expected non-decreasing, offsets[0] = 0, offsets[-1] = len(indices)")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    configs = []
    for t in parse_tables(args.tables, num_tables):
        table_offsets = offsets[t * batch_size:(t + 1) * batch_size + 1]
        begin, end = int(table_offsets[0]), int(table_offsets[-1])
        table_indices = indices[begin:end]
        if table_indices.size and table_indices.min() < 0:
            sys.exit(f"table {t}: negative index {int(table_indices.min())}")
        if not args.configs_only:
            np.save(out / f"table_{t}_indices.npy", np.ascontiguousarray(table_indices))
            np.save(out / f"table_{t}_offsets.npy", table_offsets - begin)
        configs.append(table_config(t, table_indices, batch_size, args.min_rows))
    with open(out / "table_configs.json", "w") as f:
        json.dump({"tables": configs}, f, indent=1)
    print(f"{len(configs)} tables of {num_tables}, B = {batch_size} -> {out}")


if __name__ == "__main__":
    main()
