"""One session of the system `ssh` to a far host, as `run --via-ssh` and a fleet's controller start it.

Why the system `ssh` and not paramiko: the user already reaches the far host with OpenSSH, so its
~/.ssh/config (or $WORKBENCH_SSH_CONFIG, passed as -F, as every other OpenSSH program here gets it), the agent,
identity files and known_hosts apply unchanged. `BatchMode=yes` means it never prompts; host keys are checked
as the user configured, so an unknown key fails (ssh's default "ask" cannot ask in batch mode) and is turned
into one line telling the user how to verify it. --insecure-host-keys maps to the same options the project's
own OpenSSH clients use (StrictHostKeyChecking=no, UserKnownHostsFile=/dev/null).

Here: the destination, the command line (no secret on it), the far command quoted for the far shell, lines read
with a deadline, one line for a session that failed, and its end (bounded, never hanging this side).
"""

from __future__ import annotations

import contextlib
import re
import select
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.core.fleet_lines import LineReader, Tail
from workbench.shared import sshconfig
from workbench.shared.errors import AuthError, ExitCode, NetworkError, NotFoundError, UsageError, WorkbenchError
from workbench.shared.servers_hello import MAX_HELLO_BYTES

INSTALL_HINT = "pip install filecopy-workbench"
CONNECT_TIMEOUT_S = 10
NOT_FOUND_CODES = (126, 127)  # the far shell: found but not executable / not found
# C0, DEL and C1: never part of a user or host name
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Destination:
    """`[user@]host` as given to --via-ssh (or a line of a fleet's --clients file)."""

    alias: str
    user: str | None = None

    @classmethod
    def parse(cls, text: str) -> Destination:
        if _CONTROL.search(text):
            # refused before `ssh -G` or ssh sees it: an ESC sequence would reach the terminal in ssh's own
            # messages, a NUL cannot be in an argv at all; repr shows the text without acting on it
            raise UsageError(f"--via-ssh {text!r} has a control character", "give [user@]host as plain text")
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


def ssh_failure(dest: Destination, code: int, stderr: str, remote_workbench: str) -> WorkbenchError:
    """One line for an SSH session that ended before the far side was up (its exit code and stderr)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    last = lines[-1] if lines else f"exit status {code}"
    if code == 255 and "Host key verification failed" in stderr:  # unknown (batch mode cannot ask) or changed
        return AuthError(
            f"the SSH host key of {dest.alias} is not known or has changed",
            f"connect once with 'ssh {dest.alias}' to verify and accept it, or pass --insecure-host-keys",
        )
    if code in NOT_FOUND_CODES:
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


class Lines:
    """Lines from a pipe with a deadline (a far side that hangs must not hang this side), each of bounded length
    (a fleet member's LineReader beneath: a longer line is read and dropped, never kept)."""

    def __init__(self, fd: int, limit_bytes: int = MAX_HELLO_BYTES) -> None:
        self.reader = LineReader(fd, limit_bytes)

    @property
    def closed(self) -> bool:
        return self.reader.closed and not self.reader.pending

    def read(self, deadline: float) -> bytes | None:
        """The next line (b"" in place of one past the bound), or None at end of file or once the deadline passed."""
        while not self.reader.pending:
            left = deadline - time.monotonic()
            if self.reader.closed or left <= 0:
                return None
            ready, _, _ = select.select([self.reader.fd], [], [], left)
            if not ready:
                return None
            self.reader.feed()
        line = self.reader.next()
        return line if isinstance(line, bytes) else b""


def drain_stderr(proc: subprocess.Popen[bytes], within_s: float = 2.0) -> str:
    """The end of an ended ssh's stderr (its last words, at most STDERR_KEEP_BYTES), read for at most `within_s`:
    a child of ssh may hold the pipe open, and a far side may have written without end."""
    assert proc.stderr is not None
    tail = Tail(proc.stderr.fileno())
    deadline = time.monotonic() + within_s
    with contextlib.suppress(OSError, ValueError):
        while not tail.closed and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([tail.fd], [], [], left)
            if not ready:
                break
            tail.feed()
    return tail.text()


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
