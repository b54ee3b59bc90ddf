"""The exported C library on microcontrollers under QEMU (semihosting): a Cortex-M4F
(``mps2-an386``) and a Cortex-M0+ with soft float (``microbit``) decide every row of the quick
letter-binary bundles' test split as ``EdgeRuntime.predict_row`` does, and the quick ADAPT-GBRT
policy fits the M0+ budget (32 KB flash, 2 KB RAM, 30,000 instructions per decision) and the
exporter's flash estimate is within 10% of the linked image."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from adaptedge.protocol import Manifest
from adaptedge.trainer.export.c import export_c
from tests.support.c_policy import mismatches
from tests.support.qemu_policy import build_firmware, run_qemu, toolchain_missing

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(toolchain_missing() is not None,
                                 reason=toolchain_missing() or "")]


@pytest.mark.parametrize("target", ["cortex-m4f", "cortex-m0plus"])
@pytest.mark.parametrize("method", ["adapt-gbrt", "dag"])
def test_whole_test_split_under_qemu(method: str, target: str, tmp_path: Path,
                                     quick_bundle: Callable[[str], tuple[Path, Manifest]]
                                     ) -> None:
    from adaptedge.trainer.data.datasets import load_dataset

    path, manifest = quick_bundle(method)
    point = manifest.default_operating_point
    lib = export_c(path, tmp_path / "lib", point)
    fw = build_firmware(tmp_path / "lib", target, tmp_path / target)
    if target == "cortex-m0plus":  # the estimate behind --flash-limit tracks the real size
        assert abs(lib.flash_estimate - fw.flash_bytes) <= 0.1 * fw.flash_bytes
    X = np.array(load_dataset("letter-binary").X_test, dtype=np.float32)
    X[::50, :] = np.where(np.arange(X.shape[1]) % 3 == 0, np.nan, X[::50, :])  # failing reads
    n_nodes = len(manifest.policies[manifest.operating_point(point).policy].nodes)
    for link_up in (False, True):
        run = run_qemu(fw, X, len(manifest.sensors), n_nodes, len(manifest.classes), link_up,
                       tmp_path / f"run-{link_up}")
        bad = mismatches(path, point, X, run.records, link_up)
        assert not bad, f"{target}: {len(bad)} of {len(X)} rows differ: {bad[0]}"
    if method == "adapt-gbrt" and target == "cortex-m0plus":
        assert fw.flash_bytes <= 32 * 1024
        assert fw.static_ram_bytes + run.stack_bytes <= 2 * 1024
        assert run.instructions_per_decision <= 30_000


@pytest.mark.parametrize("board", ["m4f", "m0plus"])
def test_firmware_example_builds_and_runs(board: str, toy_bundle: tuple[Path, Manifest],
                                          tmp_path: Path) -> None:
    """``docs/examples/firmware``: ``make`` builds it for an exported policy; under QEMU it
    makes its eight decisions, each answered locally or sent as an escalation."""
    import shutil
    import subprocess

    from tests.support.qemu_policy import ROOT

    work = tmp_path / "firmware"
    shutil.copytree(ROOT / "docs" / "examples" / "firmware", work)
    path, manifest = toy_bundle
    export_c(path, work / "policy", manifest.operating_points[-1].name)
    subprocess.run(["make", f"BOARD={board}"], cwd=work, check=True, capture_output=True)
    run = subprocess.run(["make", "--silent", "run", f"BOARD={board}"], cwd=work, check=True,
                         capture_output=True, text=True, timeout=120)
    output = run.stdout + run.stderr  # QEMU writes the semihosting console to stderr
    lines = [line for line in output.splitlines() if line.split(" ")[0] in ("local", "escalate")]
    assert len(lines) == 8, output
