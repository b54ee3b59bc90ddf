"""A small CSV whose sensor costs grow with each item's size (column ``n``), and its costs
file: three sensors, one energy polynomial, one latency polynomial, one constant."""

from __future__ import annotations

from pathlib import Path

import numpy as np

COSTS = '''[size]
column = "n"
[[sensor]]
name = "s1"
features = ["a"]
energy_mj = [0.5, 0.02, 0.0001]
[[sensor]]
name = "s2"
features = ["b", "c"]
energy_mj = 1.0
latency_ms = [1.0, 0.1]
[[sensor]]
name = "s3"
features = ["d"]
energy_mj = 0.2
'''


def write_data(folder: Path, n_rows: int = 300) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_rows, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n_rows) > 0).astype(int)
    sizes = rng.integers(10, 200, size=n_rows)
    lines = ["a,b,c,d,n,label"] + [",".join(f"{v:.4f}" for v in X[i]) + f",{sizes[i]},{y[i]}"
                                   for i in range(n_rows)]
    data, costs = folder / "d.csv", folder / "c.toml"
    data.write_text("\n".join(lines) + "\n")
    costs.write_text(COSTS)
    return data, costs
