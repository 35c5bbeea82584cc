"""What `workbench lab` measures when told nothing: each protocol family's main Python client beside its native
reference, at one file size that streams for about a second at the default link's rate, and one small-file set.

A first run must answer in minutes ("is my Python client the slow part, or the protocol?"), so the default is
the pairs that answer it; the other clients (a second Python library, scp, FUSE and kernel mounts) and more
sizes are one flag away, and the run says which were left out (`left_out_note`).
"""

from __future__ import annotations

# Python client, then its native reference, per family, in the order the table shows them.
FIRST_LAB_CLIENTS: tuple[str, ...] = (
    "http/aiohttp",
    "http/curl",
    "ftp/ftplib",
    "ftp/curl",
    "sftp/paramiko",
    "sftp/openssh",
    "smb/pysmb",
    "smb/smbclient",
    "rsync/ssh",  # rsync has no Python client: its two transports are the pair
    "rsync/daemon",
    # AFP: workbench's own client beside netatalk's afp_speedtest, which times a file of its own making (its rows
    # say "not verifiable", never a failure) on the lab afpd's reference volume; one small-file set is not its kind
    # of test (that row says unavailable).
    "afp/python",
    "afp/afp_speedtest",
)
FIRST_LAB_PROTOCOLS = ",".join(FIRST_LAB_CLIENTS)

# 64 MiB streams for 1.0 s at the default wifi-ac link's 533 Mbit/s: long enough that a row is the transfer,
# not its set-up; the full matrix's 16M,128M stays one flag away.
FIRST_LAB_SIZES = "64M"
FULL_LAB_SIZES = "16M,128M"


def left_out(protocols: str) -> list[str]:
    """The clients available here that `--protocols all` would add to the first lab's selection (none when the
    selection is not the default one)."""
    from workbench.protocols import registry

    if protocols.replace(" ", "") != FIRST_LAB_PROTOCOLS:
        return []
    return [
        entry.label
        for entry in registry.KNOWN_CLIENTS
        if entry.label not in FIRST_LAB_CLIENTS and not isinstance(registry.load(entry), str)
    ]


def left_out_note(protocols: str, sizes: str) -> str | None:
    """One line saying what the default lab left out and the flags that bring it back; None for a chosen plan."""
    if protocols.replace(" ", "") != FIRST_LAB_PROTOCOLS:
        return None
    missing = ", ".join(left_out(protocols)) or "none available here"
    sizes_text = f", --sizes {FULL_LAB_SIZES} for more sizes" if sizes.replace(" ", "") == FIRST_LAB_SIZES else ""
    return (
        "first-run selection: each protocol's main Python client beside its native reference; other clients "
        f"left out: {missing} (workbench lab --protocols all adds them{sizes_text})"
    )
