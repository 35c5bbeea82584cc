"""The far side of `run --via-ssh` is another host: its hello is a typed message, its lines and its stderr are read
in bounded memory and time, and whatever it sends is one line at worst, never an internal error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from workbench.core.fleet_lines import STDERR_KEEP_BYTES
from workbench.core.ssh_session import Lines, drain_stderr
from workbench.shared.errors import WorkbenchError
from workbench.shared.servers_hello import PROTOCOL, ServersHello, read_hello
from workbench.shared.target import target_from_hello

HELLO: dict[str, Any] = {
    "protocol": PROTOCOL,
    "state_dir": "/home/u/.local/state/workbench/servers",
    "ports": {"http": 8080, "ftp": 2121, "ssh": 2222},
    "remote_root": "/srv/wb",
    "share": "workbench",
    "credentials": {"user": "wb", "password": "secret"},
    "ssh_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nxyz\n-----END OPENSSH PRIVATE KEY-----\n",
    "host_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ"],
}


def _line(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


def test_a_hello_reads_back_as_the_target_reaching_the_servers(tmp_path: Path) -> None:
    hello = read_hello(_line(HELLO))
    assert isinstance(hello, ServersHello) and hello.state_dir == HELLO["state_dir"]
    target = target_from_hello(hello, "10.0.0.5", tmp_path)
    assert target.ports["ftp"] == 2121 and target.remote_root == "/srv/wb" and target.credentials.user == "wb"
    assert (tmp_path / "known_hosts").read_text() == "[10.0.0.5]:2222 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ\n"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"host_keys": ["ssh-ed25519 AAAA\n* ssh-rsa EVIL"]}, "host_keys.0"),
        ({"host_keys": ["ssh-ed25519 AAAA\r"]}, "host_keys.0"),
        ({"credentials": None}, "credentials"),
        ({"credentials": {"user": "wb"}}, "credentials.password"),
        ({"ports": {"ssh": "x"}}, "ports.ssh"),
        ({"ports": {"ssh": 70000}}, "ports.ssh"),
        ({"ports": ["ssh"]}, "ports"),
        ({"remote_root": "/srv\n/x"}, "remote_root"),
        ({"share": 5}, "share"),
    ],
)
def test_a_malformed_hello_is_one_line(tmp_path: Path, change: dict[str, Any], why: str) -> None:
    doc = {**HELLO, **change}
    for attempt in (lambda: read_hello(_line(doc)), lambda: target_from_hello(doc, "10.0.0.5", tmp_path)):
        with pytest.raises(WorkbenchError) as caught:
            attempt()
        said = caught.value.one_line()
        assert why in said and "\n" not in said, said
    assert not (tmp_path / "known_hosts").exists()


@pytest.mark.parametrize(
    "line",
    [
        b"Welcome to farbox, last login yesterday",
        b'{"protocol": "something-else/1"}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"protocol": "workbench-via-ssh/1", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b"\xff\xfe{",
        b"{" + b" " * (2 * 1024 * 1024) + b"}",
    ],
)
def test_a_line_that_is_no_hello_is_passed_over(line: bytes) -> None:
    assert read_hello(line) is None


def _pipe_with(data: bytes) -> int:
    read, write = os.pipe()
    os.set_blocking(write, True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover -- the writer
        os.close(read)
        os.write(write, data)
        os._exit(0)
    os.close(write)
    return read


def test_lines_from_the_far_side_are_bounded() -> None:
    fd = _pipe_with(b"x" * 3_000_000 + b"\nshort\n")
    try:
        lines = Lines(fd, limit_bytes=1000)
        deadline = time.monotonic() + 30
        assert lines.read(deadline) == b""  # the long line, dropped
        assert lines.read(deadline) == b"short"
        assert lines.read(deadline) is None and lines.closed
    finally:
        os.close(fd)
        os.wait()


def test_the_end_of_stderr_is_kept_not_all_of_it() -> None:
    script = "import sys; sys.stderr.write('x' * 10_000_000); sys.stderr.write('its last words')"
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)
    try:
        said = drain_stderr(proc, within_s=30)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        assert proc.stderr is not None
        proc.stderr.close()
    assert said.endswith("its last words") and len(said) <= STDERR_KEEP_BYTES
