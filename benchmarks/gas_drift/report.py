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

    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(8.5, 9))
    _per_batch(s, top, "accuracy_per_batch", "accuracy", s["hpc_accuracy_per_batch"])
    _per_batch(s, middle, "escalation_per_batch", "escalation rate", None)
    ref = s["reference"]["escalation_rate"]
    middle.axhline(ref, color="grey", lw=0.8, ls=":", label=f"validation figure {ref:.3f}")
    middle.legend(fontsize=8, loc="upper left")
    _over_time(s, bottom)
    top.set_title(f"gas drift: trained on batches 1-2 ({s['config']['method']}, seed "
                  f"{s['config']['seed']}); audit fraction {s['config']['audit_fraction']:g} "
                  f"(seed {s['config']['audit_seed']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _per_batch(s: dict[str, Any], ax: Any, key: str, label: str,
               hpc: dict[str, float] | None) -> None:
    batches = list(s["old"][key])
    ax.plot(range(len(batches)), [s["old"][key][b] for b in batches], "o-", color="C0",
            label="deployed bundle")
    if hpc is not None:
        ax.plot(range(len(batches)), [hpc[b] for b in batches], "s--", color="C1",
                label="HPC (always cloud)")
    rec = s.get("recalibration")
    if rec:
        after = rec["after"][key]
        ax.plot([batches.index(b) for b in after], list(after.values()), "^-", color="C2",
                label=f"recalibrated (decisions after {rec['cut_decision']})")
    ax.set_xticks(range(len(batches)), [f"batch {b}" + (" test" if b in ("1", "2") else "")
                                        for b in batches], fontsize=8)
    ax.set_ylabel(label)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8, loc="lower left")


def _over_time(s: dict[str, Any], ax: Any) -> None:
    w = s["escalation_windows"]
    x = [(i + 0.5) * w["size"] for i in range(len(w["rate"]))]
    ax.step(x, w["rate"], where="mid", color="C0",
            label=f"escalation rate per {w['size']} decisions")
    for b, start in s["batch_starts"].items():
        ax.axvline(start, color="grey", lw=0.6)
        ax.text(start + 15, 0.93 - 0.07 * (b in ("2", "3")), f"b{b}", fontsize=7, color="grey")
    alarms = s["alarm_decisions"]
    if alarms:
        ax.plot(alarms, [0.02] * len(alarms), "|", color="red", ms=10,
                label=f"drift alarms ({len(alarms)})")
    delay = s.get("alarm_delay_decisions")
    if delay is not None:
        ax.annotate(f"first alarm: {delay} decisions into batch 3",
                    xy=(s["stream"]["drift_start"] + delay, 0.02), xytext=(1100, 0.62),
                    fontsize=8, color="red", arrowprops={"arrowstyle": "->", "color": "red"})
    if s.get("recalibration"):
        ax.axvline(s["recalibration"]["cut_decision"], color="C2", ls="--", lw=1,
                   label="recalibration cut")
    ax.set_xlabel("decision (batch starts in grey)")
    ax.set_ylabel("escalation rate")
    ax.set_ylim(0, 1.0)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)


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
    early = s.get("batch3_first_500")
    if early:
        agreement = early["audited_agreement"]
        lines += [f"Batch 3's first {early['decisions']} decisions: escalation rate "
                  f"{early['escalation_rate']:.3f} (validation {s['reference']['escalation_rate']:.3f}"
                  f"), {early['audits']} audits, audited agreement "
                  + ("n/a" if agreement is None else f"{agreement:.3f}") + " (validation "
                  f"{s['reference'].get('local_agreement') or float('nan'):.3f}).", ""]
    rec = s.get("recalibration")
    if rec:
        b, a = rec["before"], rec["after"]
        lines += [f"Recalibrated from {rec['rows']} rows up to decision {rec['cut_decision']} "
                  f"(audit cost until then: {rec['audit_cost_until_cut']['audits']:.0f} audits, "
                  f"{rec['audit_cost_until_cut']['energy_mj']:.1f} mJ, beside "
                  f"{rec['decision_energy_mj_until_cut']:.1f} mJ of decisions); chosen "
                  f"`{rec['chosen']['name']}`.", "",
                  "| decisions after the cut | accuracy | escalation | mJ/decision |",
                  "|---|---|---|---|",
                  f"| deployed bundle | {b['accuracy']:.4f} | {b['escalation_rate']:.3f} | "
                  f"{b['energy_mj_per_decision']:.2f} |",
                  f"| recalibrated bundle | {a['accuracy']:.4f} | {a['escalation_rate']:.3f} | "
                  f"{a['energy_mj_per_decision']:.2f} |",
                  f"| HPC on every input | "
                  f"{rec['hpc_accuracy_after_cut']:.4f} | 1 | |", "",
                  "| batch (after the cut) | deployed | recalibrated |", "|---|---|---|"]
        lines += [f"| {k} | {v:.3f} | {a['accuracy_per_batch'][k]:.3f} |"
                  for k, v in b["accuracy_per_batch"].items()]
        lines.append("")
    lines.append(f"No drift: {s['no_drift']['time_ordered_alarms']} alarms on the time-ordered "
                 "batches 1-2 test rows.")
    for key in ("resampled", "resampled_loose_design"):
        nd = s["no_drift"][key]
        lines.append(f"Design alpha={nd['design']['false_alarm']:g} within "
                     f"{nd['design']['horizon']} decisions (h={nd['threshold']:.2f}): "
                     f"{nd['streams_with_alarm']} of {nd['streams']} resampled no-drift streams "
                     f"of {nd['length']} decisions alarmed (designed bound "
                     f"{nd['designed_bound']:.2g}).")
    lines += ["", "![drift](drift.png)", ""]
    return "\n".join(lines)
