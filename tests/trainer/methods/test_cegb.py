"""``--method cegb`` (LightGBM's CEGB as a gated one-node policy): its bundle walks on the edge
runtime, in a process that cannot import scikit-learn, LightGBM or the trainer, exactly as the
trainer's walk; the converted trees decide as LightGBM's ``predict``; the kept round and the
escalation cuts come from validation; without LightGBM the command says how to install it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from sklearn.naive_bayes import GaussianNB

from adaptedge.trainer.data.datasets import load_dataset
from adaptedge.trainer.export.bundle import export_bundle
from adaptedge.trainer.hpc import fit_hpc
from adaptedge.trainer.methods.cart import LEAF_QUANTUM
from adaptedge.trainer.methods.cegb import escalation_graphs, quantile_cut
from adaptedge.trainer.methods.cegb_model import (
    INSTALL_HINT,
    BoostSettings,
    CegbModel,
    Penalties,
    fit_cegb,
)
from adaptedge.trainer.methods.gating import CostModel
from adaptedge.trainer.methods.registry import MethodOptions, get_method
from adaptedge.trainer.policy.walk import walk

ROOT = Path(__file__).resolve().parents[3]
SMALL = {"coupled": "0.002", "lazy": "0.002", "escalate": "0,0.1,0.3", "n_rounds": "40",
         "patience": "10"}
DATASETS = ("miniboone-tiny", "thyroid")  # binary (|z| margin), 3 classes (top-1 - top-2)


@cache
def data(name: str) -> tuple[Any, Any, CostModel]:
    dataset = load_dataset(name, seed=0)
    hpc = fit_hpc(dataset, kind=GaussianNB(), cache=False)  # any HPC: the walks are compared
    cm = CostModel.build(dataset.sensors, dataset.cost_weights, dataset.link,
                         dataset.n_features, hpc.sensors)
    return dataset, hpc, cm


@cache
def fitted(name: str, coupled: float = 0.002, n_rounds: int = 40) -> CegbModel:
    d, _, cm = data(name)
    return fit_cegb(d.X_train, d.y_train, d.X_val, d.y_val, len(d.classes), cm.feature_sensor,
                    cm.sensor_costs, Penalties(coupled, 0.0),
                    BoostSettings(n_rounds=n_rounds, patience=n_rounds))


_DEVICE = textwrap.dedent("""
    import json, sys
    for name in ("sklearn", "lightgbm", "scipy", "adaptedge.trainer"):
        sys.modules[name] = None  # the device has none of them
    import numpy as np
    from adaptedge.edge.runtime import EdgeRuntime
    bundle, rows = sys.argv[1], np.load(sys.argv[2])
    out = {}
    for point in sys.argv[3:]:
        with EdgeRuntime.load(bundle, operating_point=point) as rt:
            out[point] = [[d.label_index, d.escalated, sorted(d.sensors_read), d.cost.scalar]
                          for d in map(rt.predict_row, rows)]
    print(json.dumps(out))
""")


@pytest.mark.slow
@pytest.mark.parametrize("name", DATASETS)
def test_the_device_walks_the_bundle_as_the_trainer(name: str, tmp_path: Path) -> None:
    """Every operating point, 150 test rows: the same escalations, the same local answers and
    the same sensors and cost where the device answers, in a process without the trainer, on
    every row: the logits and the logit-margin cut sit on one exactly summable grid."""
    d, hpc, cm = data(name)
    graphs = list(get_method("cegb")(d, hpc, MethodOptions(progress=False, extra=SMALL)))
    assert graphs and all(g.method == "cegb" for g in graphs)
    # escalating points too, whether or not they are on this HPC's front
    graphs += [g for g in escalation_graphs(fitted(name), (0.1, 0.3), d, hpc, cm)
               if g.name not in {h.name for h in graphs}]
    manifest = export_bundle(tmp_path / "b", d, hpc, graphs)
    X = np.asarray(d.X_test[:150], np.float32)
    np.save(tmp_path / "rows.npy", X)
    by_name = {g.name: g for g in graphs}
    names = [s.name for s in d.sensors]
    points = [p.name for p in manifest.operating_points]
    run = subprocess.run([sys.executable, "-c", _DEVICE, str(tmp_path / "b"),
                          str(tmp_path / "rows.npy"), *points], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True)
    answers = json.loads(run.stdout)
    assert sorted(answers) == sorted(points)
    kinds = {(row[1], row[0]) for rows in answers.values() for row in rows}
    assert {e for e, _ in kinds} == {False, True} and len({k for _, k in kinds}) > 1
    for point in manifest.operating_points:
        graph = by_name[point.policy]
        device = answers[point.name]
        mine = walk(graph, X, hpc.proba_test[:150], cm.table())
        local = graph.nodes[graph.root].model.proba(X[:, list(graph.nodes[graph.root].inputs)])
        for i, (label, escalated, read, cost) in enumerate(device):
            assert escalated == bool(mine.escalated[i]), (point.name, i)
            assert label == int(np.argmax(local[i])), (point.name, i)
            if not escalated:
                assert label == mine.answer[i]
                assert read == sorted(n for n, r in zip(names, mine.read[i], strict=True) if r)
                assert cost == pytest.approx(mine.cost[i], abs=1e-9)


@pytest.mark.parametrize("name", DATASETS)
def test_the_exported_trees_decide_as_lightgbm(name: str) -> None:
    """On the test split: the raw scores differ from LightGBM's by at most the leaf rounding,
    and the exported ONNX answers as LightGBM's ``predict`` on every row."""
    d, _, cm = data(name)
    model = fitted(name)
    X = np.asarray(d.X_test, np.float32)
    raw = np.asarray(model.booster.predict(X, num_iteration=model.rounds, raw_score=True))
    raw = raw.reshape(len(X), -1)
    mine = model.decision_logits(X)
    assert len(model.trees) == model.rounds * mine.shape[1] >= 2
    np.testing.assert_allclose(mine, raw, rtol=0, atol=len(model.trees) * LEAF_QUANTUM / 2)
    lgb_labels = (raw[:, 0] > 0).astype(int) if raw.shape[1] == 1 else raw.argmax(axis=1)
    inputs = np.flatnonzero(model.sensors_bought_[cm.feature_sensor])
    session = ort.InferenceSession(model.to_onnx(), providers=["CPUExecutionProvider"])
    proba, actions = session.run(["probabilities", "action_scores"], {"x": X[:, inputs]})
    assert actions.shape == (len(X), 2)
    assert (np.argmax(proba, axis=1) == lgb_labels).all()


def test_the_kept_round_is_the_best_on_validation() -> None:
    """The curve is the validation error after each round (recomputed from the booster, up to
    one row: LightGBM scores validation on its binned copy while training), the kept round is
    its first minimum, and the tree count follows it."""
    d, _, _ = data("miniboone-tiny")
    model = fitted("miniboone-tiny", coupled=0.0, n_rounds=80)
    X_val = np.asarray(d.X_val, np.float32)
    train_error = []
    for r in (1, model.rounds, len(model.validation_curve)):
        wrong = (model.booster.predict(X_val, num_iteration=r) > 0.5) != d.y_val
        assert model.validation_curve[r - 1] == pytest.approx(wrong.mean(), abs=1.5 / len(X_val))
        fit_wrong = (model.booster.predict(d.X_train, num_iteration=r) > 0.5) != d.y_train
        train_error.append(fit_wrong.mean())
    assert train_error[-1] < model.validation_curve[-1] - 0.02  # not the training curve
    assert model.rounds == int(np.argmin(model.validation_curve)) + 1
    assert model.validation_curve[model.rounds - 1] < model.validation_curve[0]
    assert len(model.trees) == model.rounds


@pytest.mark.parametrize("name", DATASETS)
def test_escalation_cuts_are_validation_quantiles(name: str) -> None:
    """Cut q escalates the round(q n) least confident of the n validation rows (fewer only
    where rows tie at the cut); the validated graphs escalate exactly those rows."""
    d, hpc, cm = data(name)
    model = fitted(name)
    n = len(d.y_val)
    confidence = model.confidence(model.decision_logits(d.X_val))
    ordered = np.sort(confidence)
    expected = []
    for q in (0.0, 0.1, 0.25):
        k = round(q * n)
        below = confidence < model.with_threshold(quantile_cut(confidence, q)).threshold
        assert below.sum() <= k and (k == 0 or ordered[k - 1] == ordered[k] or below.sum() == k)
        assert k == 0 or confidence[below].max(initial=-np.inf) <= confidence[~below].min()
        expected.append(below.mean())
    assert expected[2] > expected[1] > 0
    graphs = escalation_graphs(model, (0.0, 0.1, 0.25), d, hpc, cm)
    rates = [g.validation.escalation_rate for g in graphs]
    assert rates == pytest.approx(expected, abs=1e-12)


@pytest.mark.slow
def test_without_lightgbm_the_command_says_how_to_install_it(tmp_path: Path) -> None:
    """One line on stderr, exit status 2, before any HPC is fitted."""
    code = ("import sys; sys.modules['lightgbm'] = None\n"
            "from adaptedge.cli.main import main\n"
            f"sys.exit(main(['train', '--data', 'thyroid', '--method', 'cegb', '--quick', "
            f"'--no-progress', '--out', {str(tmp_path / 'b')!r}]))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip() == f"adaptedge: error: {INSTALL_HINT}"
    assert "pip install 'adaptedge-trainer[lightgbm]'" in run.stderr
    assert not (tmp_path / "b").exists()


def test_the_train_extra_pulls_lightgbm() -> None:
    """``adaptedge-trainer[lightgbm]`` holds it and ``adaptedge[train]`` (hence ``all``) pulls
    that extra: the install hint names real extras."""
    import tomllib

    trainer = tomllib.loads((ROOT / "trainer" / "pyproject.toml").read_text())["project"]
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(r.startswith("lightgbm") for r in trainer["optional-dependencies"]["lightgbm"])
    assert "lightgbm" not in " ".join(trainer["dependencies"])
    assert any(r.startswith("adaptedge-trainer[lightgbm]")
               for r in root["optional-dependencies"]["train"])
    assert "train" in root["optional-dependencies"]["all"][0]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["letter-binary", "thyroid"])  # the C export: <= 32 sensors
def test_the_c_export_decides_as_the_edge_runtime(name: str, tmp_path: Path) -> None:
    """The C library of each CEGB point (``export.c``, compiled with gcc) takes the edge
    runtime's decision on every one of 300 test rows, about one in ten with a failed read."""
    from adaptedge.trainer.export.c import export_c
    from tests.support.c_policy import build_host, gcc_available, mismatches, run_host

    if not gcc_available():
        pytest.skip("gcc is not installed")
    d, hpc, cm = data(name)
    graphs = escalation_graphs(fitted(name), (0.0, 0.2), d, hpc, cm)
    manifest = export_bundle(tmp_path / "b", d, hpc, graphs)
    X = np.array(d.X_test[:300], dtype=np.float32)
    X[np.random.default_rng(0).random(X.shape) < 0.1 / X.shape[1]] = np.nan
    for point in manifest.operating_points:
        out = tmp_path / f"c-{point.name}"
        export_c(tmp_path / "b", out, point.name)
        lib = build_host(out, out)
        records = run_host(lib, X, len(manifest.sensors), len(manifest.classes), False)
        assert not mismatches(tmp_path / "b", point.name, X, records, False)
    assert any(g.validation.escalation_rate > 0 for g in graphs)
