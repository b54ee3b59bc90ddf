"""Reports: ``report.json`` (every number), ``report.md`` (the same, for people) and PNG plots.

``evaluate`` replays the bundle at each operating point and the baselines (always-cloud HPC,
always-local: the runtime with no uplink, and any other bundles given) to place them on an
accuracy-vs-cost frontier; ``write_report`` writes the files for a main run (replay or HIL).

A regression bundle's report scores every run by its error in the target's unit (``mse`` in
the unit squared, ``mae`` and ``rmse`` in the unit; ``accuracy`` is then null) and its
frontier plots RMSE, in the unit, against the same costs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adaptedge.simulator.energy import EnergyModel
from adaptedge.simulator.metrics import cost_totals, rates_over_time, summarize
from adaptedge.simulator.records import RunResult
from adaptedge.simulator.replay import hpc_answers, hpc_values, replay
from adaptedge.simulator.replay_session import ReplaySession
from adaptedge.simulator.scenario import Scenario

REMOTE_SENSOR_DOC = """\
Remote sensors (`adaptedge simulate --hil --remote-sensors`, or a device under test that is
not ours to start): the simulator serves each sensor read over MQTT from the recorded row.
The device publishes a read request to `<prefix>/v1/<device>/sensor/<name>/get` (msgpack
`[read_id, row]`, `row` may be nil: the simulator then uses the device's current row, which
advances when the device reads a sensor it already read for this row) and receives
`[read_id, values]` (`values`: little-endian float32 bytes, one per feature column of the
sensor, or nil when there is no such row) on `<prefix>/v1/<device>/sensor/<name>/value`
after the sensor's latency from the bundle. Device side: `simulator.remote_sensors.
RemoteSensors(...).readers` plugs into `EdgeRuntime.predict`; `python -m
simulator.remote_device` is such a device, writing `adaptedge edge run --json-out` records
that the simulator scores.
"""


ALWAYS_CLOUD = "always cloud (HPC)"
ALWAYS_LOCAL = "always local (LPC)"
"""The two baselines, named alike in the summary, the frontier, the tables and the plots."""


_TOLD_APART = ("dataset", "seed", "quick", "budget", "extra")
"""Manifest metadata that tells two bundles of one method apart in a legend, in this order."""


def group_names(manifests: Sequence[Any], paths: Sequence[str | Path] = ()) -> list[str]:
    """Legend names of bundles: their method, and for two bundles of one method what differs
    between them (seed, dataset, ``--quick``, budget, parameters), else their directory names,
    else their bundle ids."""
    names = [f"{m.metadata.get('method', 'bundle')}" for m in manifests]
    out = []
    for i, (name, m) in enumerate(zip(names, manifests, strict=True)):
        same = [o for o, n in zip(manifests, names, strict=True) if n == name]
        if len(same) == 1:
            out.append(name)
            continue
        keys = [k for k in _TOLD_APART
                if len({repr(o.metadata.get(k)) for o in same}) > 1]
        dirs = [Path(p).name for p in paths]
        if keys:
            told = ", ".join(f"{k} {m.metadata.get(k)}" for k in keys)
        elif len(dirs) == len(manifests) and len(set(dirs)) == len(dirs):
            told = dirs[i]
        else:
            told = m.bundle_id[:8]
        out.append(f"{name} ({told})")
    return out


def merged_methods(manifest: Any) -> bool:
    """Whether the bundle's points come from several methods (``train --method auto``): the
    frontier then shows one series per method."""
    return len({p.method for p in manifest.operating_points if p.method}) > 1


def cost_axis(manifest: Any) -> tuple[str, str]:
    """The frontier's x: the point key and axis label in the bundle's cost unit (energy or
    money when the training scalar is only that, else the weighted scalar)."""
    w = manifest.cost_weights
    terms = [(w.energy_mj, "mJ"), (w.latency_ms, "ms"), (w.money, "money"),
             (w.uniform, "features read")]
    used = [(k, unit) for k, unit in terms if k]
    if used == [(w.energy_mj, "mJ")]:
        return "energy_mj", "mean energy per decision (mJ)"
    if [unit for _, unit in used] == ["money"]:
        return "money", "mean money per decision"
    unit = " + ".join(unit if k == 1 else f"{k:g}*{unit}" for k, unit in used)
    return "scalar", f"mean cost per decision ({unit})"


def short_labels(points: list[dict[str, Any]], x_key: str = "energy_mj") -> None:
    """Give each bundle point a short label, P1, P2, ... by cost (``x_key``) within its
    bundle (``bundle``, else its group; ``short``); baselines keep their names."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        if p["group"] != "baseline":
            groups.setdefault(p.get("bundle", p["group"]), []).append(p)
    prefixes = "PQRSTUVW"
    for g, pts in enumerate(groups.values()):
        for i, p in enumerate(sorted(pts, key=lambda p: p[x_key]), start=1):
            p["short"] = f"{prefixes[g % len(prefixes)]}{i}"


@dataclass
class ReportData:
    title: str
    main: RunResult
    energy: EnergyModel
    frontier: list[dict[str, Any]] = field(default_factory=list)
    breakdown: list[dict[str, Any]] = field(default_factory=list)
    latency: dict[str, list[float]] = field(default_factory=dict)
    comparisons: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    axis: tuple[str, str] = ("energy_mj", "mean energy per decision (mJ)")
    """The frontier's x key and label (``cost_axis``)."""
    target: dict[str, str] | None = None
    """A regression bundle's target ``name`` and ``unit`` (None: classification)."""

    @property
    def score(self) -> tuple[str, str]:
        """The frontier's y key and label: accuracy, or RMSE in the target's unit."""
        if self.target is None:
            return "accuracy", "accuracy"
        unit = self.target["unit"]
        return "rmse", f"RMSE{f' ({unit})' if unit else ''}, lower is better"


def errors_of(values: npt.NDArray[Any], targets: npt.NDArray[Any]) -> dict[str, float]:
    """``mse``, ``mae`` and ``rmse`` of ``values`` against ``targets`` (float64)."""
    diff = np.asarray(values, dtype=np.float64) - np.asarray(targets, dtype=np.float64)
    mse = float(np.mean(diff * diff)) if diff.size else math.nan
    return {"mse": mse, "mae": float(np.mean(np.abs(diff))) if diff.size else math.nan,
            "rmse": math.sqrt(mse)}


def _point(label: str, group: str, run: RunResult | None, energy: EnergyModel, *,
           accuracy: float | None = None, escalated: bool | None = None,
           errors: dict[str, float] | None = None) -> dict[str, Any]:
    """A frontier point: a run's scores and costs, or (``run`` None) the HPC's on every row
    (``accuracy``, a regression HPC's ``errors``) at its nominal cost."""
    if run is not None and run.regression:
        errors = run.errors()
    if run is not None:
        cost = cost_totals(run, energy)
        acc = run.accuracy() if accuracy is None else accuracy
        esc = run.sent_rate()
    else:
        assert escalated is not None
        d = energy.cost(energy.manifest.hpc.sensors, escalated)
        acc = float(accuracy if accuracy is not None else math.nan)
        esc = 1.0 if escalated else 0.0
        return {"label": label, "group": group, "accuracy": acc, **(errors or {}),
                "energy_mj": d.energy_mj,
                "money": d.money, "scalar": d.scalar, "sent_rate": esc,
                "cost": {"sensor_energy_mj": d.sensor_energy_mj,
                         "sensor_latency_ms": d.sensor_latency_ms,
                         "sensor_money": d.sensor_money, "link_energy_mj": d.link_energy_mj,
                         "link_bytes": d.link_bytes, "cloud_calls": d.cloud_calls,
                         "cloud_money": d.cloud_money, "idle_energy_mj": 0.0,
                         "scalar": d.scalar}}
    return {"label": label, "group": group, "accuracy": acc, **(errors or {}),
            "energy_mj": cost.energy_mj,
            "money": cost.money, "scalar": cost.scalar, "sent_rate": esc,
            "cost": cost.to_dict()}


def evaluate(bundle_dir: str | Path, X: npt.NDArray[Any], y: npt.NDArray[Any], *,
             scenario: Scenario | None = None, main: RunResult | None = None,
             compare: Sequence[str | Path] = (), limit: int | None = None,
             frontier_rows: int | None = None, progress: bool = False,
             title: str | None = None) -> ReportData:
    """Replay the scenario (unless ``main`` is given), every operating point and the baselines.

    The baselines of the summary use the main run's rows (``limit``, else the scenario's, else
    all); the frontier uses the first ``frontier_rows`` rows (default: the same rows).
    """
    scenario = scenario or Scenario()
    session = ReplaySession(bundle_dir)  # verified once; sessions and HPC answers shared
    manifest = session.manifest
    energy = EnergyModel(manifest, scenario.energy)
    n = limit if limit is not None else (scenario.devices.limit or len(X))
    Xs, ys = X[:n], y[:n]
    if main is None:
        main = replay(session, Xs, ys, scenario=scenario, limit=len(Xs), progress=progress)
    quiet = replace(scenario, devices=replace(scenario.devices, count=1))
    hpc_point, local_point, local = _baselines(session, Xs, ys, quiet, main.operating_point,
                                               energy, progress)
    nf = frontier_rows if frontier_rows is not None else n
    Xf, yf = X[:nf], y[:nf]
    frontier: list[dict[str, Any]] = []
    sessions = [ReplaySession(other) for other in compare]
    others = [other.manifest for other in sessions]
    names = group_names([manifest, *others], [bundle_dir, *compare])
    for op in manifest.operating_points:
        run = replay(session, Xf, yf, scenario=quiet, operating_point=op.name,
                     limit=len(Xf), progress=progress)
        by_method = merged_methods(manifest) and op.method
        group = f"{names[0]}: {op.method}" if by_method else names[0]
        point = {**_point(op.name, group, run, energy), "bundle": names[0]}
        point["main"] = op.name == main.operating_point
        frontier.append(point)
    if nf == n:
        frontier += [hpc_point, local_point]
    else:
        frontier += list(_baselines(session, Xf, yf, quiet, main.operating_point, energy,
                                    progress)[:2])
    for other, other_manifest, name in zip(sessions, others, names[1:], strict=True):
        other_energy = EnergyModel(other_manifest, scenario.energy)
        for op in other_manifest.operating_points:
            run = replay(other, Xf, yf, scenario=quiet, operating_point=op.name,
                         limit=len(Xf), progress=progress)
            frontier.append(_point(op.name, name, run, other_energy))
    axis = cost_axis(manifest)
    target = ({"name": manifest.target or "", "unit": manifest.target_unit or ""}
              if manifest.is_regression else None)
    short_labels(frontier, axis[0])
    main_point = _point(f"{main.mode}: {main.operating_point}", "run", main, energy)
    breakdown = [{**main_point, "label": f"this run ({main.mode})"},
                 {**hpc_point, "label": "always cloud"}, {**local_point, "label": "always local"}]
    latency = {f"this run, {main.mode} ({main.operating_point})": list(main.columns.latency_ms),
               ALWAYS_LOCAL: list(local.columns.latency_ms)}
    notes = [f"the frontier uses the first {len(Xf)} rows and the summary the run's {len(Xs)} "
             "rows, so their always-cloud and always-local accuracies may differ"
             ] if nf != n else []
    return ReportData(
        title=title or f"adaptedge simulation of bundle {manifest.bundle_id}",
        main=main, energy=energy, frontier=frontier, breakdown=breakdown, latency=latency,
        comparisons={"hpc_always": _baseline(hpc_point), "lpc_always": _baseline(local_point)},
        notes=notes, axis=axis, target=target)


def _baselines(session: ReplaySession, X: npt.NDArray[Any], y: npt.NDArray[Any],
               scenario: Scenario, point: str, energy: EnergyModel, progress: bool
               ) -> tuple[dict[str, Any], dict[str, Any], RunResult]:
    """Always-cloud (the HPC on every row) and always-local (the runtime with no uplink)."""
    if session.manifest.is_regression:
        hpc_point = _point(ALWAYS_CLOUD, "baseline", None, energy, escalated=True,
                           errors=errors_of(hpc_values(session, X), y))
    else:
        hpc_acc = float(np.mean(hpc_answers(session, X) == np.asarray(y)))
        hpc_point = _point(ALWAYS_CLOUD, "baseline", None, energy, accuracy=hpc_acc,
                           escalated=True)
    local = replay(session, X, y, scenario=scenario, operating_point=point, cloud=False,
                   limit=len(X), progress=progress)
    local_point = _point(f"{ALWAYS_LOCAL} ({point})", "baseline", local, energy)
    return hpc_point, local_point, local


def _baseline(point: dict[str, Any]) -> dict[str, Any]:
    keys = ("label", "accuracy", "mse", "mae", "rmse", "energy_mj", "money", "sent_rate")
    return {k: point[k] for k in keys if k in point}


def write_report(data: ReportData, out_dir: str | Path,
                 extra: dict[str, Any] | None = None) -> dict[str, Path]:
    """Write report.json, report.md and the PNGs; returns the paths written."""
    from adaptedge.simulator import plots

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(data.main, data.energy)
    rates = rates_over_time(data.main)
    y_key, y_label = data.score
    paths = {
        "frontier": plots.frontier_plot(data.frontier, out / "frontier.png",
                                        title=(f"{data.target['name']} error (RMSE) vs cost".strip()
                                               if data.target else "accuracy vs cost"),
                                        x_key=data.axis[0], x_label=data.axis[1],
                                        y_key=y_key, y_label=y_label),
        "cost_breakdown": plots.cost_breakdown_plot(data.breakdown, out / "cost_breakdown.png"),
        "latency_cdf": plots.latency_cdf_plot(data.latency, out / "latency_cdf.png"),
        "rates_over_time": plots.rates_over_time_plot(rates, data.main.outages,
                                                      out / "rates_over_time.png"),
    }
    body: dict[str, Any] = {
        "title": data.title,
        "summary": summary,
        "baselines": data.comparisons,
        "frontier": data.frontier,
        "cost_breakdown": data.breakdown,
        "rates_over_time": rates,
        "outage_effect": outage_effect(data.main),
        "plots": {k: p.name for k, p in paths.items()},
        "notes": data.notes,
        **({"task": "regression", "target": data.target} if data.target else {}),
        **(extra or {}),
    }
    (out / "report.json").write_text(json.dumps(_clean(body), indent=2) + "\n")
    (out / "report.md").write_text(render_markdown(body, data))
    paths["json"] = out / "report.json"
    paths["markdown"] = out / "report.md"
    return paths


def outage_effect(run: RunResult) -> dict[str, Any]:
    """Decisions and degraded rate inside vs outside the outages."""
    if not run.outages:
        return {}
    t = np.asarray(run.columns.t_start, dtype=float)
    inside = np.zeros(t.size, dtype=bool)
    for start, end in run.outages:
        inside |= (t >= start) & (t < end)
    degraded = run.sources() == "degraded"
    def rate(sel: npt.NDArray[np.bool_]) -> float:
        return float(degraded[sel].mean()) if sel.any() else float("nan")
    return {"decisions_in_outage": int(inside.sum()), "degraded_rate_in_outage": rate(inside),
            "degraded_rate_outside": rate(~inside)}


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return _clean(value.item())
    return value


def _f(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, float):
        if value == 0 or abs(value) >= 10 ** -digits:
            return f"{value:.{digits}f}"
        return f"{value:.2e}"
    return str(value)


def score_columns(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, header) of the scores a report shows: accuracy, or a regression bundle's errors
    in its target's unit (MSE in the unit squared)."""
    target = body.get("target")
    if not target:
        return [("accuracy", "accuracy")]
    unit = target.get("unit") or ""
    u, u2 = (f" ({unit})", f" ({unit}²)") if unit else ("", "")
    return [("mse", f"MSE{u2}"), ("mae", f"MAE{u}"), ("rmse", f"RMSE{u}")]


def _scores(row: dict[str, Any], columns: list[tuple[str, str]]) -> str:
    return " | ".join(_f(row.get(k), 4 if k != "accuracy" else 3) for k, _ in columns)


def _target_line(body: dict[str, Any]) -> list[str]:
    """A regression report's task line (none for classification)."""
    target = body.get("target")
    if not target:
        return []
    unit = f" in {target['unit']}" if target.get("unit") else ""
    return [f"Regression: target **{target['name'] or '?'}**{unit}; errors are in its unit "
            "(MSE in its square), the frontier plots RMSE.", ""]


def render_markdown(body: dict[str, Any], data: ReportData) -> str:
    s = body["summary"]
    c = s["cost_per_decision"]
    lat = s["latency_ms"]
    cols = score_columns(body)
    heads = " | ".join(h for _, h in cols)
    bars = "---|" * len(cols)
    lines = [f"# {body['title']}", "",
             f"Mode **{s['mode']}**, operating point **{s['operating_point']}**, "
             f"{s['decisions']} decisions from {s['devices']} device(s), "
             f"{_f(s['duration_s'], 1)} s of {'simulated' if s['mode'] == 'replay' else 'wall'} "
             "time.", "", *_target_line(body),
             "## Summary", "",
             f"| | {heads} | energy mJ/decision | money/decision | sent to cloud |",
             f"|---|{bars}---|---|---|",
             f"| this run | {_scores(s, cols)} | {_f(c['energy_mj'])} | {_f(c['money'], 4)} | "
             f"{_f(s['sent_rate'])} |"]
    for key, name in (("hpc_always", ALWAYS_CLOUD), ("lpc_always", ALWAYS_LOCAL)):
        b = body["baselines"].get(key)
        if b:
            lines.append(f"| {name} | {_scores(b, cols)} | {_f(b['energy_mj'])} | "
                         f"{_f(b['money'], 4)} | {'1.000' if key == 'hpc_always' else '0.000'} |")
    rates = s["source_rates"]
    lines += ["", f"Policy escalation rate {_f(s['escalation_rate'])} (requests actually sent: "
              f"{_f(s['sent_rate'])}). Answers: local {_f(rates['local'])}, cloud {_f(rates['cloud'])}, "
              f"degraded {_f(rates['degraded'])}. Latency p50 {_f(lat['p50'], 2)} ms, "
              f"p90 {_f(lat['p90'], 2)} ms, p99 {_f(lat['p99'], 2)} ms.", "",
              "## Cost per decision, by where it is spent", "",
              "| part | energy (mJ) | money | other |", "|---|---|---|---|",
              f"| sensors | {_f(c['sensor_energy_mj'])} | {_f(c['sensor_money'], 4)} | "
              f"{_f(c['sensor_latency_ms'], 2)} ms of sensor latency |",
              f"| radio link | {_f(c['link_energy_mj'])} | - | {_f(c['link_bytes'], 1)} bytes |",
              f"| cloud | - | {_f(c['cloud_money'], 4)} | {_f(c['cloud_calls'])} calls |",
              f"| idle | {_f(c['idle_energy_mj'])} | - | |",
              f"| **total** | **{_f(c['energy_mj'])}** | **{_f(c['money'], 4)}** | "
              f"training scalar {_f(c['scalar'])} |", "",
              f"## {'Error' if body.get('target') else 'Accuracy'} vs cost (frontier)", "",
              *[f"Note: {n}.\n" for n in body.get("notes", [])[:1]],
              f"| label | point | group | {heads} | energy mJ | money | sent to cloud |",
              f"|---|---|---|{bars}---|---|---|"]
    for p in body["frontier"]:
        lines.append(f"| {p.get('short', '')} | {p['label']} | {p['group']} | "
                     f"{_scores(p, cols)} | {_f(p['energy_mj'])} | {_f(p['money'], 4)} | "
                     f"{_f(p['sent_rate'])} |")
    eff = body.get("outage_effect") or {}
    if data.main.outages:
        spans = ", ".join(f"{a:g}-{b:g} s" for a, b in data.main.outages)
        lines += ["", "## Outages", "", f"Link down at {spans}: "
                  f"{eff.get('decisions_in_outage', 0)} decisions fell inside; degraded rate "
                  f"{_f(eff.get('degraded_rate_in_outage'))} inside vs "
                  f"{_f(eff.get('degraded_rate_outside'))} outside (see rates_over_time.png)."]
    lines += ["", "## Plots", ""]
    for name, file in body["plots"].items():
        lines.append(f"![{name}]({file})")
    if body.get("hil"):
        lines += ["", "## Hardware in the loop", "", "```json",
                  json.dumps(_clean(body["hil"]), indent=2), "```"]
    lines += ["", "## Remote sensors", "", REMOTE_SENSOR_DOC]
    for note in body.get("notes", []):
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def summary_table(body: dict[str, Any]) -> str:
    """A plain-text table: this run vs always-cloud and always-local, rates and latency."""
    s = body["summary"]
    c = s["cost_per_decision"]
    cols = score_columns(body)
    rows = [("this run (" + s["operating_point"] + ")", s, c["energy_mj"], c["money"],
             s["sent_rate"])]
    for key, name in (("hpc_always", ALWAYS_CLOUD), ("lpc_always", ALWAYS_LOCAL)):
        b = body["baselines"].get(key)
        if b:
            rows.append((name, b, b["energy_mj"], b["money"], b["sent_rate"]))
    width = max(len(r[0]) for r in rows)
    sw = [max(len(h), 8 if k == "accuracy" else 9) for k, h in cols]
    heads = "  ".join(f"{h:>{w}}" for (_, h), w in zip(cols, sw, strict=True))
    lines = [f"{'':{width}}  {heads}  energy mJ/dec  money/dec  to cloud",
             *(f"{n:{width}}  "
               + "  ".join(f"{_f(r.get(k), 3 if k == 'accuracy' else 4):>{w}}"
                           for (k, _), w in zip(cols, sw, strict=True))
               + f"  {_f(e):>13}  {_f(m, 4):>9}  {_f(x):>8}"
               for n, r, e, m, x in rows)]
    lat = s["latency_ms"]
    rates = s["source_rates"]
    lines += [f"{s['decisions']} decisions on {s['devices']} device(s) ({s['mode']}), "
              f"escalation rate {_f(s['escalation_rate'])}: "
              f"local {_f(rates['local'])}, cloud {_f(rates['cloud'])}, "
              f"degraded {_f(rates['degraded'])}; latency p50 {_f(lat['p50'], 2)} ms, "
              f"p99 {_f(lat['p99'], 2)} ms"]
    return "\n".join(lines)
