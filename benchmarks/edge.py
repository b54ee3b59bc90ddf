"""Edge runtime speed, memory and import time; prints one JSON object.

- ``local_p50_us`` / ``local_p99_us``: one decision of a one-node bundle (ADAPT's shape: a
  gradient-boosted gate and low-cost classifier, 100 trees each) through
  ``EdgeRuntime.predict_row``, and ``sklearn_p50_us``: the same decision computed by the
  scikit-learn objects (gate ``predict_proba``, then the classifier's), in the same run;
  ``agreement`` is the fraction of rows where both decide the same (stop/escalate and label).
  ``predict_row`` is the replay path: the row is given, no sensor reader threads are involved.
- ``ort_floor_p50_us``: the bare onnxruntime call on the same node model and rows, in the same
  rounds: a pre-bound IOBinding (the raw C call the runtime makes), each row copied into the
  bound input; ``local_over_floor`` = ``local_p50_us / ort_floor_p50_us``.
  ``ort_session_run_p50_us``: ``InferenceSession.run`` with a fresh feed dict, for context.
- ``step_p50_us``: the cost of each further policy step, from walks through a 16-node chain
  (one sensor per step, a 20-tree classifier per node) against the one-node walk.
- ``rss_mib``: resident memory of a fresh process that imports only ``edge``, loads the
  letter-binary-sized bundle (three policies, 19 models; the runtime builds the sessions of the
  operating point in use) and predicts once; ``rss_with_mqtt_uplink_mib`` the same with an
  ``MqttUplink`` created (paho + ssl loaded); ``rss_all_policies_resident_mib`` with every
  policy's sessions built; ``rss_given_bundle_mib`` for ``--rss-bundle DIR`` (e.g. a bundle
  from ``adaptedge train``).
- ``import_s``: ``import adaptedge.edge`` in a fresh process (median of 3).

The bundles are built here with scikit-learn, the trainer's ONNX toolkit (``trainer.export``)
and ``protocol.bundle.write_bundle``
(on letter-binary: 16 features, one sensor each, A-M vs N-Z). Run: ``python -m benchmarks.edge``
(``--quick`` for a shorter run).
"""

from __future__ import annotations

# This file is named like the package it measures: keep its folder off the import path.
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression

from adaptedge.edge import EdgeRuntime
from adaptedge.protocol import (
    Action,
    CostWeights,
    HpcRef,
    LinkSpec,
    Manifest,
    ModelRef,
    OperatingPoint,
    PolicyGraph,
    PolicyNode,
    SensorSpec,
    write_bundle,
)
from adaptedge.protocol.manifest import PROBA_OUTPUT
from adaptedge.trainer.export.fuse import fuse_node_model
from adaptedge.trainer.export.models import linear_to_onnx
from adaptedge.trainer.export.sklearn import sklearn_to_onnx

F32 = npt.NDArray[np.float32]


def letter_binary() -> tuple[F32, npt.NDArray[np.int64], F32, tuple[str, ...]]:
    """Train and test rows of letter-binary (synthetic rows of its shape if the data is absent)."""
    try:
        from adaptedge.trainer.data.datasets import load_dataset  # numpy-only data loader

        data = load_dataset("letter-binary")
        return data.X_train, data.y_train, data.X_test, data.feature_names
    except Exception:  # the data loader is not this benchmark's subject
        rng = np.random.default_rng(0)
        X = rng.integers(0, 16, size=(16000, 16)).astype(np.float32)
        y = (X[:, :8].sum(1) > X[:, 8:].sum(1)).astype(np.int64)
        return X[:12000], y[:12000], X[12000:], tuple(f"f{i}" for i in range(16))


def node_model(lpc: Any, n_in: int, gate: Any | None = None,
               constant_scores: list[float] | None = None) -> bytes:
    """One node: ``probabilities`` from ``lpc``; ``action_scores`` from ``gate`` (its class
    probabilities, classes = actions) or constant scores."""
    proba = sklearn_to_onnx(lpc, n_in)
    if gate is not None:
        return fuse_node_model(proba, sklearn_to_onnx(gate, n_in), scores_output=PROBA_OUTPUT)
    if constant_scores is not None:
        constant = linear_to_onnx(np.zeros((n_in, len(constant_scores))), constant_scores)
        return fuse_node_model(proba, constant)
    return fuse_node_model(proba)


def build_bundle(out: Path, X: F32, y: npt.NDArray[np.int64],
                 names: tuple[str, ...]) -> tuple[Manifest, Any, Any]:
    """Policies ``gate`` (one node, stop/escalate) and ``chain`` (16 nodes, one sensor each)."""
    n = X.shape[1]
    lpc = GradientBoostingClassifier(n_estimators=100, max_depth=3, random_state=0).fit(X, y)
    hard = (lpc.predict(X) != y).astype(np.int64)  # the gate learns where the LPC is wrong
    gate = GradientBoostingClassifier(n_estimators=100, max_depth=3, random_state=0).fit(X, hard)
    hpc = LogisticRegression(max_iter=500).fit(X, y)
    files = {"gate.onnx": node_model(lpc, n, gate=gate),
             "hpc.onnx": node_model(hpc, n)}
    sensors = tuple(SensorSpec(name, (i,), energy_mj=1.0, latency_ms=1.0)
                    for i, name in enumerate(names))
    all_sensors = tuple(s.name for s in sensors)
    gate_graph = PolicyGraph(root="all", nodes={"all": PolicyNode(
        all_sensors, ModelRef("gate.onnx", tuple(range(n))),
        (Action("stop"), Action("escalate")))})
    chain: dict[str, PolicyNode] = {}
    for k in range(1, n + 1):
        cols = tuple(range(k))
        file = f"chain{k}.onnx"
        small = GradientBoostingClassifier(n_estimators=20, max_depth=3,
                                           random_state=0).fit(X[:, :k], y)
        last = k == n
        files[file] = node_model(small, k, constant_scores=None if last else [1.0, 0.0])
        actions = (Action("stop"),) if last else (
            Action("acquire", names[k], f"n{k + 1}"), Action("stop"))
        chain[f"n{k}"] = PolicyNode(all_sensors[:k], ModelRef(file, cols), actions)
    one = {"n1": PolicyNode(all_sensors[:1], ModelRef("chain1.onnx", (0,)), (Action("stop"),))}
    files["one.onnx"] = files["chain1.onnx"]  # same bytes, its own file: a one-step policy
    one["n1"] = PolicyNode(all_sensors[:1], ModelRef("one.onnx", (0,)), (Action("stop"),))
    manifest = Manifest(
        schema_version=1, bundle_id="pending", classes=("A-M", "N-Z"), feature_names=names,
        sensors=sensors, link=LinkSpec(), cost_weights=CostWeights(energy_mj=0.0, uniform=1.0),
        hpc=HpcRef("hpc.onnx", all_sensors, accuracy=0.0, description="benchmark"),
        policies={"gate": gate_graph, "chain": PolicyGraph("n1", chain),
                  "one": PolicyGraph("n1", one)},
        operating_points=(OperatingPoint("gate", "gate", accuracy=0.0, cost=16.0),
                          OperatingPoint("chain", "chain", accuracy=0.0, cost=16.0),
                          OperatingPoint("one", "one", accuracy=0.0, cost=1.0)),
        default_operating_point="gate", files={}, metadata={"method": "benchmark"})
    return write_bundle(out, manifest, files), lpc, gate


def ort_floor(bundle: Path, file: str, n_inputs: int, n_outputs: int
              ) -> tuple[Callable[[F32], object], Callable[[F32], object]]:
    """The bare onnxruntime calls on ``file``: (pre-bound IOBinding, the raw C call the runtime
    makes, the row copied into the bound input; ``InferenceSession.run`` with a fresh dict)."""
    import onnxruntime as ort

    from adaptedge.edge.session import session_options
    from adaptedge.protocol.manifest import ACTION_OUTPUT, MODEL_INPUT

    session = ort.InferenceSession(str(bundle / file), session_options(),
                                   providers=["CPUExecutionProvider"])
    x = np.zeros((1, n_inputs), np.float32)
    outs = [np.zeros((1, 2), np.float32) for _ in range(n_outputs)]
    binding = session.io_binding()
    values = [ort.OrtValue.ortvalue_from_numpy(a) for a in (x, *outs)]
    binding.bind_ortvalue_input(MODEL_INPUT, values[0])
    for name, value in zip((PROBA_OUTPUT, ACTION_OUTPUT), values[1:], strict=False):
        binding.bind_ortvalue_output(name, value)
    run, raw, options, x_row = (session._sess.run_with_iobinding, binding._iobinding,
                                ort.RunOptions(), x[0])

    def bound(row: F32) -> object:
        x_row[...] = row
        return run(raw, options)

    def public(row: F32) -> object:
        return session.run(None, {MODEL_INPUT: row.reshape(1, -1)})

    bound.keep = (values, binding)  # type: ignore[attr-defined]
    return bound, public


def timed_us(fn: Callable[[F32], object], rows: F32, n_calls: int) -> list[float]:
    """Per-call wall times in µs, cycling over ``rows`` (after a warm-up)."""
    for row in rows[:50]:
        fn(row)
    out: list[float] = []
    clock = time.perf_counter
    n = len(rows)
    for i in range(n_calls):
        row = rows[i % n]
        t0 = clock()
        fn(row)
        out.append((clock() - t0) * 1e6)
    return out


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def fresh_process(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True)
    return out.stdout.strip()


def rss_after_load(bundle: Path, options: str = "", mqtt: bool = False) -> tuple[int, int, int]:
    """(VmRSS KiB, VmHWM KiB, heavy modules) of a fresh process that imports only ``edge``,
    loads ``bundle`` and decides once on a zero row."""
    code = (
        "import sys, numpy as np\n"
        "import adaptedge.edge as edge\n"
        + ("uplink = edge.MqttUplink('mqtt://127.0.0.1:1', 'd')\n" if mqtt else "")
        + f"rt = edge.EdgeRuntime.load({str(bundle)!r}, {options})\n"
        "rt.predict_row(np.zeros(len(rt.manifest.feature_names), np.float32))\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy', "
        "'skl2onnx')]\n"
        "st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)\n"
        "kb = lambda k: int(st[k].split()[0])\n"
        "print(kb('VmRSS'), kb('VmHWM'), len(heavy))\n"
    )
    rss, hwm, heavy = map(int, fresh_process(code).split())
    return rss, hwm, heavy


def _interleaved_timings(rows: F32, n_calls: int,
                         timed: dict[str, tuple[Callable[[F32], object], int]]) -> dict[str, list[float]]:
    """Microseconds per call of each function, measured in 10 interleaved rounds so machine
    noise hits them alike; a function given divisor ``d`` runs ``n_calls / d`` calls (sklearn's
    at least 100 a round)."""
    rounds = 10
    per_round = n_calls // rounds
    out: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(rounds):
        for name, (fn, divisor) in timed.items():
            calls = per_round // divisor
            out[name] += timed_us(fn, rows, max(100, calls) if name == "sklearn" else calls)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed calls")
    parser.add_argument("--rss-bundle", metavar="DIR",
                        help="also measure the RSS after loading this bundle (e.g. a trained one)")
    args = parser.parse_args(argv)
    n_calls = 5000 if args.quick else 30000
    X, y, X_test, names = letter_binary()
    with tempfile.TemporaryDirectory(prefix="adaptedge-bench-edge-") as tmp:
        bundle = Path(tmp) / "letter-binary"
        started = time.perf_counter()
        manifest, lpc, gate = build_bundle(bundle, X, y, names)
        build_s = time.perf_counter() - started
        rows = np.ascontiguousarray(X_test[:2000], dtype=np.float32)
        rt = EdgeRuntime.load(bundle, operating_point="gate")

        def skl_decision(row: F32) -> tuple[bool, int]:
            x = row.reshape(1, -1)
            escalate = bool(gate.predict_proba(x)[0].argmax() == 1)
            return escalate, int(lpc.predict_proba(x)[0].argmax())

        edge_decisions = [rt.predict_row(r) for r in rows]
        skl = [skl_decision(r) for r in rows]
        agreement = float(np.mean([(d.escalated, d.label_index) == s
                                   for d, s in zip(edge_decisions, skl, strict=True)]))
        one_rt = EdgeRuntime.load(bundle, operating_point="one")
        chain_rt = EdgeRuntime.load(bundle, operating_point="chain")
        floor_fn, ort_run_fn = ort_floor(bundle, "gate.onnx", rows.shape[1], 2)
        runs = _interleaved_timings(rows, n_calls, {
            "local": (rt.predict_row, 1), "floor": (floor_fn, 1), "ort_run": (ort_run_fn, 4),
            "sklearn": (skl_decision, 20), "one": (one_rt.predict_row, 1),
            "chain": (chain_rt.predict_row, 4)})
        local, floor, ort_run, sklearn = (runs[k] for k in ("local", "floor", "ort_run", "sklearn"))
        one, chain = runs["one"], runs["chain"]
        rt = chain_rt
        steps = len(manifest.policies["chain"].nodes) - 1
        assert rt.predict_row(rows[0]).nodes[-1] == f"n{steps + 1}"
        rss_kb, hwm_kb, n_heavy = rss_after_load(bundle)
        all_kb, _, _ = rss_after_load(bundle, "preload_all=True, max_resident_policies=99")
        mqtt_kb, _, _ = rss_after_load(bundle, mqtt=True)
        given = rss_after_load(Path(args.rss_bundle)) if args.rss_bundle else None
    import_times = [float(fresh_process(
        "import time; t = time.perf_counter(); import adaptedge.edge; print(time.perf_counter() - t)"))
        for _ in range(3)]
    local_p50, sklearn_p50 = pct(local, 50), pct(sklearn, 50)
    one_p50, chain_p50 = pct(one, 50), pct(chain, 50)
    return {
        "load_average_1min": round(os.getloadavg()[0], 2),
        "local_p50_us": round(local_p50, 2),
        "local_p99_us": round(pct(local, 99), 2),
        "ort_floor_p50_us": round(pct(floor, 50), 2),
        "local_over_floor": round(local_p50 / pct(floor, 50), 2),
        "ort_session_run_p50_us": round(pct(ort_run, 50), 2),
        "sklearn_p50_us": round(sklearn_p50, 2),
        "sklearn_p99_us": round(pct(sklearn, 99), 2),
        "speedup_vs_sklearn": round(sklearn_p50 / local_p50, 1),
        "agreement": agreement,
        "step_p50_us": round((chain_p50 - one_p50) / steps, 2),
        "one_node_walk_p50_us": round(one_p50, 2),
        "chain_walk_p50_us": round(chain_p50, 2),
        "chain_steps": steps,
        "rss_mib": round(rss_kb / 1024, 1),
        "peak_rss_mib": round(hwm_kb / 1024, 1),
        "rss_with_mqtt_uplink_mib": round(mqtt_kb / 1024, 1),
        "rss_all_policies_resident_mib": round(all_kb / 1024, 1),
        **({"rss_given_bundle_mib": round(given[0] / 1024, 1)} if given else {}),
        "heavy_modules_in_edge_process": n_heavy,
        "import_s": round(statistics.median(import_times), 3),
        "bundle_models": len(manifest.files),
        "bundle_build_s": round(build_s, 1),
        "timed_calls": n_calls,
    }


if __name__ == "__main__":
    print(json.dumps(main()))
