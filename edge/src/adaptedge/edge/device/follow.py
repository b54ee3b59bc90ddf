"""Following updates during a run: the runtime wrapped to take signed bundles announced over the
uplink (``edge.updates``), and the bundle an earlier run took resumed after a restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from adaptedge.edge.bundle_slots import BundleSlots
from adaptedge.edge.device.loading import Runtime, load_runtime
from adaptedge.edge.device.options import DeviceOptions
from adaptedge.edge.errors import DeviceError, OperatingPointError
from adaptedge.edge.runtime import EdgeRuntime
from adaptedge.edge.switchable import SwitchableRuntime
from adaptedge.edge.updates import UpdateFollower
from adaptedge.protocol.bundle_version import bundle_version

if TYPE_CHECKING:
    from adaptedge.edge.mqtt_uplink import MqttUplink

Say = Callable[[str], None]


def follow_updates(rt: EdgeRuntime, uplink: MqttUplink | None, options: DeviceOptions,
                   say: Say) -> Runtime:
    """``rt`` as is, or with ``options.follow_updates`` a ``SwitchableRuntime`` around it whose
    ``UpdateFollower`` runs until the runtime is closed. A ``DeviceError`` (no uplink, no
    trusted key) leaves ``rt`` to the caller to close."""
    if not options.follow_updates:
        return rt
    if uplink is None or not options.trust:
        raise DeviceError("--follow-updates needs --broker (updates come over MQTT) and "
                          "--trust PUBKEY (only signed bundles are taken)")
    outbox = rt.outbox

    def load(root: Path) -> EdgeRuntime:
        try:
            return load_runtime(root, options, uplink, outbox,
                                operating_point=options.operating_point)
        except OperatingPointError:  # the new bundle has no such point: its default then
            return load_runtime(root, options, uplink, outbox, operating_point=None)

    slots = BundleSlots(options.slots_dir)
    rt = resume_active(rt, slots, load, say)
    holder = SwitchableRuntime(rt, bundle_version(rt.manifest))
    follower = UpdateFollower(holder, uplink, slots, trust=options.trust, load=load,
                              prefix=options.prefix).start()
    holder.on_close.append(follower.close)
    return holder


def resume_active(rt: EdgeRuntime, slots: BundleSlots, load: Callable[[Path], EdgeRuntime],
                  say: Say) -> EdgeRuntime:
    """After a restart: the bundle an update made active, when it is newer than ``rt``'s,
    loads and verifies, and reads the same sensors; else ``rt``."""
    active = str(slots.state.get("active") or "")
    if not active or active == rt.manifest.bundle_id:
        return rt
    try:
        root = slots.bundle_path(active)
        new = load(root) if root.is_dir() else None
    except Exception as exc:  # a broken leftover: stay on --bundle
        say(f"warning: cannot resume on updated bundle {active}: {exc}")
        return rt
    if new is None:
        return rt
    if bundle_version(new.manifest) <= bundle_version(rt.manifest) or \
            new.manifest.feature_names != rt.manifest.feature_names:
        new.close()
        return rt
    say(f"resuming on bundle {active} (version {bundle_version(new.manifest)}), taken over "
        "the air before the restart")
    rt.close()
    return new
