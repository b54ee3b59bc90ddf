"""Issue 21 item 8: a missing extra is named, the datasets ship in the wheel, a LICENSE, and a
README that links only to files in the repository."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.wheel import BuiltWheel

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("blocked", "argv", "extra"), [
    ("sklearn", ["train", "--data", "heart", "--method", "l1", "--out", "OUT"], "train"),
    ("matplotlib", ["simulate", "--bundle", "B", "--data", "heart", "--report", "OUT"], "sim"),
])
def test_a_missing_extra_is_named(blocked: str, argv: list[str], extra: str,
                                  tmp_path: Path) -> None:
    from tests.support.dataset_bundle import build_dataset_bundle

    if "B" in argv:
        build_dataset_bundle(tmp_path / "b", "heart")
    argv = [str(tmp_path / "b") if a == "B" else str(tmp_path / "out") if a == "OUT" else a
            for a in argv]
    # The library is absent as far as this interpreter knows: importing it raises
    # ModuleNotFoundError, exactly as on an install without the extra.
    code = (f"import sys; sys.modules[{blocked!r}] = None\n"
            "from adaptedge.cli.main import main\n"
            f"sys.exit(main({argv!r}))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2, run.stderr[-1500:]
    assert "Traceback" not in run.stderr
    assert f"needs {blocked}, which is not installed: pip install 'adaptedge[{extra}]'" \
        in run.stderr


@pytest.mark.slow
def test_the_wheel_ships_the_datasets(built_wheel: BuiltWheel, tmp_path: Path) -> None:
    names = built_wheel.names
    prefix = "adaptedge/trainer/data/vendored/"
    vendored_dir = REPO / "trainer" / "src" / prefix
    shipped = {n.removeprefix(prefix) for n in names if n.startswith(prefix)}
    vendored = {str(p.relative_to(vendored_dir)) for p in vendored_dir.rglob("*") if p.is_file()}
    assert shipped == vendored
    code = ("import adaptedge.trainer; from adaptedge.trainer.data.datasets import load_dataset; "
            "d = load_dataset('letter-binary'); print(adaptedge.trainer.__file__, d.X_train.shape)")
    env = {"PYTHONPATH": str(built_wheel.site), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-1500:]
    assert run.stdout.startswith(str(built_wheel.site))


def test_license_is_mit_as_pyproject_says() -> None:
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text
    for folder in (".", "protocol", "edge", "cloud", "trainer", "simulator"):
        assert 'license = "MIT"' in (REPO / folder / "pyproject.toml").read_text(), folder


def test_readme_links_only_to_files_in_the_repository() -> None:
    readme = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert "docs/DESIGN.md" in targets and "LICENSE" in targets
    for target in targets:
        if target.startswith(("http://", "https://")):
            continue
        path = (REPO / target).resolve()
        assert path.is_relative_to(REPO) and path.exists(), target
    assert "../" not in readme and "shared/" not in readme


def test_readme_starts_with_the_two_commands_then_pip() -> None:
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    first = [line.split()[:2] for line in blocks[0].splitlines() if line.strip()]
    assert first == [["make", "demo"], ["make", "test"]]
    assert blocks[1].lstrip().startswith("pip install ./protocol ./edge")


def test_every_distribution_carries_the_changelogs_newest_release() -> None:
    """One version for the six distributions, the CHANGELOG's newest released section, and
    the pins between them at that minor version."""
    changelog = (REPO / "CHANGELOG.md").read_text()
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, flags=re.M)
    assert released, "the CHANGELOG has no released version"
    newest = released[0]
    assert changelog.index("## [Unreleased]") < changelog.index(f"## [{newest}]")
    minor = ".".join(newest.split(".")[:2])
    for folder in (".", "protocol", "edge", "cloud", "trainer", "simulator"):
        text = (REPO / folder / "pyproject.toml").read_text()
        assert re.search(rf'^version = "{re.escape(newest)}"$', text, flags=re.M), folder
        pins = re.findall(r"adaptedge-[a-z]+(?:\[[a-z]+\])?>=([\d.]+)", text)
        assert all(pin == minor for pin in pins), (folder, pins)
