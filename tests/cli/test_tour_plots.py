"""Issue 21 item 6: every plot kind renders a readable PNG with the expected labels; frontier
labels are short and never overlap, legends name methods, empty panels are dropped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adaptedge.simulator import plots


@pytest.fixture()
def drawn(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    """Per PNG written: its texts, its axes count and its label boxes (pixels)."""
    seen: dict[str, dict[str, Any]] = {}
    save = plots._save

    def spy(fig: Any, path: Path) -> Path:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        texts = [t for t in fig.findobj(lambda o: hasattr(o, "get_text"))
                 if t.get_text() and t.get_visible()]
        annotations = [t for ax in fig.axes for t in ax.texts]
        seen[path.name] = {
            "texts": {t.get_text() for t in texts},
            "axes": len(fig.axes),
            "boxes": [t.get_window_extent(renderer) for t in annotations],
            "size": fig.get_size_inches() * fig.dpi,
            "ylim": [ax.get_ylim() for ax in fig.axes],
            "xlim": [ax.get_xlim() for ax in fig.axes],
        }
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", spy)
    return seen


def assert_png(path: Path, min_px: tuple[int, int] = (500, 350)) -> None:
    import matplotlib.image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(path)
    assert image.shape[1] >= min_px[0] and image.shape[0] >= min_px[1]
    assert image[..., :3].std() > 0.05  # something is drawn


def frontier_points() -> list[dict[str, Any]]:
    from adaptedge.simulator.report import short_labels

    rng = np.random.default_rng(0)
    pts = [{"label": f"adapt-gbrt-p0.1-g0.002-warm-start-{i:02d}-t{t:.3f}", "group": "adapt-gbrt",
            "accuracy": 0.8 + 0.15 * t, "energy_mj": 2 + 10 * t, "main": i == 7}
           for i, t in enumerate(np.sort(rng.uniform(0, 1, 25)))]
    pts += [{"label": "always cloud (HPC)", "group": "baseline", "accuracy": 0.97,
             "energy_mj": 24.0},
            {"label": "always local (LPC) (p7)", "group": "baseline", "accuracy": 0.86,
             "energy_mj": 5.0}]
    short_labels(pts)
    return pts


@pytest.mark.slow
def test_frontier_plot_short_labels_without_overlap(tmp_path: Path,
                                                    drawn: dict[str, dict[str, Any]]) -> None:
    path = plots.frontier_plot(frontier_points(), tmp_path / "frontier.png", title="acc vs cost")
    assert_png(path)
    got = drawn["frontier.png"]
    assert {"adapt-gbrt", "baseline", "always cloud (HPC)", "mean energy per decision (mJ)",
            "accuracy", "acc vs cost", "this run: P8"} <= got["texts"]
    assert "P1" in got["texts"] and not any("…" in t or "bundle " in t for t in got["texts"])
    boxes = got["boxes"]
    assert len(boxes) >= 5
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), "two frontier labels overlap"
        assert a.x0 >= 0 and a.x1 <= got["size"][0], "a label is cut at the edge"


def cost_rows(money: bool) -> list[dict[str, Any]]:
    keys = ("sensor_energy_mj", "link_energy_mj", "idle_energy_mj", "sensor_money",
            "cloud_money")
    return [{"label": name, "cost": {k: (v if "money" not in k or money else 0.0)
                                     for k, v in zip(keys, vals, strict=True)}}
            for name, vals in (("this run (replay)", (2, 0.1, 0.05, 0.01, 0.002)),
                               ("always cloud", (4, 0.6, 0, 0.01, 0.01)),
                               ("always local", (2, 0, 0.05, 0.01, 0)))]


@pytest.mark.slow
@pytest.mark.parametrize("money", [True, False])
def test_cost_breakdown_drops_an_empty_money_panel(money: bool, tmp_path: Path,
                                                   drawn: dict[str, dict[str, Any]]) -> None:
    path = plots.cost_breakdown_plot(cost_rows(money), tmp_path / "cost.png")
    assert_png(path)
    got = drawn["cost.png"]
    assert {"energy by where it is spent", "mJ per decision", "sensors", "radio link",
            "this run (replay)", "always cloud"} <= got["texts"]
    assert got["axes"] == (2 if money else 1)
    assert ("money" in got["texts"]) == money
    # the tallest stack (always cloud: 4.6 mJ) is not cut by the frame (a zero-height idle
    # bar on top of it used to pin the axis to 4.6)
    assert got["ylim"][0][1] > 4.6 * 1.05


def test_latency_cdf_has_plain_number_ticks(tmp_path: Path,
                                            drawn: dict[str, dict[str, Any]]) -> None:
    rng = np.random.default_rng(1)
    series = {"this run, replay (p3)": list(rng.lognormal(1, 1.2, 400)),
              "always local (LPC)": [0.0, *rng.uniform(1.5, 2.5, 200)]}
    path = plots.latency_cdf_plot(series, tmp_path / "latency.png")
    assert_png(path)
    got = drawn["latency.png"]
    assert {"latency CDF", "decision latency (ms, log scale)", "fraction of decisions",
            "this run, replay (p3)", "always local (LPC)"} <= got["texts"]
    assert {"1", "10", "100"} & got["texts"] and {"2", "5"} & got["texts"]
    assert not any("^" in t for t in got["texts"]), "mathtext ticks like 10^1"


def test_latency_cdf_labels_a_span_under_one_decade(tmp_path: Path,
                                                    drawn: dict[str, dict[str, Any]]) -> None:
    rng = np.random.default_rng(2)  # the demo's shape: local 6-8 ms, escalations to 30 ms
    series = {"this run, hil": [*rng.uniform(6.5, 8.0, 400), *rng.uniform(10, 30, 20)],
              "always local (LPC)": list(rng.uniform(6.0, 6.2, 100))}
    plots.latency_cdf_plot(series, tmp_path / "latency.png")
    # the log axis's own 1-2-5 locator labelled only 10 and 20 here
    assert {"6", "8", "10", "20", "30"} <= drawn["latency.png"]["texts"]


def test_rates_over_time_plot(tmp_path: Path, drawn: dict[str, dict[str, Any]]) -> None:
    t = list(np.arange(0, 10, 0.5))
    rates = {"t": t, "escalation": [0.1] * len(t), "degraded": [0.0] * len(t)}
    path = plots.rates_over_time_plot(rates, [(2.0, 4.0)], tmp_path / "rates.png")
    assert_png(path)
    assert {"link outage", "escalated", "degraded (no cloud answer)",
            "time since start (s)"} <= drawn["rates.png"]["texts"]


def test_rates_plot_stops_where_the_run_stops(tmp_path: Path,
                                              drawn: dict[str, dict[str, Any]]) -> None:
    t = list(np.arange(0, 6, 0.5))  # a 6 s run under a scenario with an outage at 10-11.5 s
    rates = {"t": t, "escalation": [0.1] * len(t), "degraded": [0.0] * len(t)}
    plots.rates_over_time_plot(rates, [(4.0, 7.0), (10.0, 11.5)], tmp_path / "rates.png")
    assert "link outage" in drawn["rates.png"]["texts"]
    assert drawn["rates.png"]["xlim"][0][1] < 7.0


def test_inspect_table_has_columns_units_and_short_labels(
        toy_bundle: tuple[Path, Any], capsys: pytest.CaptureFixture[str]) -> None:
    from adaptedge.cli.main import main as cli

    assert cli(["inspect", str(toy_bundle[0])]) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(out) if "operating point" in line)
    assert "cost (mJ)" in out[head] and "accuracy" in out[head]
    assert "validation 95% interval" in out[head]
    rows = out[head + 1: head + 3]
    # walk (cost 8) is the cheaper point: P1, and the default (*)
    assert rows[0].split()[:3] == ["P2", "gate", "gate"]
    assert rows[1].split()[:4] == ["P1", "walk", "*", "walk"]
    for row in rows:  # every column is separated by at least two spaces
        assert len([c for c in row.split("  ") if c.strip()]) == 8, row


def test_inspect_into_a_closed_pipe_ends_quietly(toy_bundle: tuple[Path, Any]) -> None:
    import subprocess
    import sys

    with subprocess.Popen([sys.executable, "-m", "adaptedge.cli", "inspect",
                           str(toy_bundle[0])], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # as `| head` does once it has its lines
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 141
    assert "BrokenPipeError" not in err and "Traceback" not in err, err


def test_inspect_cost_unit_reads_as_a_sum_not_a_rate() -> None:
    from types import SimpleNamespace
    from typing import cast

    from adaptedge.cli.inspect_cmd import cost_unit
    from adaptedge.protocol import Manifest
    from adaptedge.protocol.manifest import CostWeights

    def unit(**weights: float) -> str:
        return cost_unit(cast(Manifest, SimpleNamespace(cost_weights=CostWeights(**weights))))

    assert unit(energy_mj=1.0, latency_ms=0.05) == "mJ + 0.05*ms"
    assert unit(energy_mj=2.0) == "2*mJ" and unit(energy_mj=1.0) == "mJ"
    assert unit(energy_mj=0.0, uniform=1.0) == "features read"



def test_evaluate_table_names_the_cost_unit_in_aligned_columns() -> None:
    from adaptedge.cli.evaluate import render

    point = {"name": "p-1", "accuracy": 0.9, "cost": 12.345, "escalation_rate": 0.1,
             "avg_sensors_read": 2.0, "energy_mj": 10.0, "latency_ms": 23.45, "bytes": 20.0,
             "validation_interval": [0.85, 0.93]}
    out = render({"hpc": {"accuracy": 0.95, "cost": 40.0}, "cost_unit": "mJ + 0.1*ms",
                  "points": [point], "best_within_1pct": None}, "t").splitlines()
    head, row = out[3], out[4]
    assert "cost (mJ + 0.1*ms)" in head
    end = head.index("cost (mJ + 0.1*ms)") + len("cost (mJ + 0.1*ms)")
    assert row[:end].endswith("12.35")  # the number sits under its header, right-aligned


def test_frontier_axis_follows_the_cost_unit_and_the_legend_hides_no_point(
        tmp_path: Path, drawn: dict[str, dict[str, Any]]) -> None:
    """Money costs draw a money axis; the legend sits beside the axes, so "always cloud
    (HPC)" (top right, where a legend in the corner used to cover it) stays visible."""
    pts = frontier_points()
    for p in pts:
        p["money"] = p["energy_mj"] / 100
    plots.frontier_plot(pts, tmp_path / "money.png", title="t", x_key="money",
                        x_label="mean money per decision")
    got = drawn["money.png"]
    assert "mean money per decision" in got["texts"] and "always cloud (HPC)" in got["texts"]
    assert got["xlim"][0][1] >= 0.24 > got["xlim"][0][0]  # the money values, not energy


def test_legend_is_outside_the_axes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    boxes: dict[str, Any] = {}
    save = plots._save

    def spy(fig: Any, path: Path) -> Path:
        fig.tight_layout()  # as _save lays it out
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        boxes["axes"] = ax.get_window_extent(renderer)
        boxes["legend"] = ax.get_legend().get_window_extent(renderer)
        boxes["figure"] = fig.bbox
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", spy)
    plots.frontier_plot(frontier_points(), tmp_path / "f.png", title="t")
    assert not boxes["axes"].overlaps(boxes["legend"])
    assert boxes["legend"].x1 <= boxes["figure"].x1  # not cut at the edge


def test_report_cost_axis_and_group_names() -> None:
    from types import SimpleNamespace

    from adaptedge.protocol.manifest import CostWeights
    from adaptedge.simulator.report import cost_axis, group_names

    def bundle(weights: CostWeights, **meta: Any) -> Any:
        return SimpleNamespace(cost_weights=weights, bundle_id="b" * 24,
                               metadata={"method": "dag", "dataset": "d", **meta})

    assert cost_axis(bundle(CostWeights(energy_mj=1.0)))[0] == "energy_mj"
    assert cost_axis(bundle(CostWeights(energy_mj=0.0, money=1.0))) == (
        "money", "mean money per decision")
    key, label = cost_axis(bundle(CostWeights(energy_mj=1.0, latency_ms=0.1)))
    assert key == "scalar" and label == "mean cost per decision (mJ + 0.1*ms)"
    assert group_names([bundle(CostWeights(), seed=0), bundle(CostWeights(), seed=1)]) == [
        "dag (seed 0)", "dag (seed 1)"]
    assert group_names([bundle(CostWeights()), bundle(CostWeights())], ["a/lb", "b/lb2"]) == [
        "dag (lb)", "dag (lb2)"]
