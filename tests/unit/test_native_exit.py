"""run_native sees a child's end through a pidfd where there is one, so a copy's time stops when the client ends."""

from __future__ import annotations

import os
import resource
import subprocess
from collections.abc import Iterator

import pytest

from workbench.protocols.process import _EndWatch

HIGH_FD = 1024  # select.select takes no descriptor from here up


def _ends(proc: subprocess.Popen[bytes]) -> None:
    with _EndWatch(proc) as end:
        while not end.within(5.0):
            pass


def test_an_ended_child_is_seen_and_reaped() -> None:
    proc = subprocess.Popen(["sleep", "0.02"])
    _ends(proc)
    assert proc.returncode == 0


def test_a_running_child_is_not_taken_for_ended() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        with _EndWatch(proc) as end:
            assert end.within(0.01) is False
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_failing_child_keeps_its_exit_status() -> None:
    proc = subprocess.Popen(["sh", "-c", "exit 3"])
    _ends(proc)
    assert proc.returncode == 3


def test_one_pidfd_per_child_however_many_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[int] = []
    closed: list[int] = []
    real_open, real_close = os.pidfd_open, os.close

    def counting_open(pid: int, flags: int = 0) -> int:
        fd = real_open(pid, flags)
        opened.append(fd)
        return fd

    def counting_close(fd: int) -> None:
        closed.append(fd)
        real_close(fd)

    proc = subprocess.Popen(["sleep", "30"])
    monkeypatch.setattr(os, "pidfd_open", counting_open)
    monkeypatch.setattr(os, "close", counting_close)
    try:
        with _EndWatch(proc) as end:
            for _ in range(3):
                assert end.within(0.01) is False
            proc.kill()
            while not end.within(5.0):
                pass
            assert proc.returncode == -9
        # the pidfd path was taken (a sleeping Popen.wait opens none), once, and its descriptor closed once
        assert len(opened) == 1
        assert closed.count(opened[0]) == 1
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def low_fds_taken() -> Iterator[None]:
    """Every descriptor below HIGH_FD in use, so the next one opened (the pidfd) is at least HIGH_FD."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < HIGH_FD + 16:
        pytest.skip(f"descriptors limited to {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, HIGH_FD + 16), hard))
    taken = [os.open(os.devnull, os.O_RDONLY)]
    try:
        while taken[-1] < HIGH_FD - 1:  # each takes the lowest free one
            taken.append(os.dup(taken[0]))
        yield
    finally:
        for fd in taken:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_pidfd_from_1024_up_is_watched(low_fds_taken: None) -> None:
    proc = subprocess.Popen(["sh", "-c", "exit 5"])
    with _EndWatch(proc) as end:
        assert end._fd is not None and end._fd >= HIGH_FD
        while not end.within(5.0):
            pass
    assert proc.returncode == 5


class _RefusingPoll:
    """A poller that cannot take the pidfd (as when the kernel refuses the registration)."""

    def register(self, fd: int, events: int) -> None:
        raise OSError("refused")

    def poll(self, timeout_ms: float) -> list[tuple[int, int]]:
        raise AssertionError("a pidfd that could not be registered is never polled")


def test_a_pidfd_the_poller_refuses_is_closed_and_the_sleeping_wait_sees_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import select

    opened: list[int] = []
    closed_in_watch: list[int] = []
    real_open, real_close = os.pidfd_open, os.close
    monkeypatch.setattr(os, "pidfd_open", lambda pid, *a: opened.append(real_open(pid, *a)) or opened[-1])
    monkeypatch.setattr(select, "poll", _RefusingPoll)
    proc = subprocess.Popen(["sleep", "0.02"])
    monkeypatch.setattr(os, "close", lambda fd: closed_in_watch.append(fd) or real_close(fd))
    end = _EndWatch(proc)
    assert len(opened) == 1 and closed_in_watch == opened  # closed at once, not left open until the watch is left
    monkeypatch.setattr(os, "close", real_close)
    with end:
        while not end.within(5.0):
            pass
    assert proc.returncode == 0
