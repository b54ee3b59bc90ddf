"""Issue 15 item 15: signed bundles. Hashes prove integrity; only a trusted signature proves
who made the bundle. The attack: replace hpc.onnx, recompute hashes and id -> refused."""

from __future__ import annotations

import base64
import io
import json
import stat
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from adaptedge.cli.main import main
from adaptedge.cloud.service.inference import HpcInference
from adaptedge.edge import EdgeRuntime
from adaptedge.protocol import BundleError, Manifest, verify
from adaptedge.protocol.bundle_digest import (
    MANIFEST_NAME,
    SIGNATURE_NAME,
    manifest_digest,
    sha256_file,
)
from adaptedge.protocol.bundle_signing import sign_bundle
from adaptedge.protocol.signing import write_keypair
from tests.support.toy_bundle import build_toy_bundle


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, as users run it (once per command here)."""
    return subprocess.run([sys.executable, "-m", "adaptedge.cli.main", *args],
                          capture_output=True, text=True, timeout=60)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command run in this process, its status and output as ``_run`` gives them: these
    tests are about what it answers, not about the process boundary."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            status = exc.code if isinstance(exc.code, int) else 2
    return subprocess.CompletedProcess(["adaptedge", *args], status, out.getvalue(),
                                       err.getvalue())


def _one_line(out: subprocess.CompletedProcess[str], text: str) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], out.stderr[-800:]


def _swap_hpc(bundle: Path, other: Path) -> None:
    """The attacker: another model as hpc.onnx, hashes and bundle id recomputed."""
    (bundle / "hpc.onnx").write_bytes((other / "hpc.onnx").read_bytes())
    raw = json.loads((bundle / MANIFEST_NAME).read_text())
    raw["files"]["hpc.onnx"] = sha256_file(bundle / "hpc.onnx")
    raw["bundle_id"] = manifest_digest(raw)
    (bundle / MANIFEST_NAME).write_text(json.dumps(raw))


@pytest.fixture()
def keys(tmp_path: Path) -> tuple[Path, Path]:
    out = _cli("keys", "new", "--out", str(tmp_path / "keys"))
    assert out.returncode == 0, out.stderr
    return tmp_path / "keys" / "signing.key", tmp_path / "keys" / "signing.pub"


def test_keys_new_writes_a_private_key_only_its_owner_reads(keys: tuple[Path, Path]) -> None:
    private, public = keys
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in private.read_bytes() and b"PUBLIC KEY" in public.read_bytes()
    again = _run("keys", "new", "--out", str(private.parent))
    _one_line(again, "never overwritten")
    assert b"PRIVATE KEY" in private.read_bytes()


def test_keys_new_does_not_follow_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "signing.key").symlink_to(victim)
    with pytest.raises(BundleError, match="never overwritten"):
        write_keypair(tmp_path / "keys")
    assert victim.read_text() == "precious"


@pytest.mark.slow
def test_sign_then_trust(toy_bundle: tuple[Path, Manifest], keys: tuple[Path, Path]) -> None:
    path, written = toy_bundle
    private, public = keys
    out = _run("sign", str(path), "--key", str(private))
    assert out.returncode == 0, out.stderr
    assert (path / SIGNATURE_NAME).is_file()
    assert verify(path) == written  # the id is unchanged: the signature is outside the hashes
    shown = _run("inspect", str(path), "--trust", str(public))
    assert shown.returncode == 0, shown.stderr
    assert "(trusted)" in shown.stdout and written.bundle_id in shown.stdout
    with EdgeRuntime.load(path, trust=[public]) as rt:
        assert rt.manifest.bundle_id == written.bundle_id
    assert HpcInference.load(path, trust=[str(public)]).manifest == written


def test_the_replaced_hpc_attack_is_refused(toy_bundle: tuple[Path, Manifest],
                                            keys: tuple[Path, Path], tmp_path: Path) -> None:
    path, _ = toy_bundle
    private, public = keys
    sign_bundle(path, private)
    other = tmp_path / "other"
    build_toy_bundle(other, seed=7)
    _swap_hpc(path, other)
    (path / SIGNATURE_NAME).unlink()  # the attacker drops the signature that no longer fits
    verify(path)  # every hash matches: integrity alone does not catch it
    _one_line(_cli("inspect", str(path), "--trust", str(public)), "is not signed")
    with pytest.raises(BundleError, match="is not signed"):
        EdgeRuntime.load(path, trust=[public])
    with pytest.raises(BundleError, match="is not signed"):
        HpcInference.load(path, trust=[str(public)])


def test_a_stale_or_foreign_signature_is_refused(toy_bundle: tuple[Path, Manifest],
                                                 keys: tuple[Path, Path], tmp_path: Path) -> None:
    path, _ = toy_bundle
    private, public = keys
    sign_bundle(path, private)
    other = tmp_path / "other"
    build_toy_bundle(other, seed=7)
    _swap_hpc(path, other)  # keeps the old signature.json
    _one_line(_cli("inspect", str(path)), "manifest changed after signing")
    mallory = write_keypair(tmp_path / "mallory")
    sign_bundle(path, mallory[0])  # re-signed by the attacker's own key
    assert _cli("inspect", str(path)).returncode == 0  # valid, but by whom?
    _one_line(_cli("inspect", str(path), "--trust", str(public)), "which is not trusted")
    assert _cli("inspect", str(path), "--trust", str(public),
                "--trust", str(mallory[1])).returncode == 0


def test_a_forged_signature_does_not_verify(toy_bundle: tuple[Path, Manifest],
                                            keys: tuple[Path, Path]) -> None:
    path, _ = toy_bundle
    sign_bundle(path, keys[0])
    doc = json.loads((path / SIGNATURE_NAME).read_text())
    forged = bytearray(base64.b64decode(doc["signature"]))
    forged[0] ^= 1
    doc["signature"] = base64.b64encode(bytes(forged)).decode()
    (path / SIGNATURE_NAME).write_text(json.dumps(doc))
    with pytest.raises(BundleError, match="does not verify"):
        verify(path, trust=[keys[1]])


def test_edge_run_and_cloud_serve_refuse_an_unsigned_bundle(toy_bundle: tuple[Path, Manifest],
                                                             keys: tuple[Path, Path]) -> None:
    path, _ = toy_bundle
    public = str(keys[1])
    _one_line(_cli("cloud", "serve", "--bundle", str(path), "--broker", "mqtt://127.0.0.1:9",
                   "--trust", public), "is not signed")
    _one_line(_cli("edge", "run", "--bundle", str(path), "--replay", "wall-robot",
                   "--trust", public), "is not signed")


def test_an_empty_password_file_is_one_line(toy_bundle: tuple[Path, Manifest],
                                            tmp_path: Path) -> None:
    empty = tmp_path / "pw"
    empty.write_text("")
    out = _cli("edge", "run", "--bundle", str(toy_bundle[0]), "--replay", "wall-robot",
               "--broker", "mqtt://127.0.0.1:9", "--username", "u", "--password-file", str(empty))
    _one_line(out, "is empty")
