from __future__ import annotations

from pathlib import Path

import pytest

from adaptedge.edge import EdgeRuntime
from adaptedge.edge.bundle_slots import BundleSlots
from adaptedge.edge.device import DeviceOptions, ReplayRows
from adaptedge.edge.device.follow import follow_updates, resume_active
from adaptedge.edge.errors import DeviceError
from adaptedge.protocol import Manifest

Letter = tuple[Path, Manifest, ReplayRows]


def test_without_follow_updates_the_runtime_is_as_loaded(letter: Letter) -> None:
    bundle, _, _ = letter
    with EdgeRuntime.load(bundle) as rt:
        assert follow_updates(rt, None, DeviceOptions(bundle), print) is rt
        with pytest.raises(DeviceError, match="--trust PUBKEY"):
            follow_updates(rt, None, DeviceOptions(bundle, follow_updates=True), print)


def test_resume_stays_on_the_bundle_without_a_usable_update(letter: Letter,
                                                            tmp_path: Path) -> None:
    bundle, manifest, _ = letter
    slots = BundleSlots(tmp_path / "slots")
    said: list[str] = []
    with EdgeRuntime.load(bundle) as rt:
        assert resume_active(rt, slots, EdgeRuntime.load, said.append) is rt  # none taken
        slots.state["active"] = manifest.bundle_id
        assert resume_active(rt, slots, EdgeRuntime.load, said.append) is rt  # the same one
        slots.state["active"] = "b" * 64
        assert resume_active(rt, slots, EdgeRuntime.load, said.append) is rt  # not kept
        assert said == []
        slots.bundle_path("b" * 64).mkdir(parents=True)  # a broken leftover
        assert resume_active(rt, slots, EdgeRuntime.load, said.append) is rt
    assert len(said) == 1 and said[0].startswith(f"warning: cannot resume on updated bundle "
                                                 f"{'b' * 64}")
