"""The gas drift scenario in the loop (``simulator.drift_hil``); prints one JSON object.

    python -m benchmarks.drift_hil [--seed S] [--audit-fraction F] [--rate HZ] [--out DIR]

Real mosquitto, ``cloud serve --db sqlite:///... --metrics-port P`` and one ``edge run
--replay ROWS.csv --outbox DIR --audit-fraction F`` device. Phase 1 streams the gas batches
1-2 test rows, then the first 600 of 800 evenly spaced batch 3 rows; ``adaptedge recalibrate
--db`` re-picks the gate from the rows phase 1 stored; phase 2 streams the other 200 batch 3
rows and 120 evenly spaced rows of each of batches 4, 5, 6, 8, 9 with the deployed and with
the recalibrated bundle. Writes drift_hil.json and drift_hil.md into ``--out`` (default
benchmarks/results/drift); bundles, stores and logs go to a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.drift_hil")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--audit-fraction", type=float, default=0.05)
    parser.add_argument("--audit-seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=50.0, help="decisions per second")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/drift"))
    args = parser.parse_args(argv)

    from benchmarks.gas_drift.hil import HilDriftConfig
    from benchmarks.gas_drift.hil_run import run_hil_scenario
    from benchmarks.gas_drift.stream import DriftConfig

    drift = DriftConfig(seed=args.seed, audit_fraction=args.audit_fraction,
                        audit_seed=args.audit_seed)
    config = HilDriftConfig(audit_fraction=args.audit_fraction, audit_seed=args.audit_seed,
                            rate_hz=args.rate)
    with tempfile.TemporaryDirectory() as work:
        summary = run_hil_scenario(Path(work), drift, config)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "drift_hil.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.out / "drift_hil.md").write_text(markdown(summary))
    print(json.dumps(summary, indent=2))
    return summary


def _pct(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def markdown(s: dict[str, Any]) -> str:
    """The summary as a short Markdown report."""
    one, two, recal = s["phase1"], s["phase2"], s["recalibration"]
    first = one["first_alarm_after_drift"]
    rows = s["rows"]
    lines = [
        "# Gas drift scenario, hardware in the loop", "",
        f"Seed {s['config']['drift']['seed']}, bundle `{s['bundle_id']}`, point `{s['point']}`; "
        f"{s['config']['hil']['rate_hz']:g} decisions/s, audit fraction "
        f"{s['config']['hil']['audit_fraction']:g}; real mosquitto, `cloud serve --db "
        "sqlite:///... --metrics-port P`, one `edge run --outbox --audit-fraction` device. "
        f"Wall time {s['wall_s']} s. Command: `python -m benchmarks.drift_hil`.", "",
        f"## Phase 1: deployed bundle, {rows['phase1']} decisions "
        f"({rows['phase1_early']} batches 1-2 test rows, then {rows['phase1_batch3']} of batch 3)",
        "",
        f"- accuracy per batch: {_batches(one['accuracy_per_batch'])}",
        f"- escalation per batch: {_batches(one['escalation_per_batch'])}",
        f"- accuracy per 100 decisions: {', '.join(f'{v:.2f}' for v in one['accuracy_windows_100'])}",
        f"- live alarms before batch 3: {one['alarms_before_drift']}; first after batch 3's "
        "start: " + ("none" if first is None else
                     f"`{first['metric']}` at decision {first['monitor_decisions_after_drift']}"
                     " of batch 3 by the monitor's count (decisions as the telemetry reported "
                     f"them); the device had made {first['decisions_after_drift']} decisions of "
                     "batch 3 when the alarm was stored"),
        f"- alarms stored: {len(one['alarms'])}; `{'adaptedge_drift_alarms_total'}` at the last "
        f"scrape: {one['metrics']['adaptedge_drift_alarms_total']} "
        f"({one['metrics']['scrapes']} scrapes parsed)",
        f"- rows stored: {one['rows_stored']['escalated']} escalated + "
        f"{one['rows_stored']['audit']} audit; audit cost {one['audit_energy_mj']:.1f} mJ, "
        f"{one['audit_bytes']:.0f} B (decisions: {one['decision_energy_mj']:.1f} mJ); "
        f"outbox left {one['outbox_records_left']:.0f}", "",
        f"## Recalibration (`{recal['command']}`)", "",
        f"Chose `{recal['chosen']['name']}` from {recal['rows']['escalated']} escalated + "
        f"{recal['rows']['audit']} audit rows "
        f"({recal['n_effective']:.0f} effective rows, target agreement "
        f"{recal['target_agreement']:.4f}).", "",
        f"## Phase 2: the later rows ({rows['phase2']}: {_batches(rows['phase2_per_batch'])})", "",
        "| bundle | accuracy | per batch | escalation per batch | mJ/decision | alarms |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("deployed", "recalibrated"):
        f = two[name]
        lines.append(f"| {name} | {f['accuracy']:.4f} | {_batches(f['accuracy_per_batch'])} | "
                     f"{_batches(f['escalation_per_batch'])} | "
                     f"{f['energy_mj_per_decision']:.2f} | {len(f['alarms'])} |")
    lines += ["", f"HPC on every input: {two['hpc_accuracy']:.4f} "
              f"({_batches(two['hpc_accuracy_per_batch'])}).", ""]
    return "\n".join(lines)


def _batches(d: dict[str, Any]) -> str:
    return ", ".join(f"b{k} {_pct(v) if isinstance(v, float) else v}" for k, v in d.items())


if __name__ == "__main__":
    main()
