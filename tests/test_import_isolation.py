"""The device and cloud installs never load scikit-learn, scipy or skl2onnx."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("sklearn", "scipy", "skl2onnx")


@pytest.mark.parametrize("module", ["adaptedge.protocol", "adaptedge.edge", "adaptedge.cloud", "adaptedge.cli.main"])
def test_import_does_not_pull_heavy_libraries(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        f"heavy = [m for m in sys.modules if m.split('.')[0] in {HEAVY!r}]\n"
        "print(','.join(sorted(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"importing {module} loaded {out.stdout.strip()}"
