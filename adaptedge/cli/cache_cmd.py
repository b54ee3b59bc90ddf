"""``adaptedge cache info|clear``: what the cache holds (HPC fits, replayed HPC answers, the
demo's bundles and reports), where it is, and removing it. Only the cache's known parts are
ever removed, so a mistaken ``$ADAPTEDGE_CACHE_DIR`` never costs anything else."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("cache",
                       help="show or clear the cache (HPC fits, replay answers, demo bundles)")
    cache_sub = p.add_subparsers(dest="cache_command", metavar="ACTION")
    info = cache_sub.add_parser("info", help="where the cache is and what it holds")
    info.set_defaults(handler=show)
    clear = cache_sub.add_parser(
        "clear", help="remove the cache's HPC fits, replay answers and demo files")
    clear.add_argument("part", nargs="?", help="only this part (hpc, replay or demo)")
    clear.set_defaults(handler=clear_cache)
    p.set_defaults(handler=lambda args: (p.print_help(), 0)[1])


def _usage(path: Path) -> tuple[int, int]:
    """(files, bytes) under ``path``."""
    files = [f for f in path.rglob("*") if f.is_file() and not f.is_symlink()]
    return len(files), sum(f.stat().st_size for f in files)


def _size(n_bytes: int) -> str:
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def show(args: argparse.Namespace) -> int:
    from adaptedge.trainer.data.cache import CACHE_PARTS, cache_root

    root = cache_root()
    print(f"cache: {root} ({'$ADAPTEDGE_CACHE_DIR' if _explicit() else 'default'})")
    total = 0
    for name, what in CACHE_PARTS.items():
        files, size = _usage(root / name) if (root / name).is_dir() else (0, 0)
        total += size
        print(f"  {name + '/':<6} {_size(size):>10}  {files:>5} files  {what}")
    print(f"  total  {_size(total):>10}   (adaptedge cache clear removes it)")
    return 0


def _explicit() -> bool:
    import os

    return bool(os.environ.get("ADAPTEDGE_CACHE_DIR"))


def clear_cache(args: argparse.Namespace) -> int:
    from adaptedge.cli.errors import CommandError
    from adaptedge.trainer.data.cache import CACHE_PARTS, cache_root

    if args.part is not None and args.part not in CACHE_PARTS:
        raise CommandError(f"unknown cache part {args.part!r}; the parts are "
                           f"{', '.join(CACHE_PARTS)}")
    root = cache_root()
    freed = 0
    for name in [args.part] if args.part else list(CACHE_PARTS):
        part = root / name
        if part.is_dir() and not part.is_symlink():
            freed += _usage(part)[1]
            shutil.rmtree(part)
        elif part.is_symlink():
            part.unlink()
    print(f"removed {_size(freed)} from {root}")
    return 0
