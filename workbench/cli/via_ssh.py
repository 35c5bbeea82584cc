"""`workbench run --via-ssh [user@]host`: start the far host's servers over SSH, run, and bring them down again.

Why the system `ssh` and not paramiko: the user already reaches the far host with OpenSSH, so its
~/.ssh/config (or $WORKBENCH_SSH_CONFIG, passed as -F, as every other OpenSSH program here gets it), the agent,
identity files and known_hosts apply unchanged. `BatchMode=yes` means it never prompts; host keys are checked
as the user configured, so an unknown key fails (ssh's default "ask" cannot ask in batch mode) and is turned
into one line telling the user how to verify it. --insecure-host-keys maps to the same options the project's
own OpenSSH clients use (StrictHostKeyChecking=no, UserKnownHostsFile=/dev/null).

Why one long-lived SSH session instead of `servers up` and `servers down`: the far side runs the hidden
`workbench servers over-ssh`, which starts the servers in a fresh private temp directory, prints where they
listen and how to log in as one JSON line on stdout, then waits on stdin. When stdin ends (the local side
finished, failed, was Ctrl-C'd, SIGTERM'd or even SIGKILLed, or the network dropped: sshd closes the session's
pipes either way) it stops every server and removes the temp directory. Cleanup therefore never depends on the
local process still being alive. On a clean end the local side also says "down" and waits (bounded) for the
far side's acknowledgement, so the servers are gone when `run` returns.

The credentials travel only on that channel (the far side's stdout): never argv, never a file the user copies.
Here they stay in memory, except the SSH client key and the host key the far sshd uses, which the OpenSSH
clients (sftp, scp, rsync) can only take from files: they go to a private 0700 temp directory removed at exit.

The far servers bind to the address the SSH connection arrived at on the far host (SSH_CONNECTION), and this
side reaches them at the SSH host's HostName as `ssh -G` resolves it, on the ports the far side reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.shared import sshconfig
from workbench.shared.errors import (
    AuthError,
    ExitCode,
    NetworkError,
    NotFoundError,
    UsageError,
    WorkbenchError,
)
from workbench.shared.target import DEFAULT_PORTS, Target, target_from_hello, url_host

if TYPE_CHECKING:
    from workbench.core.results import Run
    from workbench.core.settings import Settings

INSTALL_HINT = "pip install filecopy-workbench"
PROTOCOL = "workbench-via-ssh/1"
CONNECT_TIMEOUT_S = 10
UP_TIMEOUT_S = 120.0  # ssh login plus every server listening (smbd and sshd generate keys on a first start)
DOWN_TIMEOUT_S = 30.0
_NOT_FOUND_CODES = (126, 127)  # the far shell: found but not executable / not found


@dataclass(frozen=True)
class Destination:
    """`[user@]host` as given to --via-ssh."""

    alias: str
    user: str | None = None

    @classmethod
    def parse(cls, text: str) -> Destination:
        user, at, host = text.rpartition("@")
        if not host or (at and not user) or host.startswith("-") or any(c.isspace() for c in text):
            raise UsageError(
                f"--via-ssh {text!r} is not [user@]host", "e.g. --via-ssh alice@nas or a ~/.ssh/config alias"
            )
        return cls(host, user or None)


def ssh_argv(dest: Destination, insecure_host_keys: bool) -> list[str]:
    """The ssh command line up to (not including) the remote command; no secrets."""
    ssh = shutil.which("ssh")
    if ssh is None:
        raise NotFoundError("ssh is not installed here, so --via-ssh cannot log in", "apt-get install openssh-client")
    argv = [ssh, *sshconfig.config_args(), "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}"]
    argv += ["-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3"]
    if insecure_host_keys:
        argv += ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]
    if dest.user:
        argv += ["-l", dest.user]
    return [*argv, "--", dest.alias]


def _ssh_failure(dest: Destination, code: int, stderr: str, remote_workbench: str) -> WorkbenchError:
    """One line for an SSH session that ended before the far servers were up."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    last = lines[-1] if lines else f"exit status {code}"
    if code == 255 and "Host key verification failed" in stderr:  # unknown (batch mode cannot ask) or changed
        return AuthError(
            f"the SSH host key of {dest.alias} is not known or has changed",
            f"connect once with 'ssh {dest.alias}' to verify and accept it, or pass --insecure-host-keys",
        )
    if code in _NOT_FOUND_CODES:
        return NotFoundError(
            f"workbench is not installed on {dest.alias} ({remote_workbench!r} not found there)",
            f"install it there with '{INSTALL_HINT}', or give its path with --remote-workbench",
        )
    if code == 255:
        if "Permission denied" in stderr:
            return AuthError(f"ssh login to {dest.alias} refused: {last}", "check the key, the agent or ~/.ssh/config")
        return NetworkError(f"ssh to {dest.alias} failed: {last}", f"check that 'ssh {dest.alias} true' works")
    # the far workbench said why in one line ("error: ...") and exited with its own code
    error = WorkbenchError(f"on {dest.alias}: {last.removeprefix('error: ')}")
    with contextlib.suppress(ValueError):
        error.exit_code = ExitCode(code)
    return error


class _Lines:
    """Lines from a pipe with a deadline (a far side that hangs must not hang this side)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def read(self, deadline: float) -> str | None:
        """The next line, or None at end of file or once the deadline passed."""
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if self.closed or left <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                self.closed = True
                if self.buffer:
                    break
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode(errors="replace")


def _drain(proc: subprocess.Popen[bytes]) -> str:
    """stderr of an ended ssh (bounded: it has ended, so this does not block long)."""
    assert proc.stderr is not None
    with contextlib.suppress(OSError, ValueError):
        return proc.stderr.read().decode(errors="replace")
    return ""


def remote_shell_command(words: Sequence[str]) -> str:
    """`words` as one command line for the far host's shell, each word quoted as it is, except that a leading
    `~` or `~/` is the far home directory: "$HOME" (expanded there, never split or globbed) before the quoted
    rest. Quoted whole, `~/venv/bin/workbench` would name a folder called `~` in the login directory."""
    parts = []
    for word in words:
        if word == "~" or word.startswith("~/"):
            rest = word[1:]
            parts.append('"$HOME"' + (shlex.quote(rest) if rest else ""))
        else:
            parts.append(shlex.quote(word))
    return " ".join(parts)


@contextlib.contextmanager
def far_servers(
    text: str, remote_workbench: str = "workbench", insecure_host_keys: bool = False, say: Any = None
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
    lines = _Lines(proc.stdout.fileno())
    keys_dir: Path | None = None
    try:
        keys_dir = Path(tempfile.mkdtemp(prefix="workbench-via-ssh-"))  # mkdtemp: mode 0700
        deadline = time.monotonic() + UP_TIMEOUT_S
        hello: dict[str, Any] | None = None
        while hello is None:
            line = lines.read(deadline)
            if line is None:
                break
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                if isinstance(data, dict) and data.get("protocol") == PROTOCOL:
                    hello = data
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
            raise _ssh_failure(dest, code, _drain(proc), remote_workbench)
        if say is not None:
            say(f"far servers up on {dest.alias} ({url_host(host)}), state {hello.get('state_dir', '?')}")
        yield target_from_hello(hello, host, keys_dir)
    finally:
        _bring_down(proc, lines)
        if keys_dir is not None:
            shutil.rmtree(keys_dir, ignore_errors=True)


def _bring_down(proc: subprocess.Popen[bytes], lines: _Lines) -> None:
    """Say "down", wait (bounded) for the far side's acknowledgement, then end ssh. Never raises."""
    # A second Ctrl-C must not cut this short: the far side cleans up on its own once ssh is gone anyway.
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread() else None
    try:
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
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


def end_ssh(proc: subprocess.Popen[bytes], wait_s: float) -> None:
    """Let an ssh whose remote side was told to end exit within `wait_s`, else terminate it (then kill it), and
    close its pipes."""
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            if pipe is not None:
                pipe.close()


def main_thread() -> bool:
    """Signal handlers can be set only there."""
    import threading

    return threading.current_thread() is threading.main_thread()


# ---------------------------------------------------------------- the far side
def _bind_address() -> str:
    """The far host's address the SSH connection arrived at: reachable from the client by construction."""
    parts = os.environ.get("SSH_CONNECTION", "").split()
    return parts[2] if len(parts) == 4 else "127.0.0.1"


def _free_ports(bind: str) -> dict[str, int]:
    """A free port per service: the far host may already run `servers up` on the default ports."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    ports: dict[str, int] = {}
    holders = []
    try:
        for service in DEFAULT_PORTS:
            sock = socket.socket(family, socket.SOCK_STREAM)
            holders.append(sock)
            sock.bind((bind, 0))
            ports[service] = sock.getsockname()[1]
    finally:
        for sock in holders:
            sock.close()
    return ports


def _emit(data: Mapping[str, Any]) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.write(json.dumps(data) + "\n")
        sys.stdout.flush()


def served_hello(state_dir: Path) -> dict[str, Any]:
    """What reaches servers `servers up` started with this private state: ports, paths, login and the key
    material (read back by target_from_hello). Secret: it goes only down an SSH channel, never to a file."""
    from workbench.shared.paths import CREDENTIALS_FILE, TARGET_FILE

    creds = json.loads((state_dir / CREDENTIALS_FILE).read_text())
    target = json.loads((state_dir / TARGET_FILE).read_text())
    host_keys = []
    if creds.get("known_hosts"):
        host_keys = [" ".join(ln.split()[1:3]) for ln in Path(creds["known_hosts"]).read_text().splitlines() if ln]
    return {
        "ports": target["ports"],
        "remote_root": target["remote_root"],
        "share": target["share"],
        "credentials": {"user": creds["user"], "password": creds["password"]},
        "ssh_key": Path(creds["ssh_key"]).read_text() if creds.get("ssh_key") else None,
        "host_keys": host_keys,
    }


def serve_over_ssh(bind: str | None = None, only: list[str] | None = None) -> None:
    """The far side: servers up in a private temp dir, their target and login as one JSON line on stdout, wait for
    stdin to end (or say "down"), then everything down and the temp dir removed, whatever ended the wait."""
    from workbench.server.daemons import supervisor

    bind = bind or _bind_address()
    base = Path(tempfile.mkdtemp(prefix="workbench-over-ssh-"))  # 0700: the credentials live beneath it
    root, state_dir = base / "root", base / "state"
    root.mkdir()
    # sshd closes the session without a signal; a hangup or SIGTERM unwinds the same way (workbench's main
    # turns both into exceptions: workbench/shared/signals.py), through the `finally:` below
    try:
        state = supervisor.up(root, bind, state_dir, only=only, ports=_free_ports(bind))
        _emit({"protocol": PROTOCOL, "state_dir": str(base), **served_hello(state_dir), "servers": state.lines()})
        with contextlib.suppress(OSError, ValueError):
            for line in sys.stdin:
                if line.strip() == "down":
                    break
    finally:
        with contextlib.suppress(Exception):
            supervisor.down(state_dir)
        shutil.rmtree(base, ignore_errors=True)
        _emit({"protocol": PROTOCOL, "down": True})


# ---------------------------------------------------------------- the run
def check_via_ssh_flags(explicit: set[str], urls: list[str]) -> None:
    """--via-ssh names the far host and brings its own login: --host, --target, --credentials and URLs cannot
    say it too."""
    if urls:
        raise UsageError("--via-ssh and server URLs are two ways to name the far host: give one", "drop one of them")
    for name in ("host", "target", "credentials"):
        if name in explicit:
            raise UsageError(
                f"--via-ssh and --{name} both name the far host: give one",
                f"drop --{name}: --via-ssh starts the far servers and takes their target and login over SSH",
            )


def run_via_ssh(
    text: str,
    remote_workbench: str,
    settings: Settings,
    present: Callable[[Callable[[Any, Any], Run]], Run],
    label: str | None,
    say: Callable[[str], Any],
) -> Run:
    """Check every setting, start the far servers over SSH, run through `present` (the CLI's present_run), and
    bring the far servers down however it ends."""
    from workbench.core import runner
    from workbench.core.config import draft_plan

    complete = draft_plan(settings)  # bad input: refused before login
    insecure = bool(settings["insecure_host_keys"])
    with far_servers(text, remote_workbench, insecure, say) as target:
        plan = complete(target)
        return present(lambda recorder, observer: runner.execute(plan, recorder, observer, label=label))
