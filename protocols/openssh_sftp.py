"""OpenSSH `sftp` in batch mode: the native reference for SFTP (one process per copy or per file set)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from workbench.protocols.base import Client, ClientOptions, FileCopy, Progress
from workbench.protocols.details import ClientDetails
from workbench.protocols.process import Completed, last_line, run_native
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, WorkbenchError
from workbench.shared.target import Target, url_host

DEFAULT_CIPHER = "aes128-gcm@openssh.com"  # 20-45 % faster than chacha20-poly1305 with AES-NI (measured here)
REQUEST_BYTES = 32768  # sftp -B default
REQUESTS_IN_FLIGHT = 64  # sftp -R default
MAX_BUDGET_BYTES = 1 << 40  # caps the deadline when a download's size is unknown
MIN_RATE = 1_000_000  # bytes/s below which a whole copy is declared dead (on top of the silence timeout)


def ssh_options(target: Target, options: ClientOptions) -> list[str]:
    """ssh/sftp arguments for a non-interactive, key-authenticated, host-verified login (no secrets)."""
    creds = target.credentials
    if creds.ssh_key is None:
        raise AuthError(
            "OpenSSH clients here log in with a key only", "put ssh_key in the credentials (the server writes one)"
        )
    opts = ["-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", str(creds.ssh_key)]
    if options.verify_host_keys:
        if creds.known_hosts is None:
            raise AuthError("no known_hosts file to verify the server", "add known_hosts to the credentials")
        opts += ["-o", f"UserKnownHostsFile={creds.known_hosts}", "-o", "StrictHostKeyChecking=yes"]
    else:
        opts += ["-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "LogLevel=ERROR"]
    alive = max(1, round(options.timeout / 3))
    opts += [
        "-o",
        f"ConnectTimeout={max(1, round(options.connect_timeout))}",
        "-o",
        f"ServerAliveInterval={alive}",
        "-o",
        "ServerAliveCountMax=3",
        "-c",
        options.cipher or DEFAULT_CIPHER,
    ]
    return opts


def ssh_login(target: Target) -> str:
    return f"{target.credentials.user}@{url_host(target.host)}"


def ssh_error(done: Completed, what: str, where: str) -> WorkbenchError:
    """Map an ssh-based client's failure (exit status and stderr) to one clean error."""
    text = done.stderr + done.stdout
    low = text.lower()
    line = last_line(done.stderr) or last_line(done.stdout) or f"exit status {done.returncode}"
    if "host key verification failed" in low or "remote host identification has changed" in low:
        return AuthError(f"host key of {where} could not be verified", "check known_hosts in the credentials")
    if "permission denied (publickey" in low or "too many authentication failures" in low:
        return AuthError(f"{where} refused the SSH login", "check the user and key in the credentials")
    if "no such file" in low or "not found" in low:
        return NotFoundError(f"{what}: {line}", "check the path (relative to the served root)")
    if "connection refused" in low:
        return NetworkError(f"connection refused by {where} while {what}", "is sshd running there?")
    if "timed out" in low or "timeout" in low:
        return NetworkError(f"timed out talking to {where} while {what}", "the link or the server stalled")
    if "permission denied" in low:
        return WorkbenchError(f"permission denied while {what}: {line}", "the path is outside the served root?")
    return NetworkError(f"{what} failed: {line}", "the server stopped or dropped the link")


def _quote(path: str | Path) -> str:
    """A path as one sftp batch-file argument (double quotes, backslash escapes)."""
    text = str(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _parents(remote: str) -> list[str]:
    parts = PurePosixPath(remote).parts
    return [str(PurePosixPath(*parts[: i + 1])) for i in range(len(parts))]


def _total_size(paths: Sequence[Path]) -> int:
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            total += path.stat().st_size
    return total


class OpenSSHSftpClient(Client):
    protocol = "sftp"
    name = "openssh"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None if shutil.which("sftp") else "sftp not installed: apt-get install openssh-client"

    @property
    def _where(self) -> str:
        return f"{self.target.host}:{self.target.port('ssh')}"

    def _run(self, batch: list[str], progress: Progress, total: int, what: str, **watch: Any) -> None:
        argv = [
            "sftp",
            "-b",
            "-",
            "-P",
            str(self.target.port("ssh")),
            *ssh_options(self.target, self.options),
            ssh_login(self.target),
        ]
        done = run_native(
            argv,
            progress=progress,
            total_bytes=total,
            timeout=self.options.timeout * 4 + min(total, MAX_BUDGET_BYTES) / MIN_RATE,
            stall_timeout=self.options.timeout,
            stdin_text="\n".join(batch) + "\n",
            **watch,
        )
        if done.returncode != 0:
            raise ssh_error(done, what, self._where)

    def connect(self) -> None:
        """Log in once so bad credentials or host keys fail here, outside the timed copies."""
        self._run(["pwd"], lambda n: None, 0, "logging in over SFTP")

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        # The size is not known up front: report the file's real growth, whatever run_native estimates.
        sent = 0

        def real(_: int) -> None:
            nonlocal sent
            now = _total_size([local])
            if now > sent:
                progress(now - sent)
                sent = now

        self._get([FileCopy(local, remote, 1 << 62)], real)

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        self.upload_many([FileCopy(local, remote, local.stat().st_size)], progress)

    def download_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        self._get(files, progress)

    def _get(self, files: Sequence[FileCopy], progress: Progress) -> None:
        batch = [f"get {_quote(f.remote)} {_quote(f.local)}" for f in files]
        locals_ = [f.local for f in files]
        total = sum(f.size for f in files)
        self._run(batch, progress, total, f"downloading {files[0].remote}", watch=lambda: _total_size(locals_))

    def upload_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        batch = [f"put {_quote(f.local)} {_quote(f.remote)}" for f in files]
        total = sum(f.size for f in files)
        self._run(batch, progress, total, f"uploading {files[0].local.name}", watch_reads=True)

    def mkdir(self, remote_dir: str) -> None:
        # '-' prefix: an existing directory is not an error.
        self._run([f"-mkdir {_quote(p)}" for p in _parents(remote_dir)], lambda n: None, 0, f"creating {remote_dir}")

    def details(self) -> ClientDetails:
        return ClientDetails(
            request_bytes=REQUEST_BYTES,
            requests_in_flight=REQUESTS_IN_FLIGHT,
            cipher=self.options.cipher or DEFAULT_CIPHER,
            timed_includes_setup=True,
        )
