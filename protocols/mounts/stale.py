"""Mounts and temporary files a SIGKILLed workbench left behind: find them, and remove only those.

Everything workbench creates in the temporary directory is named ``workbench-<kind>-<owner pid>.<tag>-<random>``
(mount points, the sshfs log, the CIFS credentials), the tag naming the owner's host and boot. A leftover is
one whose owner pid no longer runs, or whose host rebooted since; a live run's or lab's files, and any
other host's (a temporary directory shared between hosts), are never touched. Names without a tag (older
versions, the lab's work directory) are this host's. A FUSE mount at an older, ownerless ``workbench-``
mount point is detached when its daemon is gone (it is dead for everyone).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

from workbench.shared import procs
from workbench.shared.procs import pid_alive

# The random tail is mkdtemp's 8 characters, which never contain '-': an old-style name whose random part
# happens to be all digits ("workbench-sshfs-12345678") cannot be mistaken for an owner pid. The tag after the
# pid (6 hex of the host name's hash, 6 of the boot id's) is absent from names older versions made.
OWNED_NAME = re.compile(
    r"^workbench-(?P<kind>[a-z0-9_]+(?:-[a-z0-9_]+)*?)-(?P<pid>\d+)"
    r"(?:\.(?P<host>[0-9a-f]{6})(?P<boot>[0-9a-f]{6}))?-[a-z0-9_]{8}$"
)


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def owner_tag() -> str:
    """This host's and this boot's part of an owned name."""
    return _short_hash(procs.hostname()) + _short_hash(procs.boot_id() or "")


def owned_prefix(kind: str) -> str:
    """The mkdtemp prefix for something this process owns: `workbench-<kind>-<pid>.<tag>-`."""
    return f"workbench-{kind}-{os.getpid()}.{owner_tag()}-"


def owner_gone(name: str) -> bool | None:
    """Whether the owner of an owned name is gone: None for any other name; never for another host's (its
    pid means nothing here); always for an earlier boot of this host's."""
    match = OWNED_NAME.match(name)
    if match is None:
        return None
    if match.group("host") is not None:
        if match.group("host") != _short_hash(procs.hostname()):
            return False
        if match.group("boot") != _short_hash(procs.boot_id() or ""):
            return True
    return not pid_alive(int(match.group("pid")))


def owner_of(path: str | Path) -> int | None:
    """The owner pid recorded in a workbench temporary name, or None for any other name."""
    match = OWNED_NAME.match(Path(path).name)
    return int(match.group("pid")) if match else None


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) of every mount this process sees (Linux; empty elsewhere)."""
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) >= 5 and right:
            found.append((_unescape(fields[4]), right.split()[0]))
    return found


def _daemon_gone(path: str, fstype: str) -> bool:
    """A FUSE mount whose daemon (sshfs keeps the mount point among its arguments) no longer runs.

    Decided from /proc, never by touching the mount: a stat on a mount whose server is stopped would hang.
    """
    return fstype.startswith("fuse") and not procs.with_argument(path)


def stale_mounts() -> list[tuple[str, str]]:
    """workbench mounts whose owner is gone; for names without an owner, FUSE mounts whose daemon is gone."""
    stale = []
    for path, fstype in mounts():
        name = Path(path).name
        if not name.startswith("workbench-"):
            continue
        gone = owner_gone(name)
        if gone if gone is not None else _daemon_gone(path, fstype):
            stale.append((path, fstype))
    return stale


def _detach(path: str, fstype: str) -> bool:
    """Lazily detach one mount (it may be busy or its server gone); True when it is no longer mounted."""
    if fstype.startswith("fuse"):
        commands = [["fusermount3", "-u", "-z", path], ["fusermount", "-u", "-z", path], ["umount", "-l", path]]
    else:
        commands = [["umount", "-l", path]]
    for argv in commands:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(argv, capture_output=True, timeout=15, stdin=subprocess.DEVNULL)
        if all(p != path for p, _ in mounts()):
            return True
    return False


def unmount_stale() -> list[str]:
    """Detach every stale workbench mount and remove its empty mount point; return what went."""
    removed = []
    # deepest first, so a mount on top of another goes before the one below it
    for path, fstype in sorted(stale_mounts(), key=lambda m: -len(m[0])):
        if _detach(path, fstype):
            with contextlib.suppress(OSError):
                os.rmdir(path)
            removed.append(f"mount {path} ({fstype})")
    return removed


def _holds_a_mount(path: Path, points: list[str]) -> bool:
    prefix = str(path).rstrip("/") + "/"
    return any(p == str(path) or p.startswith(prefix) for p in points)


def remove_stale_temp(tmp: Path | None = None, keep_kinds: tuple[str, ...] = ()) -> list[str]:
    """Remove `workbench-<kind>-<pid>-*` entries of the temporary directory whose owner is gone.

    Never one that still holds a mount: removing files through a live mount would delete them on the server.
    `keep_kinds` are left alone (a dead lab's directory records the servers only the next lab may stop).
    """
    base = Path(tmp or tempfile.gettempdir())
    points = [p for p, _ in mounts()]
    removed = []
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            match = OWNED_NAME.match(entry.name)
            if match is None or match.group("kind") in keep_kinds:
                continue
            if not owner_gone(entry.name) or _holds_a_mount(entry, points):
                continue
            if remove_tree(entry):
                removed.append(f"temporary {entry}")
    return removed


def remove_tree(path: Path) -> bool:
    """rmtree without following links (shutil's default), True when the path is gone."""
    import shutil

    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(OSError):
            path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)
    return not os.path.lexists(path)
