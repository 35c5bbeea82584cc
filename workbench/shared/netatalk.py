"""Where this host's netatalk 4 lives: installed on the host itself, or in the Debian 13 root filesystem that
scripts/afp_root.sh prepares once (Debian 12 has no netatalk, and netatalk 4 needs a newer glibc).

Nothing here installs anything: it finds what setup prepared and says, in one line, why there is none.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# The password-less account and its volume that the lab's afpd offers netatalk's own client (afp_speedtest takes a
# password only on its command line): the server makes them (workbench/server/daemons/afpd.py, only when started
# for the reference row) and the reference client logs in to them (protocols/afp_speedtest.py). The account reads
# and writes only what its uid or the world may; the volume is an empty folder of the server's private state.
GUEST_ACCOUNT = "workbench-guest"
REFERENCE_VOLUME = "workbench-reference"

ENV_ROOT = "WORKBENCH_AFP_ROOT"
DEFAULT_ROOT = Path("/var/cache/workbench/afp-root")
MARKER = ".workbench-afp-root"  # written by scripts/afp_root.sh once afpd in the root answered --version
PREPARE_HINT = "run scripts/afp_root.sh as root (it installs netatalk 4, or on Debian 12 a Debian 13 root for it)"
VERSION_TIMEOUT_S = 20.0
_VERSION = re.compile(r"^afpd (\d+)\.(\d+)")


@dataclass(frozen=True)
class Netatalk:
    """netatalk's programs as seen from where they run: `root` is None on the host, else the folder to chroot into."""

    root: Path | None
    version: str

    def path(self, inner: str) -> Path:
        """An absolute path of the netatalk system (e.g. /usr/sbin/afpd) as this host sees it."""
        return Path(inner) if self.root is None else self.root / inner.lstrip("/")

    def argv(self, inner: list[str]) -> list[str]:
        """Run `inner` (argv with absolute paths of the netatalk system) where netatalk lives."""
        return list(inner) if self.root is None else ["chroot", str(self.root), *inner]

    def describe(self) -> str:
        return f"netatalk {self.version}" + (" (host)" if self.root is None else f" (Debian 13 root {self.root})")


def _version(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _VERSION.match(done.stdout.strip())
    return f"{found.group(1)}.{found.group(2)}" if found and int(found.group(1)) >= 4 else None


def root_dir() -> Path:
    return Path(os.environ.get(ENV_ROOT) or DEFAULT_ROOT)


def find() -> tuple[Netatalk | None, str]:
    """(netatalk, "") when afpd 4 runs here, else (None, why not in one line)."""
    host_afpd = shutil.which("afpd") or ("/usr/sbin/afpd" if os.path.exists("/usr/sbin/afpd") else None)
    if host_afpd:
        version = _version([host_afpd, "-V"])
        if version:
            return Netatalk(None, version), ""
    root = root_dir()
    if not (root / MARKER).is_file():
        older = " (the host's afpd is older than 4)" if host_afpd else ""
        return None, f"netatalk 4 not found on this host{older} nor prepared in {root}: {PREPARE_HINT}"
    if os.geteuid() != 0:
        return None, f"netatalk lives in the root filesystem {root}: running it there (chroot) needs root"
    version = _version(["chroot", str(root), "/usr/sbin/afpd", "-V"])
    if version is None:
        return None, f"afpd in {root} does not answer --version: {PREPARE_HINT}"
    return Netatalk(root, version), ""
