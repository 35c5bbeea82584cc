"""Every server-side file operation under the served root, done so that it can never leave the root.

Threat model: any authenticated client (HTTP, FTP, SFTP, rsync, SMB) is hostile and may plant symlinks,
hard links, FIFOs or device nodes in the root through one protocol and use them through another.
So a path is never checked and then opened in a second step (a realpath check races and follows
links): every operation starts from a descriptor of the root and resolves the client's path in the
kernel with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS), or, where the
kernel lacks openat2, with an O_NOFOLLOW walk, one openat() per component. The final component is
always looked at with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW, and only regular files are ever opened: a
FIFO or a device node is inspected through an O_PATH descriptor and refused without being opened.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}.get(os.uname().machine)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PROC_FD = "/proc/self/fd"


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)


class PathRefused(PermissionError):
    """A client path that names something outside the root, a link, or a file that is not regular."""

    def __init__(self, rel: str, why: str) -> None:
        super().__init__(errno.EACCES, f"{why}: {rel!r}")


def split_rel(rel: str, *, allow_root: bool = False) -> list[str]:
    """The components of a client path relative to the root; refuses '..', absolute paths, NUL, '.'.

    Empty components from doubled slashes are refused too: a client that sends them is not one of ours.
    """
    if "\x00" in rel:
        raise PathRefused(rel.replace("\x00", "\\0"), "NUL byte in path")
    if rel.startswith("/"):
        raise PathRefused(rel, "absolute path")
    stripped = rel.rstrip("/")
    if not stripped:
        if allow_root:
            return []
        raise PathRefused(rel, "empty path")
    parts = stripped.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise PathRefused(rel, "'.', '..' or an empty name in path")
    return parts


def _openat2(dir_fd: int, path: str, flags: int, mode: int = 0) -> int:
    how = _OpenHow(flags, mode, _RESOLVE)
    fd = _libc.syscall(_SYS_OPENAT2, dir_fd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return fd


def _kernel_has_openat2() -> bool:
    if _SYS_OPENAT2 is None:
        return False
    root_fd = os.open("/", os.O_PATH | os.O_CLOEXEC)
    try:
        os.close(_openat2(root_fd, ".", os.O_PATH | os.O_CLOEXEC))
    except OSError as exc:
        return exc.errno not in (errno.ENOSYS, errno.EPERM)  # EPERM: a seccomp filter that blocks it
    finally:
        os.close(root_fd)
    return True


_HAVE_OPENAT2 = _kernel_has_openat2()


class ServedRoot:
    """A descriptor of the served root and the only way servers touch files beneath it.

    Every method takes a client path relative to the root ('files/a.bin'); descriptors it returns
    belong to the caller, who closes them.
    """

    def __init__(self, root: Path, *, use_openat2: bool | None = None) -> None:
        self.root = Path(root)
        # The root itself is the operator's choice and may be reached through a symlink; nothing below it may.
        self._fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self._openat2 = _HAVE_OPENAT2 if use_openat2 is None else use_openat2

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ServedRoot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- directories

    def _walk(self, parts: list[str]) -> int:
        """An O_RDONLY directory descriptor of root/parts, no symlink followed on any component."""
        if not parts:
            return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self._fd)
        if self._openat2:
            return _openat2(self._fd, "/".join(parts), _DIR_FLAGS)
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self._fd)
        try:
            for part in parts:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_dir(self, rel: str, *, create: bool = False) -> int:
        """A directory descriptor of rel ('' is the root); create=True makes missing components."""
        parts = split_rel(rel, allow_root=True)
        return self._mkdirs(parts) if create else self._walk(parts)

    def mkdirs(self, rel: str) -> None:
        os.close(self._mkdirs(split_rel(rel, allow_root=True)))

    def _mkdirs(self, parts: list[str]) -> int:
        fd = self._walk([])
        try:
            for part in parts:
                with contextlib.suppress(FileExistsError):
                    # 0o777 as mkdir(1) does: the umask, or a default ACL, decides (a fixed 0o755 would set the
                    # ACL mask to r-x and cancel the rsync daemon's inherited write grant beneath incoming/).
                    os.mkdir(part, 0o777, dir_fd=fd)  # mkdir never follows a link in its last component
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)  # a symlink or a file here: ELOOP / ENOTDIR
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def parent(self, rel: str, *, create: bool = False) -> tuple[int, str]:
        """(descriptor of rel's directory, rel's last name): for *at() calls on a single name."""
        parts = split_rel(rel)
        dir_fd = self._mkdirs(parts[:-1]) if create else self._walk(parts[:-1])
        return dir_fd, parts[-1]

    def listdir(self, rel: str) -> list[str]:
        fd = self.open_dir(rel)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    # -- files

    def open_file(self, rel: str, flags: int, mode: int = 0o644) -> int:
        """A descriptor of the regular file rel; see open_in for the rules."""
        dir_fd, name = self.parent(rel)
        try:
            return open_in(dir_fd, name, flags, mode)
        finally:
            os.close(dir_fd)

    def stat(self, rel: str) -> os.stat_result:
        """lstat() of rel: a symlink is reported as one, never followed."""
        parts = split_rel(rel, allow_root=True)
        if not parts:
            return os.stat(self._fd)
        dir_fd = self._walk(parts[:-1])
        try:
            return os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
        finally:
            os.close(dir_fd)

    def _on_name(self, rel: str, op: Callable[..., None]) -> None:
        """op(name, dir_fd=...) on rel's last name, from a descriptor of its directory."""
        dir_fd, name = self.parent(rel)
        try:
            op(name, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)

    def unlink(self, rel: str) -> None:
        """Remove a file, symlink or special (the entry itself, never what a link names)."""
        self._on_name(rel, os.unlink)

    def rmdir(self, rel: str) -> None:
        self._on_name(rel, os.rmdir)

    def remove_tree(self, rel: str) -> None:
        """rm -rf rel beneath the root: shutil.rmtree with dir_fd walks by descriptor and never follows links."""
        dir_fd, name = self.parent(rel)
        try:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(name, dir_fd=dir_fd)
            else:
                os.unlink(name, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)

    def rename(self, src_rel: str, dst_rel: str) -> None:
        """Rename a regular file or a directory within the root (renameat: links are moved, never followed)."""
        src_fd, src_name = self.parent(src_rel)
        try:
            dst_fd, dst_name = self.parent(dst_rel)
            try:
                st = os.stat(src_name, dir_fd=src_fd, follow_symlinks=False)
                if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                    raise PathRefused(src_rel, "not a regular file or directory")
                os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
            finally:
                os.close(dst_fd)
        finally:
            os.close(src_fd)


def open_in(dir_fd: int, name: str, flags: int, mode: int = 0o644) -> int:
    """Open the regular file `name` in the directory dir_fd, never following a link and never opening
    anything else (FIFO, device, socket, directory).

    O_CREAT | O_EXCL makes a new file and never touches an existing name. Otherwise the file must
    exist: it is inspected through an O_PATH descriptor and reopened by that descriptor only when it
    is a regular file, so a FIFO never blocks and a device is never opened. The file must have one
    link: a hard link to a file outside the root would otherwise be read or written through.
    O_TRUNC is applied only after those checks.
    """
    if "/" in name or name in ("", ".", ".."):
        raise PathRefused(name, "not a single file name")
    access = flags & os.O_ACCMODE
    extra = flags & (os.O_APPEND | os.O_SYNC | os.O_DSYNC)
    if flags & os.O_CREAT and flags & os.O_EXCL:
        new = access | extra | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        return os.open(name, new, mode, dir_fd=dir_fd)
    if flags & os.O_CREAT:
        raise PathRefused(name, "creating a file without O_EXCL could reuse a planted name")
    path_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st = os.fstat(path_fd)
        if stat.S_ISLNK(st.st_mode):
            raise PathRefused(name, "symbolic link")
        if not stat.S_ISREG(st.st_mode):
            raise PathRefused(name, "not a regular file")
        if st.st_nlink > 1:
            # A second link may be one planted to a file outside the root (as root, link() works on
            # any file): reading or writing it would reach outside.
            raise PathRefused(name, "file with several hard links")
        fd = _reopen(path_fd, dir_fd, name, access | extra, st)
    finally:
        os.close(path_fd)
    if flags & os.O_TRUNC:
        os.ftruncate(fd, 0)
    return fd


def _reopen(path_fd: int, dir_fd: int, name: str, flags: int, st: os.stat_result) -> int:
    """A real descriptor of the inode path_fd holds (via /proc's magic link), or, without /proc, a
    non-blocking O_NOFOLLOW open checked to be the same inode."""
    try:
        return os.open(f"{_PROC_FD}/{path_fd}", flags | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        pass  # no /proc: fall back to a second open by name, made harmless by O_NONBLOCK and the inode check
    fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dir_fd)
    again = os.fstat(fd)
    if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(again.st_mode):
        os.close(fd)
        raise PathRefused(name, "file replaced while opening")
    os.set_blocking(fd, True)
    return fd


def create_temp(dir_fd: int, name: str, mode: int = 0o644) -> tuple[int, str]:
    """A new file next to `name` with a random name (O_EXCL: never an existing, possibly planted, one)."""
    for _ in range(8):
        temp = f".{name[:200]}.{secrets.token_hex(8)}.part"
        try:
            return open_in(dir_fd, temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), temp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", name)


def replace_from_temp(dir_fd: int, temp: str, name: str) -> None:
    """Rename temp over name within one directory: a link at `name` is replaced, never written through."""
    os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
