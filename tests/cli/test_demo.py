"""``adaptedge demo`` end to end: exits 0, prints the summary, its PNGs open, no process left."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.simulator.test_report import assert_pngs_open
from tests.support.dataset_bundle import build_dataset_bundle

DEMO = [sys.executable, "-c", "import sys; from adaptedge.cli.main import main; "
        "sys.exit(main(sys.argv[1:]))", "demo", "--no-progress"]


def _run_demo(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen([*DEMO, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"demo did not finish in {timeout_s} s: {out[-2000:]} {err[-2000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _leftovers(workdir: Path) -> list[str]:
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if str(workdir) in cmd:
            found.append(f"{p.info['pid']}: {cmd[:200]}")
    return found


def _check_output(result: subprocess.CompletedProcess[str], workdir: Path, devices: int) -> None:
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    out = result.stdout
    for words in ("always cloud (HPC)", "always local (LPC)", "escalation rate", "p99"):
        assert words in out, out
    match = re.search(r"report: (\S+report\.md)", out)
    assert match, out
    report = Path(match.group(1))
    assert report.is_file() and report.is_relative_to(workdir)
    body = json.loads((report.parent / "report.json").read_text())
    assert body["summary"]["mode"] == "hil"
    assert body["summary"]["devices"] == devices
    assert body["summary"]["decisions"] == devices * 40
    assert_pngs_open([report.parent / name for name in body["plots"].values()])
    assert _leftovers(workdir) == []


@pytest.mark.slow
@pytest.mark.broker
def test_demo_short_run_with_a_given_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    build_dataset_bundle(bundle, "wall-robot", n_sensors=4)
    workdir = tmp_path / "work"
    result = _run_demo(["--quick", "--workdir", str(workdir), "--bundle", str(bundle)], 180)
    _check_output(result, workdir, devices=3)


@pytest.mark.slow
@pytest.mark.broker
def test_demo_fresh_then_cached(tmp_path: Path) -> None:
    """As on a fresh clone: trains the bundle, then a second run reuses it."""
    workdir = tmp_path / "work"
    first = _run_demo(["--quick", "--workdir", str(workdir)], 400)
    _check_output(first, workdir, devices=3)
    assert ", cached)" not in first.stdout
    second = _run_demo(["--quick", "--workdir", str(workdir), "--devices", "2"], 200)
    _check_output(second, workdir, devices=2)
    assert ", cached)" in second.stdout
