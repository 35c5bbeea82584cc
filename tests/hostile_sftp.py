"""A real SFTP server (paramiko's, over loopback) whose status messages are hostile, for tests of how workbench shows
an SFTP server's words.

`HostileSftp` serves a directory over SSH (public-key login for one user and key, the SFTP subsystem only: no shell,
no exec) with paramiko's SFTPServer and a plain file-system SFTPServerInterface. One change: before each request it
looks at its `SftpCase`, and when that names the request (open, mkdir, remove, rmdir, stat, lstat, opendir, read,
write…, and its path holds the `match` given), it answers with an SFTP status of the case's code and the case's
message (control sequences, markup, formulas, several lines or a megabyte) instead of doing it. With `odd_names`,
each directory it makes gets files whose names carry the same words, so that what lists and removes them meets them.

It runs in threads of the test's process; `ssh_config` and `known_hosts` give a client's side of it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko
from paramiko.sftp import CMD_LSTAT, CMD_MKDIR, CMD_NAMES, CMD_OPEN, CMD_OPENDIR, CMD_REMOVE, CMD_RMDIR, CMD_STAT

# The server's own log: a client's port probe (a TCP connect, no SSH) is no test failure, and paramiko would
# print a traceback of each to stderr.
_LOG = "tests.hostile_sftp"
logging.getLogger(_LOG).setLevel(logging.CRITICAL)
# requests whose first field is a path (the others start with a handle)
_PATH_FIRST = {CMD_OPEN, CMD_MKDIR, CMD_REMOVE, CMD_RMDIR, CMD_STAT, CMD_LSTAT, CMD_OPENDIR}


@dataclass(frozen=True)
class SftpCase:
    """Answer the requests named in `commands` (paramiko's names: "open", "mkdir", "read"…) whose path holds
    `match` with status `code` and `message`; make `odd_names` in each new directory."""

    commands: tuple[str, ...] = ()
    match: str = ""
    code: int = paramiko.sftp.SFTP_FAILURE
    message: str = ""
    odd_names: tuple[str, ...] = ()


class _HostileSftpServer(paramiko.SFTPServer):
    def __init__(self, channel: Any, name: str, server: Any, sftp_si: Any, state: HostileSftp) -> None:
        super().__init__(channel, name, server, sftp_si, state)
        self.state = state

    def _process(self, t: int, request_number: int, msg: paramiko.Message) -> None:
        case = self.state.case
        if CMD_NAMES.get(t) in case.commands:
            peek = paramiko.Message(msg.asbytes())
            peek.get_int()  # the request number
            path = peek.get_string().decode("utf-8", "replace") if t in _PATH_FIRST else ""
            if case.match in path:
                self.state.answered += 1
                self._send_status(request_number, case.code, case.message)
                return
        super()._process(t, request_number, msg)


class _Handle(paramiko.SFTPHandle):
    def stat(self) -> paramiko.SFTPAttributes | int:
        try:
            return paramiko.SFTPAttributes.from_stat(os.fstat(self.readfile.fileno()))
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)

    def chattr(self, attr: paramiko.SFTPAttributes) -> int:
        return paramiko.sftp.SFTP_OK


class _Root(paramiko.SFTPServerInterface):
    """The served directory as the whole of the SFTP file system ("/" is its top; ".." goes nowhere above)."""

    def __init__(self, server: Any, state: HostileSftp) -> None:
        super().__init__(server)
        self.state = state

    def _real(self, path: str) -> str:
        parts = [p for p in path.split("/") if p not in ("", ".", "..")]
        return os.path.join(self.state.root, *parts)

    def _attrs(self, real: str, follow: bool) -> paramiko.SFTPAttributes | int:
        try:
            return paramiko.SFTPAttributes.from_stat(os.stat(real) if follow else os.lstat(real))
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)

    def list_folder(self, path: str) -> list[paramiko.SFTPAttributes] | int:
        real = self._real(path)
        try:
            entries = []
            for name in os.listdir(real):
                attrs = paramiko.SFTPAttributes.from_stat(os.lstat(os.path.join(real, name)))
                attrs.filename = name
                entries.append(attrs)
            return entries
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)

    def stat(self, path: str) -> paramiko.SFTPAttributes | int:
        return self._attrs(self._real(path), follow=True)

    def lstat(self, path: str) -> paramiko.SFTPAttributes | int:
        return self._attrs(self._real(path), follow=False)

    def open(self, path: str, flags: int, attr: paramiko.SFTPAttributes) -> paramiko.SFTPHandle | int:
        try:
            fd = os.open(self._real(path), flags, (attr.st_mode or 0o644) & 0o777)
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)
        if flags & (os.O_WRONLY | os.O_RDWR):
            mode = "r+b" if flags & os.O_RDWR else "wb"
            mode = "ab" if flags & os.O_APPEND else mode
        else:
            mode = "rb"
        handle = _Handle(flags)
        handle.filename = path
        handle.readfile = handle.writefile = os.fdopen(fd, mode)
        return handle

    def _call(self, call: Any, *args: str) -> int:
        try:
            call(*args)
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno)
        return paramiko.sftp.SFTP_OK

    def remove(self, path: str) -> int:
        return self._call(os.remove, self._real(path))

    def rename(self, oldpath: str, newpath: str) -> int:
        return self._call(os.rename, self._real(oldpath), self._real(newpath))

    def rmdir(self, path: str) -> int:
        return self._call(os.rmdir, self._real(path))

    def mkdir(self, path: str, attr: paramiko.SFTPAttributes) -> int:
        real = self._real(path)
        done = self._call(os.mkdir, real)
        if done == paramiko.sftp.SFTP_OK:
            for name in self.state.case.odd_names:
                with contextlib.suppress(OSError):
                    Path(real, name).write_bytes(b"x")
        return done

    def chattr(self, path: str, attr: paramiko.SFTPAttributes) -> int:
        return paramiko.sftp.SFTP_OK


class _Login(paramiko.ServerInterface):
    def __init__(self, state: HostileSftp) -> None:
        self.state = state

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        if username == self.state.user and key == self.state.client_key:
            return paramiko.AUTH_SUCCESSFUL
        return paramiko.AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return paramiko.OPEN_SUCCEEDED
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED


class HostileSftp:
    """paramiko's SFTP server on 127.0.0.1 serving `base`/root, answering as its `case` says."""

    def __init__(self, base: Path, user: str) -> None:
        self.base = base
        self.user = user
        self.root = base / "root"
        self.root.mkdir(parents=True, exist_ok=True)
        # ECDSA: each run's client loads its RSA-2048 key with a ~40 ms consistency check, twice per login
        self.host_key = paramiko.ECDSAKey.generate()
        self.client_key = paramiko.ECDSAKey.generate()
        self.client_key_path = base / "client_key"
        self.client_key.write_private_key_file(str(self.client_key_path))
        self.client_key_path.chmod(0o600)
        self.case = SftpCase()
        self.answered = 0  # requests answered with the case's status since set_case
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._transports: list[paramiko.Transport] = []
        self._thread = threading.Thread(target=self._accept, name="hostile-sftp", daemon=True)

    def set_case(self, case: SftpCase | None = None) -> None:
        self.case = case or SftpCase()
        self.answered = 0

    def known_hosts(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_key.get_name()} {self.host_key.get_base64()}\n"

    def ssh_config(self, alias: str, known_hosts: Path) -> str:
        return (
            f"Host {alias}\n  HostName 127.0.0.1\n  Port {self.port}\n  User {self.user}\n"
            f"  IdentityFile {self.client_key_path}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known_hosts}\n"
            "  StrictHostKeyChecking yes\n  BatchMode yes\n"
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        # close() alone does not wake the thread blocked in accept() (it waited out the join's 10 s); shutdown does
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for transport in self._transports:
            transport.close()
        self._thread.join(timeout=10)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed by stop()
            transport = paramiko.Transport(conn)
            transport.set_log_channel(_LOG)
            transport.add_server_key(self.host_key)
            transport.set_subsystem_handler("sftp", _HostileSftpServer, _Root, self)
            self._transports.append(transport)
            with contextlib.suppress(paramiko.SSHException, EOFError, OSError):
                transport.start_server(event=threading.Event(), server=_Login(self))
