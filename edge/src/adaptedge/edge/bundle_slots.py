"""Where a device following updates keeps its bundles: the active one and the previous one.

Layout under the updates folder::

    downloads/<bundle_id>.tar.part   a download in progress (kept across restarts: resumable)
    bundles/<bundle_id>/             unpacked, verified bundles (active and previous only)
    state.json                       {"active", "previous", "refused": {id: reason}}

``state.json`` is replaced atomically; bundles other than the active and the previous one are
removed when a new one is committed. Bundle ids come from the network: only plain names
(letters, digits, ``._-``) are used as file names.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adaptedge.edge.errors import EdgeError
from adaptedge.protocol.archive import extract_tar

STATE_NAME = "state.json"
_SAFE_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
_MAX_REFUSED = 256


def safe_id(bundle_id: str) -> str:
    """``bundle_id`` if it can name a file; ``EdgeError`` otherwise."""
    if not _SAFE_ID.fullmatch(bundle_id):
        raise EdgeError(f"bundle id {bundle_id[:40]!r} is not a plain name (letters, digits, "
                        "'._-'): refusing it")
    return bundle_id


class BundleSlots:
    """The updates folder of one device (one process at a time)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        for sub in ("downloads", "bundles"):
            (self.root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        self.state: dict[str, Any] = {"active": "", "previous": "", "refused": {}}
        path = self.root / STATE_NAME
        if path.is_file():
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                loaded = {}  # a torn or foreign file: start over, nothing is trusted from it
            if isinstance(loaded, dict):
                self.state.update({k: loaded[k] for k in self.state if k in loaded})
        if not isinstance(self.state.get("refused"), dict):
            self.state["refused"] = {}

    # -- paths -------------------------------------------------------------------------------
    def part_path(self, bundle_id: str) -> Path:
        return self.root / "downloads" / f"{safe_id(bundle_id)}.tar.part"

    def bundle_path(self, bundle_id: str) -> Path:
        return self.root / "bundles" / safe_id(bundle_id)

    @property
    def refused(self) -> Mapping[str, str]:
        return dict(self.state["refused"])

    # -- changes -----------------------------------------------------------------------------
    def unpack(self, archive: Path, bundle_id: str) -> Path:
        """Unpack a downloaded ``.tar`` into ``bundles/<bundle_id>`` (replacing a leftover);
        returns the bundle directory. Verifying it is the caller's job."""
        target = self.bundle_path(bundle_id)
        staging = Path(tempfile.mkdtemp(prefix=f".{bundle_id}.", dir=target.parent))
        try:
            extract_tar(archive, staging)
            entries = list(staging.iterdir())
            inner = entries[0] if len(entries) == 1 and entries[0].is_dir() else staging
            if target.exists():
                shutil.rmtree(target)
            inner.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target

    def commit(self, active: str, previous: str) -> None:
        """Record the active and previous bundles; remove every other unpacked bundle and the
        finished downloads."""
        self.state["active"], self.state["previous"] = active, previous
        self._save()
        keep = {active, previous}
        for path in (self.root / "bundles").iterdir():
            if path.name not in keep and not path.name.startswith("."):
                shutil.rmtree(path, ignore_errors=True)
        for bundle_id in keep:
            if bundle_id:
                self.part_path(bundle_id).unlink(missing_ok=True)

    def refuse(self, bundle_id: str, reason: str) -> None:
        """Remember that ``bundle_id`` was refused (its retained announcement is then ignored)
        and drop its files."""
        refused: dict[str, str] = self.state["refused"]
        refused[bundle_id] = reason
        while len(refused) > _MAX_REFUSED:
            refused.pop(next(iter(refused)))
        self._save()
        try:
            self.part_path(bundle_id).unlink(missing_ok=True)
            if bundle_id not in (self.state["active"], self.state["previous"]):
                shutil.rmtree(self.bundle_path(bundle_id), ignore_errors=True)
        except EdgeError:
            pass  # not a file name: nothing of it is on disk

    def _save(self) -> None:
        path = self.root / STATE_NAME
        tmp = path.with_name(f".{STATE_NAME}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.state, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
