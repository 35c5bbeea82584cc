"""Servers for one run, started over SSH: `run --via-ssh [user@]host` starts the far host's servers, runs, and
brings them down again.

Why one long-lived SSH session instead of `servers up` and `servers down`: the far side runs the hidden
`workbench servers over-ssh` (workbench.server.over_ssh), which starts the servers in a fresh private temp directory,
prints where they listen and how to log in as one JSON line on stdout, then waits on stdin. When stdin ends (the
local side finished, failed, was Ctrl-C'd, SIGTERM'd or even SIGKILLed, or the network dropped: sshd closes the
session's pipes either way) it stops every server and removes the temp directory. Cleanup therefore never
depends on the local process still being alive. On a clean end the local side (far_servers) also says "down"
and waits (bounded) for the far side's acknowledgement, so the servers are gone when the run returns.

The credentials travel only on that channel (the far side's stdout): never argv, never a file the user copies.
Here they stay in memory, except the SSH client key and the host key the far sshd uses, which the OpenSSH
clients (sftp, scp, rsync) can only take from files: they go to a private 0700 temp directory removed at exit.

The far servers bind to the address the SSH connection arrived at on the far host (SSH_CONNECTION), and this
side reaches them at the SSH host's HostName as `ssh -G` resolves it, on the ports the far side reports. The
ssh session itself is workbench.core.ssh_session's.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from workbench.core.ssh_session import (
    Destination,
    Lines,
    drain_stderr,
    end_ssh,
    remote_shell_command,
    ssh_argv,
    ssh_failure,
)
from workbench.protocols.mounts.stale import owned_prefix
from workbench.shared import signals, sshconfig
from workbench.shared.errors import NetworkError, NotFoundError, UsageError
from workbench.shared.servers_hello import ServersHello, read_hello
from workbench.shared.target import Target, target_from_hello, url_host

UP_TIMEOUT_S = 120.0  # ssh login plus every server listening (smbd and sshd generate keys on a first start)
DOWN_TIMEOUT_S = 30.0


@contextlib.contextmanager
def far_servers(
    text: str,
    remote_workbench: str = "workbench",
    insecure_host_keys: bool = False,
    say: Callable[[str], Any] | None = None,
) -> Iterator[Target]:
    """Log in to `text` ([user@]host), start the far servers, yield the Target reaching them; always bring them
    down on the way out (return, exception, Ctrl-C, SIGTERM)."""
    dest = Destination.parse(text)
    host = sshconfig.resolve(dest.alias, user=dest.user).hostname
    try:
        words = shlex.split(remote_workbench)  # e.g. "python3 -m workbench"
    except ValueError as exc:
        raise UsageError(f"--remote-workbench {remote_workbench!r}: {exc}", "e.g. /opt/wb/bin/workbench") from None
    remote = remote_shell_command([*words, "servers", "over-ssh"])
    argv = [*ssh_argv(dest, insecure_host_keys), remote]
    # Its own session: a Ctrl-C at the terminal reaches this process only, which then ends the session in order.
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
    except OSError as exc:
        raise NotFoundError(f"cannot run ssh: {exc}", "apt-get install openssh-client") from exc
    assert proc.stdout is not None and proc.stdin is not None
    lines = Lines(proc.stdout.fileno())
    keys_dir: Path | None = None
    try:
        keys_dir = make_keys_dir()
        deadline = time.monotonic() + UP_TIMEOUT_S
        hello: ServersHello | None = None
        while hello is None:
            line = lines.read(deadline)
            if line is None:
                break
            hello = read_hello(line)  # None for a line that is no hello (a login script's chatter)
        if hello is None:
            if proc.poll() is None and not lines.closed:
                raise NetworkError(
                    f"the servers on {dest.alias} did not come up within {UP_TIMEOUT_S:.0f} s",
                    f"try 'ssh {dest.alias} workbench servers up --root DIR' by hand",
                )
            try:
                code = proc.wait(timeout=DOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired as exc:
                raise NetworkError(
                    f"ssh to {dest.alias} stopped answering before the far servers were up",
                    f"check that 'ssh {dest.alias} true' works",
                ) from exc
            raise ssh_failure(dest, code, drain_stderr(proc), remote_workbench)
        if say is not None:
            say(f"far servers up on {dest.alias} ({url_host(host)}), state {hello.state_dir or '?'}")
        yield target_from_hello(hello, host, keys_dir)
    finally:
        _bring_down(proc, lines, keys_dir)


def make_keys_dir() -> Path:
    """A private (mkdtemp: 0700) directory for the SSH client key and the far host key. Its owned name lets the
    next run's sweep of stale temporary files remove one that a run killed outright (SIGKILL) left behind."""
    return Path(tempfile.mkdtemp(prefix=owned_prefix("via-ssh")))


def _bring_down(proc: subprocess.Popen[bytes], lines: Lines, keys_dir: Path | None) -> None:
    """Say "down", wait (bounded) for the far side's acknowledgement, end ssh, and remove the key directory.

    Raises only a Ctrl-C, SIGTERM or SIGHUP that arrived meanwhile (signals.held delivers it at the end), and only
    once the key directory is gone."""
    with signals.held():
        try:
            _end_far_side(proc, lines)
        finally:
            if keys_dir is not None:
                shutil.rmtree(keys_dir, ignore_errors=True)


def _end_far_side(proc: subprocess.Popen[bytes], lines: Lines) -> None:
    """Say "down", wait (bounded) for the far side's acknowledgement, then end ssh."""
    with contextlib.suppress(OSError, ValueError):
        assert proc.stdin is not None
        proc.stdin.write(b"down\n")
        proc.stdin.close()
    deadline = time.monotonic() + DOWN_TIMEOUT_S
    while proc.poll() is None:
        line = lines.read(deadline)
        if line is None and (lines.closed or time.monotonic() >= deadline):
            break
    end_ssh(proc, max(0.1, deadline - time.monotonic()))
