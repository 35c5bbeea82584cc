"""The default `workbench lab` (workbench.core.first_lab): every protocol family with its main Python client and
its native reference, files that stream for a second at the default link, and a note naming what was left out."""

from __future__ import annotations

from workbench.core.first_lab import FIRST_LAB_CLIENTS, FIRST_LAB_PROTOCOLS, FIRST_LAB_SIZES, left_out_note
from workbench.core.settings import default
from workbench.lab import PRESETS
from workbench.protocols import registry
from workbench.shared.sizes import parse_sizes


def test_the_lab_defaults_to_the_first_run_selection() -> None:
    assert default("protocols", "lab") == FIRST_LAB_PROTOCOLS
    assert default("sizes", "lab") == FIRST_LAB_SIZES
    assert [e.label for e in registry.select(FIRST_LAB_PROTOCOLS)] == list(FIRST_LAB_CLIENTS)


def test_each_family_has_a_python_client_beside_its_native_reference() -> None:
    by_family: dict[str, list[registry.Entry]] = {}
    for entry in registry.select(FIRST_LAB_PROTOCOLS):
        by_family.setdefault(entry.label.split("/")[0], []).append(entry)
    assert set(by_family) == {"http", "ftp", "sftp", "smb", "rsync", "afp"}
    for family, entries in by_family.items():
        assert any(e.reference for e in entries), family
        if family != "rsync":  # rsync has no Python client: its ssh and daemon transports are the pair
            assert any(not e.reference for e in entries), family


def test_each_size_streams_for_a_second_at_the_default_links_rate() -> None:
    rate_bytes_per_s = PRESETS[default("link", "lab")].rate_bits_per_s / 8
    for size_bytes in parse_sizes(FIRST_LAB_SIZES):
        assert size_bytes / rate_bytes_per_s >= 1.0, size_bytes


def test_the_note_says_what_was_left_out_and_how_to_get_it() -> None:
    note = left_out_note(FIRST_LAB_PROTOCOLS, FIRST_LAB_SIZES)
    assert note is not None
    assert "--protocols all" in note and "--sizes 16M,128M" in note
    others = [e.label for e in registry.KNOWN_CLIENTS if e.label not in FIRST_LAB_CLIENTS]
    available = [label for label in others if not isinstance(registry.load(registry.select(label)[0]), str)]
    assert available, "no other client loads here: the note would have nothing to name"
    for label in available:
        assert label in note
    assert "--sizes" not in (left_out_note(FIRST_LAB_PROTOCOLS, "16M,128M") or "")


def test_a_chosen_selection_has_no_note() -> None:
    assert left_out_note("all", FIRST_LAB_SIZES) is None
    assert left_out_note("http/curl", "16M") is None
