"""``adaptedge train --cluster``: the sweep's fits run as tasks on a real Dask scheduler with two
worker processes on 127.0.0.1 (``dask scheduler`` / ``dask worker`` subprocesses), give the
same bundle as the local run, survive a killed worker, and fail in one line without writing
anything when the scheduler goes away."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

from adaptedge.cli.main import main
from adaptedge.protocol.bundle import verify
from adaptedge.trainer import parallel
from adaptedge.trainer.parallel import ClusterError, cluster_address, use_cluster

pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ["train", "--data", "heart", "--method", "adapt-gbrt", "--quick", "--hpc", "hgb",
         "--no-progress"]
SWEEP = "adapt-gbrt"
START_TIMEOUT_S = 60.0


class DaskProcesses:
    """A ``dask scheduler`` and ``n_workers`` single-thread ``dask worker`` processes (no
    nanny: a killed worker stays dead) on 127.0.0.1, and a client watching them."""

    def __init__(self, tmp: Path, n_workers: int = 2) -> None:
        self.tmp = tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.logs: list[Any] = []
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
                    "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        file = tmp / "scheduler.json"
        self.scheduler = self._spawn("dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                                     "--no-dashboard", "--scheduler-file", str(file))
        self.workers: list[subprocess.Popen[bytes]] = []
        self.address = self._read_address(file)
        self.workers = [self._spawn("dask_worker", self.address, "--nthreads", "1",
                                    "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                                    "--local-directory", str(tmp / "workers"))
                        for _ in range(n_workers)]
        from distributed import Client

        self.client = Client(self.address, timeout="30s", set_as_default=False)
        self.client.wait_for_workers(n_workers, timeout=START_TIMEOUT_S)
        self.worker_pids: dict[str, int] = self.client.run(os.getpid)

    def _spawn(self, module: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.tmp / f"{module}-{time.monotonic_ns()}.log").open("wb")
        self.logs.append(log)
        return subprocess.Popen([sys.executable, "-m", f"distributed.cli.{module}", *args],
                                env=self.env, stdout=log, stderr=log, cwd=self.tmp)

    def _read_address(self, file: Path) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if file.is_file():
                try:
                    return str(json.loads(file.read_text())["address"])
                except (ValueError, KeyError):
                    pass  # half written
            assert self.scheduler.poll() is None, "dask scheduler exited at start"
            time.sleep(0.05)
        raise AssertionError("dask scheduler did not start in time")

    def kill_when_busy(self, victim: str) -> threading.Thread:
        """In the background: once a sweep task runs on a worker, SIGKILL that worker
        (``victim="worker"``) or the scheduler; ``self.killed`` then names what died."""
        self.killed: list[tuple[str, int]] = []

        def watch() -> None:
            deadline = time.monotonic() + START_TIMEOUT_S
            while time.monotonic() < deadline and not self.killed:
                busy = [w for w, keys in self.client.processing().items()
                        if any(str(k).startswith(SWEEP) for k in keys)]
                if busy and victim == "worker":
                    pid = self.worker_pids[busy[0]]
                    os.kill(pid, signal.SIGKILL)
                    self.killed.append((busy[0], pid))
                elif busy:
                    self.scheduler.send_signal(signal.SIGKILL)
                    self.killed.append(("scheduler", self.scheduler.pid))
                time.sleep(0.01)

        thread = threading.Thread(target=watch, name="test.dask_killer", daemon=True)
        thread.start()
        return thread

    def task_prefixes(self) -> set[str]:
        return set(self.client.run_on_scheduler(
            lambda dask_scheduler: list(dask_scheduler.task_prefixes)))

    def close(self) -> list[int]:
        """Stop everything; the pids (with children) still alive afterwards."""
        procs = [self.scheduler, *self.workers]
        tree = [psutil.Process(p.pid) for p in procs if p.poll() is None]
        tree += [c for p in list(tree) for c in _children(p)]
        with contextlib.suppress(Exception):  # the scheduler may be gone on purpose
            self.client.close(timeout=5)
        for proc in reversed(procs):  # workers first: they need not wait for the scheduler
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        _, alive = psutil.wait_procs(tree, timeout=10)
        for log in self.logs:
            log.close()
        return [p.pid for p in alive]


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return list(proc.children(recursive=True))
    except psutil.NoSuchProcess:
        return []


@pytest.fixture()
def dask_procs(tmp_path: Path) -> Iterator[DaskProcesses]:
    procs = DaskProcesses(tmp_path / "dask")
    try:
        yield procs
    finally:
        assert procs.close() == [], "processes left behind"


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
                   ) -> None:
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.delenv(parallel.CLUSTER_ENV, raising=False)


@pytest.fixture(scope="module")
def local_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quick sweep trained here (local processes); its HPC is cached for later runs."""
    out = tmp_path_factory.mktemp("local") / "heart"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
        mp.delenv(parallel.CLUSTER_ENV, raising=False)
        assert main([*TRAIN, "--out", str(out)]) == 0
    return out


def assert_same_bundle(got: Path, want: Path) -> None:
    """Same operating points, metrics, HPC and byte-identical ONNX files."""
    a, b = verify(got), verify(want)
    assert a.operating_points == b.operating_points
    assert a.default_operating_point == b.default_operating_point and a.hpc == b.hpc
    onnx = sorted(p.name for p in want.glob("*.onnx*"))  # .onnx.zlib too
    assert sorted(p.name for p in got.glob("*.onnx*")) == onnx and len(onnx) > 2
    for name in onnx:
        assert (got / name).read_bytes() == (want / name).read_bytes(), name


@pytest.mark.slow
def test_cluster_run_gives_the_same_bundle(dask_procs: DaskProcesses, local_bundle: Path,
                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    # a fresh cache: the HPC's out-of-fold folds run on the cluster too
    monkeypatch.setenv("ADAPTEDGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(parallel.CLUSTER_ENV, dask_procs.address)
    out = tmp_path / "remote"
    assert main([*TRAIN, "--out", str(out)]) == 0
    assert {SWEEP, "HPC out-of-fold"} <= dask_procs.task_prefixes()
    assert_same_bundle(out, local_bundle)


@pytest.mark.slow
def test_a_worker_killed_mid_sweep_is_survived(dask_procs: DaskProcesses, local_bundle: Path,
                                               tmp_path: Path) -> None:
    killer = dask_procs.kill_when_busy("worker")
    out = tmp_path / "remote"
    assert main([*TRAIN, "--cluster", dask_procs.address, "--out", str(out)]) == 0
    killer.join(timeout=START_TIMEOUT_S)
    assert len(dask_procs.killed) == 1, "no sweep task was seen running"
    assert not psutil.pid_exists(dask_procs.killed[0][1]) or psutil.Process(
        dask_procs.killed[0][1]).status() == psutil.STATUS_ZOMBIE
    assert_same_bundle(out, local_bundle)


@pytest.mark.slow
def test_losing_the_scheduler_is_one_error_and_no_bundle(dask_procs: DaskProcesses,
                                                         local_bundle: Path, tmp_path: Path
                                                         ) -> None:
    out = tmp_path / "remote"
    env = {**os.environ, "PYTHONPATH": str(ROOT), parallel.CLUSTER_ENV: dask_procs.address}
    killer = dask_procs.kill_when_busy("scheduler")
    run = subprocess.run([sys.executable, "-m", "adaptedge.cli.main", *TRAIN, "--out", str(out)],
                         env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    killer.join(timeout=START_TIMEOUT_S)
    assert dask_procs.killed and dask_procs.killed[0][0] == "scheduler"
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("adaptedge: error:")]
    assert len(errors) == 1 and "lost the Dask scheduler" in errors[0], run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert not out.exists() and list(tmp_path.glob(".remote*")) == []


def _id_on_worker(job: tuple[int, Any]) -> tuple[int, int]:
    """(worker pid, id of the shared array as the task sees it); keeps the array alive, so
    a copy per task would show as a new id."""
    _, shared = job
    _KEPT.append(shared)
    return os.getpid(), id(shared)


_KEPT: list[Any] = []


@pytest.mark.slow
def test_shared_data_goes_to_each_worker_once_and_the_bar_counts_tasks(
        dask_procs: DaskProcesses, capsys: pytest.CaptureFixture[str]) -> None:
    data = np.arange(1_000_000, dtype=np.float64)  # 8 MB, shared by every item
    items = [(i, data) for i in range(8)]
    with use_cluster(dask_procs.address) as cluster:
        assert cluster is not None
        seen = parallel.parallel_map(_id_on_worker, items, 1, True, "shared")
    ids: dict[int, set[int]] = {}
    for pid, ident in seen:
        ids.setdefault(pid, set()).add(ident)
    assert set(ids) <= set(dask_procs.worker_pids.values())
    assert all(len(v) == 1 for v in ids.values()), ids
    err = capsys.readouterr().err
    assert "shared (cluster)" in err and "/8 [" in err, err


def test_no_scheduler_is_one_clear_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(ClusterError, match="no Dask scheduler answered"), \
            use_cluster(f"tcp://127.0.0.1:{port}", timeout=1.0):
        pass
    assert time.monotonic() - started < 20


def test_bad_address_and_env_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert cluster_address(None) is None
    monkeypatch.setenv(parallel.CLUSTER_ENV, "tcp://10.0.0.1:8786")
    assert cluster_address(None) == "tcp://10.0.0.1:8786"
    assert cluster_address("tcp://127.0.0.1:1") == "tcp://127.0.0.1:1"
    monkeypatch.setenv(parallel.CLUSTER_ENV, "scheduler-host")
    assert main([*TRAIN, "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tcp://HOST:PORT" in err[0] and not (tmp_path / "b").exists()


def test_without_the_extra_cluster_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    assert main([*TRAIN, "--cluster", "tcp://127.0.0.1:8786", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"adaptedge: error: {parallel.INSTALL_HINT}"]
