"""What a run will do: built from flags or a TOML config by workbench.core.config, executed by workbench.core.runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.protocols.base import ClientOptions
from workbench.protocols.registry import Entry
from workbench.shared.sizes import SmallSet
from workbench.shared.target import Target

DIRECTIONS = ("upload", "download")


@dataclass(frozen=True)
class Plan:
    target: Target
    entries: tuple[Entry, ...]
    directions: tuple[str, ...] = DIRECTIONS
    sizes: tuple[int, ...] = (16 << 20,)
    small_sets: tuple[SmallSet, ...] = ()
    profile: str = "random"
    seed: int = 1
    repeat: int = 3
    warmup: int = 1
    tcp_duration: float = 3.0
    files_dir: Path = Path("files")
    options: ClientOptions = field(default_factory=ClientOptions)
    link: dict[str, Any] | None = None  # the lab's measured link (rate_bps, rtt_ms, mtu)
    iperf3: bool = True
