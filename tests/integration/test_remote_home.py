"""--remote-workbench '~/…' (run --via-ssh, fleet) names a path in the far login's home directory: the leading
`~/` is expanded by the far shell, the rest stays quoted (spaces, quotes, globs reach it as typed). Against
a real sshd on 127.0.0.1 whose login's home holds a link to this venv's workbench, in a folder whose name
would break an unquoted command line."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ssh_login import REMOTE_WORKBENCH, LoginHost
from tests.stock_urls import StockSite, workbench_argv
from workbench.core.ssh_session import Destination, remote_shell_command, ssh_argv


@pytest.fixture
def far_home_workbench() -> Iterator[str]:
    """`~/<folder>/workbench` as typed, the folder made in the far login's (this user's) home and removed after."""
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    name = f".wb test 'q' *{secrets.token_hex(4)}"
    folder = home / name
    folder.mkdir(mode=0o700)
    try:
        (folder / "workbench").symlink_to(REMOTE_WORKBENCH)
        yield f"~/{name}/workbench"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_far_shell_expands_only_the_leading_tilde(login_host: LoginHost, far_home_workbench: str) -> None:
    argv = [*ssh_argv(Destination.parse("farbox"), False), remote_shell_command([far_home_workbench, "--help"])]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and "Usage: workbench" in done.stdout, done.stderr
    # a '~' inside a word, or '~user', is the name it is: never expanded
    argv[-1] = remote_shell_command(["printf", "%s\\n", "a~/b", "~nobody/x", "$HOME", "*"])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.stdout.splitlines() == ["a~/b", "~nobody/x", "$HOME", "*"], done.stderr


def test_run_via_ssh_with_a_home_relative_workbench(
    login_host: LoginHost, far_home_workbench: str, tmp_path: Path
) -> None:
    from tests.integration.test_via_ssh import PLAN, _start

    doc_path = tmp_path / "run.json"
    remote = shlex.quote(far_home_workbench)  # --remote-workbench is split into words as a shell would
    proc = _start(tmp_path, "--via-ssh", "farbox", "--remote-workbench", remote, "--json", str(doc_path), *PLAN)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, out + err
    doc = json.loads(doc_path.read_text())
    assert doc["results"] and all(r["verified"] for r in doc["results"]), doc["results"]


def test_fleet_with_a_home_relative_workbench(
    site: StockSite, login_host: LoginHost, far_home_workbench: str, tmp_path: Path
) -> None:
    site.start("webdav")
    hosts = tmp_path / "hosts"
    hosts.write_text("farbox\n")
    argv = workbench_argv("fleet", "--clients", str(hosts), site.url("webdav"))
    argv += ["--remote-workbench", shlex.quote(far_home_workbench), "--json", str(tmp_path / "fleet.json")]
    argv += ["--protocols", "http/aiohttp", "--sizes", "1M", "--repeat", "1", "--warmup", "0", "--tcp-duration", "1"]
    env = site.env(WORKBENCH_SSH_CONFIG=str(login_host.ssh_config))
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((tmp_path / "fleet.json").read_text())["results"]
    assert any(r["client_host"] == "farbox" and r["verified"] for r in rows), rows
