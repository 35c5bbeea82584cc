"""What a run will do: built from flags or a TOML config by workbench.core.config, executed by workbench.core.runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workbench.protocols.base import ClientOptions
from workbench.protocols.registry import Entry
from workbench.shared.sizes import SmallSet
from workbench.shared.target import Target

DIRECTIONS = ("upload", "download")


@dataclass(frozen=True)
class Plan:
    """The parsed settings (their defaults are workbench.core.settings's, applied by config.plan_inputs)."""

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
