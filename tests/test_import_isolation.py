"""The device, cloud and evaluation paths never load the training or plotting libraries.

One subprocess per path imports its modules and really uses a bundle (load, decide, serve,
evaluate), then lists the heavy modules that ended up in ``sys.modules``: the device install
(``pip install adaptedge``, no extras) must be enough for each of them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from adaptedge.protocol import Manifest
from adaptedge.protocol.device_bundle import write_device_bundle

HEAVY = ("sklearn", "scipy", "skl2onnx", "onnx", "matplotlib")

PATHS = {
    "protocol": "import adaptedge.protocol as p\np.verify(BUNDLE)\np.open_bundle(BUNDLE)\n",
    "edge": (
        "import adaptedge.edge as e, adaptedge.cli.edge_cmd\n"
        "rt = e.EdgeRuntime.load(BUNDLE)\n"
        "rt.predict_row([0.1, 0.2, 0.3])\n"
        "rt.predict({'a': lambda: [0.1, 0.2], 'b': lambda: [0.3]})\n"),
    "device": (  # a device bundle (no HPC) needs protocol + edge only
        "import adaptedge.edge as e\n"
        "rt = e.EdgeRuntime.load(DEVICE)\n"
        "rt.predict_row([0.1, 0.2, 0.3])\n"
        "assert not [m for m in sys.modules if m.startswith(('adaptedge.trainer', "
        "'adaptedge.cloud', 'adaptedge.simulator'))]\n"),
    "cloud": (
        "import adaptedge.cloud as c, adaptedge.cloud.access.acl, adaptedge.cloud.transport.client\n"
        "import adaptedge.cloud.service.worker, adaptedge.cli.cloud_cmd\n"
        "c.HpcInference.load(BUNDLE)\n"),
    "cli": (
        "from adaptedge.cli.main import build_parser, main\n"
        "build_parser()\n"
        "assert main(['inspect', BUNDLE]) == 0\n"),
    "evaluate": (
        "import numpy as np\n"
        "from adaptedge.trainer.data.datasets import load_dataset\n"
        "from adaptedge.trainer.policy.oracle import evaluate_policy\n"
        "load_dataset('heart')\n"
        "evaluate_policy(BUNDLE, 'walk', np.zeros((4, 3), np.float32))\n"),
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_path_loads_no_heavy_library(path: str, toy_bundle: tuple[Path, Manifest],
                                     tmp_path: Path) -> None:
    device = tmp_path / "device"
    write_device_bundle(toy_bundle[0], toy_bundle[1], device)
    code = (f"import sys\nBUNDLE = {str(toy_bundle[0])!r}\nDEVICE = {str(device)!r}\n"
            f"{PATHS[path]}"
            f"heavy = {{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})\n"
            "print('heavy=' + ','.join(sorted(heavy)))\n")
    # cwd outside the repository: only the adaptedge package resolves, not its folders.
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "heavy=", (
        f"the {path} path loaded {out.stdout.strip().splitlines()[-1]}")
