"""Samba's `smbclient` CLI: the native SMB reference, one process (and so one login) per copy.

The password travels in an authentication file (``-A``, mode 0600, in a private temp dir removed on
close); commands go in on stdin, so neither secrets nor long file lists touch argv. smbclient reports
failures as ``NT_STATUS_*`` lines and its exit code reflects only the last command, so every batch's
output is scanned.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.protocols.base import Client, ClientOptions, FileCopy, Progress
from workbench.protocols.details import ClientDetails
from workbench.protocols.process import Completed, run_native
from workbench.protocols.smb import share_path
from workbench.protocols.smb_negotiated import BY_NAME, from_smbclient_output, merge
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, UsageError, WorkbenchError

BINARY = "smbclient"
_STATUS = re.compile(r"NT_STATUS_[A-Z_]+")
_AUTH = {"NT_STATUS_LOGON_FAILURE", "NT_STATUS_WRONG_PASSWORD", "NT_STATUS_NO_SUCH_USER", "NT_STATUS_ACCESS_DENIED"}
_NOT_FOUND = {
    "NT_STATUS_OBJECT_NAME_NOT_FOUND",
    "NT_STATUS_OBJECT_PATH_NOT_FOUND",
    "NT_STATUS_NO_SUCH_FILE",
}
_NETWORK = {
    "NT_STATUS_CONNECTION_REFUSED",
    "NT_STATUS_CONNECTION_RESET",
    "NT_STATUS_CONNECTION_DISCONNECTED",
    "NT_STATUS_IO_TIMEOUT",
    "NT_STATUS_HOST_UNREACHABLE",
    "NT_STATUS_NETWORK_UNREACHABLE",
    "NT_STATUS_END_OF_FILE",
    "NT_STATUS_INVALID_NETWORK_RESPONSE",
}
SEP = "\\"  # SMB's path separator
UNKNOWN_SIZE = 1 << 50  # a total for run_native when the download's size is not known up front
UNKNOWN_SIZE_BOUND = 4 * 3600.0
MIN_RATE = 100_000  # bytes/s assumed at worst when bounding a whole batch; stalls are caught sooner


def _quote(path: str) -> str:
    """One argument of an smbclient command (its parser splits on blanks outside double quotes)."""
    if any(c in path for c in '"\n\r;'):
        raise UsageError(f"path {path!r} cannot be passed to smbclient", 'avoid ", ; and newlines in file names')
    return f'"{path}"'


class SmbclientClient(Client):
    protocol = "smb"
    name = "smbclient"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dir: Path | None = None
        self._negotiated = ClientDetails()

    @classmethod
    def unavailable_reason(cls) -> str | None:
        if shutil.which(BINARY) is None:
            return "smbclient not installed: apt-get install smbclient"
        return None

    @property
    def _where(self) -> str:
        return f"{self.target.host}:{self.target.port('smb')}"

    def _remote(self, remote: str) -> str:
        """One smbclient argument naming `remote` in the share (beneath the URL's directory on a stock server)."""
        return _quote(share_path(self.target, remote))

    def connect(self) -> None:
        """Write the private auth file and check the login once (every copy logs in again)."""
        # owner pid in the name: a SIGKILLed run's auth file is removed by the next lab (mounts/stale.py)
        self._dir = Path(tempfile.mkdtemp(prefix=f"workbench-smbclient-{os.getpid()}-"))
        try:
            creds = self.target.credentials
            fd = os.open(self._auth_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(f"username = {creds.user}\npassword = {creds.password}\n")
            self._run([], what="logging in", total=0)
            self._negotiated = self._negotiation()
        except BaseException:
            self.close()
            raise

    @property
    def _auth_file(self) -> Path:
        if self._dir is None:
            raise NetworkError("smbclient is not connected", "call connect() first")
        return self._dir / "auth"

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def details(self) -> ClientDetails:
        # smbclient pipelines large reads/writes itself, so no request-bound ceiling; what it negotiated comes
        # from its own debug output at login (with client defaults it signs only the session setup).
        return merge(ClientDetails(timed_includes_setup=True), self._negotiated)

    def _negotiation(self) -> ClientDetails:
        """One more login, untimed, at debug level 10 with one command on the tree (`volume`): the dialect and
        whether the session's own messages are signed or encrypted. Only the lines the reader matches are
        used; the rest (authentication exchanges among them) is dropped here, never kept or shown."""
        argv = self._argv(debug_level=10)
        try:
            done = run_native(
                argv,
                progress=lambda n: None,
                total_bytes=0,
                timeout=self._time_bound(0),
                stdin_text="volume\n",
            )
        except WorkbenchError:  # a stalled or timed-out probe: the login that counts passed, the row goes on
            return ClientDetails()
        if done.returncode != 0:
            return ClientDetails()  # the login that counts already passed: the figures are just not known
        return from_smbclient_output(done.stderr, self.options.smb_signing, self.options.smb_encryption)

    def _argv(self, debug_level: int = 0) -> list[str]:
        return [
            BINARY,
            f"//{self.target.host}/{self.target.share}",
            "-p",
            str(self.target.port("smb")),
            "-A",
            str(self._auth_file),
            "-s",
            "/dev/null",  # no system smb.conf: the same client defaults on every host
            "-d",
            str(debug_level),  # 0, only errors, for copies: a line per file would fill the output pipe on large sets
            "-q",
            "-t",
            str(max(1, round(self.options.stall_timeout_s))),  # per-operation timeout: a stalled server fails the batch
            *_protection_options(self.options),
        ]

    def _run(
        self,
        commands: Sequence[str],
        *,
        what: str,
        total: int,
        progress: Progress | None = None,
        watch_file: Path | None = None,
        ignore: frozenset[str] = frozenset(),
    ) -> Completed:
        done = run_native(
            self._argv(),
            progress=progress or (lambda n: None),
            total_bytes=total,
            timeout=self._time_bound(total),
            watch_file=watch_file,
            watch_reads=watch_file is None and total > 0,
            stdin_text="".join(f"{c}\n" for c in commands),
            stall_timeout=self.options.stall_timeout_s if total > 0 else None,
        )
        error = self._error(done, what, ignore)
        if error is not None:
            raise error
        return done

    def _time_bound(self, total: int) -> float:
        """Seconds a whole batch may take; stalls (no progress for options.stall_timeout_s) are caught much sooner."""
        if total >= UNKNOWN_SIZE:
            return UNKNOWN_SIZE_BOUND
        if total == 0:  # a login or mkdir: no bytes to watch, so no stall guard; bound it as connect + a stall
            return self.options.connect_timeout_s + 2 * self.options.stall_timeout_s
        return max(60.0, 2 * self.options.stall_timeout_s) + total / MIN_RATE

    def _error(self, done: Completed, what: str, ignore: frozenset[str]) -> WorkbenchError | None:
        text = f"{done.stdout}\n{done.stderr}"
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        problems = [ln for ln in lines if not any(s in ln for s in ignore)]
        statuses = [m for ln in problems for m in _STATUS.findall(ln)]
        if done.returncode == 0 and not problems:
            return None
        first = problems[0] if problems else f"smbclient exited with status {done.returncode}"
        if any(s in _AUTH for s in statuses):
            return AuthError(f"SMB login refused by {self._where} while {what}: {first}", "check the user and password")
        if "NT_STATUS_BAD_NETWORK_NAME" in statuses:
            return NotFoundError(f"{what}: the server has no share {self.target.share!r}", "check the share name")
        if any(s in _NOT_FOUND for s in statuses):
            return NotFoundError(f"{what}: {first}", "check the remote path")
        if any(s in _NETWORK for s in statuses) or not problems:
            return NetworkError(f"smbclient lost {self._where} while {what}: {first}", "is the server running?")
        return WorkbenchError(f"smbclient failed while {what}: {first}", "see the smbd log")

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        # The remote size is unknown without a second login inside the timed span, so the total is
        # open-ended and every report is clipped to what the local file really holds.
        self._run(
            [f"get {self._remote(remote)} {_quote(str(local))}"],
            what=f"downloading {remote}",
            total=UNKNOWN_SIZE,
            progress=_LocalFileProgress(progress, local),
            watch_file=local,
        )

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        self._run(
            [f"put {_quote(str(local))} {self._remote(remote)}"],
            what=f"uploading {remote}",
            total=_size(local),
            progress=progress,
        )

    def download_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        if files:
            self._run(
                [f"get {self._remote(f.remote)} {_quote(str(f.local))}" for f in files],
                what=f"downloading {len(files)} files",
                total=sum(f.size for f in files),
                progress=progress,
            )

    def upload_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        if files:
            self._run(
                [f"put {_quote(str(f.local))} {self._remote(f.remote)}" for f in files],
                what=f"uploading {len(files)} files",
                total=sum(_size(f.local) for f in files),
                progress=progress,
            )

    def mkdir(self, remote_dir: str) -> None:
        parts = [p for p in share_path(self.target, remote_dir).split("\\") if p]
        commands = [f"mkdir {_quote(SEP.join(parts[:i]))}" for i in range(1, len(parts) + 1)]
        if commands:
            self._run(
                commands, what=f"creating {remote_dir}", total=0, ignore=frozenset({"NT_STATUS_OBJECT_NAME_COLLISION"})
            )


# smb_signing -> Samba's `client signing`: never, whenever the server allows (desired), or insist.
_SIGNING = {"off": "off", "on": "desired", "required": "required"}


def _protection_options(options: ClientOptions) -> list[str]:
    """smbclient's --option arguments for the user's signing, encryption and highest dialect (none: its
    defaults, which sign and encrypt only what the server requires and offer up to SMB 3.1.1)."""
    said = []
    if options.smb_signing is not None:
        said.append(f"--option=client signing={_SIGNING[options.smb_signing]}")
    if options.smb_encryption is not None:
        said.append(f"--option=client smb encrypt={options.smb_encryption}")
    if options.smb_max_dialect is not None:
        said.append(f"--option=client max protocol={BY_NAME[options.smb_max_dialect].samba}")
    return said


class _LocalFileProgress:
    """Forwards progress only up to the size the local file has reached."""

    def __init__(self, progress: Progress, local: Path) -> None:
        self.progress = progress
        self.local = local
        self.forwarded = 0

    def __call__(self, n: int) -> None:
        try:
            seen = self.local.stat().st_size
        except OSError:
            return
        if seen > self.forwarded:
            self.progress(seen - self.forwarded)
            self.forwarded = seen


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError as exc:
        raise NotFoundError(f"local file {path} not found", "check the path") from exc
