"""`python -m workbench ARGS` as a process forked from one that has already imported workbench, for test matrices
that start a `workbench run` per case (the hostile-server suites: ~185 runs).

A run against a loopback server spends most of its CPU importing (typer, pydantic, rich, the client's library:
~0.3 s of a 0.4 s FTP run). Here one process per site imports them once, under the site's environment, then forks a
child per command: the child is a process of its own (its pid, its exit status, stdin from /dev/null, stdout and
stderr in files, its atexit handlers and interpreter shutdown), which runs `workbench/__main__.py` as `-m` would.
What differs from a fresh `python -m workbench` is only what was imported before the arguments were read, in the
same environment. The suites still run the console path itself (`python -m workbench`) in one case each.
"""

from __future__ import annotations

import contextlib
import json
import locale
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

_FORKER = r"""
import json, os, random, runpy, sys
for name in sys.argv[1:]:
    __import__(name)
control_in = os.dup(0)
control_out = os.dup(1)
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)  # what the children inherit, as subprocess.run(stdin=DEVNULL) gives a fresh process
os.close(null)
os.write(control_out, b"ready\n")
with os.fdopen(control_in, "rb", buffering=0) as requests:
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(control_out)
            for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
                opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(opened, fd)
                os.close(opened)
            random.seed()  # a fresh process seeds from the OS, not from its parent's state
            sys.argv = ["workbench", *request["argv"]]
            runpy.run_module("workbench", run_name="__main__", alter_sys=True)
            sys.exit(0)
        os.write(control_out, b"%d\n" % pid)
        _, status = os.waitpid(pid, 0)
        os.write(control_out, b"%d\n" % os.waitstatus_to_exitcode(status))
"""


# What every `workbench run` imports, by the time it has reported (its client's module comes with `preload`).
COMMON_MODULES = (
    "workbench.cli.app",
    "workbench.core.session",
    "workbench.core.runner",
    "workbench.core.config",
    "workbench.core.stock",
    "workbench.core.store",
    "workbench.core.explain",
    "workbench.core.fixedcost",
    "workbench.cli.summary",
    "workbench.cli.report",
    "workbench.cli.run_table",
    "workbench.cli.exports",
    "workbench.cli.eta",
    "workbench.shared.login",
    "workbench.shared.urls",
    "workbench.shared.sshconfig",
    "workbench.probe.iperf",
)


class ForkedWorkbench:
    """One forking process for `env`, with `preload` (module names) imported before any command."""

    def __init__(self, env: dict[str, str], preload: tuple[str, ...] = ()) -> None:
        modules = (*COMMON_MODULES, *preload)
        self._scratch = tempfile.TemporaryDirectory(prefix="forked-workbench-")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _FORKER, *modules], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0
        )
        self._pending = b""
        ready = self._line(60)
        assert ready == b"ready", (ready, self._proc.poll())

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """`workbench ARGS` in a forked child; like subprocess.run(capture_output=True, text=True, timeout=...)."""
        assert self._proc.stdin is not None
        out, err = (Path(self._scratch.name) / name for name in ("stdout", "stderr"))
        request = {"argv": list(args), "stdout": str(out), "stderr": str(err)}
        self._proc.stdin.write(json.dumps(request).encode() + b"\n")
        self._proc.stdin.flush()
        pid = int(self._line(30))
        try:
            code = int(self._line(timeout))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            self._line(30)
            raise subprocess.TimeoutExpired(["workbench", *args], timeout, out.read_bytes(), err.read_bytes()) from None
        return subprocess.CompletedProcess(["workbench", *args], code, _text(out), _text(err))

    def _line(self, timeout: float) -> bytes:
        """The forking process's next line to us, within `timeout` seconds."""
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired("forked workbench", timeout)
            chunk = os.read(fd, 4096)
            assert chunk, f"the forking process ended (exit {self._proc.wait()})"
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        finally:
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._scratch.cleanup()


def _text(path: Path) -> str:
    """What subprocess.run(text=True) makes of a stream: the locale's encoding, universal newlines."""
    data = path.read_bytes().decode(locale.getpreferredencoding(False))
    return data.replace("\r\n", "\n").replace("\r", "\n")
