"""iperf3 as a cross-check of the raw-TCP probe, from the client: a bounded run parsed from its -J output.

The iperf3 server that `workbench serve` starts (RSA-authenticated, dying with serve) is the far
host's: workbench.server.iperf_server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.shared.errors import NetworkError, UsageError, WorkbenchError

INSTALL_HINT = "apt-get install iperf3 (macOS: brew install iperf3)"


@dataclass(frozen=True)
class IperfResult:
    """One iperf3 run; rates in bytes/s as everywhere in workbench (iperf3 itself reports bits)."""

    direction: str
    bytes_per_s: float  # as counted by the receiving side (sum_received)
    sender_bytes_per_s: float
    bytes: int  # received
    seconds: float
    retransmits: int | None
    cpu_local: float | None = None  # percent of one host's CPUs, as iperf3 reports them
    cpu_remote: float | None = None
    window: int | None = None  # -w requested (iperf3 sets the socket buffers, not the window itself)


@dataclass(frozen=True)
class IperfAuth:
    """What an iperf3 client needs for a server started with RSA authentication (iperf3 >= 3.5)."""

    user: str
    password: str = field(repr=False)  # passed in IPERF3_PASSWORD, never on argv
    public_key: Path | None = None


def iperf3_available() -> str | None:
    """None when iperf3 can run here; otherwise why not and how to install it."""
    return None if shutil.which("iperf3") else f"iperf3 not installed: {INSTALL_HINT}"


def iperf3_command(
    host: str, port: int, direction: str, duration: float, window: int | None = None, auth: IperfAuth | None = None
) -> list[str]:
    """The client argv; with `auth`, the user and public key only (the password goes in the environment)."""
    if direction not in ("upload", "download"):
        raise UsageError(f"unknown direction {direction!r}", "use upload or download")
    if not 0 < duration <= 60:
        raise UsageError(f"iperf3 duration {duration} s is out of range", "use 0 < duration <= 60")
    # iperf3 reads -t with atoi and takes 0 as "forever": whole seconds, at least one.
    seconds = max(1, round(duration))
    argv = ["iperf3", "-c", host, "-p", str(port), "-t", str(seconds), "-J", "--connect-timeout", "3000"]
    if direction == "download":
        argv.append("-R")
    if window is not None:
        argv += ["-w", str(int(window))]
    if auth is not None and auth.public_key is not None:
        argv += ["--username", auth.user, "--rsa-public-key-path", str(auth.public_key)]
    return argv


def run_iperf3(
    host: str, port: int, direction: str, duration: float, window: int | None = None, auth: IperfAuth | None = None
) -> IperfResult | None:
    """Run one iperf3 client test (upload = client sends). None when iperf3 is not installed."""
    argv = iperf3_command(host, port, direction, duration, window, auth)
    env = dict(os.environ)
    if auth is not None:
        env["IPERF3_PASSWORD"] = auth.password
    if iperf3_available():
        return None
    timeout = max(1, round(duration)) + 15  # connect, parameter exchange and the server's result exchange
    for attempt in range(1, BETWEEN_TESTS_ATTEMPTS + 1):
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env)
        except subprocess.TimeoutExpired as exc:
            raise NetworkError(
                f"iperf3 to {host}:{port} did not finish within {timeout:.0f} s", "is the iperf3 server reachable?"
            ) from exc
        text = proc.stdout.decode(errors="replace")
        try:
            return parse_iperf3_json(text, direction, host, port, window)
        except NetworkError as exc:
            if attempt == BETWEEN_TESTS_ATTEMPTS or not turned_away_between_tests(exc.message, text):
                raise
        time.sleep(BETWEEN_TESTS_PAUSE_S * attempt)
    raise AssertionError("unreachable: the last attempt returns or raises")


# An iperf3 server closes its listening socket when a test ends, failed or not, and opens a new one for the next:
# a client that connects in between is refused, or reset if it was still queued on the old socket. Back-to-back
# tests (upload then download, or a test after a refused login) meet that gap now and then, so a test turned away
# before it began (no interval measured) is tried again, twice, after a short pause. A test reset once it had
# begun is not: that is a failure of the path or the server. A server that is not there fails the same way three
# times, about a second later than it would have.
BETWEEN_TESTS_ATTEMPTS = 3
BETWEEN_TESTS_PAUSE_S = 0.3


def turned_away_between_tests(message: str, output: str) -> bool:
    """Whether an iperf3 error (`message`, from its -J `output`) says the connection was refused or reset before
    the test began: no interval was measured."""
    lowered = message.lower()
    turned_away = "unable to connect" in lowered or "unable to receive control message" in lowered
    if not turned_away or not ("refused" in lowered or "reset by peer" in lowered):
        return False
    try:
        data = json.loads(output)
    except ValueError:
        return False
    return isinstance(data, dict) and not data.get("intervals")


def parse_iperf3_json(
    text: str, direction: str, host: str = "?", port: int = 0, window: int | None = None
) -> IperfResult:
    """Turn iperf3 -J output (also its error form) into a result or a WorkbenchError."""
    try:
        data: dict[str, Any] = json.loads(text)
    except ValueError as exc:
        raise WorkbenchError(f"iperf3 printed no JSON: {text.strip()[:200]!r}", "run it by hand to see why") from exc
    error = data.get("error")
    if error:
        hint = "is 'iperf3 -s' running there?"
        if "busy" in error:
            hint = "iperf3 serves one test at a time: wait or use another port"
        if "authoriz" in error or "authentic" in error:
            hint = "this iperf3 server requires workbench's credentials and its public key"
        raise NetworkError(f"iperf3 to {host}:{port}: {error}", hint)
    try:
        end = data["end"]
        received = end["sum_received"]
        sent = end["sum_sent"]
    except KeyError as exc:
        raise WorkbenchError(f"iperf3 JSON lacks {exc.args[0]!r}", "is this iperf3 >= 3.1?") from exc
    cpu = end.get("cpu_utilization_percent") or {}
    return IperfResult(
        direction=direction,
        bytes_per_s=float(received["bits_per_second"]) / 8,
        sender_bytes_per_s=float(sent["bits_per_second"]) / 8,
        bytes=int(received.get("bytes", 0)),
        seconds=float(received.get("seconds", 0.0)),
        retransmits=sent.get("retransmits"),
        cpu_local=cpu.get("host_total"),
        cpu_remote=cpu.get("remote_total"),
        window=window,
    )
