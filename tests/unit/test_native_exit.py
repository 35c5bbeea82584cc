"""run_native sees a child's end through a pidfd where there is one, so a copy's time stops when the client ends."""

from __future__ import annotations

import subprocess

from protocols.process import _ended_within


def test_an_ended_child_is_seen_and_reaped() -> None:
    proc = subprocess.Popen(["sleep", "0.02"])
    while not _ended_within(proc, 5.0):
        pass
    assert proc.returncode == 0


def test_a_running_child_is_not_taken_for_ended() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert _ended_within(proc, 0.01) is False
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_failing_child_keeps_its_exit_status() -> None:
    proc = subprocess.Popen(["sh", "-c", "exit 3"])
    while not _ended_within(proc, 5.0):
        pass
    assert proc.returncode == 3
