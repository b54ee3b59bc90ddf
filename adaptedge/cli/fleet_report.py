"""``adaptedge fleet report``: Markdown and PNGs of the fleet over time (matplotlib, Agg)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from adaptedge.cloud.fleet.store import FleetStore
from adaptedge.cloud.fleet.view import (
    Expectation,
    Series,
    agreement_series,
    device_status,
    escalation_series,
    expectations,
    main_point,
)
from adaptedge.protocol.manifest import Manifest


def _plot(series: list[Series], expect: dict[str, Expectation], title: str, ylabel: str,
          path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2))
    t0 = min((s.t[0] for s in series if s.t), default=0.0)
    span = max((s.t[-1] - t0 for s in series if s.t), default=0.0)
    unit, scale = (("seconds", 1.0) if span < 120 else ("minutes", 60.0) if span < 3 * 3600
                   else ("hours", 3600.0) if span < 3 * 86400 else ("days", 86400.0))
    for s in series:
        if not s.t:
            continue
        minutes = [(t - t0) / scale for t in s.t]
        line = ax.plot(minutes, s.value, marker="o", markersize=3, label=f"{s.device} (live)")[0]
        ax.fill_between(minutes, s.low, s.high, color=line.get_color(), alpha=0.2, linewidth=0)
        if s.device in expect:
            e = expect[s.device]
            ax.axhline(e.value, color=line.get_color(), linestyle="--", linewidth=1,
                       label=f"{s.device} validation")
            if e.low is not None and e.high is not None:
                ax.axhspan(e.low, e.high, color=line.get_color(), alpha=0.08)
    ax.set_xlabel(f"{unit} since the first window")
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(store: FleetStore, out: Path, manifest: Manifest | None, window: int) -> Path:
    """Write ``out/fleet.md``, ``out/agreement.png`` and ``out/escalation_rate.png``."""
    out.mkdir(parents=True, exist_ok=True)
    rows = device_status(store)
    expect: dict[str, dict[str, Expectation]] = {}
    if manifest is not None:
        for r in rows:
            if manifest.bundle_id in r["bundles"] or not r["bundles"]:
                point = main_point(store, r["device"], manifest.bundle_id)
                expect[r["device"]] = expectations(manifest, point)
    agreement, escalation = agreement_series(store, window), escalation_series(store)
    _plot(agreement, {d: e["agreement"] for d, e in expect.items() if "agreement" in e},
          f"Audited agreement with the HPC (windows of {window} audits, 95% Wilson bands)",
          "agreement", out / "agreement.png")
    _plot(escalation, {d: e["escalation_rate"] for d, e in expect.items()},
          "Escalation rate between telemetry messages (95% Wilson bands)", "escalation rate",
          out / "escalation_rate.png")
    path = out / "fleet.md"
    path.write_text(_markdown(rows, expect, manifest, window))
    return path


def _cell(value: Any, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _markdown(rows: list[dict[str, Any]], expect: dict[str, dict[str, Expectation]],
              manifest: Manifest | None, window: int) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Fleet report ({now})", ""]
    if manifest is None:
        lines += ["No bundle given (`--bundle`): no validation expectation is drawn.", ""]
    else:
        lines += [f"Validation expectation from bundle `{manifest.bundle_id}` (dashed lines "
                  "and light bands: 95% Wilson intervals on the validation rows).", ""]
    lines += ["| device | records | audits (labelled) | agreement [95%] | expected agreement "
              "| escalation rate | expected escalation | alarms |",
              "|---|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        e = expect.get(r["device"], {})
        band = "-" if r["agreement"] is None else \
            f"{r['agreement']:.3f} [{r['agreement_low']:.3f}, {r['agreement_high']:.3f}]"
        lines.append(
            f"| {r['device']} | {r['records_stored']} | {r['audits']} ({r['audits_labelled']}) "
            f"| {band} | {_cell(e['agreement'].value if 'agreement' in e else None)} "
            f"| {_cell(r['escalation_rate'])} "
            f"| {_cell(e['escalation_rate'].value if 'escalation_rate' in e else None)} "
            f"| {r['alarms']} |")
    lines += ["", "![agreement](agreement.png)", "",
              f"Agreement: windows of {window} consecutive labelled audits per device (audits are "
              "a seeded, input-independent sample of the local decisions: an unbiased "
              "estimate).", "", "![escalation rate](escalation_rate.png)", "",
              "Escalation rate: between consecutive telemetry messages of each device.", ""]
    return "\n".join(lines)
