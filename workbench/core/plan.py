"""What a run will do: built from its resolved settings by workbench.core.config, executed by workbench.core.runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workbench.protocols.base import ClientOptions
from workbench.protocols.registry import Entry
from workbench.shared.sizes import SmallSet, total_bytes
from workbench.shared.target import Target

DIRECTIONS = ("upload", "download")


@dataclass(frozen=True)
class Plan:
    """The parsed settings (their defaults are workbench.core.settings's, applied by workbench.core.config.resolve)."""

    target: Target
    entries: tuple[Entry, ...]
    directions: tuple[str, ...]
    sizes: tuple[int, ...]
    small_sets: tuple[SmallSet, ...]
    profile: str
    seed: int
    repeat: int
    warmup: int
    tcp_duration: float
    files_dir: Path
    options: ClientOptions = field(default_factory=ClientOptions)
    iperf3: bool = True

    @property
    def copies_per_row(self) -> int:
        """Copies of each client and direction: the untimed warm-ups, then the timed ones."""
        return self.warmup + self.repeat

    def copies(self, clients: int | None = None) -> int:
        """Copies of one test file (or small-file set) in the whole run: clients × directions × (warm-up + repeat).

        `clients`: how many of the plan's clients run (default: all of them)."""
        count = len(self.entries) if clients is None else clients
        return count * len(self.directions) * self.copies_per_row

    @property
    def files_bytes(self) -> int:
        """The bytes of the test files: one file of each size and every small-file set."""
        return total_bytes(self.sizes, self.small_sets)
