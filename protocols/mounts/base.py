"""MountClient: mount a share at a private mount point, copy through the filesystem, always unmount.

A subclass supplies the mount command, the unmount commands (polite first, forced last) and how to
read its mount helper's failure messages; everything else (the mount point, the copy loop, keeping
reads off the local page cache, error translation) lives here.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
import stat
import sys
import tempfile
from abc import abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import ClassVar

from workbench.protocols.base import Client, ClientOptions, Progress
from workbench.protocols.details import ClientDetails
from workbench.protocols.mounts import stale
from workbench.protocols.mounts.commands import CommandRunner, Outcome
from workbench.shared import procs
from workbench.shared.errors import (
    AuthError,
    DiskError,
    NetworkError,
    NotFoundError,
    UnavailableError,
    UsageError,
    WorkbenchError,
    from_os_error,
)
from workbench.shared.target import Target

# Errors a mounted file returns when the server or the link behind it is gone.
LINK_ERRNOS = frozenset(
    {
        errno.ENOTCONN,
        errno.EIO,
        errno.ECONNABORTED,
        errno.ECONNRESET,
        errno.ETIMEDOUT,
        errno.EHOSTDOWN,
        errno.EHOSTUNREACH,
        errno.ENETDOWN,
        errno.ENETUNREACH,
        errno.EPIPE,
        errno.ESTALE,
        errno.ENODEV,
    }
)
_F_NOCACHE = 48  # macOS fcntl: bypass the unified buffer cache for this descriptor


class MountClient(Client):
    """A client that copies through a share mounted at a private, 0700 temporary directory."""

    page_cache: ClassVar[str] = ""  # how downloads are kept off the local page cache, for details()

    def __init__(
        self, target: Target, options: ClientOptions | None = None, *, runner: CommandRunner | None = None
    ) -> None:
        super().__init__(target, options)
        self.runner = runner or CommandRunner()
        self.mountpoint: Path | None = None
        self._mounted = False
        self._mount_session: int | None = None

    # --- what a subclass provides -------------------------------------------------------------

    @abstractmethod
    def _mount(self, mountpoint: Path) -> Outcome:
        """Run the mount command (secrets off argv); return its outcome."""

    @abstractmethod
    def _unmount_commands(self, mountpoint: Path) -> list[list[str]]:
        """Unmount commands to try in order until the path is no longer a mount point."""

    def _failure(self, outcome: Outcome) -> WorkbenchError:
        """Translate a failed mount into AuthError / NetworkError / NotFoundError."""
        return classify(self.label, outcome, self.mount_timeout)

    def _cleanup(self) -> None:
        """Remove per-mount secrets or state (credential files); called on every close."""

    def helper_cpu_seconds(self) -> float:
        # A user-space file system runs on after its mount command: sshfs forks a daemon (in a session of
        # its own, the mount point among its arguments) and leaves its ssh in the mount command's session.
        # A kernel file system (cifs, smbfs, afpfs) leaves no process: its work is the copier's system time.
        if self.mountpoint is None or not self._mounted or not os.path.isdir("/proc"):
            return 0.0
        snap = procs.snapshot()
        roots = procs.with_argument(str(self.mountpoint))
        if self._mount_session:
            roots += procs.in_session(self._mount_session, snap)
        return procs.cpu_seconds(procs.tree(roots, snap), snap)

    # --- session ------------------------------------------------------------------------------

    @property
    def mount_timeout(self) -> float:
        return max(10.0, self.options.stall_timeout_s)

    def connect(self) -> None:
        if self.mountpoint is not None:
            return
        reason = self.runner.unavailable(type(self))
        if reason:
            raise UnavailableError(f"{self.label} cannot run here: {reason}", "see 'workbench doctor'")
        # a mount left by a SIGKILLed run would otherwise stay until reboot: the next mount detaches it
        stale.unmount_stale()
        # mode 0700; the owner pid in the name lets the next run tell a leftover from a live mount
        self.mountpoint = Path(tempfile.mkdtemp(prefix=stale.owned_prefix(self.name)))
        try:
            outcome = self._mount(self.mountpoint)
            if not outcome.ok:
                raise self._failure(outcome)
            self._mounted = True
            self._mount_session = outcome.session
        except BaseException:
            # unmount even on failure: a mount that timed out may still have succeeded late
            self.close()
            raise

    def close(self) -> None:
        """Unmount and remove the mount point: a stale mount blocks the next run and leaves a dead directory."""
        mountpoint = self.mountpoint
        if mountpoint is None:
            return
        try:
            if self._mounted or self.runner.is_mounted(mountpoint):
                self._unmount(mountpoint)
            self._mounted = False
            with contextlib.suppress(OSError):
                mountpoint.rmdir()
            self.mountpoint = None
        finally:
            self._cleanup()

    def _unmount(self, mountpoint: Path) -> None:
        last: Outcome | None = None
        for argv in self._unmount_commands(mountpoint):
            last = self.runner.run(argv, timeout=15.0)
            if not self.runner.is_mounted(mountpoint):
                return
        detail = last.output.strip().splitlines()[-1] if last and last.output.strip() else "still mounted"
        raise WorkbenchError(
            f"could not unmount {mountpoint}: {detail}",
            f"unmount it by hand ({' '.join(self._unmount_commands(mountpoint)[0])}) before the next run",
        )

    def details(self) -> ClientDetails:
        return ClientDetails(
            mount=self.name, block_size=self.options.block_size, page_cache=self.page_cache, timed_includes_setup=False
        )

    # --- copies -------------------------------------------------------------------------------

    def _path(self, remote: str) -> Path:
        """The mounted path of `remote`, refusing paths that would leave the mounted root.

        On a stock server every path lies beneath the URL's directory (target.prefix) inside the mounted share;
        sshfs mounts that directory itself (its prefix is empty).
        """
        if self.mountpoint is None or not self._mounted:
            raise UsageError(f"{self.label} is not connected", "call connect() first")
        rel = PurePosixPath(self.target.remote_path(remote) if self.target.stock else remote)
        if rel.is_absolute() or ".." in rel.parts:
            raise UsageError(f"remote path {remote!r} leaves the served root", "use a path relative to the share")
        return self.mountpoint.joinpath(*rel.parts)

    def is_dir(self, remote: str) -> bool:
        try:
            return stat.S_ISDIR(os.stat(self._path(remote)).st_mode)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise self._remote_error(exc, remote, "looking up") from exc

    def remove_tree(self, remote_dir: str) -> None:
        """Delete a directory of the mount and what it holds; a link inside is removed, never followed.

        shutil.rmtree walks by directory descriptors where the platform has them (Linux, macOS), so a link
        swapped in during the walk cannot lead it out either.
        """
        path = self._path(remote_dir)
        if path == self.mountpoint:
            raise UsageError(f"refusing to delete the whole share through {self.label}", "name a directory in it")
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                raise WorkbenchError(f"{remote_dir} is not a directory on the {self.label} mount", "nothing deleted")
            shutil.rmtree(path)
        except OSError as exc:
            raise self._remote_error(exc, remote_dir, "deleting") from exc

    def mkdir(self, remote_dir: str) -> None:
        path = self._path(remote_dir)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._remote_error(exc, remote_dir, "creating a directory") from exc

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        path = self._path(remote)
        try:
            src = open(local, "rb", buffering=0)  # noqa: SIM115 - closed below, errors translated apart
        except OSError as exc:
            raise from_os_error(exc, f"reading {local}") from exc
        with src:
            dst = self._open_remote(path, remote, "wb")
            try:
                _pump(
                    src,
                    dst,
                    progress,
                    self.options.block_size,
                    lambda exc: from_os_error(exc, f"reading {local}"),
                    lambda exc: self._remote_error(exc, remote, "writing"),
                )
            except BaseException:
                with contextlib.suppress(OSError):
                    dst.close()
                raise
            # close() flushes the last writes and waits for the server's replies: part of the timed copy
            self._close_remote(dst, remote)

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        path = self._path(remote)
        src = self._open_remote(path, remote, "rb")
        try:
            try:
                dst = open(local, "wb", buffering=0)  # noqa: SIM115 - closed below, errors translated apart
            except OSError as exc:
                raise from_os_error(exc, f"writing {local}") from exc
            expected = os.fstat(src.fileno()).st_size
            with dst:
                copied = _pump(
                    src,
                    dst,
                    progress,
                    self.options.block_size,
                    lambda exc: self._remote_error(exc, remote, "reading"),
                    lambda exc: from_os_error(exc, f"writing {local}"),
                )
            _drop_cache(src.fileno())
            if copied < expected:
                # FUSE takes a short read for end of file: when sshfs loses its server mid-read the
                # copy can "finish" early without any error, so compare with the size seen at open
                raise NetworkError(
                    f"the {self.label} mount of {self.target.host} ended {remote} after {copied} of {expected} bytes",
                    "the server stopped or the link dropped",
                )
        finally:
            with contextlib.suppress(OSError):
                src.close()

    def _open_remote(self, path: Path, remote: str, mode: str) -> io.FileIO:
        try:
            fh = io.FileIO(path, mode)  # what open(path, mode, buffering=0) returns; the caller closes it
        except OSError as exc:
            raise self._remote_error(exc, remote, "opening") from exc
        # a download must cross the network: drop pages an earlier run left in the page cache
        _drop_cache(fh.fileno())
        return fh

    def _close_remote(self, fh: io.FileIO, remote: str) -> None:
        try:
            fh.close()
        except OSError as exc:
            raise self._remote_error(exc, remote, "finishing the upload of") from exc

    def _remote_error(self, exc: OSError, remote: str, what: str) -> WorkbenchError:
        where = f"{self.label} mount of {self.target.host}"
        if exc.errno == errno.ENOENT:
            return NotFoundError(f"{remote} not found on the {where}", "check the path (relative to the share)")
        if exc.errno in LINK_ERRNOS:
            return NetworkError(
                f"lost the {where} while {what} {remote}: {exc.strerror}", "the server stopped or the link dropped"
            )
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return DiskError(f"the share on {self.target.host} is full while {what} {remote}", "free space there")
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return DiskError(f"permission denied on the {where} while {what} {remote}", "check the share is writable")
        return WorkbenchError(f"{what} {remote} through the {where} failed: {exc.strerror or exc}")


def readahead_bytes(path: Path) -> int | None:
    """The kernel's readahead window for the file system mounted at `path` (Linux; None elsewhere)."""
    try:
        dev = os.stat(path).st_dev
        kib = int(Path(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb").read_text())
    except (OSError, ValueError):
        return None
    return kib * 1024 or None


def _pump(
    src: io.FileIO,
    dst: io.FileIO,
    progress: Progress,
    block_size: int,
    read_error: Callable[[OSError], WorkbenchError],
    write_error: Callable[[OSError], WorkbenchError],
) -> int:
    """Copy src to dst in block_size pieces, reporting each piece once written; OSErrors go through the mappers."""
    buf = memoryview(bytearray(max(block_size, 64 * 1024)))
    total = 0
    while True:
        try:
            n = src.readinto(buf) or 0
        except OSError as exc:
            raise read_error(exc) from exc
        if n == 0:
            return total
        try:
            _write_all(dst, buf[:n])
        except OSError as exc:
            raise write_error(exc) from exc
        total += n
        progress(n)


def _write_all(fh: io.FileIO, buf: memoryview) -> None:
    while buf:
        n = fh.write(buf)
        if n is None:  # only for non-blocking files, which these are not
            continue
        buf = buf[n:]


def _drop_cache(fd: int) -> None:
    """Evict (Linux) or bypass (macOS) the local page cache for this file; best effort."""
    with contextlib.suppress(OSError, AttributeError):
        if sys.platform == "darwin":
            import fcntl

            fcntl.fcntl(fd, getattr(fcntl, "F_NOCACHE", _F_NOCACHE), 1)
        else:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


# --- reading a mount helper's failure ---------------------------------------------------------

AUTH_WORDS = ("permission denied", "authentication", "logon failure", "access denied", "host key verification")
NETWORK_WORDS = (
    "connection refused",
    "timed out",
    "no route to host",
    "host is down",
    "network is unreachable",
    "could not resolve",
    "connection reset",
    "connection closed",
)
NOT_FOUND_WORDS = ("no such file or directory", "does not exist", "not found", "bad network name")


def classify(
    label: str, outcome: Outcome, timeout: float, extra: Sequence[tuple[str, type[WorkbenchError]]] = ()
) -> WorkbenchError:
    """A one-line WorkbenchError for a failed mount, chosen from words in the helper's output."""
    if outcome.reprompted:
        return AuthError(f"{label}: the server refused the password", "check the user and password")
    if outcome.timed_out:
        return NetworkError(f"{label}: mounting did not finish within {timeout:.0f} s", "is the server up?")
    lines = [ln.strip() for ln in outcome.output.replace("\r", "\n").splitlines() if ln.strip()]
    rules: list[tuple[str, type[WorkbenchError]]] = [*extra, *((w, AuthError) for w in AUTH_WORDS)]
    rules += [(w, NetworkError) for w in NETWORK_WORDS] + [(w, NotFoundError) for w in NOT_FOUND_WORDS]
    for word, kind in rules:
        for line in lines:
            if word in line.lower():
                return kind(f"{label}: {_WHAT.get(kind, 'mount failed')}: {line}", _HINTS.get(kind, ""))
    last = lines[-1] if lines else f"exit status {outcome.returncode}"
    return WorkbenchError(f"{label}: mount failed: {last}", "run the mount by hand to see more")


_WHAT = {
    AuthError: "login refused",
    NetworkError: "cannot reach the server",
    NotFoundError: "share or path not found",
    UnavailableError: "cannot mount here",
}
_HINTS = {
    AuthError: "check the user, password or key, and the host key",
    NetworkError: "is the server running at that host and port?",
    NotFoundError: "check the share name and served root",
    UnavailableError: "see 'workbench doctor'",
}


def which(*names: str) -> str | None:
    """The first of these programs found on PATH or in the sbin directories mount helpers live in."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/sbin", "/usr/sbin", "/usr/local/sbin"])
    for name in names:
        found = shutil.which(name, path=path)
        if found:
            return found
    return None
