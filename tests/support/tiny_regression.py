"""A tiny numeric-target CSV and a regression bundle trained on it by ``adaptedge train``
(the trainer's real path, ``--quick``): for the regression tests of evaluate, replay,
simulate and the cloud that need a trained bundle rather than the hand-made toy."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from adaptedge.cli.main import main


def tiny_regression_csv(path: Path, n: int = 300) -> Path:
    """temp = 3a + sin(2b) + noise; c and d are noise; four one-column sensors."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 4))
    y = 3 * X[:, 0] + np.sin(2 * X[:, 1]) + 0.1 * rng.normal(size=n)
    rows = ["a,b,c,d,temp"] + [",".join(f"{v:.5f}" for v in (*r, t))
                               for r, t in zip(X, y, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    return path


TINY_COSTS = """weights = "energy"
[link]
deadline_ms = 5000
""" + "".join(f"""[[sensor]]
name = "{s}"
features = ["{s}"]
energy_mj = 1.0
latency_ms = 1.0
""" for s in "abcd")
"""Costs of the tiny CSV (``--costs``): 1 mJ per sensor, a deadline no shared machine misses."""


def train_tiny_regression(root: Path, method: str = "greedy-miser",
                          costs: bool = False) -> tuple[Path, Path]:
    """``(csv, bundle)`` under ``root``: the CSV and a ``--quick`` regression bundle of it
    (its device bundle beside it, ``bundle-device``); ``costs``: trained with ``TINY_COSTS``
    (``root/costs.toml``)."""
    data = tiny_regression_csv(root / "t.csv")
    out = root / "bundle"
    extra = []
    if costs:
        (root / "costs.toml").write_text(TINY_COSTS)
        extra = ["--costs", str(root / "costs.toml")]
    assert main(["train", "--data", str(data), "--target", "temp", "--task", "regression",
                 "--method", method, "--quick", "--no-progress", "--out", str(out),
                 *extra]) == 0
    return data, out
