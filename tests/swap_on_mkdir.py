"""`workbench` as a user runs it, against a server where another user swaps the new scratch directory for a link.

    python -m tests.swap_on_mkdir SHARE_DIR VICTIM_DIR workbench-arguments...

SHARE_DIR is the URL's folder as the server's disk holds it. Right after the run's utility client has made
`workbench-<hex>` there (its mkdir returned), the directory is moved aside and a link to VICTIM_DIR put in its
place: what a co-user of a NAS's public share does between two requests of the run. The swap is done here, on
the server's disk, at that exact moment, so that the run's own check after mkdir meets it every time (a watcher
on the server's disk would race the client's next request). Nothing else of workbench is changed.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from workbench.protocols.base import Client


def _swapping(mkdir: Callable[[Client, str], None], share: Path, victim: Path) -> Callable[[Client, str], None]:
    @functools.wraps(mkdir)
    def swapped(self: Client, remote_dir: str) -> None:
        mkdir(self, remote_dir)
        name = PurePosixPath(remote_dir).name
        made = share / name
        if name.startswith("workbench-") and made.is_dir() and not made.is_symlink():
            made.rename(share / (name + ".moved"))
            os.symlink(victim, made)

    return swapped


def main() -> None:
    share, victim, *args = sys.argv[1:]
    from workbench.protocols.rsync import RsyncDaemonClient
    from workbench.protocols.smb import PysmbClient
    from workbench.protocols.smbprotocol_client import SmbprotocolClient

    for cls in (PysmbClient, SmbprotocolClient, RsyncDaemonClient):
        cls.mkdir = _swapping(cls.mkdir, Path(share), Path(victim))  # type: ignore[method-assign]
    from workbench.cli.app import main as workbench

    sys.argv = ["workbench", *args]
    workbench()


if __name__ == "__main__":
    main()
