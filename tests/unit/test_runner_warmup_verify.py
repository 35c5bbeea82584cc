"""A download of many small files warms up with its first files only, while every timed copy is the whole set; a set's
uploads checked several at a time still catch the one file that arrived corrupted, or could not be checked.

The client and the far host are the pure-logic fakes of tests/fakes.py; the copies are real file copies between
two temporary directories, verified by the runner against the manifest's hashes as always.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeFarHost, ListRecorder, Script
from tests.unit.test_runner_orchestration import plan_of as orchestration_plan
from workbench.core.plan import Plan
from workbench.core.runner import SMALL_FILE_MAX_BYTES, WARMUP_FILES, execute
from workbench.shared.errors import NetworkError
from workbench.shared.sizes import SmallSet

FILES = WARMUP_FILES + 15  # more than a warm-up copies


def plan_of(tmp_path: Path, directions: tuple[str, ...], repeat: int = 2, warmup: int = 1) -> Plan:
    return orchestration_plan(
        tmp_path, directions=directions, sizes=(), repeat=repeat, warmup=warmup, small_sets=(SmallSet(FILES, 1024),)
    )


def copied_names(script: Script) -> list[str]:
    return [Path(event[2]).name for event in script.events if event[0] == "copy"]


def test_a_download_of_small_files_warms_up_with_its_first_files_and_each_timed_copy_is_the_whole_set(
    tmp_path: Path, script: Script
) -> None:
    run = execute(plan_of(tmp_path, ("download",)), ListRecorder(script.events), far=FakeFarHost(script.far_root))

    [row] = run.results
    assert row.error is None and row.verified and row.warmup == 1
    assert [(s.files, s.bytes) for s in row.samples] == [(FILES, FILES * 1024)] * 2
    names = copied_names(script)
    assert len(names) == WARMUP_FILES + 2 * FILES
    assert names[:WARMUP_FILES] == names[WARMUP_FILES : 2 * WARMUP_FILES]  # the set's first files, in its order


@pytest.mark.parametrize(
    ("direction", "file_bytes"),
    [("upload", 1024), ("download", SMALL_FILE_MAX_BYTES + 1)],
    ids=["upload", "download-of-big-files"],
)
def test_other_warm_ups_copy_the_whole_set(tmp_path: Path, script: Script, direction: str, file_bytes: int) -> None:
    """An upload's warm-up leaves every file in place (each timed upload then overwrites the same files); a set
    of big files warms its pages whole."""
    files = WARMUP_FILES + 2
    plan = orchestration_plan(
        tmp_path, directions=(direction,), sizes=(), small_sets=(SmallSet(files, file_bytes),), repeat=1
    )
    run = execute(plan, ListRecorder(script.events), far=FakeFarHost(script.far_root))

    [row] = run.results
    assert row.error is None and row.verified and row.warmup == 1
    names = copied_names(script)
    assert len(names) == 2 * files and names[:files] == names[files:]


class _Corrupting(FakeFarHost):
    """A far host whose copy of one uploaded file reads differently (or cannot be read), as after a bad write."""

    def __init__(self, root: Path, bad: str, unreadable: bool = False) -> None:
        super().__init__(root)
        self.bad = bad
        self.unreadable = unreadable
        self.hashed: list[str] = []

    def hash(self, path: str, size_bytes: int = 0) -> dict[str, Any]:
        self.hashed.append(Path(path).name)
        if Path(path).name == self.bad:
            if self.unreadable:
                raise NetworkError("the far host hung up", "check it")
            return {"xxh3_128": "0" * 32}
        return super().hash(path, size_bytes)


@pytest.mark.parametrize(("unreadable", "said"), [(False, "arrived corrupted"), (True, "could not verify")])
def test_one_bad_file_of_a_set_fails_the_upload_row(
    tmp_path: Path, script: Script, unreadable: bool, said: str
) -> None:
    plan = plan_of(tmp_path, ("upload",), repeat=1, warmup=0)
    probe = execute(plan, ListRecorder([]), far=FakeFarHost(script.far_root))  # the set's file names, in order
    bad = copied_names(script)[FILES - 3]  # late in the set: the checks before it pass
    script.events.clear()

    far = _Corrupting(script.far_root, bad, unreadable)
    run = execute(plan, ListRecorder(script.events), far=far)

    assert probe.results[0].verified
    [row] = run.results
    assert row.error is not None and said in row.error and bad in row.error
    assert not row.verified
    assert sorted(far.hashed) == sorted(copied_names(script))  # every file of the copy was checked


class _Threads(FakeFarHost):
    """A far host that notes which thread asked it to hash each file."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.threads: set[str] = set()

    def hash(self, path: str, size_bytes: int = 0) -> dict[str, Any]:
        self.threads.add(threading.current_thread().name)
        return super().hash(path, size_bytes)


@pytest.mark.parametrize(
    ("file_bytes", "side_by_side"), [(1024, True), (SMALL_FILE_MAX_BYTES + 1, False)], ids=["small", "big"]
)
def test_uploads_are_checked_side_by_side_only_when_their_files_are_small(
    tmp_path: Path, script: Script, file_bytes: int, side_by_side: bool
) -> None:
    """Each check's deadline counts on the far disk's whole rate: big files are checked one after another."""
    plan = orchestration_plan(
        tmp_path, directions=("upload",), sizes=(), small_sets=(SmallSet(3, file_bytes),), repeat=1, warmup=0
    )
    far = _Threads(script.far_root)
    [row] = execute(plan, ListRecorder(script.events), far=far).results

    assert row.verified and far.threads
    assert all(name.startswith("verify") for name in far.threads) is side_by_side
