#!/usr/bin/env python3
"""Pool the per-task cost ratios of several `embplan compare --json` files.

    tools/pool_compare.py out/gpu_4_32_s*.json [--confidence 0.95]

Each file is one compare run (one or more settings); runs of one setting with
different --seed values hold independent tasks, so their per-task ratios to
the baseline ("ratio_to_baseline.per_task") pool into one sample. Prints, per
setting (devices / max dim) and planner: the tasks, the geometric mean of the
ratios with a Student-t interval on their logs (as meter/paired.hpp's
paired_ratio_interval computes it), its half-width in per cent, the mean
cost, and the mean balance. Standard library only.
"""
import argparse
import json
import math
import sys
from collections import defaultdict


def t_cdf(t, nu):
    """Student-t CDF by the regularised incomplete beta (continued fraction)."""
    x = nu / (nu + t * t)
    a, b = nu / 2.0, 0.5

    def betacf(a, b, x):
        tiny, eps = 1e-300, 1e-15
        c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
        d = 1.0 / (d if abs(d) > tiny else tiny)
        h = d
        for m in range(1, 1000):
            m2 = 2 * m
            aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2))
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
            aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            de = d * c
            h *= de
            if abs(de - 1.0) < eps:
                break
        return h

    lbeta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    front = math.exp(a * math.log(x) + b * math.log1p(-x) - lbeta)
    if x < (a + 1) / (a + b + 2):
        ib = front * betacf(a, b, x) / a
    else:
        ib = 1.0 - front * betacf(b, a, 1.0 - x) / b
    return 1.0 - 0.5 * ib if t > 0 else 0.5 * ib


def t_quantile(p, nu):
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, nu) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def interval(ratios, confidence):
    logs = [math.log(r) for r in ratios if r is not None and r > 0 and math.isfinite(r)]
    n = len(logs)
    if n == 0:
        return 0, float("nan"), float("nan"), float("nan")
    mean = sum(logs) / n
    if n < 2:
        return n, math.exp(mean), float("nan"), float("nan")
    se = math.sqrt(sum((l - mean) ** 2 for l in logs) / (n - 1) / n)
    t = t_quantile(0.5 + 0.5 * confidence, n - 1)
    return n, math.exp(mean), math.exp(mean - t * se), math.exp(mean + t * se)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--confidence", type=float, default=0.95)
    a = ap.parse_args()
    # (devices, max_dim) -> planner -> lists
    ratios = defaultdict(lambda: defaultdict(list))
    costs = defaultdict(lambda: defaultdict(list))
    balance = defaultdict(lambda: defaultdict(list))
    baseline = {}
    meter = set()
    for f in a.files:
        with open(f) as fh:
            report = json.load(fh)
        meter.add(report.get("meter", "?"))
        for s in report["settings"]:
            key = (s["devices"], s["max_dim"])
            for p in s["planners"]:
                r = p.get("ratio_to_baseline")
                if r is None:
                    continue
                baseline[key] = r["baseline"]
                ratios[key][p["planner"]] += r["per_task"]
                if p["mean_cost_ms_of_succeeded"] is not None:
                    costs[key][p["planner"]].append((p["mean_cost_ms_of_succeeded"], p["succeeded"]))
                    balance[key][p["planner"]].append((p["mean_balance"], p["succeeded"]))
    if not ratios:
        sys.exit("no ratio_to_baseline in the files: run compare with its default baseline "
                 "(torchrec_like) among --planners, or --baseline")
    for m in sorted(meter):
        print("meter:", m)
    for key in sorted(ratios):
        d, m = key
        print(f"\n{d} devices, max dim {m}: paired ratio to {baseline[key]} "
              f"(geometric mean, {100 * a.confidence:.0f}% t-interval on log ratios)")
        print(f"{'planner':<16}{'tasks':>6}{'ratio':>8}{'low':>8}{'high':>8}{'+-%':>7}"
              f"{'cost ms':>10}{'balance':>9}")
        for planner, rs in ratios[key].items():
            n, g, lo, hi = interval(rs, a.confidence)
            half = 100 * (hi - lo) / 2 / g if n > 1 else float("nan")
            cw = costs[key][planner]
            tot = sum(k for _, k in cw)
            cost = sum(c * k for c, k in cw) / tot if tot else float("nan")
            bal = sum(b * k for b, k in balance[key][planner]) / tot if tot else float("nan")
            print(f"{planner:<16}{n:>6}{g:>8.3f}{lo:>8.3f}{hi:>8.3f}{half:>7.2f}{cost:>10.2f}{bal:>9.3f}")


if __name__ == "__main__":
    main()
