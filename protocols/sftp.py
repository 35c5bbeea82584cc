"""SFTP with paramiko: pinned cipher, verified host keys, bounded prefetch for downloads, pipelined uploads,
Nagle's algorithm off (send_at_once).

Against workbench's own sshd it logs in with the credentials' key and known_hosts; against a stock
server (`target.stock`) it follows the user's OpenSSH configuration (protocols/paramiko_login.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import posixpath
import socket
import stat
from collections import deque
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, cast

from workbench.protocols import paramiko_login
from workbench.protocols.base import Client, LeftInPlace, Progress, Removal, listed_name
from workbench.protocols.details import ClientDetails
from workbench.protocols.openssh_sftp import known_host_hint, remote_path
from workbench.shared import sshconfig
from workbench.shared.errors import AuthError, NetworkError, NotFoundError, UsageError, WorkbenchError, from_os_error

try:
    import paramiko
    from paramiko.sftp import CMD_READ, CMD_STATUS, CMD_WRITE, int64
except ImportError:  # the registry reports it as unavailable
    paramiko = None  # type: ignore[assignment]

# Sanity runs on loopback (64 MiB, 2 busy cores, MB/s medians of 3; noisy): paramiko's own prefetch
# bounded to 64 x 32 KiB ~ 11 down, unbounded ~ 66; this module's pipelined reader with 64 x 32 KiB
# ~ 52, 32 x 64 KiB ~ 85, 16 x 128 KiB ~ 76-134, 32 x 128 KiB ~ 134. Fewer, larger requests cut
# paramiko's per-message Python cost. sftp-server accepts messages up to 256 KiB, so 128 KiB is safe.
REQUEST_BYTES = 128 * 1024
PREFETCH_REQUESTS = 32  # 4 MiB in flight
# Above the bytes in flight so the window never throttles; >= 16 MiB made paramiko's downloads 6x slower.
WINDOW_BYTES = 8 * 1024 * 1024
PACKET_BYTES = 32768 + 1024  # larger SSH packets (132 KiB) measured no better
PREFERRED_CIPHERS = ("aes128-gcm@openssh.com", "aes128-ctr")  # AES-NI beats chacha20 here


def send_at_once(sock: socket.socket) -> None:
    """Turn Nagle's algorithm off on the SSH connection, as OpenSSH's ssh and sshd do on theirs; paramiko leaves
    it on. With it on, a request's last, partial segment waits until everything before it is acknowledged: on the
    wifi-ac lab that cost a 64 KiB file about one round trip each way (13.4 against 10.8 ms a file up, 17.1
    against 13.9 down, 100 files). A socket that is not TCP is left as it is."""
    if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _pick_cipher(wanted: str | None) -> str:
    supported: tuple[str, ...] = vars(paramiko.Transport)["_preferred_ciphers"]  # listed on the class only
    if wanted:
        if wanted not in supported:
            raise UsageError(f"paramiko does not support cipher {wanted!r}", f"choose from {', '.join(supported)}")
        return wanted
    return next(c for c in PREFERRED_CIPHERS if c in supported)


class ParamikoClient(Client):
    protocol = "sftp"
    name = "paramiko"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._transport: paramiko.Transport | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._cipher = _pick_cipher(self.options.cipher) if paramiko else ""

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None if paramiko else "paramiko not importable: pip install paramiko"

    @property
    def _where(self) -> tuple[str, int]:
        return self.target.host, self.target.port("ssh")

    def connect(self) -> None:
        host, port = self._where
        ssh_host = self._resolve() if self.target.stock else None
        if ssh_host is not None:
            sock = paramiko_login.open_socket(ssh_host, self.options.connect_timeout_s, self.options.stall_timeout_s)
        else:
            try:
                sock = socket.create_connection((host, port), timeout=self.options.connect_timeout_s)
                sock.settimeout(self.options.stall_timeout_s)
            except OSError as exc:
                raise from_os_error(exc, "connecting over SSH", host, port) from exc
        try:
            if isinstance(sock, socket.socket):  # a ProxyCommand's pipe has no TCP of its own
                send_at_once(sock)
            transport = paramiko.Transport(sock, default_window_size=WINDOW_BYTES, default_max_packet_size=PACKET_BYTES)
            self._transport = transport
            transport.get_security_options().ciphers = (self._cipher,)
            if ssh_host is not None:
                self._stock_login(transport, ssh_host)
            else:
                transport.start_client(timeout=self.options.stall_timeout_s)
                self._check_host_key(transport.get_remote_server_key())
                self._authenticate(transport)
            self._sftp = paramiko.SFTPClient.from_transport(
                transport, window_size=WINDOW_BYTES, max_packet_size=PACKET_BYTES
            )
            if self._sftp is None:
                raise NetworkError(f"{host}:{port} refused the SFTP subsystem", "is sftp enabled on the server?")
            self._sftp.sock.settimeout(self.options.stall_timeout_s)
        except BaseException as exc:
            self.close()
            if isinstance(exc, WorkbenchError):
                raise
            raise self._translate(exc, "logging in over SSH") from exc

    def _resolve(self) -> sshconfig.SshHost:
        """The stock target's alias as `ssh -G` resolves it, with the URL's (or resolved) user and port."""
        alias = self.target.ssh_alias or self.target.host
        return sshconfig.resolve(alias, port=self.target.port("ssh"), user=self.target.credentials.user or None)

    def _known_hosts_files(self, ssh_host: sshconfig.SshHost) -> list[str]:
        # As UserKnownHostsFile=FILE does for the OpenSSH programs: the credentials' file replaces the user's.
        known = self.target.credentials.known_hosts
        user_files = [str(known)] if known is not None else list(ssh_host.user_known_hosts)
        return user_files + list(ssh_host.global_known_hosts)

    def _stock_login(self, transport: paramiko.Transport, ssh_host: sshconfig.SshHost) -> None:
        creds = self.target.credentials
        if self.options.verify_host_keys:
            files = self._known_hosts_files(ssh_host)
            paramiko_login.prefer_known_types(transport, paramiko_login.known_keys(files, ssh_host.known_hosts_name))
        transport.start_client(timeout=self.options.stall_timeout_s)
        if self.options.verify_host_keys:
            hint = known_host_hint(self.target)
            paramiko_login.check_host_key(transport.get_remote_server_key(), ssh_host, files, hint)
        if creds.ssh_key is not None:
            identities, only = [str(creds.ssh_key)], True  # as -i KEY -o IdentitiesOnly=yes
        else:
            identities, only = list(ssh_host.identity_files), ssh_host.identities_only
        where = f"{ssh_host.alias}:{ssh_host.port}"
        paramiko_login.authenticate(transport, ssh_host.user, identities, only, creds.password, where)

    def _check_host_key(self, key: paramiko.PKey) -> None:
        if not self.options.verify_host_keys:
            return
        host, port = self._where
        known = self.target.credentials.known_hosts
        if known is None or not Path(known).exists():
            raise AuthError(
                f"no known_hosts file to verify {host}:{port}",
                "pass the server's known_hosts in the credentials, or --insecure-host-keys on a trusted link",
            )
        keys = paramiko.HostKeys(str(known))
        name = host if port == 22 else f"[{host}]:{port}"
        entry = keys.lookup(name)
        if entry is None or key.get_name() not in entry:
            raise AuthError(f"host key of {name} is unknown", f"add it to {known} (the server writes it at start)")
        if entry[key.get_name()] != key:
            raise AuthError(f"host key of {name} does not match {known}", "the server changed or this is not it")

    def _authenticate(self, transport: paramiko.Transport) -> None:
        creds = self.target.credentials
        if creds.ssh_key is not None:
            try:
                pkey = paramiko.PKey.from_path(creds.ssh_key)
            except (OSError, paramiko.SSHException) as exc:
                raise AuthError(f"cannot load SSH key {creds.ssh_key}: {exc}", "check the key file") from exc
            transport.auth_publickey(creds.user, pkey)
        else:
            transport.auth_password(creds.user, creds.password)

    def _translate(self, exc: BaseException, what: str) -> WorkbenchError:
        host, port = self._where
        if isinstance(exc, paramiko.AuthenticationException):
            return AuthError(f"{self.target.credentials.user}@{host} was refused by SSH", "check the key or password")
        if isinstance(exc, paramiko.BadHostKeyException):
            return AuthError(f"host key of {host}:{port} does not match", "the server changed or this is not it")
        if isinstance(exc, TimeoutError):
            return NetworkError(
                f"no data from {host}:{port} for {self.options.stall_timeout_s:.0f} s while {what}",
                "the server stalled"
            )
        if isinstance(exc, OSError) and exc.errno == errno.ENOENT:
            return NotFoundError(f"no such remote file while {what}", "check the path (relative to the served root)")
        if isinstance(exc, OSError) and exc.errno is not None:
            return from_os_error(exc, what, host, port)
        if type(exc) is OSError and self._transport is not None and self._transport.is_active():
            # An SFTP status other than "no such file" or "permission denied" (paramiko raises OSError(its
            # message)) on a live connection: the server refused, the link is fine.
            return WorkbenchError(f"the SFTP server refused {what}: {exc}")
        # paramiko reports a dropped connection as EOFError, SSHException or a bare OSError.
        return NetworkError(f"connection to {host}:{port} failed while {what}: {exc}", "the server stopped?")

    def _client(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            raise NetworkError("not connected", "call connect() first")
        return self._sftp

    def _path(self, remote: str) -> str:
        return remote_path(self.target, remote)

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        sftp = self._client()
        try:
            with sftp.open(self._path(remote), "rb") as src, open(local, "wb") as dst:
                _pipelined_read(sftp, src, src.stat().st_size or 0, dst, progress)
        except WorkbenchError:
            raise
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._translate(exc, f"downloading {remote}") from exc

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        sftp = self._client()
        try:
            src = open(local, "rb")  # noqa: SIM115 - opened first so a missing local file is a local error
        except OSError as exc:
            raise from_os_error(exc, f"reading {local}") from exc
        try:
            with src, sftp.open(self._path(remote), "wb") as dst:
                _pipelined_write(sftp, dst, src, progress)
        except WorkbenchError:
            raise
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._translate(exc, f"uploading {remote}") from exc

    def mkdir(self, remote_dir: str) -> None:
        sftp = self._client()
        path = PurePosixPath()
        for part in PurePosixPath(self._path(remote_dir)).parts:
            path /= part
            try:
                if stat.S_ISDIR(sftp.stat(str(path)).st_mode or 0):
                    continue
            except FileNotFoundError:
                pass
            except (OSError, paramiko.SSHException, EOFError) as exc:
                raise self._translate(exc, f"creating {remote_dir}") from exc
            try:
                sftp.mkdir(str(path))
            except (OSError, paramiko.SSHException, EOFError) as exc:
                raise self._translate(exc, f"creating {path}") from exc

    def is_dir(self, remote: str) -> bool:
        try:
            return stat.S_ISDIR(self._client().stat(self._path(remote)).st_mode or 0)
        except FileNotFoundError:
            return False
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._translate(exc, f"looking up {remote or 'the directory'}") from exc

    def _removal(self) -> _SftpRemoval:
        host, port = self._where
        return _SftpRemoval(self._client(), f"the SFTP server {host}:{port}")

    def check_real_dir(self, remote: str) -> None:
        try:
            self._removal().real_top(self._path(remote))
        except WorkbenchError:
            raise
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._translate(exc, f"looking up {remote}") from exc
        except Exception as exc:  # a reply paramiko cannot decode (a path that is no UTF-8): one line, never a trace
            raise WorkbenchError(f"SFTP: looking up {remote} failed: {exc!r}", "see the server's log") from exc

    def remove_tree(self, remote_dir: str) -> None:
        """Delete remote_dir and everything beneath it; a link is removed itself, never followed (_SftpRemoval).

        What cannot be proven the real directory it was (the top too) stays, named in a LeftInPlace."""
        walk = self._removal()
        try:
            walk.remove_top(self._path(remote_dir))
        except WorkbenchError:
            raise
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise self._translate(exc, f"removing {remote_dir}") from exc
        except Exception as exc:  # a reply paramiko cannot parse: one line, never a trace
            why = f"SFTP: removing {remote_dir} stopped: {exc!r}"
            raise WorkbenchError(why, "delete what is left by hand") from exc
        walk.raise_first()

    def close(self) -> None:
        # A dead link makes paramiko's close raise; closing must still succeed.
        sftp, transport, self._sftp, self._transport = self._sftp, self._transport, None, None
        if sftp is not None:
            with contextlib.suppress(Exception):
                sftp.close()
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.close()

    def row_details(self, direction: str) -> ClientDetails:
        # Per file: an open and a close around the data; a download also asks the file's size (fstat).
        trips = 3 if direction == "download" else 2
        return dataclasses.replace(self.details(), round_trips_per_file=trips)

    def details(self) -> ClientDetails:
        return ClientDetails(
            request_bytes=REQUEST_BYTES,
            requests_in_flight=PREFETCH_REQUESTS,
            ssh_window_bytes=WINDOW_BYTES,
            cipher=self._cipher,
            timed_includes_setup=False,
        )


class _SftpRemoval(Removal):
    """One remove_tree over an SFTP session; `problems` collects what was left in place and why.

    SFTP removes by path, so a directory swapped for a link between two requests would lead the next one
    elsewhere. Before each listing, removal and rmdir in a directory its path is checked again: lstat says a
    directory (not a link) and the server's realpath of it is still the one worked out from the top down (a link
    anywhere above it would change that). The top is proven so too, from its parent's realpath.
    """

    def __init__(self, sftp: paramiko.SFTPClient, where: str) -> None:
        super().__init__(where)
        self.sftp = sftp

    def remove_top(self, top: str) -> None:
        self._remove_dir(top, self.real_top(top), 0)

    def real_top(self, top: str) -> str:
        """Raise unless lstat says `top` is a directory (not a link); its realpath."""
        parent, name = posixpath.split(top.rstrip("/") or top)
        listed_name(name, f"the scratch path {top!r} on {self.where}")
        mode = self.sftp.lstat(top).st_mode or 0  # ENOENT: NotFoundError
        if not stat.S_ISDIR(mode):
            kind = "a link" if stat.S_ISLNK(mode) else "not a directory"
            raise LeftInPlace(
                f"{top} on {self.where} is {kind}: left in place, nothing through it touched",
                "delete it by hand if it is yours",
            )
        return posixpath.join(self.sftp.normalize(parent or "."), name)

    def _unchanged(self, path: str, real: str) -> None:
        try:
            is_dir = stat.S_ISDIR(self.sftp.lstat(path).st_mode or 0)
            same = is_dir and self.sftp.normalize(path) == real
        except FileNotFoundError:
            same = False
        if not same:
            raise LeftInPlace(
                f"{path} on {self.where} was swapped for a link or moved while it was being deleted: left in place, "
                "nothing through it touched",
                "delete it by hand if it is yours",
            )

    def _remove_dir(self, path: str, real: str, depth: int) -> bool:
        """Empty and remove `path` (whose realpath must stay `real`); False when something in it had to stay."""
        self.budget.enter(depth, path)
        self._unchanged(path, real)
        entries = []
        for entry in self.sftp.listdir_iter(path):
            self.budget.count(1, path)
            entries.append(entry)

        def remove(entry: paramiko.SFTPAttributes) -> bool:
            name = listed_name(entry.filename, f"{self.where}, in {path},")
            child = posixpath.join(path, name)
            try:
                mode = entry.st_mode or 0
                if stat.S_ISDIR(mode):  # a listing may stat through links (OpenSSH's lstat): ask lstat itself
                    mode = self.sftp.lstat(child).st_mode or 0
                if stat.S_ISDIR(mode):
                    return self._remove_dir(child, posixpath.join(real, name), depth + 1)
                self._unchanged(path, real)
                self.sftp.remove(child)  # a file or a link: unlinked, never followed
            except FileNotFoundError:
                pass  # gone since the listing
            return True

        def refused(entry: paramiko.SFTPAttributes, exc: Exception) -> WorkbenchError | None:
            # The server's status for this one entry (permission denied, a failure) on a live session: noted, and
            # the next entry tried. A dropped session (a bare OSError too, once the channel closed) ends it all.
            if not isinstance(exc, OSError) or isinstance(exc, FileNotFoundError) or self.sftp.sock.closed:
                return None
            why = exc.strerror or str(exc)
            return WorkbenchError(
                f"{posixpath.join(path, entry.filename)} on {self.where} was left: the server refused ({why})",
                "delete it by hand",
            )

        complete = self.each(entries, remove, refused)
        if not complete:
            return False  # its rmdir would only say "not empty" again
        self._unchanged(path, real)
        self.sftp.rmdir(path)
        return True


class _Plumbing(Protocol):
    """paramiko's private SFTP request plumbing, which its published types leave out."""

    def _async_request(self, fileobj: object, t: int, *args: object) -> int: ...
    def _read_response(self, waitfor: int | None = None) -> object: ...
    def _convert_status(self, msg: paramiko.Message) -> None: ...


class _Replies:
    """Collects SFTP replies by request number (paramiko hands out-of-turn replies to their file object)."""

    def __init__(self) -> None:
        self.by_num: dict[int, tuple[int, paramiko.Message]] = {}

    def _async_response(self, kind: int, msg: paramiko.Message, num: int) -> None:
        self.by_num[num] = (kind, msg)


def _pipelined_read(sftp: paramiko.SFTPClient, src: paramiko.SFTPFile, size: int, dst: Any, progress: Progress) -> None:
    """Read `size` bytes keeping PREFETCH_REQUESTS reads in flight, in this thread.

    paramiko's own prefetch bounds its queue by polling every 10 ms from a second thread, which
    caps a bounded queue at depth * 32 KiB per 10 ms; here each reply immediately frees a slot.
    Uses paramiko's request plumbing (_async_request/_read_response), stable since paramiko 1.x.
    """
    replies = _Replies()
    plumbing = cast(_Plumbing, sftp)
    pending: deque[tuple[int, int, int]] = deque()
    offset = 0
    while offset < size or pending:
        while offset < size and len(pending) < PREFETCH_REQUESTS:
            length = min(REQUEST_BYTES, size - offset)
            num = plumbing._async_request(replies, CMD_READ, src.handle, int64(offset), length)
            pending.append((num, offset, length))
            offset += length
        num, start, length = pending.popleft()
        while num not in replies.by_num:
            plumbing._read_response()
        kind, msg = replies.by_num.pop(num)
        if kind == CMD_STATUS:
            plumbing._convert_status(msg)  # raises the server's error; EOF here means the file shrank
            raise EOFError(f"file ended at {start} of {size} bytes")
        data = msg.get_string()
        if len(data) < length:  # a short read: fetch the rest before moving on
            data += _read_exact(sftp, src, start + len(data), length - len(data))
        dst.write(data)
        progress(len(data))


def _pipelined_write(sftp: paramiko.SFTPClient, dst: paramiko.SFTPFile, src: Any, progress: Progress) -> None:
    """Write `src` keeping PREFETCH_REQUESTS writes in flight, counting bytes as the server acknowledges them.

    paramiko's pipelined SFTPFile goes through its buffered-file layer and drains all replies at once
    when more than 100 are pending; sending each request straight away and collecting its status as
    the window moves costs less Python per request and keeps a steady number in flight.
    """
    replies = _Replies()
    plumbing = cast(_Plumbing, sftp)
    pending: deque[tuple[int, int]] = deque()
    offset = 0
    while True:
        while len(pending) < PREFETCH_REQUESTS and (chunk := src.read(REQUEST_BYTES)):
            num = plumbing._async_request(replies, CMD_WRITE, dst.handle, int64(offset), chunk)
            pending.append((num, len(chunk)))
            offset += len(chunk)
        if not pending:
            return
        num, length = pending.popleft()
        while num not in replies.by_num:
            plumbing._read_response()
        kind, msg = replies.by_num.pop(num)
        if kind != CMD_STATUS:
            raise paramiko.SSHException(f"unexpected reply {kind} to a write")
        plumbing._convert_status(msg)  # returns on SSH_FX_OK, raises the server's error otherwise
        progress(length)


def _read_exact(sftp: paramiko.SFTPClient, src: paramiko.SFTPFile, offset: int, length: int) -> bytes:
    src.seek(offset)
    data = src.read(length)
    if len(data) < length:
        raise EOFError(f"file ended at {offset + len(data)} bytes")
    return data
