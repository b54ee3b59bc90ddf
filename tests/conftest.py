"""Shared fixtures: a hand-made bundle, a private mosquitto, seeds; the private cache, the wheels
and the quick letter-binary bundles are made once per run, shared by pytest-xdist's workers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adaptedge.protocol import Manifest, verify
from tests.support.run_shared import run_root, shared_folder
from tests.support.toy_bundle import build_toy_bundle
from tests.support.wheel import BuiltWheel, build_wheel, read_wheels


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The suite never writes to the user's cache: HPC fits, demo bundles (also of the
    subprocesses tests start, which inherit the environment) go to a temporary directory, one
    for the whole run: an HPC is fitted once per run whichever worker asks first (the cache
    writes each entry atomically)."""
    cache = run_root(tmp_path_factory) / "adaptedge-cache"
    cache.mkdir(exist_ok=True)
    saved = {k: os.environ.get(k) for k in ("ADAPTEDGE_CACHE_DIR", "XDG_CACHE_HOME")}
    os.environ["ADAPTEDGE_CACHE_DIR"] = str(cache)
    os.environ["XDG_CACHE_HOME"] = str(cache / "xdg")
    try:
        yield cache
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def one_native_thread() -> Iterator[None]:
    """One thread per native pool (BLAS, OpenMP) for a module's fits, as ``fit_hpc`` runs
    them: on a busy 2-core machine more threads only spin (the DAG static and cascade
    baselines on wall-robot: 36.8 CPU s with OpenBLAS's default threads, 25.1 with one).
    Use it with ``pytestmark = pytest.mark.usefixtures("one_native_thread")``."""
    import sklearn.ensemble  # noqa: F401  (load OpenMP first so the limit applies to it)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="session")
def global_random_seed() -> int:
    """Seed for randomised tests; CI may vary it with ADAPTEDGE_TEST_SEED."""
    return int(os.environ.get("ADAPTEDGE_TEST_SEED", "0"))


@pytest.fixture()
def toy_bundle(tmp_path: Path) -> tuple[Path, Manifest]:
    out = tmp_path / "toy"
    return out, build_toy_bundle(out)


@pytest.fixture()
def mosquitto() -> Iterator[object]:
    from adaptedge.simulator.brokers import MosquittoBroker

    broker = MosquittoBroker()
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> BuiltWheel:
    """The wheels, built once per run (``support.wheel``)."""
    return read_wheels(shared_folder(tmp_path_factory, "wheel", build_wheel))


@pytest.fixture(scope="session")
def quick_bundle(tmp_path_factory: pytest.TempPathFactory
                 ) -> Callable[[str], tuple[Path, Manifest]]:
    """``method`` -> (path, manifest) of ``train_bundle("letter-binary", method, quick=True)``,
    trained once per run (the C export's tests and the walk's parity test read the same)."""

    def train(method: str) -> Callable[[Path], object]:
        def build(folder: Path) -> object:
            from adaptedge.trainer.api import train_bundle

            return train_bundle("letter-binary", method, folder / "bundle", quick=True,
                                progress=False)
        return build

    def get(method: str) -> tuple[Path, Manifest]:
        path = shared_folder(tmp_path_factory, f"quick-{method}", train(method)) / "bundle"
        return path, verify(path)

    return get
