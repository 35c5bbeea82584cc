"""rsync over SSH and to an rsync daemon: whole-file copies, one process per file or per file set.

Flags: ``-W`` (whole file: no delta algorithm, which only costs CPU on a fresh copy), ``-I``
(ignore times: copy even when size and mtime match, so every timed run moves the bytes). Not
``--inplace``: rsync's default writes a temp file and renames it, which replaces a longer file
cleanly and never leaves a half-written file under the real name when a copy fails; the rename
is cheap. Downloads put that temp file in a private ``--temp-dir`` so its growth shows progress.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import ClassVar, Unpack

from workbench.protocols.base import Client, ClientOptions, FileCopy, LeftInPlace, Progress
from workbench.protocols.details import ClientDetails
from workbench.protocols.openssh_sftp import (
    DEFAULT_CIPHER,
    SSH_LOGIN_DENIED,
    askpass_env,
    remote_path,
    ssh_error,
    ssh_host,
    ssh_login,
    ssh_options,
)
from workbench.protocols.process import Completed, WatchAndInput, last_line, run_native
from workbench.shared.errors import AuthError, DiskError, NetworkError, NotFoundError, WorkbenchError
from workbench.shared.target import Target, url_host

MAX_BUDGET_BYTES = 1 << 40  # caps the deadline when a download's size is unknown
MIN_RATE = 1_000_000  # bytes/s below which a whole copy is declared dead (besides --timeout)
_NETWORK_CODES = {10, 12, 30, 35, 255}  # socket I/O, protocol stream, timeout, daemon connect timeout


def _dir_size(path: Path, since_ns: int) -> int:
    total = 0
    for entry in path.rglob("*"):
        with contextlib.suppress(OSError):
            st = entry.stat()
            if st.st_mtime_ns >= since_ns:
                total += st.st_size
    return total


def _finished_size(paths: Sequence[Path], since_ns: int) -> int:
    total = 0
    for path in paths:
        with contextlib.suppress(OSError):
            st = path.stat()
            if st.st_mtime_ns >= since_ns:  # written by this run (no -t, so rsync stamps it now)
                total += st.st_size
    return total


def _groups(files: Sequence[FileCopy]) -> tuple[dict[tuple[Path, str], list[str]], list[FileCopy]]:
    """Files sharing (local dir, remote dir) and their base name go in one invocation; renames go alone."""
    groups: dict[tuple[Path, str], list[str]] = defaultdict(list)
    singles: list[FileCopy] = []
    for f in files:
        remote = PurePosixPath(f.remote)
        if remote.name == f.local.name:
            groups[(f.local.parent, str(remote.parent))].append(f.local.name)
        else:
            singles.append(f)
    return groups, singles


class _RsyncClient(Client):
    protocol: ClassVar[str] = "rsync"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None if shutil.which("rsync") else "rsync not installed: apt-get install rsync"

    # --- what differs between rsync over ssh and the daemon ---
    def _remote(self, path: str) -> str:
        raise NotImplementedError

    def _transport_args(self) -> list[str]:
        return []

    def _env(self) -> dict[str, str]:
        return {}

    @property
    def _where(self) -> str:
        raise NotImplementedError

    def _error(self, done: Completed, what: str) -> WorkbenchError:
        text = (done.stderr + done.stdout).lower()
        line = last_line(done.stderr) or last_line(done.stdout) or f"exit status {done.returncode}"
        code = done.returncode
        if code == 5 or "auth failed" in text:
            return AuthError(f"{self._where} refused the rsync login", "check the user and password")
        if "no space left" in text:
            return DiskError(f"disk full while {what}", "free some space or choose smaller --sizes")
        if code == 23 and ("no such file" in text or "not found" in text):
            return NotFoundError(f"{what}: {line}", "check the path (relative to the served root)")
        if code in _NETWORK_CODES:
            return NetworkError(f"{what} failed: {line}", "the server stopped, refused, or the link stalled")
        return WorkbenchError(f"{what} failed (rsync exit {code}): {line}")

    # --- the Client interface ---
    def _argv(self, *extra: str) -> list[str]:
        argv = ["rsync", "-W", "-I", f"--timeout={max(1, round(self.options.stall_timeout_s))}"]
        if self.options.compress:
            argv.append("-z")
        return argv + self._transport_args() + list(extra)

    def _run(self, argv: list[str], progress: Progress, total: int, what: str, **kw: Unpack[WatchAndInput]) -> None:
        done = run_native(
            argv,
            progress=progress,
            total_bytes=total,
            timeout=self.options.stall_timeout_s * 4 + min(total, MAX_BUDGET_BYTES) / MIN_RATE,
            env=self._env(),
            stall_timeout=self.options.stall_timeout_s * 2,  # rsync's own --timeout should speak first
            **kw,
        )
        if done.returncode != 0:
            raise self._error(done, what)

    def connect(self) -> None:
        """List only the root itself: bad credentials or host keys fail here, outside the timed copies."""
        argv = self._argv("--list-only", "--exclude=*", self._remote("./"))
        self._run(argv, lambda n: None, 0, "logging in over rsync")

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        size = local.stat().st_size
        self._run(
            self._argv(str(local), self._remote(remote)), progress, size, f"uploading {local.name}", watch_reads=True
        )

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        self._download(self._argv, [self._remote(remote), str(local)], [local], progress, 0, f"downloading {remote}")

    def _download(
        self,
        argv_of: Callable[..., list[str]],  # the argv for these extra arguments (strings)
        args: list[str],
        finals: list[Path],
        progress: Progress,
        total: int,
        what: str,
        stdin_text: str | None = None,
    ) -> None:
        dest_dir = finals[0].parent
        tmp = Path(tempfile.mkdtemp(prefix=".wb-rsync-", dir=dest_dir))  # same filesystem: the rename stays cheap
        since = time.time_ns() - 1_000_000_000
        exact = total > 0
        sent = 0

        def real(n: int) -> None:
            # Without known sizes, report what really landed, never run_native's estimate.
            nonlocal sent
            now = _dir_size(tmp, since) + _finished_size(finals, since)
            if now > sent:
                progress(now - sent)
                sent = now

        try:
            self._run(
                argv_of(f"--temp-dir={tmp}", *args),
                progress if exact else real,
                total if exact else 1 << 40,
                what,
                watch=lambda: _dir_size(tmp, since) + _finished_size(finals, since),
                stdin_text=stdin_text,
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def download_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        groups, singles = _groups(files)
        for (local_dir, remote_dir), names in groups.items():
            total = sum(f.size for f in files if f.local.parent == local_dir and f.local.name in names)
            self._download(
                self._argv,
                ["--files-from=-", "--from0", self._remote(remote_dir + "/"), f"{local_dir}/"],
                [local_dir / n for n in names],
                progress,
                total,
                f"downloading {len(names)} files from {remote_dir}",
                stdin_text="\0".join(names),
            )
        for f in singles:
            self.download(f.remote, f.local, progress)

    def upload_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        groups, singles = _groups(files)
        for (local_dir, remote_dir), names in groups.items():
            total = sum(f.size for f in files if f.local.parent == local_dir and f.local.name in names)
            argv = self._argv("--files-from=-", "--from0", f"{local_dir}/", self._remote(remote_dir + "/"))
            self._run(
                argv,
                progress,
                total,
                f"uploading {len(names)} files to {remote_dir}",
                watch_reads=True,
                stdin_text="\0".join(names),
            )
        for f in singles:
            self.upload(f.local, f.remote, progress)

    def mkdir(self, remote_dir: str) -> None:
        # rsync creates missing parents of the destination with --mkpath (rsync >= 3.2.3).
        with tempfile.TemporaryDirectory() as empty:
            os.chmod(empty, 0o755)  # new remote directories take this mode
            argv = self._argv("-d", "--mkpath", f"{empty}/", self._remote(remote_dir.rstrip("/") + "/"))
            self._run(argv, lambda n: None, 0, f"creating {remote_dir}")

    def details(self) -> ClientDetails:
        # rsync streams a whole set without a round trip per file.
        return ClientDetails(
            timed_includes_setup=True, whole_file=True, compress=self.options.compress, streams_sets=True
        )


class RsyncSshClient(_RsyncClient):
    name = "ssh"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return super().unavailable_reason() or (
            None if shutil.which("ssh") else "ssh not installed: apt-get install openssh-client"
        )

    def __init__(self, target: Target, options: ClientOptions | None = None) -> None:
        super().__init__(target, options)
        self._askpass: dict[str, str] = {}

    @property
    def _where(self) -> str:
        return f"{ssh_host(self.target)}:{self.target.port('ssh')}"

    def _remote(self, path: str) -> str:
        # Served: relative to the served root (the server's rrsync gate anchors them there). Stock: beneath
        # remote_root, absolute or relative to the home directory; a trailing "/" (the contents) is kept.
        joined = remote_path(self.target, path)
        if self.target.stock and path.endswith("/") and not joined.endswith("/"):
            joined += "/"
        return f"{ssh_login(self.target)}:{joined}"

    def _run(self, argv: list[str], progress: Progress, total: int, what: str, **kw: Unpack[WatchAndInput]) -> None:
        # A stock server's password reaches ssh through SSH_ASKPASS, set up for this one rsync (see _env).
        with askpass_env(self.target) as env:
            self._askpass = env
            try:
                super()._run(argv, progress, total, what, **kw)
            finally:
                self._askpass = {}

    def _env(self) -> dict[str, str]:
        return self._askpass

    def _transport_args(self) -> list[str]:
        ssh = ["ssh", "-p", str(self.target.port("ssh")), *ssh_options(self.target, self.options)]
        return ["-e", shlex.join(ssh)]

    def _error(self, done: Completed, what: str) -> WorkbenchError:
        text = (done.stderr + done.stdout).lower()
        host_key = "host key verification failed" in text or "identification has changed" in text
        if host_key or SSH_LOGIN_DENIED.search(text):
            return ssh_error(done, what, self._where, self.target)
        if "connection refused" in text:
            return NetworkError(f"connection refused by {self._where} while {what}", "is sshd running there?")
        gate = next((ln.strip() for ln in done.stderr.splitlines() if "rrsync error" in ln), "")
        if gate:
            # The server's rrsync gate refused the request before rsync ran.
            if "no such file" in gate.lower():
                return NotFoundError(
                    f"{what}: no such file on the server", "check the path (relative to the served root)"
                )
            return WorkbenchError(f"{what} refused by the server: {gate}", "paths must stay inside the served root")
        return super()._error(done, what)

    def details(self) -> ClientDetails:
        return dataclasses.replace(super().details(), cipher=self.options.cipher or DEFAULT_CIPHER)


class RsyncDaemonClient(_RsyncClient):
    name = "daemon"

    @property
    def _where(self) -> str:
        return f"{self.target.host}:{self.target.port('rsync')}"

    def _module_url(self) -> str:
        host = url_host(self.target.host)
        user = self.target.credentials.user
        return f"rsync://{user}@{host}:{self.target.port('rsync')}/{self.target.share}/"

    def _remote(self, path: str) -> str:
        if self.target.stock:
            # Beneath the URL's directory; a trailing "/" (rsync: the directory's contents) is kept. The daemon
            # expands wildcards in the paths it is given (and un-backslashes the rest): escaped, a name is itself.
            joined = self.target.remote_path(path)
            path = _rsync_literal(joined + "/" if path.endswith("/") and joined else joined)
        return self._module_url() + path.lstrip("/")

    def mkdir(self, remote_dir: str) -> None:
        if not self.target.stock:
            super().mkdir(remote_dir)
            return
        # --mkpath would name new directories after the escaped path, backslashes and all. Send the directories
        # instead: a tree of empty ones into the module's root, where existing ones (or links to them, -K) stay.
        from workbench.shared.errors import UsageError

        parts = PurePosixPath(self.target.remote_path(remote_dir)).parts
        if any(part in (".", "..") for part in parts):
            raise UsageError(f"remote directory {remote_dir!r} leaves the module", "use a path beneath the URL's")
        with tempfile.TemporaryDirectory() as tree:
            for depth in range(len(parts) + 1):
                os.makedirs(Path(tree, *parts[:depth]), exist_ok=True)
                os.chmod(Path(tree, *parts[:depth]), 0o755)  # new remote directories take this mode
            argv = ["rsync", "-r", "--keep-dirlinks", *self._io_args(), f"{tree}/", self._module_url()]
            self._ask(argv, f"creating {remote_dir}")

    def _transport_args(self) -> list[str]:
        return [f"--contimeout={max(1, round(self.options.connect_timeout_s))}", "--no-motd"]

    def _ask(self, argv: list[str], what: str, work_bytes: int = 0) -> Completed:
        """Run an rsync that moves no file data (a listing, a dry run, a delete) and return its output."""
        done = run_native(
            argv,
            progress=lambda n: None,
            total_bytes=0,
            timeout=self.options.connect_timeout_s + self.options.stall_timeout_s * 4 + work_bytes / MIN_RATE,
            env=self._env(),
        )
        if done.returncode != 0:
            raise self._error(done, what)
        return done

    def is_dir(self, remote: str) -> bool:
        """Whether `remote` is a directory of the module, by a listing of it alone (-d): a directory lists first."""
        argv = ["rsync", "--list-only", "-d", *self._io_args(), self._remote(remote.strip("/") + "/")]
        try:
            listed = self._ask(argv, f"looking up {remote or 'the directory'}")
        except NotFoundError:
            return False
        return listed.stdout.startswith("d")

    def check_real_dir(self, remote: str) -> None:
        """The entry itself as the daemon lists it (-d, no trailing "/"): with lstat, so a link lists as `l`, a
        directory as `d`; anything but `d` is left alone."""
        path = remote.strip("/")
        listed = self._ask(["rsync", "--list-only", "-d", *self._io_args(), self._remote(path)], f"looking up {path}")
        kind = listed.stdout[:1]
        if kind != "d":
            what = "a link" if kind == "l" else "not a directory"
            raise LeftInPlace(
                f"{path} on {self._where} is not a real directory ({what}, as the daemon lists it): left in place, "
                "nothing through it touched",
                "delete it by hand if it is yours",
            )

    def remove_tree(self, remote_dir: str) -> None:
        """Sync an empty directory onto the parent with --delete, filtered down to this one entry.

        rsync deletes what it finds with lstat: a symlink inside is removed as a link, never followed.
        """
        from workbench.shared.errors import UsageError

        path = PurePosixPath(remote_dir.strip("/"))
        name = path.name
        if not name or name in (".", "..") or "\n" in remote_dir:
            raise UsageError(f"cannot delete {remote_dir!r} with rsync", "give a directory beneath the module's root")
        self.check_real_dir(str(path))
        with tempfile.TemporaryDirectory() as empty:
            filters = [f"--include=/{_rsync_literal(name, wild=False)}", f"--include=/{_rsync_literal(name)}/**"]
            parent = str(path.parent) + "/"
            argv = ["rsync", "-r", "--delete", *filters, "--exclude=*", *self._io_args(), f"{empty}/"]
            self._ask([*argv, self._remote(parent)], f"deleting {remote_dir}")

    def same_as_local(self, local: Path, remote: str) -> bool:
        """True when `remote` holds exactly the bytes of `local`, by rsync's own checksums (nothing downloaded).

        A dry run (-n) with --checksum and --itemize-changes: the daemon checksums its copy, rsync the local
        file, and an empty itemize list means nothing would change. A missing remote file is not the same.
        """
        size = local.stat().st_size
        # The daemon reads the whole file before it answers: give rsync's I/O timeout that long too.
        io_timeout = round(self.options.stall_timeout_s + size / MIN_RATE)
        argv = ["rsync", "-n", "-c", "-i", f"--timeout={io_timeout}", *self._transport_args()]
        done = self._ask([*argv, str(local), self._remote(remote)], f"checksumming {remote}", work_bytes=size)
        return not any(line[:2] in _ITEMIZED for line in done.stdout.splitlines())

    def _io_args(self) -> list[str]:
        return [f"--timeout={max(1, round(self.options.stall_timeout_s))}", *self._transport_args()]

    def _env(self) -> dict[str, str]:
        # The only way to hand rsync a daemon password without argv or a prompt.
        return {"RSYNC_PASSWORD": self.target.credentials.password}

    def _error(self, done: Completed, what: str) -> WorkbenchError:
        text = done.stderr + done.stdout
        if "connection refused" in text.lower():
            return NetworkError(f"connection refused by {self._where} while {what}", "is the rsync daemon running?")
        # The daemon's own line names the missing path; the last line is only the connection it then closed.
        missing = next((ln.strip() for ln in text.splitlines() if "no such file or directory" in ln.lower()), "")
        if done.returncode == 23 and missing:
            return NotFoundError(f"{what}: {missing}", f"check the path (relative to the module {self.target.share!r})")
        return super()._error(done, what)


# The first two characters of an --itemize-changes line for a file rsync would send or change.
_ITEMIZED = {f"{update}{kind}" for update in "<>ch.*" for kind in "fdLDS"}


def _rsync_literal(name: str, wild: bool = True) -> str:
    """`name` as an rsync filter pattern matching only itself.

    Backslash escapes wildcards only in a pattern that has one (`wild`: the pattern gets "**" added, or
    the name itself holds * ? or [); a pattern without is compared as is.
    """
    if not wild and not any(c in name for c in "*?["):
        return name
    return "".join("\\" + c if c in "\\*?[" else c for c in name)
