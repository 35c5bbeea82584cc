"""scp (its SFTP mode and the legacy protocol, -O) against workbench's own sshd: the client contract, behind
the gate that confines each session to the served root (the legacy mode's remote `scp -t`/`scp -f` too)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.contract.suite import Counter, SshdClientContract
from tests.helpers import write_random
from workbench.protocols.base import ClientOptions, FileCopy
from workbench.protocols.scp import ScpClient, ScpLegacyClient
from workbench.shared.errors import AuthError, WorkbenchError

if TYPE_CHECKING:
    from tests.ssh_fixtures import Served


class TestScpContract(SshdClientContract):
    client_class = ScpClient
    small_set_files = 6  # a login per downloaded file


class TestScpLegacyContract(SshdClientContract):
    client_class = ScpLegacyClient
    small_set_files = 6  # a login per downloaded file


@pytest.mark.parametrize("client_class", [ScpClient, ScpLegacyClient])
def test_odd_names_survive_both_ways(client_class: type, sshd: Served, tmp_path: Path) -> None:
    # The legacy protocol hands paths to the server's shell (here: the gate's sh-like split), SFTP mode globs
    # its sources: both must take these literally.
    names = ["a b.bin", "star*.bin", "q'uote.bin", 'dq".bin', "d$ollar.bin", "semi;colon.bin", "br[ack]et.bin"]
    originals = {n: write_random(sshd.root / "files" / "odd" / n, 1000 + i) for i, n in enumerate(names)}
    (tmp_path / "down").mkdir()
    with client_class(sshd.target, ClientOptions(compress=True)) as client:
        client.download_many([FileCopy(tmp_path / "down" / n, f"files/odd/{n}", 1) for n in names], Counter())
        client.mkdir("incoming/odd dir")
        for name in names:
            client.upload(tmp_path / "down" / name, f"incoming/odd dir/{name}", Counter())
    for name, data in originals.items():
        assert (tmp_path / "down" / name).read_bytes() == data
        assert (sshd.root / "incoming" / "odd dir" / name).read_bytes() == data


@pytest.mark.parametrize("client_class", [ScpClient, ScpLegacyClient])
def test_cannot_leave_the_root(client_class: type, sshd: Served, tmp_path: Path) -> None:
    secret = write_random(sshd.root.parent / "secret.bin", 1000)
    write_random(tmp_path / "x.bin", 1000)
    with client_class(sshd.target) as client:
        for path in ("../secret.bin", str(sshd.root.parent / "secret.bin"), "/etc/shadow"):
            with pytest.raises(WorkbenchError):
                client.download(path, tmp_path / "leak.bin", Counter())
            leaked = tmp_path / "leak.bin"
            assert not leaked.exists() or leaked.read_bytes() != secret
        with pytest.raises(WorkbenchError):
            client.upload(tmp_path / "x.bin", "../escaped.bin", Counter())
    assert not (sshd.root.parent / "escaped.bin").exists()


def test_details_say_what_shapes_each_mode(sshd: Served) -> None:
    sftp_mode = ScpClient(sshd.target, ClientOptions(compress=True)).details()
    legacy = ScpLegacyClient(sshd.target).details()
    assert sftp_mode.request_bytes == 32768 and sftp_mode.requests_in_flight == 64 and sftp_mode.compress
    assert legacy.ssh_window_bytes == 2 * 1024 * 1024 and legacy.request_bytes is None and not legacy.compress
    assert sftp_mode.timed_includes_setup and legacy.timed_includes_setup


@pytest.mark.parametrize("client_class", [ScpClient, ScpLegacyClient])
def test_compression_is_asked_with_dash_c(client_class: type, sshd: Served) -> None:
    argv = client_class(sshd.target, ClientOptions(compress=True))._argv("src", "dst")
    assert "-C" in argv and ("-O" in argv) == (client_class is ScpLegacyClient)
    assert "-C" not in client_class(sshd.target)._argv("src", "dst")


def test_an_unknown_host_key_is_refused(sshd: Served, tmp_path: Path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    target = replace(sshd.target, credentials=replace(sshd.target.credentials, known_hosts=empty))
    for client_class in (ScpClient, ScpLegacyClient):
        with pytest.raises(AuthError):
            client_class(target).connect()


@pytest.mark.parametrize("client_class", [ScpClient, ScpLegacyClient])
def test_mkdir_leaves_existing_directories_as_they_were(client_class: type, sshd: Served) -> None:
    # scp -r in SFTP mode sets the mode of every directory it copies onto: a mkdir that copied a whole tree
    # onto incoming/ reset its mode, and with it the ACL mask that lets workbench's rsync daemon write there.
    existing = sshd.root / "incoming" / "kept"
    existing.mkdir(parents=True, exist_ok=True)
    existing.chmod(0o770)
    before = {p: p.stat().st_mode for p in (sshd.root / "incoming", existing)}
    with client_class(sshd.target) as client:
        client.mkdir("incoming/kept/new/deeper")
    assert (existing / "new" / "deeper").is_dir()
    assert {p: p.stat().st_mode for p in before} == before
