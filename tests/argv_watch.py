"""A watch over every process's command line on this machine while a test runs: a secret seen in one is a hit.

Used wherever a password or key must reach a server but no command line (`workbench run`, the clients and
their helpers such as curl, smbclient, rsync, ssh). `programs` lists what the watch saw, so a test can check
that the processes it cares about lived long enough to be looked at, and `scans` that the watch ran at all:
a watch that saw nothing cannot pass.
"""

from __future__ import annotations

import os
import threading

SCAN_PAUSE_S = 0.002  # between two passes over /proc: short-lived helpers (an askpass, an ssh) live ~10 ms


def _read(path: str) -> bytes:
    """The whole file, read with plain system calls: half the CPU of open() with its buffered file object, for a
    watch that reads every process's command line hundreds of times a second."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


class ArgvWatch:
    """Reads every process's command line until stopped; keeps any that holds the secret, and the programs seen."""

    def __init__(self, secret: str, pause_s: float = SCAN_PAUSE_S) -> None:
        """`pause_s` between passes: the default catches a helper of ~10 ms; a long run's own processes (a fleet's
        ssh sessions and members) are seen with a longer one, at a fraction of the CPU."""
        self.secret = secret.encode()
        self.pause_s = pause_s
        self.hits: list[str] = []
        self.programs: set[str] = set()
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(self.pause_s):
            self.scan()

    def scan(self) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                argv = _read(f"/proc/{entry.name}/cmdline")
            except OSError:
                continue  # gone meanwhile
            if not argv:
                continue  # a zombie or a kernel thread
            words = argv.split(b"\0")
            self.programs.add(os.path.basename(words[0].decode(errors="replace")))
            if self.secret in argv:
                shown = argv.replace(self.secret, b"<PASSWORD>").replace(b"\0", b" ").decode(errors="replace")
                self.hits.append(f"pid {entry.name}: {shown[:300]}")
        self.scans += 1

    def __enter__(self) -> ArgvWatch:
        self.scan()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.scan()
