"""The far host's iperf3: `iperf3 -s` with RSA authentication, started by `workbench serve` and dying with it.

write_server_auth derives iperf3's key pair and users file from workbench's credentials; the client
side (argv, run, JSON parsing) is workbench.probe.iperf.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from workbench.probe.iperf import iperf3_available
from workbench.shared.errors import NetworkError, NotFoundError
from workbench.shared.net import listening


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
            # Read from the kernel's tables, never by connecting: iperf3 -s takes any connection as a test's
            # control channel, and after one that closes at once it re-opens its listener, resetting a client
            # that connected in that gap ("unable to receive control message").
            if listening(self.port):
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
