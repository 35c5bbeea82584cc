"""The FTP side of `workbench serve`: pyftpdlib, passive mode, sendfile on RETR, one user confined to root.

Every file operation goes through workbench.server.confine (ConfinedFS below): no symlink is followed on any
path component, only regular files with a single link are opened, nothing outside the root is
reachable, and pyftpdlib never calls os.chdir (which would move the whole serve process). SITE CHMOD
and STOU are not offered. A connection not logged in AUTH_DEADLINE_S after accept is closed.
"""

from __future__ import annotations

import errno
import hmac
import os
import stat
import threading
from pathlib import Path
from typing import IO, Any, ClassVar

from pyftpdlib.authorizers import AuthenticationFailed, DummyAuthorizer
from pyftpdlib.filesystems import AbstractedFS, FilesystemError
from pyftpdlib.handlers import DTPHandler, FTPHandler
from pyftpdlib.servers import FTPServer

from workbench.server.confine import PathRefused, ServedRoot, open_in
from workbench.shared.credentials import Credentials

AUTH_DEADLINE_S = 10.0  # from accept to a successful login, however slowly the client types
# e: cd, l: list, r: retrieve, a: append, d: delete, f: rename, m: mkdir, w: store, T: mtime.
# No 'M' (SITE CHMOD): a client must not make setuid files or open up permissions.
PERMISSIONS = "elradfmwT"
_DROPPED_COMMANDS = ("SITE CHMOD", "STOU")  # STOU would create files through tempfile by path


class _Dtp(DTPHandler):
    # Large socket reads on STOR: the default 64 KiB costs a syscall and a disk write per 64 KiB.
    ac_in_buffer_size = 1 << 20
    ac_out_buffer_size = 1 << 20


class ConfinedFS(AbstractedFS):
    """pyftpdlib's filesystem view, with every operation done beneath the root's descriptor.

    pyftpdlib hands the methods "real" paths (root + '/' + the normalised virtual path, computed
    lexically by ftp2fs); they are turned back into paths relative to the root and resolved by the
    kernel under ServedRoot's rules, never by realpath().
    """

    def __init__(self, root: str, cmd_channel: Any) -> None:
        super().__init__(root, cmd_channel)
        self._served: ServedRoot = cmd_channel.served

    def _rel(self, path: str) -> str:
        root = self.root.rstrip("/")
        if path == root:
            return ""
        if not path.startswith(root + "/"):
            raise PathRefused(path, "outside the served root")
        return path[len(root) + 1 :]

    # -- path checks: lexical only (the kernel checks links when the path is used)

    def validpath(self, path: str) -> bool:
        try:
            self._rel(path)
        except OSError:
            return False
        return True

    def realpath(self, path: str) -> str:
        return path

    # -- files

    def open(self, filename: str, mode: str) -> IO[bytes]:
        rel = self._rel(filename)
        if mode == "rb":
            return open(self._served.open_file(rel, os.O_RDONLY), "rb")
        dir_fd, name = self._served.parent(rel)
        try:
            if mode == "wb":
                # A new inode every time: an existing name (maybe a hard link to a file outside the
                # root, maybe a symlink) is removed, never written through; O_EXCL then refuses any
                # name planted in between.
                try:
                    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    pass
                else:
                    if stat.S_ISDIR(st.st_mode):
                        raise IsADirectoryError(errno.EISDIR, "is a directory", name)
                    os.unlink(name, dir_fd=dir_fd)
                fd = open_in(dir_fd, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            elif mode == "ab":
                try:
                    fd = open_in(dir_fd, name, os.O_WRONLY | os.O_APPEND)
                except FileNotFoundError:
                    fd = open_in(dir_fd, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            elif mode == "r+b":  # STOR after REST: rewrite from an offset
                fd = open_in(dir_fd, name, os.O_RDWR)
            else:
                raise FilesystemError(f"open mode {mode!r} not supported")
        finally:
            os.close(dir_fd)
        return open(fd, mode)

    def mkstemp(self, *args: Any, **kwargs: Any) -> Any:
        raise FilesystemError("STOU is not supported")

    # -- directories

    def chdir(self, path: str) -> None:
        os.close(self._served.open_dir(self._rel(path)))  # must be a real directory beneath the root
        self.cwd = self.fs2ftp(path)

    def mkdir(self, path: str) -> None:
        dir_fd, name = self._served.parent(self._rel(path))
        try:
            os.mkdir(name, 0o777, dir_fd=dir_fd)  # the umask or a default ACL decides, as in ServedRoot.mkdirs
        finally:
            os.close(dir_fd)

    def listdir(self, path: str) -> list[str]:
        return self._served.listdir(self._rel(path))

    def listdirinfo(self, path: str) -> list[str]:
        return self.listdir(path)

    def rmdir(self, path: str) -> None:
        self._served.rmdir(self._rel(path))

    def remove(self, path: str) -> None:
        self._served.unlink(self._rel(path))

    def rename(self, src: str, dst: str) -> None:
        self._served.rename(self._rel(src), self._rel(dst))

    def chmod(self, path: str, mode: int) -> None:
        raise FilesystemError("SITE CHMOD is not supported")

    def utime(self, path: str, timeval: float) -> None:
        fd = self._served.open_file(self._rel(path), os.O_RDONLY)
        try:
            os.utime(fd, (timeval, timeval))
        finally:
            os.close(fd)

    # -- metadata: lstat semantics throughout, a link is never followed

    def stat(self, path: str) -> os.stat_result:
        return self._served.stat(self._rel(path))

    def lstat(self, path: str) -> os.stat_result:
        return self._served.stat(self._rel(path))

    def readlink(self, path: str) -> str:
        raise FilesystemError("links are not followed or shown")

    def _mode(self, path: str) -> int | None:
        try:
            return self.stat(path).st_mode
        except OSError:
            return None

    def isfile(self, path: str) -> bool:
        mode = self._mode(path)
        return mode is not None and stat.S_ISREG(mode)

    def islink(self, path: str) -> bool:
        mode = self._mode(path)
        return mode is not None and stat.S_ISLNK(mode)

    def isdir(self, path: str) -> bool:
        mode = self._mode(path)
        return mode is not None and stat.S_ISDIR(mode)

    def lexists(self, path: str) -> bool:
        return self._mode(path) is not None

    def getsize(self, path: str) -> int:
        return self.stat(path).st_size

    def getmtime(self, path: str) -> float:
        return self.stat(path).st_mtime


class _Authorizer(DummyAuthorizer):
    """One user; the name and password are compared in constant time."""

    def __init__(self, creds: Credentials, root: Path) -> None:
        super().__init__()
        self.add_user(creds.user, creds.password, str(root), perm=PERMISSIONS)
        self._user = creds.user.encode()
        self._password = creds.password.encode()

    def validate_authentication(self, username: str, password: str, handler: Any) -> None:
        ok_user = hmac.compare_digest(username.encode("utf-8", "surrogateescape"), self._user)
        ok_pass = hmac.compare_digest(password.encode("utf-8", "surrogateescape"), self._password)
        if not (ok_user and ok_pass):
            raise AuthenticationFailed("Authentication failed.")


class _Handler(FTPHandler):
    banner = "workbench ftp ready"
    use_sendfile = True  # RETR straight from the page cache to the socket
    dtp_handler = _Dtp
    abstracted_fs = ConfinedFS
    proto_cmds: ClassVar[dict[str, Any]] = {
        cmd: spec for cmd, spec in FTPHandler.proto_cmds.items() if cmd not in _DROPPED_COMMANDS
    }
    timeout = 60
    served: ServedRoot  # set on the per-server subclass

    def handle(self) -> None:
        super().handle()
        # pyftpdlib's `timeout` is per idle period, so a client typing one byte at a time never hits
        # it; this is a total deadline for logging in. self.call_later is cancelled on close().
        self.call_later(AUTH_DEADLINE_S, self._auth_deadline)

    def _auth_deadline(self) -> None:
        if not self.authenticated and not self._closed:
            self.respond("421 Login time exceeded, closing control connection.")
            self.close()  # not close_when_done(): a client that does not read would keep the slot


class FtpServer:
    """pyftpdlib in a background thread; `port` is the real one once started (port 0 allowed)."""

    def __init__(self, root: Path, creds: Credentials, bind: str, port: int) -> None:
        self._served = ServedRoot(root)
        handler = type("Handler", (_Handler,), {"authorizer": _Authorizer(creds, root), "served": self._served})
        try:
            self._server = FTPServer((bind, port), handler)
        except BaseException:
            self._served.close()
            raise
        self._server.max_cons = 64
        self.port = self._server.address[1]
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        self._thread = threading.Thread(
            # handle_exit=False: no start-up banner or logging set-up from pyftpdlib (serve prints its own line).
            target=self._server.serve_forever,
            kwargs={"timeout": 0.5, "blocking": True, "handle_exit": False},
            daemon=True,
        )
        self._thread.start()
        return self.port

    def stop(self) -> None:
        self._server.close_all()
        if self._thread:
            self._thread.join(timeout=5)
        self._served.close()
