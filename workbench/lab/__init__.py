"""The emulated two-host lab: network namespaces joined by a userspace link emulator.

`Lab` (link.py) is the one entry point: lifecycle.py builds and removes a lab's namespaces, emulator.py
drives the linkemu process, measure.py measures the link; run.py runs the copies over it.
"""

from workbench.lab.lifecycle import check_available, cleanup_stale
from workbench.lab.link import PRESETS, Lab, LinkSpec
from workbench.lab.linkemu import expected_goodput_bits_per_s

__all__ = ["PRESETS", "Lab", "LinkSpec", "check_available", "cleanup_stale", "expected_goodput_bits_per_s"]
