"""The emulated two-host lab: network namespaces joined by a userspace link emulator."""

from workbench.lab.link import PRESETS, Lab, LinkSpec, check_available, cleanup_stale
from workbench.lab.linkemu import expected_goodput_bps

__all__ = ["PRESETS", "Lab", "LinkSpec", "check_available", "cleanup_stale", "expected_goodput_bps"]
