"""Shared by the client benchmarks: real servers on loopback, timed copies, medians and paired ratios.

Timing matches the runner's: from the first request to the last byte, session set-up outside the
span for library clients and inside it for native clients started per copy (said in the output).
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.fixtures import generate
from workbench.protocols import registry
from workbench.protocols.base import Client, ClientOptions
from workbench.server.daemons import supervisor
from workbench.shared import credentials as creds_mod
from workbench.shared import target as target_mod
from workbench.shared.target import Target

HOST = "127.0.0.1"


@contextlib.contextmanager
def loopback_servers(size: int, only: list[str] | None = None) -> Iterator[tuple[Target, Path]]:
    """Start the real servers on loopback over a private root holding one `size`-byte test file."""
    work = Path(tempfile.mkdtemp(prefix="workbench-bench-"))
    root = work / "root"
    root.mkdir()
    state = work / "state"
    generate.make(root / "files", sizes=[size], seed=7)
    supervisor.up(root, HOST, state, only=only)
    try:
        creds = creds_mod.read(state / "credentials.json")
        target = target_mod.read(state / "target.json", creds)
        yield target, root
    finally:
        supervisor.down(state)
        shutil.rmtree(work, ignore_errors=True)


def client(label: str, target: Target, options: ClientOptions | None = None) -> Client | str:
    entry = next(e for e in registry.KNOWN_CLIENTS if e.label == label)
    loaded = registry.load(entry)
    if isinstance(loaded, str):
        return loaded
    return loaded(target, options or ClientOptions())


def timed_copy(c: Client, direction: str, root: Path, size_name: str, scratch: Path) -> float:
    """Seconds for one copy of files/<size_name> in `direction`."""
    remote = f"files/{size_name}"
    local_src = root / "files" / size_name
    start = time.perf_counter()
    if direction == "download":
        c.download(remote, scratch / "down.bin", lambda n: None)
    else:
        c.upload(local_src, "incoming/bench.bin", lambda n: None)
    seconds = time.perf_counter() - start
    (scratch / "down.bin").unlink(missing_ok=True)
    return seconds


def compare(
    python_label: str,
    native_label: str,
    target: Target,
    root: Path,
    size: int,
    rounds: int,
    directions: tuple[str, ...] = ("download", "upload"),
) -> list[str]:
    """Alternate the two clients A B A B …; print medians (MB/s) and the median of the paired ratios."""
    lines = []
    name = generate.file_name(size)
    scratch = Path(tempfile.mkdtemp(prefix="workbench-bench-dl-"))
    a, b = client(python_label, target), client(native_label, target)
    for c in (a, b):
        if isinstance(c, str):
            return [f"{python_label} vs {native_label}: skipped ({c})"]
    assert isinstance(a, Client) and isinstance(b, Client)
    try:
        a.connect()
        b.connect()
        with contextlib.suppress(NotImplementedError, Exception):
            a.mkdir("incoming")
        for direction in directions:
            timed_copy(a, direction, root, name, scratch)  # warm-up: page cache, sessions, CPU frequency
            timed_copy(b, direction, root, name, scratch)
            ra, rb, ratios = [], [], []
            for _ in range(rounds):
                sa = timed_copy(a, direction, root, name, scratch)
                sb = timed_copy(b, direction, root, name, scratch)
                ra.append(size / sa)
                rb.append(size / sb)
                ratios.append(sb / sa)  # rate ratio A/B = time B / time A
            lines.append(
                f"{direction:8} {python_label:17} {statistics.median(ra) / 1e6:8.0f} MB/s   "
                f"{native_label:15} {statistics.median(rb) / 1e6:8.0f} MB/s   "
                f"ratio {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f}, n={rounds})"
            )
    finally:
        a.close()
        b.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return lines


__all__ = ["HOST", "compare", "loopback_servers"]
