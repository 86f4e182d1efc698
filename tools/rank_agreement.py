#!/usr/bin/env python3
"""How often a cost model orders two plans of a task as a measured meter does.

    tools/rank_agreement.py MEASURED_DIR MODEL_DIR [--min-gap 0.02]

Both folders hold `compare --json` files of the same runs (same settings,
seed, count and planners, so the same tasks and the same plans: planners are
seeded by task), matched by file name: MEASURED_DIR's priced by a measured
meter (--meter measured, or cuda in embplan_gpu), MODEL_DIR's by the model
(--meter simulated). A task's plans are ordered by their per-task ratio to
the baseline (the same denominator within a task), so files without
per_task_cost_ms work too. For every task and every pair of planners both
solved, the pair counts where the model's two costs differ (equal costs are,
but for rounding, the same plan); it agrees where the measured order is the
same. Printed per setting and overall: pairs, agreement, and agreement among
the pairs whose measured costs differ by more than --min-gap (the decisions
a search gets wrong at a cost). Where both files have per_task_cost_ms, also
the model's MAPE on plan cost. Standard library only.
"""
import argparse
import json
import math
import os
from collections import defaultdict


def per_task(report):
    """(devices, max_dim) -> planner -> (ratios, costs or None)."""
    out = {}
    for s in report["settings"]:
        key = (s["devices"], s["max_dim"])
        rows = {}
        for p in s["planners"]:
            r = p.get("ratio_to_baseline")
            if r is None:
                continue
            rows[p["planner"]] = (r["per_task"], p.get("per_task_cost_ms"))
        out[key] = rows
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("measured_dir")
    ap.add_argument("model_dir")
    ap.add_argument("--min-gap", type=float, default=0.02)
    a = ap.parse_args()
    stats = defaultdict(lambda: [0, 0, 0, 0])  # pairs, agree, big pairs, big agree
    ape = defaultdict(list)
    files = sorted(f for f in os.listdir(a.measured_dir) if f.endswith(".json"))
    used = 0
    for f in files:
        model_path = os.path.join(a.model_dir, f)
        if not os.path.exists(model_path):
            continue
        used += 1
        with open(os.path.join(a.measured_dir, f)) as fh:
            meas = per_task(json.load(fh))
        with open(model_path) as fh:
            model = per_task(json.load(fh))
        for key, rows in meas.items():
            mrows = model.get(key, {})
            planners = [p for p in rows if p in mrows]
            n = len(rows[planners[0]][0]) if planners else 0
            for i in range(n):
                ok = [p for p in planners
                      if rows[p][0][i] is not None and mrows[p][0][i] is not None]
                for x in range(len(ok)):
                    for y in range(x + 1, len(ok)):
                        p, q = ok[x], ok[y]
                        mp, mq = mrows[p][0][i], mrows[q][0][i]
                        if abs(mp - mq) <= 1e-9 * max(mp, mq):
                            continue
                        rp, rq = rows[p][0][i], rows[q][0][i]
                        agree = (mp < mq) == (rp < rq)
                        big = abs(math.log(rp / rq)) > math.log1p(a.min_gap)
                        st = stats[key]
                        st[0] += 1
                        st[1] += agree
                        st[2] += big
                        st[3] += agree and big
                for p in ok:
                    cm, cr = mrows[p][1], rows[p][1]
                    if cm is not None and cr is not None and cm[i] and cr[i]:
                        ape[key].append(abs(cm[i] - cr[i]) / cr[i])
    if not used:
        raise SystemExit("no file of MEASURED_DIR has a namesake in MODEL_DIR")
    total = [0, 0, 0, 0]
    print(f"{used} file pairs; pairs of plans of one task that the model tells apart")
    print(f"{'setting':<22}{'pairs':>7}{'agree':>8}{'pairs>gap':>11}{'agree':>8}{'MAPE':>8}")
    for key in sorted(stats):
        st = stats[key]
        total = [t + s for t, s in zip(total, st)]
        mape = f"{100 * sum(ape[key]) / len(ape[key]):.1f}%" if ape[key] else "-"
        print(f"{f'{key[0]} dev, max dim {key[1]}':<22}{st[0]:>7}{100 * st[1] / max(st[0], 1):>7.1f}%"
              f"{st[2]:>11}{100 * st[3] / max(st[2], 1):>7.1f}%{mape:>8}")
    print(f"{'all':<22}{total[0]:>7}{100 * total[1] / max(total[0], 1):>7.1f}%"
          f"{total[2]:>11}{100 * total[3] / max(total[2], 1):>7.1f}%")
    print(f"(pairs>gap: measured costs more than {100 * a.min_gap:.0f}% apart)")


if __name__ == "__main__":
    main()
