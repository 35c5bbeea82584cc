"""netatalk's own AFP client, afp_speedtest (netatalk-tests), as the native reference row beside afp/python.

What it measures: one afp_speedtest process per copy logs in and opens the reference volume, then times with
its own clock, in microseconds, one test of the row's file size, `-q` request size and `-r` requests in flight:
- download: "Read": it writes a file of its own of that size (untimed), then times FPReadExt requests over it
  from its first request to its last reply, the data thrown away;
- upload: "Write": it times FPWriteExt requests of its own data into a file of its own, without the flush to
  disk (-a; afp/python flushes nothing either).
Its figures (the bytes its header line names, the microseconds of its result line) are the row's samples: the
start of the process, the login and the untimed preparation stay outside them. Its rows are never verified
against the manifest: it reads no file of the run and writes none (the row's state: UNVERIFIABLE).

Logins: afp_speedtest logs in only by cleartext, with the password of -w on its command line or, without it,
an empty one; it has no guest login. No password goes on a command line: it logs in as afpd's password-less
unprivileged account (GUEST_ACCOUNT in workbench/shared/netatalk.py), which only a server workbench started in
the lab has, and only on a volume of its own (REFERENCE_VOLUME, an empty folder in the server's private state,
never the served root). Against any other server (a URL, `servers up`) the row is unavailable and says why.

netatalk 4.2.3 reads the test's name from memory it has already freed: sixteen commas before the name keep the
name clear of the bytes glibc's allocator reuses (without them every test prints "NOT TESTED").
"""

from __future__ import annotations

import dataclasses
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from workbench.protocols.afp import _afp_port
from workbench.protocols.base import Client, ClientOptions, FileCopy, Progress
from workbench.protocols.details import ClientDetails
from workbench.protocols.process import Completed, last_line, run_native
from workbench.shared.errors import NetworkError, UnavailableError, WorkbenchError, from_os_error
from workbench.shared.netatalk import GUEST_ACCOUNT, REFERENCE_VOLUME, Netatalk, find
from workbench.shared.safetext import strip_controls
from workbench.shared.target import Target

TOOL = "/usr/bin/afp_speedtest"
NAME_PAD = "," * 16  # see the module's docstring
UNVERIFIABLE = "not verifiable: the tool makes its own data"
NEEDS_GUEST = "needs a guest login on a server workbench started"
MIB = 1 << 20
TESTS = {"download": "Read", "upload": "Write"}
MEASURES = {
    "download": "afp_speedtest Read: FPReadExt over a file of its own (written untimed first), data thrown away; "
    "its own µs from first request to last reply",
    "upload": "afp_speedtest Write: FPWriteExt of its own data into a file of its own, no flush; its own µs from "
    "first request to last reply",
}
# The tool's header line ("Read qantum 262144, size 4194304": 4.2.3 spells Read's "qantum") and its result lines
# ("1\t     1763\t2436169.75": run, microseconds, its KB/s).
_HEADER = re.compile(r"^(Read|Write) q?u?antum (\d+), size (\d+)\s*$")
_RESULT = re.compile(r"^\s*(\d+)\s+(\d+)\s+[\d.]+\s*$")
# Each copy starts a process and logs in: bounded by the stall timeout beyond the data's time at 1 MB/s.
MIN_BYTES_PER_S = 1_000_000


@dataclass(frozen=True)
class SpeedtestRun:
    """What one afp_speedtest run printed: its test, request size, file size and each run's microseconds."""

    test: str
    request_bytes: int
    size_bytes: int
    microseconds: tuple[int, ...]


def parse_output(stdout: str) -> SpeedtestRun:
    """afp_speedtest's figures from its output; ValueError (one line saying what was missing) when it timed
    nothing: no header, no result line, a zero time, or "NOT TESTED"/"FAILED" in it."""
    header: tuple[str, int, int] | None = None
    micros: list[int] = []
    for line in stdout.splitlines():
        if "NOT TESTED" in line or "FAILED" in line:
            raise ValueError(f"afp_speedtest said {line.strip()[:120]!r}")
        if found := _HEADER.match(line.strip()):
            header = (found.group(1), int(found.group(2)), int(found.group(3)))
        elif header is not None and (found := _RESULT.match(line)):
            micros.append(int(found.group(2)))
    if header is None:
        raise ValueError("afp_speedtest printed no test header (it did not log in, or did not open the volume)")
    if not micros:
        raise ValueError(f"afp_speedtest printed no result for its {header[0]} test")
    if min(micros) <= 0:
        raise ValueError(f"afp_speedtest timed its {header[0]} test at 0 µs")
    return SpeedtestRun(header[0], header[1], header[2], tuple(micros))


class AfpSpeedtestClient(Client):
    protocol = "afp"
    name = "afp_speedtest"
    unverifiable: ClassVar[str | None] = UNVERIFIABLE

    def __init__(self, target: Target, options: ClientOptions | None = None) -> None:
        super().__init__(target, options)
        self._netatalk: Netatalk | None = None
        self._request_bytes = 0  # the row's request size, at most the server's quantum (learnt at connect)
        self.last_run: SpeedtestRun | None = None  # the last copy's figures, as the tool printed them

    @classmethod
    def unavailable_reason(cls) -> str | None:
        found, why = find()
        if found is None:
            return why
        if not found.path(TOOL).exists():
            return f"{found.describe()} has no afp_speedtest: install netatalk-tests there (scripts/afp_root.sh)"
        return None

    def connect(self) -> None:
        if self.target.stock:
            raise UnavailableError(f"{NEEDS_GUEST} (in the lab), not one given by URL", "afp/python measures it")
        found, why = find()
        if found is None:
            raise UnavailableError(why, "")
        self._netatalk = found
        # An unreachable host or a closed port is a network failure in connect_timeout_s, as for every client (the
        # tool would wait for its own, longer, time and say less)
        try:
            socket.create_connection((self.target.host, self._port), timeout=self.options.connect_timeout_s).close()
        except OSError as exc:
            raise from_os_error(exc, f"connecting to {self.label}", self.target.host, self._port) from exc
        # The tool's own login, untimed: a 1 MiB Write (no -q: the server's quantum) says whether this server has
        # the password-less account and its volume, and which quantum it announces. Without them: unavailable.
        done = _run_tool(self._argv("Write", MIB, None), self.options.stall_timeout_s + self.options.connect_timeout_s)
        try:
            quantum = parse_output(done.stdout).request_bytes
        except ValueError as exc:
            said = strip_controls(last_line(done.stderr) or last_line(done.stdout))  # the tool's words
            raise UnavailableError(
                f"{NEEDS_GUEST} (in the lab); {self.target.host} refused its login ({exc}; exit {done.returncode}: "
                f"{said[:120]})",
                "afp/python measures this server",
            ) from exc
        self._request_bytes = min(self.options.block_size, quantum) if quantum > 0 else self.options.block_size

    def _argv(self, test: str, size_bytes: int, request_bytes: int | None) -> list[str]:
        """afp_speedtest's argv for one `test` of `size_bytes` (whole MiB) with `request_bytes` per request (None:
        the server's quantum) and the row's requests in flight; no password (see the module's docstring)."""
        assert self._netatalk is not None
        quantum = ["-q", str(max(1, request_bytes >> 10))] if request_bytes is not None else []
        return self._netatalk.argv([
            TOOL, "-h", self.target.host, "-p", str(self._port), "-s", REFERENCE_VOLUME, "-u", GUEST_ACCOUNT,
            "-f", NAME_PAD + test, "-d", str(size_bytes // MIB), *quantum, "-r", str(self.in_flight), "-a",
        ])  # fmt: skip

    @property
    def _port(self) -> int:
        return _afp_port(self.target.ports)

    @property
    def in_flight(self) -> int:
        return max(1, self.options.requests_in_flight)

    def timed_by_itself_s(self) -> float | None:
        """The seconds afp_speedtest itself timed for the last copy (the row's sample), None before one."""
        return self.last_run.microseconds[0] / 1e6 if self.last_run is not None else None

    def _run(self, direction: str, files: Sequence[FileCopy], progress: Progress) -> None:
        self.last_run = None
        if len(files) != 1 or files[0].size < MIB or files[0].size % MIB:
            # no count: a row's warm-up copies part of a many-file set (runner.WARMUP_FILES), and the row is the set
            what = "a set of many files" if len(files) != 1 else f"a file of {files[0].size} bytes"
            raise WorkbenchError(f"unavailable: afp_speedtest times one file of whole MiB, not {what}")
        if self._netatalk is None or not self._request_bytes:
            raise NetworkError("afp_speedtest: not connected", "call connect() first")
        size = files[0].size
        test = TESTS[direction]
        argv = self._argv(test, size, self._request_bytes)
        timeout = self.options.stall_timeout_s + self.options.connect_timeout_s + size / MIN_BYTES_PER_S
        done = _run_tool(argv, timeout)
        try:
            run = parse_output(done.stdout)
        except ValueError as exc:
            said = strip_controls(last_line(done.stderr) or last_line(done.stdout))  # the tool's words
            raise WorkbenchError(f"{self.label} {test}: {exc} (exit {done.returncode}: {said[:160]})") from exc
        if run.test != test or run.size_bytes != size:
            raise WorkbenchError(f"{self.label}: it ran {run.test} of {run.size_bytes} bytes, not {test} of {size}")
        self.last_run = run
        progress(run.size_bytes)

    def download_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        self._run("download", files, progress)

    def upload_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        self._run("upload", files, progress)

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        raise WorkbenchError(f"{self.label} copies no file of the run", "it runs through download_many")

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        raise WorkbenchError(f"{self.label} copies no file of the run", "it runs through upload_many")

    def mkdir(self, remote_dir: str) -> None:
        """Nothing to make: the tool writes only in its own volume."""

    def details(self) -> ClientDetails:
        return ClientDetails(
            request_bytes=self._request_bytes or None,
            requests_in_flight=self.in_flight,
            timed_includes_setup=False,
            block_bytes=self._request_bytes or None,
            process="one afp_speedtest process per copy (its own login, untimed)",
        )

    def row_details(self, direction: str) -> ClientDetails:
        return dataclasses.replace(self.details(), measures=MEASURES.get(direction))



def _run_tool(argv: list[str], timeout_s: float) -> Completed:
    """One afp_speedtest run, and once more when it printed its test's header and then no result: the tool reads
    its test's name from memory it has freed (see the module's docstring), and now and then that memory is
    already reused when the test starts, so the test stops at once, untimed. A second failure is the row's."""
    done = run_native(argv, progress=lambda _n: None, total_bytes=None, timeout=timeout_s)
    lines = done.stdout.splitlines()
    began = any(_HEADER.match(line.strip()) for line in lines)
    if not began or any(_RESULT.match(line) for line in lines):
        return done  # it timed its test, or it never began one (no login, no volume): nothing to try again
    return run_native(argv, progress=lambda _n: None, total_bytes=None, timeout=timeout_s)
