"""Confinement of the legacy scp protocol (`scp -O`: a remote `scp -t` or `scp -f`) behind workbench's sshd gate.

Same threat model and checks as tests/integration/test_confine_ssh_rsync_smb.py: an authenticated, hostile
client; a canary directory beside the root on the same file system; after each attack the canary hashes
the same, nothing appears next to the root, the server's state is unchanged and the root holds no special,
setuid/setgid or capability file and no symlink. Attacks come through the real `scp -O` and as raw protocol
records written straight into `ssh HOST 'scp -t DIR'`, and as remote commands the gate must refuse.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.integration.test_confine_ssh_rsync_smb import SECRET, Far, _make_far, assert_no_secret_inside, planted_links
from workbench.protocols.base import ClientOptions
from workbench.protocols.openssh_sftp import ssh_login, ssh_options
from workbench.server.daemons.sshd import Sshd
from workbench.server.daemons.sshgate import scp_argv


@pytest.fixture(scope="module")
def scp_far(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Far]:
    far = _make_far(tmp_path_factory.mktemp("scp"), "ssh", Sshd)
    try:
        server = far.server
        assert isinstance(server, Sshd)
        creds = replace(far.target.credentials, ssh_key=server.client_key_path, known_hosts=server.known_hosts_path)
        far.target = replace(far.target, credentials=creds)
        far.watched_state = [server.gate_path, server.config_path, server.dir / "authorized_keys"]
        yield far
    finally:
        far.server.stop()


def _scp(far: Far, *args: str) -> subprocess.CompletedProcess[str]:
    """`scp -O` with R:PATH meaning PATH on the server (relative to the root unless absolute)."""
    login = ssh_login(far.target)
    argv = ["scp", "-O", "-P", str(far.target.ports["ssh"]), *ssh_options(far.target, ClientOptions())]
    argv += [f"{login}:{a[2:]}" if a.startswith("R:") else a for a in args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def _raw(far: Far, command: str, records: bytes) -> subprocess.CompletedProcess[bytes]:
    """Run `command` on the server through ssh and write scp protocol records to it, as a hostile client can."""
    argv = ["ssh", "-p", str(far.target.ports["ssh"]), *ssh_options(far.target, ClientOptions())]
    return subprocess.run([*argv, ssh_login(far.target), command], input=records, capture_output=True, timeout=60)


def _scp_attacks(far: Far, local: Path) -> dict[str, tuple[str, ...]]:
    canary, state = far.canary, far.server.dir
    etc_probe = f"/etc/workbench-confine-{secrets.token_hex(4)}"
    return {
        "download ../ (read outside)": ("R:../canary/secret.txt", str(local)),
        "download absolute canary path": (f"R:{canary}/secret.txt", str(local)),
        "download /etc/shadow": ("R:/etc/shadow", str(local)),
        "download the server's private host key": (f"R:{state}/host_ed25519", str(local)),
        "download -r the canary directory": ("-r", "R:../canary", str(local.parent / "tree")),
        "download a planted symlink to the canary": ("R:incoming/planted", str(local)),
        "download through a planted directory symlink": ("R:incoming/planted_dir/secret.txt", str(local)),
        "upload to ../ (write outside)": (str(local), "R:../canary/new.txt"),
        "upload to absolute canary path": (str(local), f"R:{canary}/new.txt"),
        "upload to /etc/<new file>": (str(local), f"R:{etc_probe}"),
        "upload over the server's authorized_keys": (str(local), f"R:{state}/authorized_keys"),
        "upload over the gate's config": (str(local), f"R:{state}/gate.json"),
        "upload through a planted symlink to the canary": (str(local), "R:incoming/planted"),
        "upload through a planted directory symlink": (str(local), "R:incoming/planted_dir/new.txt"),
    }


def test_scp_legacy_attacks_all_fail_and_leave_the_canary(scp_far: Far, tmp_path: Path) -> None:
    local = tmp_path / "local.bin"
    attacks = _scp_attacks(scp_far, local)
    for name, args in attacks.items():
        local.write_bytes(b"attacker data\n")
        scp_far.snapshot()
        with planted_links(scp_far.root):
            done = _scp(scp_far, *args)
        assert done.returncode != 0, f"{name}: scp -O {args} succeeded"
        assert local.read_bytes() != SECRET, f"{name}: the canary was read"
        assert not (tmp_path / "tree").exists() or not any((tmp_path / "tree").rglob("secret.txt")), name
        scp_far.check()
        probe = args[-1][2:]
        if probe.startswith("/etc/workbench-confine-"):
            assert not os.path.lexists(probe)


def _record(mode: str, name: str, data: bytes) -> bytes:
    return f"C{mode} {len(data)} {name}\n".encode() + data + b"\0"


@pytest.mark.parametrize(
    ("name", "command", "records"),
    [
        ("a setuid/setgid file", "scp -t incoming", _record("6755", "suid.bin", b"#!/bin/sh\n")),
        ("a setuid file, -p", "scp -p -t incoming", b"T0 0 0 0\n" + _record("4755", "suid-p.bin", b"#!/bin/sh\n")),
        ("a name with ../", "scp -t incoming", _record("0644", "../escaped.txt", b"x\n")),
        ("a directory named ..", "scp -r -t incoming", b"D0755 0 ..\n" + _record("0644", "escaped.txt", b"x\n")),
        ("a setgid directory", "scp -r -t incoming", b"D2755 0 sgid\n" + _record("0644", "a.txt", b"x\n") + b"E\n"),
        ("into the canary by an absolute target", "scp -t {canary}", _record("0644", "x.txt", b"x\n")),
        ("over the canary's file", "scp -t {canary}/secret.txt", _record("0644", "secret.txt", b"x\n")),
        ("read the canary", "scp -f {canary}/secret.txt", b"\0\0\0"),
    ],
)
def test_raw_scp_records_cannot_escape_or_make_setid_files(
    scp_far: Far, name: str, command: str, records: bytes
) -> None:
    scp_far.snapshot()
    done = _raw(scp_far, command.format(canary=scp_far.canary), records)  # refused, or stored harmlessly
    assert SECRET not in done.stdout, f"{name}: the canary was sent"
    scp_far.check()
    assert_no_secret_inside(scp_far.root)
    for leftover in ("suid.bin", "suid-p.bin", "sgid"):
        path = scp_far.root / "incoming" / leftover
        if path.is_dir():
            for child in path.iterdir():
                child.unlink()
            path.rmdir()
        else:
            path.unlink(missing_ok=True)


@pytest.mark.parametrize(
    "command",
    [
        "scp -t incoming; touch /tmp/wb-gate-injected",
        "scp -t $(touch /tmp/wb-gate-injected)",
        "scp -t `touch /tmp/wb-gate-injected`",
        "scp -S /bin/sh -t incoming",
        "scp -o ProxyCommand=touch\\ /tmp/wb-gate-injected localhost:x incoming",
        "scp -t -f incoming",
        "scp -t incoming other",
        "scp incoming",
        "scp -3 -t incoming",
        "scp -t 'unterminated",
    ],
)
def test_the_gate_refuses_every_other_scp_command(scp_far: Far, command: str) -> None:
    done = _raw(scp_far, command, b"")
    assert done.returncode != 0
    assert b"workbench: scp: only" in done.stderr or b"command refused" in done.stderr, done.stderr
    assert not os.path.lexists("/tmp/wb-gate-injected")


def test_scp_argv_takes_exactly_one_mode_a_few_flags_and_one_path() -> None:
    assert scp_argv("scp -t incoming") == ["-t", "--", "incoming"]
    assert scp_argv("scp -r -p -d -t -- 'a b/c'") == ["-r", "-p", "-d", "-t", "--", "a b/c"]
    assert scp_argv("scp -f files/x\\ y\\*z") == ["-f", "--", "files/x y*z"]
    for refused in ("scp -t", "scp -t -t x", "scp -r x", "scp -t x y", "scp -q -t x", "ssh -t x", "scp -t ''"):
        assert scp_argv(refused) is None, refused


def test_scp_legacy_still_works_inside_the_root(scp_far: Far, tmp_path: Path) -> None:
    """The attacks above fail for the right reason: the same kind of copies inside the root succeed."""
    local = tmp_path / "ok.bin"
    local.write_bytes(b"fine\n")
    done = _scp(scp_far, str(local), "R:incoming/ok.bin")
    assert done.returncode == 0, done.stderr
    done = _scp(scp_far, "R:files/a.txt", str(tmp_path / "a.txt"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "a.txt").read_bytes() == b"served file\n"
    assert (scp_far.root / "incoming" / "ok.bin").read_bytes() == b"fine\n"
    (scp_far.root / "incoming" / "ok.bin").unlink()
