"""The emulated two-host lab: network namespaces joined by a userspace link emulator.

It builds the two hosts, starts the far host's servers (workbench.server) in one and runs the comparison
(workbench.core) from the other. May import every package but cli; only cli imports it.
"""

from workbench.lab.link import PRESETS, Lab, LinkSpec, check_available, cleanup_stale
from workbench.lab.linkemu import expected_goodput_bps

__all__ = ["PRESETS", "Lab", "LinkSpec", "check_available", "cleanup_stale", "expected_goodput_bps"]
