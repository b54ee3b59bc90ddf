"""PNG plots of a report (matplotlib, Agg backend; imported only when a report is written)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def frontier_plot(points: Sequence[dict[str, Any]], path: Path, *, title: str) -> Path:
    """Accuracy vs mean energy per decision; one series per group (bundle or baseline)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        groups.setdefault(p["group"], []).append(p)
    markers = "osD^v<>Px*"
    for i, (group, pts) in enumerate(groups.items()):
        pts = sorted(pts, key=lambda p: p["energy_mj"])
        xs = [p["energy_mj"] for p in pts]
        ys = [p["accuracy"] for p in pts]
        style = "-" if group != "baseline" and len(pts) > 1 else ""
        ax.plot(xs, ys, style + markers[i % len(markers)], label=group, alpha=0.85)
        many = group != "baseline" and len(pts) > 4
        for p in pts:
            if many and not p.get("main"):
                continue  # too many to name: the report's table lists them all
            ax.annotate(p["label"] if len(p["label"]) <= 28 else p["label"][:26] + "…",
                        (p["energy_mj"], p["accuracy"]), fontsize=7,
                        textcoords="offset points", xytext=(4, 3))
        for p in pts:
            if p.get("main"):
                ax.plot([p["energy_mj"]], [p["accuracy"]], "*", color="black", markersize=12,
                        label="operating point run", zorder=5)
    ax.set_xlabel("mean energy per decision (mJ)")
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def cost_breakdown_plot(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Stacked bars: mean energy per decision spent on sensors, link and idle, per run."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 4.0))
    names = [r["label"] for r in rows]
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for key, label in (("sensor_energy_mj", "sensors"), ("link_energy_mj", "radio link"),
                       ("idle_energy_mj", "idle")):
        vals = np.asarray([r["cost"][key] for r in rows], dtype=float)
        axes[0].bar(x, vals, bottom=bottom, label=label)
        bottom += vals
    axes[0].set_xticks(x, names, rotation=20, fontsize=8)
    axes[0].set_ylabel("mJ per decision")
    axes[0].set_title("energy by where it is spent")
    axes[0].legend(fontsize=8)
    money_s = np.asarray([r["cost"]["sensor_money"] for r in rows], dtype=float)
    money_c = np.asarray([r["cost"]["cloud_money"] for r in rows], dtype=float)
    axes[1].bar(x, money_s, label="sensors")
    axes[1].bar(x, money_c, bottom=money_s, label="cloud calls")
    axes[1].set_xticks(x, names, rotation=20, fontsize=8)
    if not (money_s.any() or money_c.any()):
        axes[1].text(0.5, 0.5, "no money costs in this bundle", ha="center", va="center",
                     transform=axes[1].transAxes, fontsize=9, color="gray")
    axes[1].set_ylabel("money per decision (bundle units)")
    axes[1].set_title("money")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def latency_cdf_plot(series: Mapping[str, Sequence[float]], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, values in series.items():
        v = np.sort(np.asarray(values, dtype=float))
        if not v.size:
            continue
        ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=label)
    ax.set_xlabel("decision latency (ms)")
    ax.set_ylabel("fraction of decisions")
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("latency CDF")
    return _save(fig, path)


def rates_over_time_plot(rates: dict[str, list[float]], outages: Sequence[Sequence[float]],
                         path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    for i, (start, end) in enumerate(outages):
        ax.axvspan(start, end, color="tab:red", alpha=0.15,
                   label="link outage" if i == 0 else None)
    ax.plot(rates["t"], rates["escalation"], "-", label="escalated")
    ax.plot(rates["t"], rates["degraded"], "-", label="degraded (no cloud answer)")
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("fraction of decisions")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title("escalation and degraded answers over time")
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
