"""A URL whose user or host starts with '-' is refused at parsing, in one line with exit 2, before any client
runs: sftp, scp, rsync and sshfs put `user@host` among their arguments, where older OpenSSH reads '-oX' as an
option (a ProxyCommand runs whatever it names)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workbench.shared.errors import ExitCode, UsageError
from workbench.shared.urls import parse


@pytest.mark.parametrize(
    "url",
    [
        "sftp://-oProxyCommand=touch%20MARK@127.0.0.1:1/",
        "ssh://-oProxyCommand=x@127.0.0.1:1/",
        "rsync://-x@127.0.0.1:1/module",
        "smb://-U@127.0.0.1:1/share",
        "sftp://-oProxyCommand=x:1/",
        "ftp://%2Dbad@127.0.0.1:1/",
    ],
)
def test_refused_in_one_line_with_exit_2(url: str, tmp_path: Path) -> None:
    mark = tmp_path / "MARK"
    proc = subprocess.run(
        [sys.executable, "-m", "workbench", "run", url.replace("MARK", str(mark).replace("/", "%2F"))],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "WORKBENCH_HOME": str(tmp_path / "wb")},
    )
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "may not start with '-'" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and not mark.exists()


def test_a_dash_inside_a_name_is_fine() -> None:
    url = parse("sftp://al-ice@nas-1.local/")
    assert (url.user, url.host) == ("al-ice", "nas-1.local")
    with pytest.raises(UsageError, match="user may not start"):
        parse("sftp://-al@nas-1.local/")
