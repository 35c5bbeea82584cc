"""AFP through workbench's own client: DSI over TCP, AFP 3.x, a DHX2 login, pipelined reads and writes.

No maintained AFP client exists for Python, and Linux has none at all, so this one speaks the protocol itself
(afp_dsi.py: the session layer; afp_wire.py: the commands; afp_dhx2.py: the login). What shapes its speed:
reads and writes of `request_bytes` each (ClientOptions.block_size, at most the DSI quantum the server
announces), `requests_in_flight` of them outstanding at once (ClientOptions.requests_in_flight), so its ceiling
is requests_in_flight x request_bytes per round trip, as details() says. Per file one round trip more: it opens
the data fork (an upload sends the FPCreateFile right in front), and sends FPCloseFork right behind the last
read or write.

Logins: DHX2 (Diffie-Hellman, then the password CAST5-encrypted) unless the user asks for ClientOptions.afp_login
"cleartext" (the password, at most 8 bytes, in clear) or "guest". A server that offers no DHX2 is refused with
a hint rather than sent the password in clear.

Paths: every request names its object by its whole path from the volume's root, never by a directory ID the
client kept (with netatalk's "last" CNID scheme an ID dies with the next change to its directory).

Links: netatalk shows a symbolic link as a file (Finder type 'slnk', st_mode S_IFLNK) and resolves no path
through it; remove_tree deletes such an entry itself and never enters it, and checks before deleting inside a
directory, and before deleting the directory, that its path still leads to a real directory (the same ID where
the volume keeps IDs), not a link swapped in.
"""

from __future__ import annotations

import errno
import mmap
import os
import secrets
import stat
import struct
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO

from workbench.protocols import afp_dhx2 as dhx2
from workbench.protocols import afp_wire as wire
from workbench.protocols.afp_dsi import COMMAND, WRITE, ZERO_COPY, DsiConnection, DsiError, LocalFileError, Reply
from workbench.protocols.base import (
    REMOVE_MAX_ENTRIES,
    Client,
    LeftInPlace,
    Progress,
    RemovalBudget,
    first_problem,
    listed_name,
)
from workbench.protocols.details import ClientDetails
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

AFP_PORT = 548
ATTENTION_SHUTDOWN = 0x8000  # an attention code's bit: the server is shutting down
MAX_REQUESTS_IN_FLIGHT = 64
ENUMERATE_COUNT = 512  # entries asked for per FPEnumerateExt2
ENUMERATE_REPLY_BYTES = 256 * 1024


def _afp_port(ports: Any) -> int:
    return int(ports.get("afp", AFP_PORT))


class AfpPythonClient(Client):
    protocol = "afp"
    name = "python"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._conn: DsiConnection | None = None
        self._vol: wire.Volume | None = None
        self.version: str | None = None
        self.uam: str | None = None
        self.peak_in_flight = 0  # the most read or write requests outstanding at once this session

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None

    @property
    def _port(self) -> int:
        return _afp_port(self.target.ports)

    @property
    def _where(self) -> str:
        host = f"[{self.target.host}]" if ":" in self.target.host else self.target.host
        return f"{host}:{self._port}"

    # -- errors -----------------------------------------------------------------------------------------------

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """Translate what the connection raises while doing `what` into one-line workbench errors."""
        try:
            yield
        except WorkbenchError:
            raise
        except DsiError as exc:
            shutdown = self._conn is not None and any(code & ATTENTION_SHUTDOWN for code in self._conn.attentions)
            self._broken()
            said = " (it had announced a shutdown)" if shutdown else ""
            raise NetworkError(f"AFP: {exc}{said} while {what}", "the server stopped or dropped the session") from exc
        except TimeoutError as exc:
            self._broken()
            raise NetworkError(
                f"AFP: no reply from {self._where} for {self.options.stall_timeout_s:g} s while {what}",
                "the server stalled",
            ) from exc
        except OSError as exc:
            self._broken()
            raise from_os_error(exc, what, self.target.host, self._port) from exc
        except ValueError as exc:  # a reply the parsers refuse
            self._broken()
            raise NetworkError(
                f"AFP: malformed reply from {self._where} while {what}: {exc}", "see the server's log"
            ) from exc

    def _broken(self) -> None:
        """After a failed exchange the stream's position is unknown: no further request goes on it."""
        if self._conn is not None:
            self._conn.close(session_open=False)
            self._conn = None

    def _failure(self, code: int, what: str) -> WorkbenchError:
        """The workbench error for an AFP result code."""
        text = f"AFP: {what}: {wire.result_name(code)} from {self._where}"
        if code in (wire.ERR_OBJECT_NOT_FOUND, wire.ERR_DIR_NOT_FOUND):
            return NotFoundError(text, "check the remote path")
        if code == wire.ERR_ACCESS:
            return AuthError(text, "check the volume's permissions for this user")
        if code in (wire.ERR_DISK_FULL, wire.ERR_VOLUME_LOCKED):
            return DiskError(text, "free space on the server or use a writable volume")
        if code in (wire.ERR_USER_NOT_AUTH, wire.ERR_BAD_UAM, wire.ERR_PASSWORD_EXPIRED):
            return AuthError(text, "check the user and password")
        return WorkbenchError(text, "see the server's log")

    def _require(self) -> tuple[DsiConnection, wire.Volume]:
        if self._conn is None or self._vol is None:
            raise NetworkError("AFP session is not connected", "call connect() first")
        return self._conn, self._vol

    def _call(self, payload: bytes, what: str, ok: tuple[int, ...] = (wire.AFP_OK,)) -> Reply:
        """One AFP command and its reply; a result code outside `ok` raises its workbench error."""
        conn = self._conn
        if conn is None:
            raise NetworkError("AFP session is not connected", "call connect() first")
        with self._guard(what):
            reply = conn.request(COMMAND, payload)
        if reply.code not in ok:
            raise self._failure(reply.code, what)
        return reply

    # -- session ----------------------------------------------------------------------------------------------

    def _server_info(self) -> wire.ServerInfo:
        what = f"asking {self._where} for its AFP versions and login methods"
        with self._guard(what):
            status = DsiConnection.connect(
                self.target.host, self._port, self.options.connect_timeout_s, self.options.connect_timeout_s
            )
            try:
                return wire.parse_server_info(status.get_status())
            finally:
                status.close(session_open=False)

    def _choose_uam(self, info: wire.ServerInfo) -> str:
        login = self.options.afp_login
        if login not in wire.AFP_LOGINS:
            raise UsageError(f"unknown AFP login {login!r}", f"choose from {', '.join(wire.AFP_LOGINS)}")
        wanted = {"secure": wire.UAM_DHX2, "cleartext": wire.UAM_CLEARTEXT, "guest": wire.UAM_GUEST}[login]
        offered = ", ".join(repr(u) for u in info.uams) or "none"
        if wanted not in info.uams:
            hint = {
                "secure": "it offers no secure login workbench speaks; --afp-login cleartext only on a link you "
                "trust (the password then crosses it in clear)",
                "cleartext": "use --afp-login secure (DHX2)",
                "guest": "log in with a user and password (--afp-login secure)",
            }[login]
            raise AuthError(f"AFP server {self._where} offers no {wanted!r} login (it offers {offered})", hint)
        return wanted

    def connect(self) -> None:
        info = self._server_info()
        version = wire.choose_version(info.versions)
        if version is None:
            offered = ", ".join(repr(v) for v in info.versions) or "none"
            raise UnavailableError(
                f"AFP server {self._where} speaks no AFP 3 version (it offers {offered})",
                f"{self.label} speaks AFP 3.1 to 3.4",
            )
        uam = self._choose_uam(info)
        what = f"opening an AFP session with {self._where}"
        with self._guard(what):
            conn = DsiConnection.connect(
                self.target.host, self._port, self.options.connect_timeout_s, self.options.stall_timeout_s
            )
            self._conn = conn
            conn.open_session()
        try:
            self._login(version, uam)
            self.version, self.uam = version, uam
            reply = self._call(wire.open_vol(self.target.share), f"opening the volume {self.target.share!r}")
            with self._guard(f"opening the volume {self.target.share!r}"):
                self._vol = wire.parse_open_vol(reply.data)
        except BaseException:
            self.close()
            raise

    def _login(self, version: str, uam: str) -> None:
        creds = self.target.credentials
        what = f"logging in to {self._where} as {creds.user!r}"
        conn = self._conn
        assert conn is not None
        if uam == wire.UAM_GUEST:
            self._login_step(conn, wire.login_guest(version), what, last=True)
            return
        if uam == wire.UAM_CLEARTEXT:
            try:
                password = wire.cleartext_password(creds.password)
            except ValueError as exc:
                raise UsageError(f"AFP: {exc}", "--afp-login secure (DHX2) takes a longer password") from exc
            self._login_step(conn, wire.login_ext(version, uam, creds.user, password), what, last=True)
            return
        if missing := dhx2.cast5_missing():
            raise UnavailableError(f"AFP: the DHX2 login needs CAST5 and {missing}", "pip install -U cryptography")
        answer = self._login_step(conn, wire.login_ext(version, uam, creds.user), what, last=False)
        with self._guard(what):
            challenge = dhx2.parse_challenge(answer)
            rb = 2 + secrets.randbelow(challenge.p - 3)
            nonce = os.urandom(dhx2.NONCE_BYTES)
            first, key = dhx2.first_reply(challenge, rb, nonce)
        answer = self._login_step(conn, wire.login_cont(first), what, last=False)
        try:
            session_id, server_nonce = dhx2.server_nonce(key, nonce, answer)
        except ValueError as exc:
            raise AuthError(f"AFP: {what}: {exc}", "the server is not who it claims, or it is broken") from exc
        try:
            proof = dhx2.password_reply(key, session_id, server_nonce, creds.password)
        except ValueError as exc:
            raise UsageError(f"AFP: {exc}", "use a shorter password") from exc
        self._login_step(conn, wire.login_cont(proof), what, last=True)

    def _login_step(self, conn: DsiConnection, payload: bytes, what: str, last: bool) -> bytes:
        """One login message; its reply's data. The last must be accepted, the others continued."""
        with self._guard(what):
            reply = conn.request(COMMAND, payload)
        expected = wire.AFP_OK if last else wire.ERR_AUTH_CONTINUE
        if reply.code == expected:
            return reply.data
        if reply.code in (wire.ERR_USER_NOT_AUTH, wire.ERR_PARAM, wire.ERR_ACCESS, wire.AFP_OK):
            # netatalk answers a bad user name with a parameter error at the first step
            raise AuthError(
                f"AFP login as {self.target.credentials.user!r} refused by {self._where} "
                f"({wire.result_name(reply.code)})",
                "check the user and password",
            )
        raise self._failure(reply.code, what)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        self._vol = None
        if conn is None:
            return
        with suppress(OSError, DsiError):
            conn.sock.settimeout(min(self.options.stall_timeout_s, 2.0))
            conn.read_reply(conn.send_request(COMMAND, wire.logout()))
        conn.close()

    # -- paths ------------------------------------------------------------------------------------------------

    def _names(self, remote: str) -> list[str]:
        path = self.target.remote_path(remote) if self.target.stock else remote
        try:
            return wire.split_path(path)
        except ValueError as exc:
            raise NotFoundError(f"AFP: the remote path {remote!r} holds {exc}", "use a path inside the volume") from exc

    def _lookup(self, names: list[str], what: str) -> wire.Entry:
        """The file or directory at `names` (NotFoundError when there is none)."""
        _, vol = self._require()
        unix = bool(vol.attributes & wire.VOL_ATTR_UNIX_PRIVS)
        fbits, dbits = wire.file_bitmap(unix), wire.dir_bitmap(unix)
        reply = self._call(wire.get_file_dir_parms(vol.vol_id, wire.ROOT_DIR_ID, fbits, dbits, names), what)
        with self._guard(what):
            return wire.parse_file_dir_parms(reply.data)

    def _file_names(self, remote: str) -> list[str]:
        names = self._names(remote)
        if not names:
            raise NotFoundError(f"AFP: {remote!r} names the volume itself, not a file", "give a file's path")
        return names

    # -- copies -----------------------------------------------------------------------------------------------

    @property
    def request_bytes(self) -> int:
        """One read or write: the block size, at most the server's quantum."""
        quantum = self._conn.server_quantum_bytes if self._conn is not None else 0
        size = self.options.block_size
        return min(size, quantum) if quantum else size

    @property
    def in_flight(self) -> int:
        return max(1, min(self.options.requests_in_flight, MAX_REQUESTS_IN_FLIGHT))

    def _open_fork(self, names: list[str], access: int, what: str) -> tuple[int, int | None]:
        _, vol = self._require()
        reply = self._call(wire.open_fork(vol.vol_id, wire.ROOT_DIR_ID, names, access), what)
        with self._guard(what):
            return wire.parse_open_fork(reply.data)

    def _close_fork(self, fork: int, what: str) -> None:
        if self._conn is not None:
            self._call(wire.close_fork(fork), what)

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        what = f"downloading {remote}"
        fork, size = self._open_fork(self._file_names(remote), wire.FORK_READ, what)
        try:
            fh = open(local, "wb")  # noqa: SIM115 - closed below
        except OSError as exc:
            with suppress(WorkbenchError):
                self._close_fork(fork, what)
            raise from_os_error(exc, f"writing {local}") from exc
        with fh:
            self._read_fork(fork, size, fh, progress, what)

    def _read_fork(self, fork: int, size: int | None, fh: BinaryIO, progress: Progress, what: str) -> None:
        """Read the fork from its start into `fh` with `in_flight` FPReadExt requests outstanding, then close it:
        the FPCloseFork goes right behind the last read, so it costs no round trip of its own. After a failure
        the replies still due are read and dropped (the stream stays usable) and the first failure is raised."""
        conn, _ = self._require()
        step, in_flight = self.request_bytes, self.in_flight
        file_fd = _file_fd(fh)  # the data spliced straight into the file where the system can
        view = memoryview(bytearray(step))  # the replies' data without a file to splice into, or drained
        pending: deque[tuple[bool, int, int, int]] = deque()  # (a read?, request id, offset, count)
        next_offset = 0
        ended = closed = False
        failure: WorkbenchError | None = None
        with self._guard(what):
            while True:
                while not ended and len(pending) < in_flight and (size is None or next_offset < size):
                    count = step if size is None else min(step, size - next_offset)
                    request_id = conn.send_request(COMMAND, wire.read_ext(fork, next_offset, count))
                    pending.append((True, request_id, next_offset, count))
                    self.peak_in_flight = max(self.peak_in_flight, len(pending))
                    next_offset += count
                if not closed and (ended or (size is not None and next_offset >= size)):
                    pending.append((False, conn.send_request(COMMAND, wire.close_fork(fork)), 0, 0))
                    closed = True
                if not pending:
                    break
                is_read, request_id, offset, count = pending.popleft()
                if is_read and file_fd is not None and failure is None:
                    try:
                        reply = conn.read_reply_to_file(request_id, file_fd, offset, count)
                    except LocalFileError as exc:  # the stream stopped inside a reply: the session goes
                        self._broken()
                        cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else OSError(str(exc))
                        raise from_os_error(cause, f"{what}: writing the local file") from exc
                else:
                    reply = conn.read_reply(request_id, view if is_read else None)
                if failure is not None:
                    continue  # draining what was asked before the failure
                if not is_read:
                    if reply.code != wire.AFP_OK:
                        failure = self._failure(reply.code, f"{what}: closing the file")
                    continue
                if reply.code not in (wire.AFP_OK, wire.ERR_EOF):
                    failure, ended = self._failure(reply.code, what), True
                    continue
                if reply.length:
                    try:
                        if file_fd is None:
                            _write_local(fh, view[: reply.length], what)
                    except WorkbenchError as exc:
                        failure, ended = exc, True
                        continue
                    progress(reply.length)
                if reply.length < count or reply.code == wire.ERR_EOF:
                    ended = True
                    if size is not None and offset + reply.length < size:
                        failure = WorkbenchError(
                            f"AFP: {what}: the file ended at {offset + reply.length} bytes, not {size}",
                            "it changed on the server during the copy",
                        )
        if failure is not None:
            raise failure

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        what = f"uploading {remote}"
        names = self._file_names(remote)
        try:
            fh = open(local, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise from_os_error(exc, f"reading {local}") from exc
        with fh:
            conn, vol = self._require()
            access = wire.FORK_READ | wire.FORK_WRITE | wire.FORK_DENY_WRITE
            with self._guard(what):
                # a hard create replaces an existing file (nothing of a longer one stays behind); the open goes
                # right behind it, the server answers both in order
                create = conn.send_request(COMMAND, wire.create_file(vol.vol_id, wire.ROOT_DIR_ID, names, hard=True))
                opening = conn.send_request(COMMAND, wire.open_fork(vol.vol_id, wire.ROOT_DIR_ID, names, access))
                created, opened = conn.read_reply(create), conn.read_reply(opening)
                fork = wire.parse_open_fork(opened.data)[0] if opened.code == wire.AFP_OK else None
            if created.code != wire.AFP_OK or fork is None:
                if fork is not None:
                    with suppress(WorkbenchError):
                        self._close_fork(fork, what)
                raise self._failure(created.code or opened.code, what)
            self._write_fork(fork, fh, progress, what)

    def _write_fork(self, fork: int, fh: BinaryIO, progress: Progress, what: str) -> None:
        """Write `fh` from its start with `in_flight` FPWriteExt requests outstanding, then close the fork right
        behind the last write; each acknowledged write counts as progress. After a failure the replies still due
        are read and dropped and the first failure is raised."""
        mapping = _mapped(fh)
        if mapping is None:
            self._write_from(fork, fh, None, progress, what)
            return
        mapped = memoryview(mapping)
        try:
            self._write_from(fork, fh, mapped, progress, what)
        finally:
            mapped.release()
            with suppress(BufferError):  # a request's slice still held (by a traceback): freed with it instead
                mapping.close()

    def _write_from(
        self, fork: int, fh: BinaryIO, mapped: memoryview | None, progress: Progress, what: str
    ) -> None:
        """The writes of `_write_fork`, their data from `mapped` (the whole file) or else read from `fh`."""
        conn, _ = self._require()
        step, in_flight = self.request_bytes, self.in_flight
        file_bytes = len(mapped) if mapped is not None else 0
        view = memoryview(bytearray(step if mapped is None else 0))
        pending: deque[tuple[bool, int, int, int]] = deque()  # (a write?, request id, offset, count)
        offset = 0
        ended = closed = False
        failure: WorkbenchError | None = None
        with self._guard(what):
            while True:
                while not ended and len(pending) < in_flight:
                    if mapped is not None:
                        count = min(step, file_bytes - offset)
                        data = mapped[offset : offset + count]
                        if count == 0 and _size_of(fh) != file_bytes:
                            # a page the file kept but cut short, or data past the mapping, sent no error
                            failure = _changed_size(what, file_bytes)
                    else:
                        try:
                            count = _read_local(fh, view, what)
                        except WorkbenchError as exc:
                            failure, count = exc, 0
                        data = view[:count]
                    if count == 0:
                        ended = True
                        break
                    try:
                        request_id = conn.send_request(WRITE, wire.write_ext(fork, offset, count), data)
                    except OSError as exc:
                        if exc.errno != errno.EFAULT:
                            raise
                        self._broken()  # the request was cut short where the mapped file had shrunk
                        raise _changed_size(what, file_bytes) from exc
                    pending.append((True, request_id, offset, count))
                    self.peak_in_flight = max(self.peak_in_flight, len(pending))
                    offset += count
                if ended and not closed:
                    pending.append((False, conn.send_request(COMMAND, wire.close_fork(fork)), 0, 0))
                    closed = True
                if not pending:
                    break
                is_write, request_id, at, count = pending.popleft()
                reply = conn.read_reply(request_id)
                if failure is not None:
                    continue  # draining what was sent before the failure
                if reply.code != wire.AFP_OK:
                    failure, ended = self._failure(reply.code, what if is_write else f"{what}: closing the file"), True
                elif is_write and len(reply.data) >= 8 and struct.unpack_from(">Q", reply.data)[0] != at + count:
                    failure, ended = WorkbenchError(f"AFP: {what}: the server wrote up to another offset"), True
                elif is_write:
                    progress(count)
        if failure is not None:
            raise failure

    # -- directories ------------------------------------------------------------------------------------------

    def mkdir(self, remote_dir: str) -> None:
        names = self._names(remote_dir)
        what = f"creating {remote_dir}"
        _, vol = self._require()
        for depth in range(1, len(names) + 1):
            reply = self._call(
                wire.create_dir(vol.vol_id, wire.ROOT_DIR_ID, names[:depth]),
                what,
                (wire.AFP_OK, wire.ERR_OBJECT_EXISTS),
            )
            if reply.code == wire.ERR_OBJECT_EXISTS and not self._lookup(names[:depth], what).is_real_dir:
                raise NotFoundError(f"AFP: {'/'.join(names[:depth])} on {self._where} is not a directory while {what}")

    def is_dir(self, remote: str) -> bool:
        names = self._names(remote)
        if not names:
            return True
        try:
            return self._lookup(names, f"looking up {remote}").is_dir
        except NotFoundError:
            return False

    def check_real_dir(self, remote: str) -> None:
        names = self._names(remote)
        if names and not self._lookup(names, f"checking {remote}").is_real_dir:
            raise LeftInPlace(
                f"{remote} on {self._where} is not a real directory (a link or a file): left in place",
                "delete it by hand if it is yours",
            )

    def _list(self, names: list[str], what: str) -> list[wire.Entry]:
        """Every entry of the directory at `names`, with FPEnumerateExt2 until the server says there are no more."""
        _, vol = self._require()
        unix = bool(vol.attributes & wire.VOL_ATTR_UNIX_PRIVS)
        entries: list[wire.Entry] = []
        while True:
            request = wire.enumerate_ext2(
                vol.vol_id,
                wire.ROOT_DIR_ID,
                wire.file_bitmap(unix),
                wire.dir_bitmap(unix),
                ENUMERATE_COUNT,
                len(entries) + 1,
                ENUMERATE_REPLY_BYTES,
                names,
            )
            reply = self._call(request, what, (wire.AFP_OK, wire.ERR_OBJECT_NOT_FOUND))
            if reply.code == wire.ERR_OBJECT_NOT_FOUND:
                return entries  # past the last entry
            with self._guard(what):
                batch = wire.parse_enumerate_ext2(reply.data)
            if not batch:
                return entries
            entries.extend(batch)
            if len(entries) > REMOVE_MAX_ENTRIES:
                raise LeftInPlace(f"AFP: {what}: the server lists no end of entries", "delete it by hand")

    def remove_tree(self, remote_dir: str) -> None:
        names = self._names(remote_dir)
        if not names:
            raise UsageError("refusing to delete the volume's root directory", "give a directory beneath it")
        where = f"{self._where}/{self.target.share}"
        top = self._lookup(names, f"removing {remote_dir}")
        if not top.is_real_dir:
            raise LeftInPlace(
                f"{remote_dir} on {where} is not a real directory (a link or a file, as the volume lists it): left "
                "in place, nothing through it touched",
                "delete it by hand if it is yours",
            )
        problems: list[WorkbenchError] = []
        self._remove_dir(names, top, where, problems, RemovalBudget(where), 0)
        problem = first_problem(problems)
        if problem is not None:
            raise problem

    def _remove_dir(
        self,
        names: list[str],
        entry: wire.Entry,
        where: str,
        problems: list[WorkbenchError],
        budget: RemovalBudget,
        depth: int,
    ) -> bool:
        """Delete the directory at `names` (`entry` as it was looked up) and its contents; False (the reason in
        `problems`) when something had to stay."""
        path = "/".join(names)
        budget.enter(depth, path)
        entries = self._list(names, f"listing {path}")
        budget.count(len(entries), path)
        self._unchanged(names, entry, where)
        complete = True
        for child in entries:
            try:
                name = listed_name(child.name, f"{where}, in {path},")
            except WorkbenchError as exc:
                problems.append(exc)
                complete = False
                continue
            if child.is_real_dir:
                try:
                    complete &= self._remove_dir([*names, name], child, where, problems, budget, depth + 1)
                except LeftInPlace as exc:
                    if budget.entries > budget.max_entries:
                        raise
                    problems.append(exc)
                    complete = False
                continue
            # a file, or a link (whatever it leads to): deleted itself, never entered
            complete &= self._delete([*names, name], where, problems)
        if not complete:
            return False
        self._unchanged(names, entry, where)
        return self._delete(names, where, problems)

    def _unchanged(self, names: list[str], entry: wire.Entry, where: str) -> None:
        """Raise LeftInPlace unless `names` still leads to a real directory, the same one where the volume keeps
        IDs (no link swapped in). The server never resolves a path through a link it shows as one."""
        path = "/".join(names)
        try:
            now: wire.Entry | None = self._lookup(names, f"checking {path}")
        except NotFoundError:
            now = None
        _, vol = self._require()
        same = now is not None and (not vol.attributes & wire.VOL_ATTR_FILE_IDS or now.node_id == entry.node_id)
        if now is None or not now.is_real_dir or not same:
            raise LeftInPlace(
                f"{path} on {where} was swapped for a link or another directory while it was being deleted: left "
                "in place, nothing through it touched",
                "delete it by hand if it is yours",
            )

    def _delete(self, names: list[str], where: str, problems: list[WorkbenchError]) -> bool:
        _, vol = self._require()
        path = "/".join(names)
        what = f"deleting {path}"
        reply = self._call(
            wire.delete(vol.vol_id, wire.ROOT_DIR_ID, names),
            what,
            (wire.AFP_OK, wire.ERR_OBJECT_NOT_FOUND, wire.ERR_DIR_NOT_EMPTY, wire.ERR_ACCESS, wire.ERR_PARAM,
             wire.ERR_VOLUME_LOCKED, wire.ERR_FILE_BUSY, wire.ERR_OBJECT_LOCKED),
        )  # fmt: skip
        if reply.code in (wire.AFP_OK, wire.ERR_OBJECT_NOT_FOUND):
            return True  # deleted, or gone already
        if reply.code == wire.ERR_DIR_NOT_EMPTY:
            problems.append(
                WorkbenchError(
                    f"{path} on {where} is not empty after deleting everything the server lists in it",
                    "the server hides some entries: remove them there",
                )
            )
        else:
            problems.append(self._failure(reply.code, what))
        return False

    # -- what shapes the rows ---------------------------------------------------------------------------------

    def details(self) -> ClientDetails:
        # Per file one round trip besides the data: FPOpenFork (an upload's FPCreateFile rides in front of it);
        # FPCloseFork goes right behind the last read or write.
        return ClientDetails(
            request_bytes=self.request_bytes,
            requests_in_flight=self.in_flight,
            timed_includes_setup=False,
            block_bytes=self.request_bytes,
            round_trips_per_file=1,
        )

    @property
    def requests_sent(self) -> int:
        """AFP requests sent on this session so far (a test counts a copy's with it)."""
        return self._conn.requests_sent if self._conn is not None else 0


def _write_local(fh: BinaryIO, data: memoryview, what: str) -> None:
    try:
        fh.write(data)
    except OSError as exc:
        raise from_os_error(exc, f"{what}: writing the local file") from exc


def _read_local(fh: BinaryIO, view: memoryview, what: str) -> int:
    try:
        return fh.readinto(view) or 0  # type: ignore[attr-defined]
    except OSError as exc:
        raise from_os_error(exc, f"{what}: reading the local file") from exc


def _changed_size(what: str, file_bytes: int) -> WorkbenchError:
    """The one-line failure of an upload whose local file was not `file_bytes` long to its end."""
    return WorkbenchError(
        f"AFP: {what}: the local file changed size during the copy (it had {file_bytes} bytes)",
        "it changed during the copy",
    )


def _size_of(fh: BinaryIO) -> int | None:
    """The size of `fh`'s file now; None if it cannot be told."""
    try:
        return os.fstat(fh.fileno()).st_size
    except (OSError, AttributeError, ValueError):
        return None


def _mapped(fh: BinaryIO) -> mmap.mmap | None:
    """`fh` mapped into memory, read-only, where it is a regular file that can be mapped; None otherwise (empty,
    not a regular file, or a file system that maps nothing).

    An upload sends from the mapping: the kernel copies each request's data once, from the page cache into the
    socket, where a read into a buffer and a send from it copy it twice (on loopback the client shares the
    CPU with the server, so that copy costs speed). sendfile, which hands the cached pages to TCP without a
    copy, measured slower: the server then spent more CPU per byte. Only the kernel touches the mapped bytes:
    a file that loses whole pages under the copy makes the send fail with EFAULT, never a SIGBUS; any other change
    of size is found when the last request is sent."""
    try:
        fd = fh.fileno()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return None
        mapping = mmap.mmap(fd, st.st_size, prot=mmap.PROT_READ)
    except (OSError, AttributeError, ValueError, OverflowError):
        return None
    with suppress(OSError, AttributeError):
        mapping.madvise(mmap.MADV_SEQUENTIAL)  # read ahead where the file is not in the page cache
    return mapping


def _file_fd(fh: BinaryIO) -> int | None:
    """The descriptor of `fh` when the kernel can move a read's data from the socket into it (splice): a regular
    file, on a system with splice; None otherwise (the data then pass through Python's memory)."""
    if not ZERO_COPY:
        return None
    try:
        fd = fh.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (OSError, AttributeError, ValueError):
        return None
