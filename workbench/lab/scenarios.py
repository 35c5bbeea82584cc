"""The published stories the lab replays (`workbench lab --scenario NAME`), each with its figures.

A scenario is one or more lab runs (variants: the same story on an MTU of 1500 and 9000, say) and the
figures the story published, each beside the lab's own figure for the same thing. The lab's figures are
what it measured; where the lab cannot be the story's hardware (a Mac's AFP, an 802.11g radio's shared
air time), the scenario says so in its notes rather than bending a figure to match.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.core.results import Result, Run
from workbench.shared.errors import UsageError
from workbench.shared.triage import TcpTriage

Figure = Callable[[Mapping[str, Run]], float | None]  # from the variants' runs by name: bits/s, or None


@dataclass(frozen=True)
class Variant:
    """One lab run of a scenario: its link (LabRequest fields) and its plan (settings by name)."""

    name: str
    link: Mapping[str, Any]
    settings: Mapping[str, Any]


@dataclass(frozen=True)
class Published:
    """A figure the story published and how to read the lab's own figure for the same thing."""

    what: str
    figure: str
    lab: Figure
    unit: str = "Mbit/s"


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str  # one line, for --scenario list
    story: str
    variants: tuple[Variant, ...]
    published: tuple[Published, ...]
    quick: Mapping[str, Any] = field(default_factory=dict)  # settings of the reduced form (--quick)
    quick_link: Mapping[str, Any] = field(default_factory=dict)  # and its link, where the story's would not show
    notes: tuple[str, ...] = ()


# -- reading the lab's figures from runs ---------------------------------------------------------------


def raw_tcp(variant: str, direction: str) -> Figure:
    def read(runs: Mapping[str, Run]) -> float | None:
        run = runs.get(variant)
        rate = run.baseline.for_direction(direction) if run else None
        return rate * 8 if rate else None

    return read


def copies(variant: str, family: str, direction: str, best: bool = False) -> Figure:
    """The copy rate of `family`'s clients (e.g. "smb") that way on the largest single file measured: the
    clients' median, or the best client's. The largest file is the one a story's figure is about (a movie, a
    1 GB file); a reduced run has only a smaller one, and its figure is then that file's."""

    def read(runs: Mapping[str, Run]) -> float | None:
        run = runs.get(variant)
        if run is None:
            return None
        mine = [r for r in run.results if r.protocol == family and r.direction == direction and r.files == 1]
        largest = max((r.bytes for r in mine), default=None)
        rates = [
            r.median_bytes_per_s * 8 for r in mine if r.bytes == largest and r.error is None and r.median_bytes_per_s
        ]
        if not rates:
            return None
        return max(rates) if best else statistics.median(rates)

    return read


def swept(variant: str, window_bytes: int) -> Figure:
    def read(runs: Mapping[str, Run]) -> float | None:
        run = runs.get(variant)
        for point in (run.window_sweep or ()) if run else ():
            if point.get("window_bytes") == window_bytes and point.get("measured_bytes_per_s"):
                return float(point["measured_bytes_per_s"]) * 8
        return None

    return read


def stalled_seconds(variant: str) -> Figure:
    """Not a rate: the seconds of stalls the copies saw (unit "s")."""

    def read(runs: Mapping[str, Run]) -> float | None:
        run = runs.get(variant)
        return sum(r.stall_seconds for r in run.results) if run else None

    return read


def _sender_rows(run: Run, family: str, direction: str) -> list[Result]:
    return [r for r in run.results if r.protocol == family and r.direction == direction and r.error is None]


def resent_percent(variant: str, direction: str, family: str | None = None) -> Figure:
    """Not a rate: the share of its bytes the sender sent again, in % (unit "%"): raw TCP's probe (`family`
    None), else the median over `family`'s rows that way."""

    def read(runs: Mapping[str, Run]) -> float | None:
        run = runs.get(variant)
        if run is None:
            return None
        if family is None:
            probe = TcpTriage.from_json((run.baseline.tcp or {}).get(direction))
            share = probe.retrans_fraction if probe is not None and probe.side == "sender" else None
            return 100 * share if share is not None else None
        shares = [r.retransmitted_share for r in _sender_rows(run, family, direction)]
        known = [100 * s for s in shares if s is not None]
        return statistics.median(known) if known else None

    return read


def per_file_byte(variant: str, direction: str, family: str, counted_by: str = "connections") -> Figure:
    """Not a rate: bytes per byte of file (unit "x"), the median over `family`'s rows that way: what the sender's
    connections put on the wire (`counted_by` "connections"), or what its interface counted ("interface")."""

    def one(row: Result) -> float | None:
        if counted_by == "connections":
            return row.wire_bytes_per_file_byte
        t = row.tcp
        return t.iface_bytes / t.copy_bytes if t is not None and t.iface_bytes and t.copy_bytes else None

    def read(runs: Mapping[str, Run]) -> float | None:
        run = runs.get(variant)
        known = [x for x in (one(r) for r in _sender_rows(run, family, direction)) if x is not None] if run else []
        return statistics.median(known) if known else None

    return read


# -- the stories -------------------------------------------------------------------------------------------

_STREAMING = "smb/smbclient,smb/pysmb,afp/python,http/aiohttp,http/curl,ftp/ftplib,ftp/curl"
# A path that drops offloaded super-packets: the server sends with its TSO/GSO as the kernel set them, then off
_TSO_ON, _TSO_OFF = "server TSO and GSO on", "server TSO and GSO off"  # names of output files: no slash
_TSO_CLIENTS = "http/aiohttp,sftp/openssh"
# A small NAS: its CPU in cores, and the clients that can sign, encrypt and speak SMB 3 (pysmb does none of it)
NAS_CORES = 0.25
_NAS_CLIENTS = "smb/smbclient,smb/smbprotocol,http/curl,http/aiohttp"

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            name="wifi-ac-64k",
            summary="802.11ac laptop: iperf 533 Mbit/s, file sharing 170 (its receive window never passed 64 KiB)",
            story=(
                "A laptop on 802.11ac reached 533 Mbit/s with iperf at 2.8 ms, but AFP and SMB copies ran at "
                "170 Mbit/s: the file-sharing connections never scaled their receive window past 64 KiB, so "
                "each carried 64 KiB per round trip. HTTP and FTP, whose windows scaled, went above 300."
            ),
            variants=(
                Variant(
                    "as published",
                    {
                        "preset": "wifi-ac",
                        "client_window": "64K",
                        "client_window_services": ("smb", "afp"),
                        "window_sweep": "32K,64K,128K,256K",
                    },
                    {"protocols": _STREAMING, "sizes": "64M", "small": ["none"]},
                ),
            ),
            published=(
                Published("iperf (raw TCP, download)", "533", raw_tcp("as published", "download")),
                Published(
                    "AFP copy, download (best client)", "170", copies("as published", "afp", "download", best=True)
                ),
                Published(
                    "SMB copy, download (best client)", "170", copies("as published", "smb", "download", best=True)
                ),
                Published(
                    "HTTP copy, download (best client)", "> 300", copies("as published", "http", "download", best=True)
                ),
                Published(
                    "FTP copy, download (best client)", "> 300", copies("as published", "ftp", "download", best=True)
                ),
                Published("window 32 KiB", "93.6", swept("as published", 32 << 10)),
                Published("window 64 KiB", "187.2", swept("as published", 64 << 10)),
                Published("window 128 KiB", "374.5", swept("as published", 128 << 10)),
                Published("window 256 KiB", "533", swept("as published", 256 << 10)),
            ),
            quick={"protocols": "smb/smbclient,afp/python,http/curl", "sizes": "8M"},
            notes=(
                "the 64 KiB cap is applied on the wire to the client host's AFP and SMB connections only, as "
                "the story's file sharing; AFP is workbench's own client against netatalk's afpd (the story's "
                "server was a Mac), which reads 1 MiB x 4 requests in flight, so the window is its limit",
                "published AFP download 170 Mbit/s (a Mac's share); the lab's: afp/python 170 Mbit/s on 64 MiB, "
                "94 % of window/RTT (180), bound by the window: afpd's sender waited on the client's window 97 % "
                "of the time and was short of data 0.3 % (neither afpd nor afp/python's requests held it back); "
                "the quick form's 8 MiB copy read 145 (83 %), window-bound 99 % of the time: each copy's start "
                "weighs more there",
                "pysmb reads 64 KiB per round trip whatever the window, so it sits below the cap on its own",
            ),
        ),
        Scenario(
            name="gige-jumbo",
            summary="gigabit Ethernet: 911 Mbit/s default buffers, 937 raised, 887 with jumbo frames (MTU 9000)",
            story=(
                "On gigabit Ethernet iperf gave 911 Mbit/s with default socket buffers and 937 after raising "
                "them; jumbo frames (MTU 9000) gave 887 on that hardware."
            ),
            variants=tuple(
                Variant(
                    name,
                    {"preset": "gige", "mtu": mtu, "host_buffers": buffers},
                    {"protocols": "http/aiohttp,http/curl", "sizes": "128M", "small": ["none"]},
                )
                for name, mtu, buffers in (
                    ("MTU 1500, default buffers", 1500, "default"),
                    ("MTU 1500, raised buffers", 1500, "raised"),
                    ("MTU 9000, raised buffers", 9000, "raised"),
                )
            ),
            published=(
                Published("iperf, default buffers", "911", raw_tcp("MTU 1500, default buffers", "upload")),
                Published("iperf, raised buffers", "937", raw_tcp("MTU 1500, raised buffers", "upload")),
                Published("iperf, jumbo frames", "887", raw_tcp("MTU 9000, raised buffers", "upload")),
                Published("HTTP copy up, MTU 1500", "—", copies("MTU 1500, raised buffers", "http", "upload")),
                Published("HTTP copy up, MTU 9000", "—", copies("MTU 9000, raised buffers", "http", "upload")),
            ),
            quick={"protocols": "http/curl", "sizes": "8M"},
            notes=(
                "the lab's wire is ideal: jumbo frames lift goodput from 94.1 % of the rate to 99.0 %, where the "
                "story's hardware lost 5 % with them (a NIC or switch limit no emulated link has)",
                "at 0.2 ms the bandwidth-delay product is 25 KB, under either buffer setting: buffers change "
                "nothing here, which is what the lab shows",
            ),
        ),
        Scenario(
            name="wireless-g",
            summary="wireless G to a 100 Mbit host (about 12 Mbit/s): rsync vs rsync -z vs scp -C, random and text",
            story=(
                "A laptop on wireless G copied to a host wired at 100 Mbit/s at about 12 Mbit/s; rsync, "
                "`scp -C` and `rsync -z` were compared on a 1 GB file, then 100 MB and 10 MB pieces and many "
                "small files, and the results changed overnight."
            ),
            variants=tuple(
                Variant(
                    f"{profile}, {'compressed' if compress else 'plain'}",
                    # 12.5 Mbit/s of TCP goodput: what the story's link carried (802.11g's 54 Mbit/s is its PHY)
                    {"preset": "wifi-ac", "rate": "13.3mbit", "rtt": "4ms"},
                    {
                        "protocols": "rsync/ssh,scp/openssh",
                        "sizes": "100M,10M",
                        "small": ["100x64K"],
                        "profile": profile,
                        "compress": compress,
                        "directions": "upload",
                        "repeat": 1,
                    },
                )
                for profile in ("text", "random")
                for compress in (False, True)
            ),
            published=(
                Published("the link (raw TCP, upload)", "≈ 12", raw_tcp("text, plain", "upload")),
                Published("rsync, text, largest file", "—", copies("text, plain", "rsync", "upload")),
                Published("rsync -z, text, largest file", "—", copies("text, compressed", "rsync", "upload")),
                Published("scp -C, text, largest file", "—", copies("text, compressed", "scp", "upload")),
                Published("rsync, random, largest file", "—", copies("random, plain", "rsync", "upload")),
                Published("rsync -z, random, largest file", "—", copies("random, compressed", "rsync", "upload")),
                Published("scp -C, random, largest file", "—", copies("random, compressed", "scp", "upload")),
            ),
            quick={"sizes": "2M", "small": ["10x16K"]},
            notes=(
                "the 1 GB file of the story takes 11 minutes a copy at this rate: add it with --sizes 1G,100M,10M",
                "802.11g shares one channel between both directions; the lab's link is full duplex",
                "a compressed copy of text can beat the link: its rate counts the file's bytes, not the wire's",
            ),
        ),
        Scenario(
            name="thunderbolt",
            summary="Thunderbolt bridge: iperf 5.3 and 5.7 Gbit/s by direction; copies stall for seconds at random",
            story=(
                "Two Macs joined by a Thunderbolt bridge: iperf gave 5.3 Gbit/s one way and 5.7 the other, "
                "but copies stalled for seconds at random and then resumed, with gaps of about 10 ms with no "
                "packets."
            ),
            variants=(
                Variant(
                    "as published",
                    # goodput 5.3 / 5.7 Gbit/s at MTU 1500 (94.1 % of the rate), no delay line: a kernel link
                    {
                        "preset": "10ge",
                        "rate_up": "5.63gbit",
                        "rate_down": "6.06gbit",
                        "rtt": "0.02ms",
                        "stall": "~4s:1.5s",
                    },
                    {"protocols": "http/curl,http/aiohttp,smb/smbclient", "sizes": "1G", "small": ["none"]},
                ),
            ),
            published=(
                Published("iperf one way (upload)", "5300", raw_tcp("as published", "upload")),
                Published("iperf the other way (download)", "5700", raw_tcp("as published", "download")),
                Published(
                    "seconds of stalls seen in copies", "seconds, at random", stalled_seconds("as published"), unit="s"
                ),
            ),
            quick={"protocols": "http/curl", "sizes": "256M", "repeat": 2},
            quick_link={"stall": "~1s:300ms"},  # copies of 0.4 s: stalls every 4 s would rarely meet one
            notes=(
                "stalls are 1.5 s pauses of the line at random gaps averaging 4 s; the 10 ms gaps of the story "
                "are below the 100 ms sampling that finds stalls, and are not replayed",
                "at these rates the copies' CPU, not the link, often binds on two cores: the table says which",
            ),
        ),
        Scenario(
            name="nas-signing",
            summary="a small NAS on gigabit: SMB signing took a copy from 400 to 80 Mbit/s, encryption 50 to 5-8 MB/s",
            story=(
                "A Windows client copying from a NAS went from 400 to 80 Mbit/s once a signing policy was set; "
                "another client went from 50 MB/s to 5-8 MB/s with SMB encryption on. Signing and encryption cost "
                "CPU per byte, and a NAS has little: on a fast desktop the same settings hardly show."
            ),
            variants=tuple(
                Variant(
                    name,
                    # the NAS: a quarter of one core for every process of the server host, on a gigabit link
                    {"preset": "gige", "server_cpu": NAS_CORES, **({"smb_server": smb} if smb else {})},
                    {"protocols": _NAS_CLIENTS, "sizes": "64M", "small": ["none"]},
                )
                for name, smb in (
                    ("signing offered", None),
                    ("signing required", "signing=required"),
                    ("signing required, SMB 2.0.2", "signing=required,max-dialect=2.0.2"),
                    ("encryption required", "encryption=required"),
                )
            ),
            published=(
                Published("the link (raw TCP, download)", "—", raw_tcp("signing offered", "download")),
                Published(
                    "SMB copy, no signing policy (best client)",
                    "400",
                    copies("signing offered", "smb", "download", best=True),
                ),
                Published(
                    "SMB copy, signing required (best client)",
                    "80",
                    copies("signing required", "smb", "download", best=True),
                ),
                Published(
                    "SMB 2.0.2 copy, signing required (best client)",
                    "—",
                    copies("signing required, SMB 2.0.2", "smb", "download", best=True),
                ),
                Published(
                    "SMB copy, encryption required (best client)",
                    "40-64",  # 5-8 MB/s
                    copies("encryption required", "smb", "download", best=True),
                ),
                Published(
                    "HTTP copy from the same NAS (best client)",
                    "—",
                    copies("signing required", "http", "download", best=True),
                ),
            ),
            quick={"protocols": "smb/smbclient,http/curl", "sizes": "8M"},
            notes=(
                f"the NAS is the lab's server host held to {NAS_CORES:g} of one core (a cgroup CPU quota on every "
                "process there, HTTP's server too); the published figures are of other hardware: 400 -> 80 "
                "Mbit/s with a signing policy on a Windows client, 50 -> 5-8 MB/s (400 -> 40-64 Mbit/s) with "
                "encryption on; the lab's are this machine's CPU held to that share, and a CPU with AES "
                "instructions signs and encrypts at a small cost per byte: its drop can be far smaller",
                "'signing offered' is Samba's default: smbclient then copies unsigned, smbprotocol signs anyway "
                "(its own default); 'SMB 2.0.2' caps the server's dialect: 64 KiB requests signed with HMAC-SHA256 "
                "instead of SMB 3.1.1's larger ones signed with AES",
                "the lab's link line gives the CPU the server host used per second of the copies (host_cpu in "
                "the JSON)",
            ),
        ),
        Scenario(
            name="broken-tso",
            summary="a path that drops TSO/GSO super-packets: 1 MB/s until the sender's TSO went off, then 106",
            story=(
                "A macOS server sent at 1 MB/s where another send path of the same machine reached 106 MB/s, until "
                "`sysctl net.inet.tcp.tso=0`. Forwarded TSO frames on a USB4/Thunderbolt bridge gave 244 KB/s with "
                "TSO on and 380 MB/s with it off, 15 % of the bytes retransmitted and 2.7 bytes on the wire per "
                "payload byte; an r8169 NIC with 67 % retransmissions went from under 1 kbit/s to 983 Mbit/s with "
                "`ethtool -K tso off gso off`; a Thunderbolt bridge's activity counters showed twice the traffic "
                "the copies moved."
            ),
            variants=tuple(
                Variant(
                    name,
                    # gigabit, its line dropping every super-packet of two or more segments, MTU-sized ones passing;
                    # CUBIC, the stories' hosts' (macOS, Linux): BBR's model of a collapsed path paced it at 1.4 kbit/s
                    {
                        "preset": "gige",
                        "cc": "cubic",
                        "link_breaks": "offloaded",
                        **({"offload": offload} if offload else {}),
                    },
                    # the server sends (downloads); a collapsed flow moves a few KB/s: its file is capped at 256 KiB
                    {
                        "protocols": _TSO_CLIENTS,
                        "sizes": size,
                        "small": ["none"],
                        "directions": "download",
                        "repeat": 1,
                        "warmup": 0,
                        "tcp_duration": 2,
                    },
                )
                for name, offload, size in (
                    (_TSO_ON, None, "256K"),
                    (_TSO_OFF, "server:tso=off,gso=off", "64M"),
                )
            ),
            published=(
                Published("raw TCP down, TSO on", "8 (1 MB/s); 2 (244 KB/s); < 0.001", raw_tcp(_TSO_ON, "download")),
                Published(
                    "raw TCP down, TSO/GSO off", "848 (106 MB/s); 3040 (380 MB/s); 983", raw_tcp(_TSO_OFF, "download")
                ),
                Published("HTTP copy down, TSO on", "—", copies(_TSO_ON, "http", "download")),
                Published("HTTP copy down, TSO/GSO off", "—", copies(_TSO_OFF, "http", "download")),
                Published("SFTP copy down, TSO on", "—", copies(_TSO_ON, "sftp", "download")),
                Published("SFTP copy down, TSO/GSO off", "—", copies(_TSO_OFF, "sftp", "download")),
                Published("raw TCP down resent, TSO on", "15; 67", resent_percent(_TSO_ON, "download"), unit="%"),
                Published("raw TCP down resent, TSO/GSO off", "—", resent_percent(_TSO_OFF, "download"), unit="%"),
                Published("HTTP copy resent, TSO on", "15; 67", resent_percent(_TSO_ON, "download", "http"), unit="%"),
                Published(
                    "HTTP wire bytes per file byte, TSO on", "2.7", per_file_byte(_TSO_ON, "download", "http"), unit="x"
                ),
                Published(
                    "HTTP wire bytes per file byte, TSO/GSO off",
                    "—",
                    per_file_byte(_TSO_OFF, "download", "http"),
                    unit="x",
                ),
                Published(
                    "HTTP bytes the interface counted per file byte, TSO on",
                    "2 (activity counters)",
                    per_file_byte(_TSO_ON, "download", "http", counted_by="interface"),
                    unit="x",
                ),
            ),
            quick={"sizes": "64K", "protocols": "http/aiohttp"},
            notes=(
                "published figures, in order: the macOS server, the USB4/Thunderbolt bridge, the r8169 NIC (MB/s "
                "and KB/s given as Mbit/s); the lab's link is gigabit Ethernet, so its TSO-off figures stop near "
                "940 Mbit/s where the bridge's went on to 3 Gbit/s",
                "the lab's line drops every TSO/GSO super-packet of two or more segments (--link-breaks offloaded) "
                "and passes MTU-sized ones, as the bridge dropped forwarded TSO frames; with the server's TSO and "
                "GSO off (--offload server:tso=off,gso=off) its kernel hands the device MTU-sized packets",
                "the client host keeps its offloads, so its uploads (the raw-TCP probe's, too) collapse in both "
                "variants; only downloads are copied. A collapsed copy moves a few KB/s: its file is 256 KiB",
                "the interface counts every byte the sender handed it, those the line dropped too: the "
                "retransmissions are what an activity monitor shows beyond the copy's bytes",
            ),
        ),
    )
}


def find(name: str) -> Scenario:
    """The scenario called `name`, or a one-line usage error naming the others."""
    try:
        return SCENARIOS[name]
    except KeyError:
        raise UsageError(
            f"--scenario: no story called {name!r}", f"choose from {', '.join(SCENARIOS)}, or 'list'"
        ) from None


def listing() -> list[tuple[str, str]]:
    """(name, one line) for every scenario."""
    return [(s.name, s.summary) for s in SCENARIOS.values()]


def figures(scenario: Scenario, runs: Mapping[str, Run]) -> list[tuple[Published, float | None]]:
    """Each published figure beside the lab's (bits/s, or seconds for unit "s"; None when not measured)."""
    return [(p, p.lab(runs)) for p in scenario.published]


def requests(
    scenario: Scenario, settings: Mapping[str, Any], explicit: set[str], quick: bool
) -> list[tuple[Variant, Any]]:
    """Each variant's LabRequest: the story's link, its plan under the settings the user typed (`explicit`),
    and with `quick` the reduced form (small files, one copy, no warm-up) over both.

    A link option typed beside a scenario is refused: the story sets the link, and a silent override would
    replay another story.
    """
    from workbench.core.config import resolve
    from workbench.core.settings import BY_NAME, LINK_SETTINGS
    from workbench.lab.run import LabRequest

    typed = sorted(BY_NAME[name].flag_text for name in explicit if name in LINK_SETTINGS)
    if typed:
        raise UsageError(
            f"--scenario {scenario.name} sets the link itself: drop {', '.join(typed)}",
            "or replay the story by hand with those options and no --scenario",
        )
    out = []
    for variant in scenario.variants:
        plan = {**settings, **{k: v for k, v in variant.settings.items() if k not in explicit}}
        link = dict(variant.link)
        if quick:
            reduced = {"repeat": 1, "warmup": 0, "tcp_duration": 1, **scenario.quick}
            plan.update({k: v for k, v in reduced.items() if k not in explicit})
            link.update(scenario.quick_link)
        request = LabRequest(
            preset=link.pop("preset"),
            rate=link.pop("rate", None),
            rtt=link.pop("rtt", None),
            loss=0.0,
            mtu=link.pop("mtu", 1500),
            cc=link.pop("cc", None),
            window_sweep=link.pop("window_sweep", None),
            settings=resolve("lab", plan, typed=explicit),
            **link,
        )
        out.append((variant, request))
    return out
