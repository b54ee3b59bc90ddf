"""Child processes that never outlive the simulator: bounded waits, terminate-then-kill.

Children get ``PR_SET_PDEATHSIG`` (Linux) so they receive SIGTERM if we die abruptly; every
child is otherwise stopped by ``ProcessSet.close()`` (also on ``__exit__``), by its own pid.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def terminate(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> int | None:
    """SIGTERM (after SIGCONT, in case it was paused), then SIGKILL after ``grace_s``."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace_s)
    return proc.returncode


def adaptedge_command(*args: str) -> list[str]:
    """``adaptedge ARGS`` run with this interpreter (works without the console script).

    Not ``-m adaptedge.cli.main``: that would load the module twice (as ``__main__`` too), and
    its ``CommandError`` would not be the one handlers raise.
    """
    return [sys.executable, "-c", "import sys; from adaptedge.cli.main import main; "
            "sys.exit(main(sys.argv[1:]))", *args]


class ProcessSet:
    """Start named children with logs in a directory; stop them all, bounded in time."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        log_dir.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []

    def __enter__(self) -> ProcessSet:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None
              ) -> subprocess.Popen[bytes]:
        if name in self.procs:
            raise ValueError(f"a process named {name!r} is already running")
        out = (self.log_dir / f"{name}.out").open("wb")
        err = (self.log_dir / f"{name}.err").open("wb")
        self._logs += [out, err]
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        proc = subprocess.Popen(list(argv), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env=full_env,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        self.procs[name] = proc
        return proc

    def log(self, name: str, stream: str = "err") -> str:
        path = self.log_dir / f"{name}.{stream}"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_for_log(self, name: str, text: str, timeout_s: float) -> bool:
        """Wait until ``text`` appears in the child's stderr/stdout; False on timeout or exit."""
        deadline = time.monotonic() + timeout_s
        proc = self.procs[name]
        while time.monotonic() < deadline:
            if text in self.log(name, "err") or text in self.log(name, "out"):
                return True
            if proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def wait(self, names: Sequence[str], timeout_s: float) -> dict[str, int | None]:
        """Wait for the named children to exit; returns exit codes (None = still running)."""
        deadline = time.monotonic() + timeout_s
        codes: dict[str, int | None] = {}
        for name in names:
            proc = self.procs[name]
            try:
                codes[name] = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                codes[name] = None
        return codes

    def stop(self, name: str, grace_s: float = 5.0) -> int | None:
        proc = self.procs.get(name)
        return None if proc is None else terminate(proc, grace_s)

    def close(self) -> None:
        for name in reversed(list(self.procs)):
            self.stop(name)
        for fh in self._logs:
            with contextlib.suppress(Exception):
                fh.close()
        self._logs.clear()

    def alive(self) -> list[int]:
        return [p.pid for p in self.procs.values() if p.poll() is None]
