"""``benchmarks.cstc`` over several seeds: per data set and method, mean ± sd of what each seed chose.

    python -m benchmarks.cstc_seeds DIR [DIR ...] [--markdown]

Each DIR holds ``cstc-<dataset>.json`` files written by ``python -m benchmarks.cstc --seed S
--out DIR`` (one seed per DIR). Nothing is chosen here: every point was chosen on validation by
``benchmarks.cstc`` and is read as it reported it on test. Per (data set, method): on how many
seeds ``best_within_1pct`` exists and the mean ± sample sd of its test accuracy, test cost and
escalation rate; the test cost at Greedy Miser's most accurate validation point ("at GM") and
on how many seeds it is below Greedy Miser's own; the sweep's CPU seconds (range). Prints JSON,
or with ``--markdown`` the README table.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

DATASETS = ("letter-binary", "thyroid", "miniboone-tiny", "gas")


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "sd": sd, "n": len(values)}


def _runs(dirs: list[Path], dataset: str) -> list[dict[str, Any]]:
    runs = [json.loads(p.read_text()) for d in dirs
            for p in [d / f"cstc-{dataset}.json"] if p.exists()]
    return sorted(runs, key=lambda r: int(r["seed"]))


def summarise(dirs: list[Path]) -> dict[str, Any]:
    """Per data set and method, the seeds' chosen points summarised (see the module doc)."""
    out: dict[str, Any] = {}
    for dataset in DATASETS:
        runs = _runs(dirs, dataset)
        if not runs:
            continue
        methods = list(dict.fromkeys(m for r in runs for m in r["methods"]))
        per: dict[str, Any] = {}
        for method in methods:
            have = [r for r in runs if method in r["methods"]]
            chosen = [r["methods"][method]["best_within_1pct"] for r in have]
            points = [p for p in chosen if p is not None]
            at_gm, below_gm = [], 0
            for r in have:
                vs = r.get("vs_greedy_miser", {})
                gm, mine = vs.get("greedy_miser"), vs.get(method)
                if method != "greedy-miser" and gm is not None and mine is not None:
                    at_gm.append(mine["test"]["cost"])
                    below_gm += mine["val"]["cost"] < gm["val"]["cost"]
            cpu = [r["methods"][method]["cpu_seconds"] for r in have]
            per[method] = {
                "seeds": [int(r["seed"]) for r in have],
                "within_1pct_seeds": len(points),
                "test_accuracy": _stats([p["test"]["accuracy"] for p in points]),
                "test_cost": _stats([p["test"]["cost"] for p in points]),
                "escalation_rate": _stats([p["test"]["escalation_rate"] for p in points]),
                "at_gm_test_cost": _stats(at_gm),
                "cheaper_than_gm_on_validation": below_gm,
                "cpu_seconds": [min(cpu), max(cpu)],
            }
        gm_costs = [r["vs_greedy_miser"]["greedy_miser"]["test"]["cost"] for r in runs
                    if "vs_greedy_miser" in r]
        out[dataset] = {"seeds": [int(r["seed"]) for r in runs],
                        "hpc_test_accuracy": _stats([r["hpc_test_accuracy"] for r in runs]),
                        "greedy_miser_test_cost": _stats(gm_costs), "methods": per}
    return out


def _pm(s: dict[str, float] | None, digits: int) -> str:
    return "—" if s is None else f"{s['mean']:.{digits}f} ± {s['sd']:.{digits}f}"


def markdown(summary: dict[str, Any]) -> str:
    """The README table: one row per (data set, method)."""
    rows = ["| dataset (seeds; HPC test) | method | within 1% on | test accuracy | test cost "
            "| escalated | at GM (cheaper on) | CPU s |", "|---|---|---|---|---|---|---|---|"]
    for dataset, d in summary.items():
        first = f"{dataset} ({len(d['seeds'])}; {_pm(d['hpc_test_accuracy'], 4)})"
        for method, m in d["methods"].items():
            n = len(m["seeds"])
            gm = (_pm(m["at_gm_test_cost"], 2) + f" ({m['cheaper_than_gm_on_validation']}"
                  f" of {m['at_gm_test_cost']['n']})") if m["at_gm_test_cost"] else "—"
            if method == "greedy-miser":
                gm = _pm(d["greedy_miser_test_cost"], 2)
            lo, hi = m["cpu_seconds"]
            rows.append(f"| {first} | {method} | {m['within_1pct_seeds']} of {n} | "
                        f"{_pm(m['test_accuracy'], 4)} | {_pm(m['test_cost'], 2)} | "
                        f"{_pm(m['escalation_rate'], 3)} | {gm} | {lo:.0f}–{hi:.0f} |")
            first = ""
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    summary = summarise(args.dirs)
    print(markdown(summary) if args.markdown else json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
