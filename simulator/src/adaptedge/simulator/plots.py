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


def _spread_labels(pts: Sequence[dict[str, Any]], span: tuple[float, float, float, float],
                   taken: list[tuple[float, float]], min_gap: float = 0.06,
                   x_key: str = "energy_mj", y_key: str = "accuracy") -> list[dict[str, Any]]:
    """The points whose label fits: not within ``min_gap`` (axes fraction) of a label already
    placed. Main and baseline points go first, so they are always named."""
    x0, x1, y0, y1 = span
    out = []
    for p in sorted(pts, key=lambda p: (not p.get("main"), p["group"] != "baseline")):
        fx = (p[x_key] - x0) / ((x1 - x0) or 1.0)
        fy = (p[y_key] - y0) / ((y1 - y0) or 1.0)
        if all(abs(fx - a) > min_gap or abs(fy - b) > min_gap for a, b in taken):
            taken.append((fx, fy))
            out.append(p)
    return out


def frontier_plot(points: Sequence[dict[str, Any]], path: Path, *, title: str,
                  x_key: str = "energy_mj", x_label: str = "mean energy per decision (mJ)",
                  y_key: str = "accuracy", y_label: str = "accuracy") -> Path:
    """Accuracy (``y_key``: a regression report's RMSE, in the target's unit) vs mean cost per
    decision (``x_key`` of each point, in the bundle's cost unit:
    ``report.cost_axis``); one series per group (a bundle's method, or the baselines). Points
    carry short labels (``short``: P1, P2, ... by cost; the report's table maps them to
    operating point names); labels that would overlap are left out. The legend sits beside
    the axes, so it hides no point."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9.0, 4.8))
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        groups.setdefault(p["group"], []).append(p)
    markers = "osD^v<>Px*"
    for i, (group, pts) in enumerate(groups.items()):
        pts = sorted(pts, key=lambda p: p[x_key])
        style = "-" if group != "baseline" and len(pts) > 1 else ""
        ax.plot([p[x_key] for p in pts], [p[y_key] for p in pts],
                style + markers[i % len(markers)], label=group, alpha=0.85)
        for p in pts:
            if p.get("main"):
                ax.plot([p[x_key]], [p[y_key]], "*", color="black", markersize=13,
                        label=f"this run: {p.get('short', p['label'])}", zorder=5)
    xs = [p[x_key] for p in points]
    ys = [p[y_key] for p in points]
    span = (min(xs), max(xs), min(ys), max(ys))
    for p in _spread_labels(points, span, [], x_key=x_key, y_key=y_key):
        right = (p[x_key] - span[0]) > 0.6 * ((span[1] - span[0]) or 1.0)  # label to the left
        ax.annotate(p.get("short", p["label"]), (p[x_key], p[y_key]), fontsize=8,
                    textcoords="offset points", xytext=(-5 if right else 5, 4),
                    ha="right" if right else "left")
    ax.margins(x=0.12, y=0.08)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return _save(fig, path)


def cost_breakdown_plot(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Stacked bars: mean energy per decision spent on sensors, link and idle, per run; and,
    when the bundle has money costs, money on sensors and cloud calls (else no empty panel)."""
    plt = _pyplot()
    money_s = np.asarray([r["cost"]["sensor_money"] for r in rows], dtype=float)
    money_c = np.asarray([r["cost"]["cloud_money"] for r in rows], dtype=float)
    has_money = bool(money_s.any() or money_c.any())
    fig, axes = plt.subplots(1, 2 if has_money else 1, figsize=(9.0 if has_money else 5.6, 4.0),
                             squeeze=False)
    names = [r["label"] for r in rows]
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    ax = axes[0][0]
    for key, label in (("sensor_energy_mj", "sensors"), ("link_energy_mj", "radio link"),
                       ("idle_energy_mj", "idle")):
        vals = np.asarray([r["cost"][key] for r in rows], dtype=float)
        ax.bar(x, vals, bottom=bottom, label=label)
        bottom += vals
    ax.set_ylim(0, max(float(bottom.max()), 1e-9) * 1.12)  # room above the tallest bar
    ax.set_xticks(x, names, fontsize=8)
    ax.set_ylabel("mJ per decision")
    ax.set_title("energy by where it is spent")
    ax.legend(fontsize=8)
    if has_money:
        ax = axes[0][1]
        ax.bar(x, money_s, label="sensors")
        ax.bar(x, money_c, bottom=money_s, label="cloud calls")
        ax.set_ylim(0, max(float((money_s + money_c).max()), 1e-9) * 1.12)
        ax.set_xticks(x, names, fontsize=8)
        ax.set_ylabel("money per decision (bundle units)")
        ax.set_title("money")
        ax.legend(fontsize=8)
    return _save(fig, path)


def latency_cdf_plot(series: Mapping[str, Sequence[float]], path: Path) -> Path:
    """Cumulative distribution of decision latency, log scale with plain-number ticks."""
    from matplotlib.ticker import FixedLocator, FuncFormatter

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    floor = 0.01  # ms: a log axis has no 0; faster decisions are drawn at 10 µs
    for label, values in series.items():
        v = np.sort(np.maximum(np.asarray(values, dtype=float), floor))
        if not v.size:
            continue
        ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=label)
    ax.set_xscale("log")
    drawn = [max(float(v), floor) for values in series.values() for v in values]
    lo, hi = min(drawn, default=1.0) / 1.15, max(drawn, default=100.0) * 1.15
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_locator(FixedLocator(_ticks_125(lo, hi)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xlabel("decision latency (ms, log scale)")
    ax.set_ylabel("fraction of decisions")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("latency CDF")
    return _save(fig, path)


def _ticks_125(lo: float, hi: float) -> list[float]:
    """Plain ticks covering ``lo..hi``: 1-2-5 per decade, or 1-2-3-4-5-6-8 when that leaves
    fewer than three (a log axis's own locator labels a span like 6-30 ms with 10 and 20 only);
    the two ends when nothing fits."""
    import math

    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for mantissas in ((1, 2, 5), (1, 2, 3, 4, 5, 6, 8)):
        ticks = [m * 10.0**e for e in decades for m in mantissas if lo <= m * 10.0**e <= hi]
        if len(ticks) >= 3:
            return ticks
    return ticks if len(ticks) >= 2 else [float(f"{lo:.2g}"), float(f"{hi:.2g}")]


def rates_over_time_plot(rates: dict[str, list[float]], outages: Sequence[Sequence[float]],
                         path: Path) -> Path:
    """Escalated and degraded fractions over the run; outages shaded where the run was."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    last = max((float(t) for t in rates["t"]), default=0.0)
    # a scenario's outages after the run's last decision would stretch the axis over nothing
    shown = [(a, min(b, last)) for a, b in outages if a < last]
    for i, (start, end) in enumerate(shown):
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
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
