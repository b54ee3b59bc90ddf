"""The gas drift scenario's report: Markdown plus one PNG (accuracy and escalation per batch,
before and after recalibration, the HPC's accuracy, the alarm)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_report(summary: dict[str, Any], out: Path) -> Path:
    """``out/drift.md``, ``out/drift.png`` and ``out/drift.json``; returns the Markdown path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "drift.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    _plot(summary, out / "drift.png")
    md = out / "drift.md"
    md.write_text(_markdown(summary))
    return md


def _plot(s: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = list(s["old"]["accuracy_per_batch"])
    x = range(len(batches))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    top.plot(x, [s["old"]["accuracy_per_batch"][b] for b in batches], "o-", label="deployed bundle")
    top.plot(x, [s["hpc_accuracy_per_batch"][b] for b in batches], "s--", label="HPC (always cloud)")
    bottom.plot(x, [s["old"]["escalation_per_batch"][b] for b in batches], "o-",
                label="deployed bundle")
    rec = s.get("recalibration")
    if rec:
        after = rec["after"]
        xs = [batches.index(b) for b in after["accuracy_per_batch"]]
        top.plot(xs, list(after["accuracy_per_batch"].values()), "^-",
                 label="recalibrated (rows after the cut)")
        bottom.plot(xs, list(after["escalation_per_batch"].values()), "^-", label="recalibrated")
    ref = s["reference"]["escalation_rate"]
    bottom.axhline(ref, color="grey", lw=0.8, ls=":", label=f"validation escalation {ref:.3f}")
    if s.get("alarm_delay_decisions") is not None:
        for ax in (top, bottom):
            ax.axvline(batches.index("3") - 0.5, color="red", lw=1, ls="--")
        top.text(batches.index("3") - 0.45, 0.05,
                 f"alarm {s['alarm_delay_decisions']} decisions\ninto batch 3", color="red",
                 fontsize=8)
    top.set_ylabel("accuracy")
    top.set_ylim(0, 1.02)
    bottom.set_ylabel("escalation rate")
    bottom.set_ylim(0, 1.02)
    bottom.set_xticks(list(x), [f"batch {b}" + (" (test)" if b in ("1", "2") else "")
                                for b in batches], rotation=20, fontsize=8)
    top.legend(fontsize=8, loc="lower left")
    bottom.legend(fontsize=8, loc="upper left")
    top.set_title(f"gas drift: trained on batches 1-2 ({s['config']['method']}, seed "
                  f"{s['config']['seed']}), audits {s['config']['audit_fraction']:g}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _markdown(s: dict[str, Any]) -> str:
    old = s["old"]
    lines = [
        "# Gas drift scenario", "",
        f"Bundle `{s['bundle_id']}` point `{s['point']}`; stream of {s['stream']['rows']} "
        f"decisions, batch 3 starts at decision {s['stream']['drift_start']}.", "",
        "| batch | rows | accuracy | HPC accuracy | escalation |", "|---|---|---|---|---|"]
    for b, acc in old["accuracy_per_batch"].items():
        lines.append(f"| {b} | {s['stream']['batches'][b]} | {acc:.3f} | "
                     f"{s['hpc_accuracy_per_batch'][b]:.3f} | {old['escalation_per_batch'][b]:.3f} |")
    first = s.get("first_alarm_after_batch3")
    lines += ["", f"Alarm threshold h = {s['threshold']:.2f}; alarms before batch 3: "
              f"{len(s['alarms_before_batch3'])}; first alarm after batch 3's start: "
              + (f"{first['stream']} {first['direction']} after "
                 f"{s['alarm_delay_decisions']} decisions" if first else "none"), ""]
    rec = s.get("recalibration")
    if rec:
        b, a = rec["before"], rec["after"]
        lines += [f"Recalibrated from {rec['rows']} rows up to decision {rec['cut_decision']} "
                  f"(audit cost until then: {rec['audit_cost_until_cut']['audits']:.0f} audits, "
                  f"{rec['audit_cost_until_cut']['energy_mj']:.1f} mJ); chosen "
                  f"`{rec['chosen']['name']}`.", "",
                  "| rows after the cut | accuracy | escalation | mJ/decision |",
                  "|---|---|---|---|",
                  f"| before (deployed) | {b['accuracy']:.4f} | {b['escalation_rate']:.3f} | "
                  f"{b['energy_mj_per_decision']:.2f} |",
                  f"| after (recalibrated) | {a['accuracy']:.4f} | {a['escalation_rate']:.3f} | "
                  f"{a['energy_mj_per_decision']:.2f} |", ""]
    nd = s["no_drift"]["resampled"]
    lines += [f"No drift: {s['no_drift']['time_ordered_alarms']} alarms on the time-ordered "
              f"batches 1-2 test rows; {nd['streams_with_alarm']} of {nd['streams']} resampled "
              f"streams of {nd['length']} decisions alarmed (designed bound "
              f"{nd['designed_bound']:.2g}).", "", "![drift](drift.png)", ""]
    return "\n".join(lines)
