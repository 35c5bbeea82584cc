"""Pure-logic stand-ins for the runner's collaborators, for tests of its orchestration only.

`FakeClient` is a protocol client registered for tests only (`FAKE`, an Entry no user can select): it
copies files between this machine's test files and a `FakeFarHost`'s directory, and fails, breaks its
session or raises Ctrl-C at the copy a `Script` names. `FakeFarHost` answers what the runner asks of the
far host (files, hashes, directories, a fixed baseline) from a local directory. `ListRecorder` keeps
what the runner records, in order. No server, socket or protocol is involved: the protocols themselves are
tested against real servers elsewhere (tests/contract).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from workbench.core.farhost import WorkbenchSide
from workbench.core.plan import Plan
from workbench.core.results import Baseline, Result, Run
from workbench.fixtures import generate
from workbench.fixtures.manifest import hash_file
from workbench.protocols.base import Client, Progress
from workbench.protocols.registry import Entry
from workbench.shared.errors import NetworkError, UnavailableError
from workbench.shared.sizes import SmallSet

FAKE = Entry("fake/scripted", "tests.fakes:FakeClient", "tests only")
FAKE_UNAVAILABLE = Entry("fake/absent", "tests.fakes:AbsentClient", "tests only")
FAKE_NO_HELPER = Entry("fake/nohelper", "tests.fakes:NoHelperClient", "tests only")


@dataclass
class Script:
    """What the fake client does, and the log of what it did (shared with the recorder, so orders compare)."""

    far_root: Path
    fail_copies: set[int] = field(default_factory=set)  # 1-based copy numbers that fail and break the session
    interrupt_copy: int | None = None  # the copy during which Ctrl-C arrives
    events: list[tuple[Any, ...]] = field(default_factory=list)
    copies: int = 0
    sessions: int = 0


class FakeClient(Client):
    protocol = "fake"
    name = "scripted"
    script: ClassVar[Script]

    def connect(self) -> None:
        FakeClient.script.sessions += 1
        self.session = FakeClient.script.sessions
        self.broken = False
        self._log("connect")

    def _log(self, *what: Any) -> None:
        FakeClient.script.events.append((*what, self.session))

    def _copy(self, source: Path, dest: Path, remote: str, progress: Progress) -> None:
        script = FakeClient.script
        script.copies += 1
        self._log("copy", script.copies, remote)
        if self.broken:
            raise NetworkError("the session is broken", "reconnect")
        if script.copies == script.interrupt_copy:
            progress(source.stat().st_size // 2)
            raise KeyboardInterrupt
        if script.copies in script.fail_copies:
            self.broken = True  # as a real session is after a reset: every later call on it fails
            raise NetworkError("connection reset by the far host", "check the far host")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
        progress(dest.stat().st_size)

    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        self._copy(local, FakeClient.script.far_root / remote, remote, progress)

    def download(self, remote: str, local: Path, progress: Progress) -> None:
        self._copy(FakeClient.script.far_root / remote, local, remote, progress)

    def mkdir(self, remote_dir: str) -> None:
        if self.broken:
            raise NetworkError("the session is broken", "reconnect")
        (FakeClient.script.far_root / remote_dir).mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        if hasattr(self, "session"):
            self._log("close")


class AbsentClient(FakeClient):
    """A client whose library or binary is missing here (registry.load gives the reason instead)."""

    name = "absent"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return "fakelib not importable: tests only"


class NoHelperClient(FakeClient):
    """A client whose mount helper this platform lacks: found out at connect, like mount_smbfs off macOS."""

    name = "nohelper"

    def connect(self) -> None:
        raise UnavailableError("the fake mount helper exists only on a platform this is not", "tests only")


class FakeFarHost(WorkbenchSide):
    """The far host's control API and baseline, from a local directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.deleted: list[str] = []

    def info(self) -> dict[str, Any]:
        return {"hostname": "fake-far-host"}

    def make_files(self, sizes: list[int], small: list[tuple[int, int]], profile: str, seed: int) -> dict[str, Any]:
        sets = [SmallSet(count, size) for count, size in small]
        return generate.make(self.root / "files", sizes, sets, profile, seed).manifest.to_json()

    def hash(self, path: str, size_bytes: int = 0) -> dict[str, Any]:
        return {"xxh3_128": hash_file(self.root / path)}

    def mkdir(self, path: str) -> None:
        (self.root / path).mkdir(parents=True, exist_ok=True)

    def delete(self, path: str) -> None:
        self.deleted.append(path)
        shutil.rmtree(self.root / path, ignore_errors=True)

    def cpu_seconds(self) -> float | None:
        return None

    def cpu_waits_ns(self) -> dict[int, int] | None:
        return None

    def baseline(self, plan: Plan) -> Baseline:
        return Baseline(up_bytes_per_s=1e9, down_bytes_per_s=1e9, rtt_ms=0.1)

    def tcp_watch_start(self, role: str) -> str | None:
        return None

    def tcp_watch_stop(self, watch_id: str) -> dict[str, Any] | None:
        return None

    def finish(self) -> None:
        """Nothing to undo: like serve, the fake removes only what it is told to."""


class ListRecorder:
    """Keeps what the runner records, in memory; logs each row into the script's events as it arrives."""

    def __init__(self, events: list[tuple[Any, ...]]) -> None:
        self.events = events
        self.rows: list[tuple[int, Result]] = []
        self.finished: Run | None = None

    def unfinished_runs(self) -> list[tuple[int, dict[str, Any]]]:
        return []

    def update_meta(self, run_id: int, meta: Any) -> None:
        pass

    def record_cleanup(self, run_id: int, keys: Any) -> None:
        pass

    def begin(self, meta: Any, label: str | None, link: Any, window_sweep: Any) -> int:
        return 1

    def baseline(self, run_id: int, baseline: Baseline) -> None:
        pass

    def row(self, run_id: int, index: int, row: Result) -> None:
        self.rows.append((index, row))
        self.events.append(("row", index, row.label, row.direction, row.file_set))

    def finish(self, run: Run) -> None:
        self.finished = run
