"""iperf3 as a cross-check of the raw-TCP probe: a bounded client run parsed from -J, and serve's own server."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.shared.errors import NetworkError, NotFoundError, UsageError, WorkbenchError
from workbench.shared.net import port_open

INSTALL_HINT = "apt-get install iperf3 (macOS: brew install iperf3)"


@dataclass(frozen=True)
class IperfResult:
    """One iperf3 run; rates in bytes/s as everywhere in workbench (iperf3 itself reports bits)."""

    direction: str
    bps: float  # as counted by the receiving side (sum_received)
    sender_bps: float
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


@dataclass(frozen=True)
class IperfServerAuth:
    private_key: Path
    users: Path
    public_key: Path


def write_server_auth(directory: Path, user: str, password: str) -> IperfServerAuth:
    """An RSA key pair and an authorized-users file, so the iperf3 that `serve` starts is authenticated too.

    iperf3's users file holds `user,sha256("{user}password")`; files are 0600 in a 0700 directory.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    auth = IperfServerAuth(directory / "private.pem", directory / "users.csv", directory / "public.pem")
    if not auth.private_key.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
        _write_private(auth.private_key, pem)
        public = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        auth.public_key.write_bytes(public)
    digest = hashlib.sha256(f"{{{user}}}{password}".encode()).hexdigest()
    _write_private(auth.users, f"{user},{digest}\n".encode())
    return auth


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


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
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired as exc:
        raise NetworkError(
            f"iperf3 to {host}:{port} did not finish within {timeout:.0f} s", "is the iperf3 server reachable?"
        ) from exc
    return parse_iperf3_json(proc.stdout.decode(errors="replace"), direction, host, port, window)


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
        bps=float(received["bits_per_second"]) / 8,
        sender_bps=float(sent["bits_per_second"]) / 8,
        bytes=int(received.get("bytes", 0)),
        seconds=float(received.get("seconds", 0.0)),
        retransmits=sent.get("retransmits"),
        cpu_local=cpu.get("host_total"),
        cpu_remote=cpu.get("remote_total"),
        window=window,
    )


# Runs between fork and exec of the iperf3 server: ask the kernel to SIGKILL it when its parent dies, so an
# iperf3 started by `serve` never outlives a SIGKILLed serve (it did: orphaned, still listening). A
# separate interpreter rather than preexec_fn, which is unsafe in serve's threaded process; it exits at
# once if the parent is already gone (the race between fork and prctl).
_DEATHSIG_WRAPPER = """
import ctypes, os, sys
parent = int(sys.argv[1])
if sys.platform.startswith("linux"):
    ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
if os.getppid() != parent:
    sys.exit(1)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def with_parent_death_signal(argv: list[str]) -> list[str]:
    """argv wrapped so the process is SIGKILLed when the calling process dies (Linux; elsewhere argv as is).

    The kernel ties the signal to the thread that forks: call it from a thread that lives as long as the child.
    """
    return [sys.executable, "-I", "-S", "-c", _DEATHSIG_WRAPPER, str(os.getpid()), *argv]


class Iperf3Server:
    """`iperf3 -s -B ADDR -p PORT` with RSA authentication, in the caller's process group, dying with it.

    Only `serve` starts one: it lives in serve's process group (so stopping that group stops it) and
    gets SIGKILL from the kernel when serve dies, even by SIGKILL.
    """

    def __init__(self, bind: str, port: int, auth: IperfServerAuth) -> None:
        self.bind = bind
        self.auth = auth
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        return [
            "iperf3",
            "-s",
            "-B",
            self.bind,
            "-p",
            str(self.port),
            "--rsa-private-key-path",
            str(self.auth.private_key),
            "--authorized-users-path",
            str(self.auth.users),
        ]

    @property
    def log_path(self) -> Path:
        return self.auth.private_key.parent / "iperf3.log"

    def start(self, timeout: float = 10.0) -> int:
        """Launch and wait until the port accepts; returns the pid."""
        reason = iperf3_available()
        if reason:
            raise NotFoundError(reason)
        # stderr to a file, never a pipe: nobody reads a pipe once it listens, and after 64 KiB of failed
        # logins iperf3 would block on its next write and stop serving.
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                with_parent_death_signal(self.command()),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self.proc.pid

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.log_path.read_bytes()[-200:].decode(errors="replace").strip()
                raise NetworkError(
                    f"iperf3 server exited at start: {err[:200] or self.proc.returncode}",
                    "is the port in use? choose another",
                )
            if port_open(self.bind, self.port):
                return
            time.sleep(0.05)
        raise NetworkError(f"iperf3 server did not listen on {self.bind}:{self.port} within {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
            self.proc = None

    def __enter__(self) -> Iperf3Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
