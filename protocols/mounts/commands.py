"""Runs mount and unmount commands, bounded in time, with secrets kept off argv.

Two ways in for a secret: `stdin_text` (mount helpers that read stdin) and `answer` (tools that only
read a password from their terminal, like `mount_afp -i` and `mount_smbfs`: they get a pseudo-terminal
and the password is typed at their prompt). Output goes to a file or the pty, never to a pipe the
caller waits on: sshfs daemonizes and its ssh child keeps the inherited stderr open for the life of
the mount, so waiting for EOF on a pipe would hang.
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.protocols.base import Client

PROMPT_WORDS = ("password", "passphrase")


@dataclass(frozen=True)
class Outcome:
    """How a command ended: its status (None when killed at the deadline) and its output."""

    returncode: int | None
    output: str = ""
    reprompted: bool = False  # asked for the password again: the one we typed was refused
    session: int | None = None  # the session the command led: what it leaves running (sshfs's ssh) stays in it

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def timed_out(self) -> bool:
        return self.returncode is None and not self.reprompted


class CommandRunner:
    """The real host: runs commands, tells whether a path is mounted and whether a client can run."""

    def unavailable(self, client_cls: type[Client]) -> str | None:
        return client_cls.unavailable_reason()

    def is_mounted(self, path: Path) -> bool:
        try:
            return os.path.ismount(path)
        except OSError:
            return True  # a dead FUSE mount answers ENOTCONN: still mounted, still needs unmounting

    def run(self, argv: Sequence[str], *, timeout: float, stdin_text: str | None = None) -> Outcome:
        """Run argv to completion or kill its process group after `timeout` seconds."""
        with tempfile.TemporaryFile() as out:
            try:
                proc = subprocess.Popen(
                    list(argv),
                    stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                    stdout=out,
                    stderr=out,
                    start_new_session=True,
                )
            except FileNotFoundError:
                return Outcome(127, f"{argv[0]}: command not found")
            try:
                if stdin_text is not None and proc.stdin is not None:
                    with contextlib.suppress(BrokenPipeError):
                        proc.stdin.write(stdin_text.encode())
                        proc.stdin.close()
                returncode: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid)
                proc.wait()
                returncode = None
            out.seek(0)
            text = out.read().decode(errors="replace")
        return Outcome(returncode, _redact(text, stdin_text), session=proc.pid)

    def run_with_prompt(self, argv: Sequence[str], *, timeout: float, answer: str) -> Outcome:
        """Run argv on a pseudo-terminal and type `answer` at its first password prompt (once only)."""
        pid, master = pty.fork()
        if pid == 0:  # the child: pty.fork made the pty its controlling terminal, as readpassphrase wants
            try:
                os.execvp(argv[0], list(argv))
            finally:
                os._exit(127)
        chunks: list[bytes] = []
        answered = reprompted = False
        deadline = time.monotonic() + timeout
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                ready, _, _ = select.select([master], [], [], min(remaining, 0.2))
                if not ready:
                    continue
                try:
                    data = os.read(master, 4096)
                except OSError:  # EIO: the child closed the terminal (exited)
                    break
                if not data:
                    break
                chunks.append(data)
                tail = b"".join(chunks[-4:]).decode(errors="replace").lower()
                if any(word in tail.rsplit("\n", 1)[-1] for word in PROMPT_WORDS):
                    if answered:
                        reprompted = True
                        break
                    os.write(master, answer.encode() + b"\n")
                    answered = True
                    chunks.append(b"\n")  # keep the next prompt on a line of its own
            returncode = _reap(pid, deadline if not reprompted else time.monotonic())
        finally:
            os.close(master)
        text = b"".join(chunks).decode(errors="replace")
        return Outcome(None if reprompted else returncode, _redact(text, answer), reprompted, session=pid)


def _reap(pid: int, deadline: float) -> int | None:
    """Wait for the child until the deadline, then kill it. Its status, None when it had to be killed."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            _kill_group(pid)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.02)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _redact(text: str, secret: str | None) -> str:
    """Output may end up in an error message: never let a secret through, even one echoed back."""
    if secret:
        for line in secret.splitlines() or [secret]:
            if line.strip():
                text = text.replace(line, "***")
    return text
