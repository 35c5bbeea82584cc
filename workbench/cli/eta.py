"""How far a run's copies have got and how long the rest should take: the arithmetic of the overall progress line.

Every copy counts, warm-ups included: they take as long as timed copies, so a time left that left them out
would be short by a quarter with the default one warm-up and three timed copies.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.shared.validate import format_duration


@dataclass(frozen=True)
class TimeLeft:
    """An estimate of the time the copies still take. `at_least`: a floor, from the raw-TCP rate, because no
    copy has finished yet to measure the pace by."""

    seconds: float
    at_least: bool

    def text(self) -> str:
        if self.at_least:
            return f"≥ {format_duration(self.seconds)} left"  # as the status line before it said: at raw TCP
        return f"≈ {format_duration(self.seconds)} left"


@dataclass
class Pace:
    """The run's planned copies (warm-ups included) and their bytes, and those done so far.

    `least_s` is the runner's floor for every copy at the raw-TCP rate (None without a baseline);
    `started_s` the monotonic time the copies began. `current_bytes` is what the copy under way has moved.
    """

    total_copies: int
    total_bytes: int
    least_s: float | None
    started_s: float
    copies_done: int = 0
    bytes_done: int = 0
    current_bytes: int = 0

    def under_way(self, done_bytes: int) -> None:
        """The copy under way has moved `done_bytes` so far."""
        self.current_bytes = done_bytes

    def copy_done(self, set_bytes: int) -> None:
        """One copy ended (a failed one too: its time was spent); its set's bytes are done."""
        self.current_bytes = 0
        self.copies_done += 1
        self.bytes_done += set_bytes

    def dropped(self, copies: int, set_bytes: int) -> None:
        """Planned copies that will not be made (a row failed and stopped, a client could not connect)."""
        self.total_copies = max(self.copies_done, self.total_copies - copies)
        self.total_bytes = max(self.bytes_done, self.total_bytes - set_bytes)

    @property
    def moved_bytes(self) -> int:
        return min(self.total_bytes, self.bytes_done + self.current_bytes)

    def time_left(self, now_s: float) -> TimeLeft | None:
        """The time the remaining copies should take, or None when nothing can be said yet (no copy finished
        and no raw-TCP rate).

        Before a copy finishes, the floor: the raw-TCP rate's time for the bytes left, which no client beats.
        After, the pace so far: bytes moved per second of wall time since the copies began, for the bytes
        left. That wall time holds everything a copy costs besides its bytes (logins, a small-file set's round
        trips per file, verification, reconnects), and each client copies the same sets in the same
        proportions, so the rest pays them at the rate the copies so far did. It is never below the floor.
        """
        left_bytes = self.total_bytes - self.moved_bytes
        if left_bytes <= 0:
            return TimeLeft(0.0, at_least=False)
        floor = self.least_s * left_bytes / self.total_bytes if self.least_s and self.total_bytes else None
        elapsed = now_s - self.started_s
        if self.copies_done == 0 or elapsed <= 0 or self.moved_bytes <= 0:
            return TimeLeft(floor, at_least=True) if floor is not None else None
        paced = left_bytes / (self.moved_bytes / elapsed)
        return TimeLeft(max(paced, floor or 0.0), at_least=False)

    def copies_text(self) -> str:
        return f"copies {self.copies_done}/{self.total_copies}"


def clock(seconds: float) -> str:
    """Elapsed time as m:ss, or h:mm:ss from an hour."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
