"""Every client this platform supports loads from the registry; the others say, in one line, why not.

The list of what "supports" means is tests/platform_clients.py, written down rather than read from each
client's own unavailable_reason(): a client that wrongly reports itself unavailable fails here (under
WORKBENCH_TESTS_STRICT=1, where setup.sh has installed everything; elsewhere it is a skip naming it).
"""

from __future__ import annotations

import sys

import pytest

from tests.platform_clients import KERNEL_CIFS, MACOS_ONLY, expected_clients
from workbench.protocols import registry

ENTRIES = {e.label: e for e in registry.KNOWN_CLIENTS}


def test_every_client_this_platform_supports_loads() -> None:
    missing = {}
    for label in sorted(expected_clients()):
        loaded = registry.load(ENTRIES[label])
        if isinstance(loaded, str):
            missing[label] = loaded
        else:
            assert f"{loaded.protocol}/{loaded.name}" == label, (label, loaded)
            assert loaded.unavailable_reason() is None, label
    if missing:
        said = "; ".join(f"{label}: {why}" for label, why in missing.items())
        pytest.skip(f"clients this platform supports are not installed here: {said}")  # strict mode: a failure


def test_every_other_client_says_in_one_line_why_it_cannot_run_here() -> None:
    others = sorted(set(ENTRIES) - expected_clients())
    for label in others:
        loaded = registry.load(ENTRIES[label])
        assert isinstance(loaded, str), f"{label} loads here, but this platform's list leaves it out"
        assert loaded.strip() and "\n" not in loaded, (label, loaded)


@pytest.mark.skip_elsewhere
@pytest.mark.skipif(sys.platform != "linux", reason="checks the Linux list")
def test_on_linux_only_the_macos_mounts_and_a_kernel_without_cifs_are_left_out() -> None:
    left_out = set(ENTRIES) - expected_clients()
    assert left_out >= MACOS_ONLY and left_out <= MACOS_ONLY | {KERNEL_CIFS}, left_out
    for label in MACOS_ONLY:
        assert "macOS only" in str(registry.load(ENTRIES[label])), label
    if KERNEL_CIFS in left_out:
        why = str(registry.load(ENTRIES[KERNEL_CIFS]))
        assert "CIFS" in why or "root" in why, why
