"""OpenSSH `scp`, as people copy with it: its default SFTP mode (scp/openssh) and the old protocol (scp/legacy, -O).

One scp process per copy or per file set, so the login is inside every timed copy as for `sftp`. The ssh
options, cipher, time limits and progress watching are OpenSSH sftp's (openssh_sftp.py). `-C` when
compression is asked: the rsync -z against `scp -C` comparison users run.

The two modes read remote paths differently: in SFTP mode a source is a glob pattern on the server (so
`*?[]\\` are escaped) and a destination is taken literally; the legacy protocol hands both to the remote
login shell, so every character a shell treats specially is escaped with a backslash. A set downloads
with all its files named in one scp, which logs in once per remote file (scp's own behaviour); a set
uploads with one login. Directories are made by copying an empty local tree with -r (scp has no mkdir).
"""

from __future__ import annotations

import contextlib
import functools
import re
import secrets
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import ClassVar, Unpack

from workbench.protocols.base import Client, FileCopy, Progress
from workbench.protocols.details import ClientDetails
from workbench.protocols.openssh_sftp import (
    DEFAULT_CIPHER,
    MAX_BUDGET_BYTES,
    MIN_RATE,
    REQUEST_BYTES,
    REQUESTS_IN_FLIGHT,
    askpass_env,
    remote_path,
    ssh_error,
    ssh_host,
    ssh_login,
    ssh_options,
    total_size,
)
from workbench.protocols.process import Completed, Watch, run_native
from workbench.shared import childcpu
from workbench.shared.errors import UsageError

CHANNEL_WINDOW_BYTES = 2 * 1024 * 1024  # OpenSSH's session channel window: the legacy protocol streams in it
_GLOB = re.compile(r"([\\*?\[\]])")
_SHELL = re.compile(r"([^\w./,:+@%=-])")  # \w includes non-ASCII letters, which no shell treats specially


def _groups(files: Sequence[FileCopy]) -> tuple[dict[tuple[Path, str], list[FileCopy]], list[FileCopy]]:
    """Files sharing (local dir, remote dir) under the same base name go in one scp; renames go alone."""
    groups: dict[tuple[Path, str], list[FileCopy]] = defaultdict(list)
    singles: list[FileCopy] = []
    for f in files:
        remote = PurePosixPath(f.remote)
        if remote.name == f.local.name:
            groups[(f.local.parent, str(remote.parent))].append(f)
        else:
            singles.append(f)
    return groups, singles


class _ScpClient(Client):
    protocol: ClassVar[str] = "scp"
    legacy: ClassVar[bool] = False

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None if shutil.which("scp") else "scp not installed: apt-get install openssh-client"

    @property
    def _where(self) -> str:
        return f"{ssh_host(self.target)}:{self.target.port('ssh')}"

    # --- remote paths as this mode's scp reads them ---
    def _path(self, remote: str) -> str:
        path = remote_path(self.target, remote) or "."
        if "\n" in path or "\r" in path:
            raise UsageError(f"remote path {path!r} holds a line break, which scp cannot pass", "rename it")
        return path

    def _source(self, remote: str) -> str:
        escaped = (_SHELL if self.legacy else _GLOB).sub(r"\\\1", self._path(remote))
        return f"{ssh_login(self.target)}:{escaped}"

    def _dest(self, remote: str, folder: bool = False) -> str:
        path = self._path(remote)
        if folder:  # a trailing slash: scp fails on a missing directory instead of copying to that name
            path = path.rstrip("/") + "/"
        escaped = _SHELL.sub(r"\\\1", path) if self.legacy else path
        return f"{ssh_login(self.target)}:{escaped}"

    # --- running scp ---
    def _argv(self, *args: str) -> list[str]:
        # No -q: scp passes it on to ssh, which then keeps its reason for a failed login to itself. Without a
        # terminal scp shows no progress meter anyway.
        argv = ["scp", "-P", str(self.target.port("ssh"))]
        if self.legacy:
            argv.append("-O")
        if self.options.compress:
            argv.append("-C")
        return [*argv, *ssh_options(self.target, self.options), *args]

    def _run(
        self,
        args: list[str],
        progress: Progress,
        total: int,
        what: str,
        count_tree: bool = False,
        **watch: Unpack[Watch],
    ) -> None:
        done = self._scp(args, progress, total, count_tree, **watch)
        if done.returncode != 0:
            raise ssh_error(done, what, self._where, self.target)

    def _scp(
        self, args: list[str], progress: Progress, total: int, count_tree: bool = False, **watch: Unpack[Watch]
    ) -> Completed:
        """Run scp. `count_tree` where it downloads more than one remote file: it starts an ssh per remote file and
        reaps only the last, so only there its tree is counted whole (run_native), at a dearer start; one remote
        file, or uploads (one login), leave no child unreaped."""
        # A connection master it started would live on in the counted group after the copy (a user's ssh config
        # may ask for ControlMaster with ControlPersist), its CPU landing on later copies: none outlives this
        # scp, while an existing master is still used.
        persist = ["-o", "ControlPersist=no"] if count_tree else []
        with askpass_env(self.target) as env:
            return run_native(
                self._argv(*persist, *args),
                progress=progress,
                total_bytes=total,
                timeout=self.options.stall_timeout_s * 4 + min(total, MAX_BUDGET_BYTES) / MIN_RATE,
                stall_timeout=self.options.stall_timeout_s,
                env=env,
                count_tree=count_tree,
                **watch,
            )

    def connect(self) -> None:
        """Ask for a file that does not exist: the login and host key are checked outside the timed copies.

        scp saying exactly that file is missing means the login worked and scp runs on the server.
        """
        probe = f".workbench-login-check-{secrets.token_hex(6)}"
        childcpu.prepare()  # the group a download of several files counts its ssh in: made here, not in a copy
        with tempfile.TemporaryDirectory(prefix="wb-scp-") as tmp:
            done = self._scp([self._source(probe), f"{tmp}/"], lambda n: None, 0)
        said = done.stderr.lower()
        if done.returncode == 0 or (probe in said and "no such file" in said):
            return
        raise ssh_error(done, "logging in over scp", self._where, self.target)

    # --- copies ---
    def download(self, remote: str, local: Path, progress: Progress) -> None:
        # The size is not known up front: report what really landed.
        with contextlib.suppress(FileNotFoundError):
            local.unlink()  # legacy scp truncates only at the end: a longer old file would fake progress
        sent = 0

        def real(_: int) -> None:
            nonlocal sent
            now = total_size([local])
            if now > sent:
                progress(now - sent)
                sent = now

        self._run(
            [self._source(remote), str(local)],
            real,
            1 << 62,
            f"downloading {remote}",
            watch=lambda: total_size([local]),
        )

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        size = local.stat().st_size
        self._run([str(local), self._dest(remote)], progress, size, f"uploading {local.name}", watch_reads=True)

    def download_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        groups, singles = _groups(files)
        for (local_dir, remote_dir), items in groups.items():
            locals_ = [f.local for f in items]
            for path in locals_:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            sources = [self._source(f.remote) for f in items]
            self._run(
                [*sources, f"{local_dir}/"],
                progress,
                sum(f.size for f in items),
                f"downloading {len(items)} files from {remote_dir}",
                count_tree=len(items) > 1,
                watch=functools.partial(total_size, locals_),
            )
        for f in singles:
            self.download(f.remote, f.local, progress)

    def upload_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        groups, singles = _groups(files)
        for (_, remote_dir), items in groups.items():
            self._run(
                [*(str(f.local) for f in items), self._dest(remote_dir, folder=True)],
                progress,
                sum(f.size for f in items),
                f"uploading {len(items)} files to {remote_dir}",
                watch_reads=True,
            )
        for f in singles:
            self.upload(f.local, f.remote, progress)

    def mkdir(self, remote_dir: str) -> None:
        """Copy an empty local tree shaped like remote_dir with -r (scp has no mkdir); existing parts stay as
        they were. See _copy_tree for how each mode is asked."""
        parts = PurePosixPath(remote_dir.strip("/")).parts
        if not parts or ".." in parts:
            raise UsageError(f"cannot create {remote_dir!r} with scp", "give a directory beneath the remote root")
        with tempfile.TemporaryDirectory(prefix="wb-scp-") as tmp:
            Path(tmp, *parts).mkdir(parents=True)
            for depth in range(1, len(parts) + 1):
                Path(tmp, *parts[:depth]).chmod(0o755)  # new remote directories take the local tree's modes
            self._copy_tree(Path(tmp), parts, remote_dir)

    def _copy_tree(self, tree: Path, parts: tuple[str, ...], remote_dir: str) -> None:
        # The legacy protocol's receiver sets the mode only of a directory it creates: the whole tree goes into
        # the remote root. In SFTP mode scp sets the mode of every directory it copies onto, existing ones too,
        # and a chmod of a directory with a POSIX ACL rewrites the ACL's mask, taking write access from users
        # the server granted it (workbench's own rsync daemon, beneath incoming/). So only the leaf is copied,
        # into its parent; that fails on a missing parent, which is then made first, the same way.
        if self.legacy:
            self._run(
                ["-r", str(tree / parts[0]), self._dest("", folder=True)], lambda n: None, 0, f"creating {remote_dir}"
            )
            return
        argv = ["-r", str(tree.joinpath(*parts)), self._dest("/".join(parts[:-1]), folder=True)]
        done = self._scp(argv, lambda n: None, 0)
        if done.returncode != 0 and len(parts) > 1 and "no such file" in (done.stderr + done.stdout).lower():
            self._copy_tree(tree, parts[:-1], remote_dir)  # copies the parent with its (empty-but-for-us) leaf
            return
        if done.returncode != 0:
            raise ssh_error(done, f"creating {remote_dir}", self._where, self.target)

    def details(self) -> ClientDetails:
        cipher = self.options.cipher or DEFAULT_CIPHER
        process = "one scp per copy or set; a login per remote file of a downloaded set"
        if self.legacy:
            return ClientDetails(
                ssh_window_bytes=CHANNEL_WINDOW_BYTES,
                cipher=cipher,
                compress=self.options.compress,
                process=process,
                timed_includes_setup=True,
            )
        return ClientDetails(
            request_bytes=REQUEST_BYTES,
            requests_in_flight=REQUESTS_IN_FLIGHT,
            cipher=cipher,
            compress=self.options.compress,
            process=process,
            timed_includes_setup=True,
        )


class ScpClient(_ScpClient):
    """scp in its default mode (OpenSSH >= 9.0): SFTP requests under the scp command line."""

    name = "openssh"


class ScpLegacyClient(_ScpClient):
    """scp -O: the old rcp-style protocol, a remote `scp -t`/`scp -f` streaming through the channel."""

    name = "legacy"
    legacy = True
