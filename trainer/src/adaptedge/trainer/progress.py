"""Progress of long training stages, on a terminal or not.

On a terminal: a tqdm bar. Otherwise (piped to a file, a CI log, ``systemd``): one line on
stderr when a stage starts, then at most every ``$ADAPTEDGE_PROGRESS_EVERY`` seconds (default
30) and when it ends, with the stage, done/total and the estimated time left, e.g.
``[adaptedge] adapt-gbrt: 12/48 (25%), 1m05s elapsed, ETA 3m15s``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TextIO, TypeVar

T = TypeVar("T")
A = TypeVar("A")
R = TypeVar("R")
DEFAULT_EVERY_S = 30.0


def _every_s() -> float:
    try:
        return max(0.0, float(os.environ.get("ADAPTEDGE_PROGRESS_EVERY", DEFAULT_EVERY_S)))
    except ValueError:
        return DEFAULT_EVERY_S


def clock(seconds: float) -> str:
    """``seconds`` as ``12s``, ``3m05s`` or ``1h02m``."""
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else (
        f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")


class LogProgress:
    """Periodic progress lines for a stage of ``total`` steps."""

    def __init__(self, desc: str, total: int, *, stream: TextIO | None = None,
                 every_s: float | None = None) -> None:
        self.desc, self.total, self.done = desc, total, 0
        self._stream = stream or sys.stderr
        self._every = _every_s() if every_s is None else every_s
        self._started = time.monotonic()
        self._last = self._started
        self._say(f"{desc}: {total} steps")

    def _say(self, text: str) -> None:
        print(f"[adaptedge] {text}", file=self._stream, flush=True)

    def line(self) -> str:
        elapsed = time.monotonic() - self._started
        pct = 100.0 * self.done / self.total if self.total else 100.0
        eta = (f", ETA {clock(elapsed / self.done * (self.total - self.done))}"
               if 0 < self.done < self.total else "")
        return (f"{self.desc}: {self.done}/{self.total} ({pct:.0f}%), {clock(elapsed)} elapsed"
                f"{eta}")

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.done >= self.total or now - self._last >= self._every:
            self._last = now
            self._say(self.line())


def track(items: Iterable[T], desc: str, total: int, enabled: bool) -> Iterator[T]:
    """``items``, reporting progress: a bar on a terminal, log lines otherwise."""
    if not enabled:
        yield from items
        return
    if sys.stderr.isatty():
        from tqdm import tqdm

        yield from tqdm(items, desc=desc, total=total, leave=False)
        return
    log = LogProgress(desc, total)
    for item in items:
        yield item
        log.update()


class Stages:
    """One line per stage of a method as it starts, on a terminal or not (stages are few and
    long), e.g. ``[adaptedge] dag: stage 2/4 classifier bank, 12s elapsed``."""

    def __init__(self, method: str, names: Sequence[str], enabled: bool, *,
                 stream: TextIO | None = None) -> None:
        self.method, self.names, self.enabled = method, tuple(names), enabled
        self._stream = stream
        self._started = time.monotonic()

    def start(self, name: str) -> None:
        if not self.enabled:
            return
        k = self.names.index(name) + 1
        print(f"[adaptedge] {self.method}: stage {k}/{len(self.names)} {name}, "
              f"{clock(time.monotonic() - self._started)} elapsed",
              file=self._stream or sys.stderr, flush=True)


def counting(fn: Callable[[A], R], desc: str, total: int, enabled: bool) -> Callable[[A], R]:
    """``fn``, reporting each call as one step of (at most) ``total``: a bar on a terminal,
    log lines otherwise."""
    if not enabled:
        return fn
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(desc=desc, total=total, leave=False)

        def on_bar(arg: A) -> R:
            out = fn(arg)
            bar.update()
            return out

        return on_bar
    log = LogProgress(desc, total)

    def on_log(arg: A) -> R:
        out = fn(arg)
        log.update()
        return out

    return on_log
