"""SFTP scratch removal against a server that refuses some entries or answers in bytes that are no UTF-8.

paramiko's own SFTP server (tests/hostile_sftp.py) refuses the removal of some files with "permission denied":
the removal goes on with every other entry and says what stayed in one line, as FTP and SMB do. Its realpath
answers a path that is no UTF-8 (paramiko cannot decode it): the check of the scratch directory and its removal
say so in one line, never an internal error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest
from paramiko.sftp import SFTP_PERMISSION_DENIED

from tests.contract.test_scratch_links import far_host, one_line
from tests.helpers import write_random
from tests.hostile_sftp import HostileSftp, SftpCase, _Root
from tests.stock_urls import StockSite
from workbench.core import stock
from workbench.shared.errors import WorkbenchError

ALIAS = "refusing-sftp"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StockSite, HostileSftp]]:
    base = tmp_path_factory.mktemp("refusing-sftp")
    site = StockSite(base)
    site._write_client_side()
    hostile = HostileSftp(base / "sftp", site.credentials.user)
    known_hosts = site.home / "known_hosts"
    known_hosts.write_text(hostile.known_hosts())
    (site.home / "ssh_config").write_text(hostile.ssh_config(ALIAS, known_hosts))
    hostile.start()
    try:
        yield site, hostile
    finally:
        hostile.stop()


@pytest.fixture
def far(
    server: tuple[StockSite, HostileSftp], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[stock.StockFarHost, Path]]:
    site, hostile = server
    for key, value in site.env().items():
        monkeypatch.setenv(key, value)
    share = hostile.root / tmp_path.name
    share.mkdir()
    made = far_host(f"sftp://{ALIAS}/{share.name}", tmp_path)
    made.info()
    try:
        yield made, share / made.scratch
    finally:
        hostile.set_case()
        made.close()


def test_a_refused_entry_is_noted_and_the_others_are_removed(
    far: tuple[stock.StockFarHost, Path], server: tuple[StockSite, HostileSftp]
) -> None:
    host, scratch = far
    for n in range(10):  # refused and removable ones, in whatever order the server lists them
        write_random(scratch / "files" / f"deny-{n}.bin", 10)
        write_random(scratch / "files" / f"keep-{n}.bin", 10)
        write_random(scratch / "incoming" / f"run-{n}" / "up.bin", 10)
    server[1].set_case(SftpCase(commands=("remove",), match="/deny-", code=SFTP_PERMISSION_DENIED, message="no"))
    with pytest.raises(WorkbenchError) as refused:
        host._utility(lambda c: c.remove_tree(host.scratch))
    said = one_line(refused.value)
    assert "deny-" in said and "(and 9 more)" in said, said
    assert sorted(p.name for p in (scratch / "files").iterdir()) == [f"deny-{n}.bin" for n in range(10)]
    assert not (scratch / "incoming").exists()  # every other entry went


def test_a_realpath_that_is_no_utf8_is_one_line(
    far: tuple[stock.StockFarHost, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    host, scratch = far
    real = _Root.canonicalize

    def canonicalize(self: paramiko.SFTPServerInterface, path: str) -> str | bytes:
        said = real(self, path)
        return b"/\xff" + said.encode() if scratch.parent.name in path else said

    monkeypatch.setattr(_Root, "canonicalize", canonicalize)
    for action in (lambda c: c.check_real_dir(host.scratch), lambda c: c.remove_tree(host.scratch)):
        with pytest.raises(WorkbenchError) as failed:
            host._utility(action)
        said = one_line(failed.value)
        assert "UnicodeDecodeError" in said and host.scratch in said, said
    assert scratch.is_dir()  # nothing removed on a path it could not read
