"""``adaptedge cloud serve`` checks the device bundles it is given before any connection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from adaptedge.protocol.device_bundle import write_device_bundle
from tests.support.toy_bundle import build_toy_bundle

LAUNCHER = "import sys; from adaptedge.cli.main import main; sys.exit(main(sys.argv[1:]))"


def _serve(*bundles: Path) -> subprocess.CompletedProcess[str]:
    args = [a for b in bundles for a in ("--bundle", str(b))]
    return subprocess.run([sys.executable, "-c", LAUNCHER, "cloud", "serve", *args, "--broker",
                           "mqtt://127.0.0.1:9"], capture_output=True, text=True, timeout=120)


def test_a_device_bundle_naming_another_hpc_is_refused_in_one_line(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    other = build_toy_bundle(tmp_path / "other", seed=1)
    write_device_bundle(tmp_path / "other", other, tmp_path / "dev")
    out = _serve(tmp_path / "full", tmp_path / "dev")
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip()
    assert "\n" not in line and line.startswith(f"adaptedge: error: {tmp_path / 'dev'}: names "
                                                f"the cloud model {other.bundle_id}/hpc.onnx")
    assert f"the HPC served is {full.bundle_id}/hpc.onnx" in line


def test_a_device_bundle_alone_is_refused_in_one_line(tmp_path: Path) -> None:
    full = build_toy_bundle(tmp_path / "full")
    write_device_bundle(tmp_path / "full", full, tmp_path / "dev")
    out = _serve(tmp_path / "dev")
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip()
    assert "\n" not in line and "is a device bundle: it names its HPC" in line
