"""An interface's send-path state, read from the kernel: offloads (TSO, GSO, GRO, LRO, checksums), size limits,
MTU, root qdisc and queue length; and the offloads switched, with what the kernel actually did read back.

Why: a sender that hands its device 64 KiB super-packets (TSO/GSO) over a path that mishandles them collapses
to a trickle with retransmissions, while the same host's other traffic looks healthy. The state that decides
it is per device and must be recorded beside the figures it explains.

Linux, written against the kernel's UAPI rather than through a library (the same choice as inetdiag.py):
- the features come from ethtool's ioctl (SIOCETHTOOL: ETHTOOL_GSSET_INFO and ETHTOOL_GSTRINGS name the bits of
  the "features" string set, ETHTOOL_GFEATURES gives each bit's available/requested/active/never-changed
  words, ETHTOOL_SFEATURES changes them);
- the rest from one rtnetlink RTM_GETLINK (IFLA_MTU, IFLA_QDISC, IFLA_TXQLEN, IFLA_GSO_MAX_SIZE/SEGS,
  IFLA_GRO_MAX_SIZE, IFLA_TSO_MAX_SIZE/SEGS), through workbench.shared.rtnetlink;
- the path's interface from RTM_GETROUTE (RTA_OIF), through the same.
Both sockets belong to the network namespace of the thread that opens them, so every function here works
inside a lab namespace entered with setns (sysfs would not: it shows the namespace it was mounted in).

macOS: `sysctl net.inet.tcp.tso` (host-wide) and `ifconfig -v IF` (options, mtu, scheduler); elsewhere, and
for whatever those do not say, "not known".
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import ipaddress
import platform
import re
import socket
import struct
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.shared import rtnetlink
from workbench.shared.errors import UnavailableError, UsageError, WorkbenchError

# ("X as X": the rtnetlink names this module's readers have always found here, re-exported)
from workbench.shared.rtnetlink import IFLA_GRO_MAX_SIZE as IFLA_GRO_MAX_SIZE
from workbench.shared.rtnetlink import IFLA_GSO_MAX_SEGS as IFLA_GSO_MAX_SEGS
from workbench.shared.rtnetlink import IFLA_GSO_MAX_SIZE as IFLA_GSO_MAX_SIZE
from workbench.shared.rtnetlink import IFLA_IFNAME as IFLA_IFNAME
from workbench.shared.rtnetlink import IFLA_MTU as IFLA_MTU
from workbench.shared.rtnetlink import IFLA_QDISC as IFLA_QDISC
from workbench.shared.rtnetlink import IFLA_TSO_MAX_SEGS as IFLA_TSO_MAX_SEGS
from workbench.shared.rtnetlink import IFLA_TSO_MAX_SIZE as IFLA_TSO_MAX_SIZE
from workbench.shared.rtnetlink import IFLA_TXQLEN as IFLA_TXQLEN
from workbench.shared.rtnetlink import RTA_OIF as RTA_OIF
from workbench.shared.rtnetlink import parse_route_oif as parse_route_oif

NOT_KNOWN = "not known"

# The short names, ethtool's own (`ethtool -K dev tso off`), each standing for the kernel features it switches.
# A group reads "on" when any of its members is active: one active TSO flavour is enough for the stack to hand
# the device super-packets.
GROUPS: dict[str, tuple[str, ...]] = {
    "tso": ("tx-tcp-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation"),
    "gso": ("tx-generic-segmentation",),
    "gro": ("rx-gro",),
    "lro": ("rx-lro",),
    "sg": ("tx-scatter-gather",),
    "tx_checksum": ("tx-checksum-ipv4", "tx-checksum-ip-generic", "tx-checksum-ipv6", "tx-checksum-sctp"),
    "rx_checksum": ("rx-checksum",),
}
# What a lab is asked to switch, per host: ((host, ((short name, on), …)), …); tuples, so a frozen spec holds it
Switches = tuple[tuple[str, tuple[tuple[str, bool], ...]], ...]
_ALIASES = {"tx": "tx_checksum", "rx": "rx_checksum", "tx-checksum": "tx_checksum", "rx-checksum": "rx_checksum"}

# ---- ethtool ioctl (linux/ethtool.h, linux/sockios.h) ----
SIOCETHTOOL = 0x8946
ETHTOOL_GSTRINGS = 0x1B
ETHTOOL_GSSET_INFO = 0x37
ETHTOOL_GFEATURES = 0x3A
ETHTOOL_SFEATURES = 0x3B
ETH_SS_FEATURES = 4
ETH_GSTRING_LEN = 32
IFNAMSIZ = 16
_IFREQ_BYTES = 40  # struct ifreq: 16 bytes of name, then a 24-byte union whose member here is the data pointer
_SSET_INFO = struct.Struct("=IIQ")  # cmd, reserved, sset_mask; then one u32 per set bit of the mask
_GSTRINGS = struct.Struct("=III")  # cmd, string_set, len; then len × ETH_GSTRING_LEN bytes
_FEATURES_HEAD = struct.Struct("=II")  # cmd, size (blocks); for GFEATURES and SFEATURES alike
_GET_BLOCK = struct.Struct("=IIII")  # available, requested, active, never_changed
_SET_BLOCK = struct.Struct("=II")  # valid, requested

_U32 = struct.Struct("=I")


@dataclass(frozen=True)
class Feature:
    """One kernel feature bit: active now, what was asked, and whether it can be changed at all."""

    name: str
    active: bool
    requested: bool
    fixed: bool

    def state(self) -> str:
        """ethtool's wording: "on", "off", "off [fixed]", and "[requested on]" when the wish was not granted."""
        text = "on" if self.active else "off"
        if self.fixed:
            return f"{text} [fixed]"
        if self.requested != self.active:
            return f"{text} [requested {'on' if self.requested else 'off'}]"
        return text


@dataclass(frozen=True)
class Offloads(rtnetlink.SizeLimits):
    """The send-path state of one interface. Absent knowledge is None (a feature missing from `features`)."""

    interface: str
    source: str  # how it was read: "ethtool ioctl + rtnetlink", "sysctl + ifconfig -v", or NOT_KNOWN
    features: tuple[Feature, ...] = ()  # the kernel features named in GROUPS, those the device has
    mtu_bytes: int | None = None
    qdisc: str | None = None
    tx_queue_len: int | None = None  # and the size limits (rtnetlink.SizeLimits)
    # macOS only: what the group states come from when there is no per-bit kernel feature (e.g. "tso": True)
    group_states: tuple[tuple[str, bool], ...] = ()
    unmet: tuple[str, ...] = ()  # after set_offloads: the short names asked for whose read-back differs
    note: str = ""

    def feature(self, name: str) -> Feature | None:
        return next((f for f in self.features if f.name == name), None)

    def is_on(self, group: str) -> bool | None:
        """Whether a group (tso, gso, gro, …) is active: any member on; None when not known."""
        group = canonical_name(group)
        for name, on in self.group_states:
            if name == group:
                return on
        members = [f for f in self.features if f.name in GROUPS.get(group, (group,))]
        if not members:
            return None
        return any(f.active for f in members)

    def is_fixed(self, group: str) -> bool | None:
        """Whether a group cannot be changed on this device (every member it has is fixed)."""
        members = [f for f in self.features if f.name in GROUPS.get(canonical_name(group), (group,))]
        return all(f.fixed for f in members) if members else None

    def group_state(self, group: str) -> str:
        on = self.is_on(group)
        if on is None:
            return NOT_KNOWN
        text = "on" if on else "off"
        return f"{text} [fixed]" if self.is_fixed(group) else text

    def summary(self) -> str:
        """One line for a terminal: `lo: tso on, gso on, gro on, … mtu 65536, qdisc noqueue, qlen 1000`."""
        return summary_of(self.to_json()) or f"{self.interface}: {NOT_KNOWN}"

    def to_json(self) -> dict[str, Any]:
        return {
            "interface": self.interface,
            "source": self.source,
            "offloads": {g: self.group_state(g) for g in GROUPS},
            "kernel_features": {f.name: f.state() for f in self.features},
            "mtu_bytes": self.mtu_bytes,
            "qdisc": self.qdisc,
            "tx_queue_len": self.tx_queue_len,
            **self.size_limits(),
            "unmet": list(self.unmet),
            "note": self.note,
        }


def canonical_name(name: str) -> str:
    """A short name as GROUPS spells it ("tx" and "tx-checksum" are "tx_checksum"); others pass unchanged."""
    lowered = name.strip().lower()
    return _ALIASES.get(lowered, lowered.replace("-", "_") if lowered.replace("-", "_") in GROUPS else lowered)


# ---------------------------------------------------------------- ethtool ioctl


def _ethtool(sock: socket.socket, ifname: str, data: ctypes.Array[ctypes.c_char]) -> int:
    """One SIOCETHTOOL call on `ifname` with `data` as the command buffer (changed in place)."""
    name = ifname.encode()
    if not name or len(name) >= IFNAMSIZ:
        raise UsageError(f"interface name {ifname!r} is not a valid interface name")
    ifreq = bytearray(_IFREQ_BYTES)
    ifreq[: len(name)] = name
    struct.pack_into("P", ifreq, IFNAMSIZ, ctypes.addressof(data))
    return int(fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq, True))


def feature_count(sock: socket.socket, ifname: str) -> int:
    buf = ctypes.create_string_buffer(_SSET_INFO.size + 4)
    _SSET_INFO.pack_into(buf, 0, ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_FEATURES)
    _ethtool(sock, ifname, buf)
    _, _, mask = _SSET_INFO.unpack_from(buf, 0)
    if not mask & (1 << ETH_SS_FEATURES):
        return 0
    return int(_U32.unpack_from(buf, _SSET_INFO.size)[0])


def feature_names(sock: socket.socket, ifname: str, count: int) -> list[str]:
    buf = ctypes.create_string_buffer(_GSTRINGS.size + count * ETH_GSTRING_LEN)
    _GSTRINGS.pack_into(buf, 0, ETHTOOL_GSTRINGS, ETH_SS_FEATURES, count)
    _ethtool(sock, ifname, buf)
    return parse_gstrings(buf.raw, count)


def parse_gstrings(raw: bytes, count: int) -> list[str]:
    """The names of an ETHTOOL_GSTRINGS answer: `count` NUL-padded 32-byte strings after the 12-byte head."""
    base = _GSTRINGS.size
    return [
        raw[base + i * ETH_GSTRING_LEN : base + (i + 1) * ETH_GSTRING_LEN].split(b"\0", 1)[0].decode("ascii", "replace")
        for i in range(count)
    ]


def _blocks(count: int) -> int:
    return (count + 31) // 32


def feature_words(sock: socket.socket, ifname: str, count: int) -> list[tuple[int, int, int, int]]:
    """ETHTOOL_GFEATURES: per 32-bit block, (available, requested, active, never_changed)."""
    blocks = _blocks(count)
    buf = ctypes.create_string_buffer(_FEATURES_HEAD.size + blocks * _GET_BLOCK.size)
    _FEATURES_HEAD.pack_into(buf, 0, ETHTOOL_GFEATURES, blocks)
    _ethtool(sock, ifname, buf)
    return parse_gfeatures(buf.raw, blocks)


def parse_gfeatures(raw: bytes, blocks: int) -> list[tuple[int, int, int, int]]:
    base = _FEATURES_HEAD.size
    return [_GET_BLOCK.unpack_from(raw, base + i * _GET_BLOCK.size) for i in range(blocks)]


def features_from_words(names: list[str], words: list[tuple[int, int, int, int]], wanted: set[str]) -> list[Feature]:
    """The features named in `wanted` from GFEATURES' words: a bit not in `available`, or in `never_changed`,
    is fixed (the kernel refuses to change it)."""
    found = []
    for bit, name in enumerate(names):
        if name not in wanted or bit // 32 >= len(words):
            continue
        available, requested, active, never = words[bit // 32]
        mask = 1 << (bit % 32)
        fixed = not (available & mask) or bool(never & mask)
        found.append(Feature(name, bool(active & mask), bool(requested & mask), fixed))
    return found


def pack_sfeatures(names: list[str], wanted: Mapping[str, bool]) -> bytes:
    """An ETHTOOL_SFEATURES command: `valid` marks the bits to change, `requested` their new values."""
    blocks = _blocks(len(names))
    valid = [0] * blocks
    requested = [0] * blocks
    index = {name: bit for bit, name in enumerate(names)}
    for name, on in wanted.items():
        bit = index[name]
        valid[bit // 32] |= 1 << (bit % 32)
        if on:
            requested[bit // 32] |= 1 << (bit % 32)
    out = bytearray(_FEATURES_HEAD.pack(ETHTOOL_SFEATURES, blocks))
    for v, r in zip(valid, requested, strict=True):
        out += _SET_BLOCK.pack(v, r)
    return bytes(out)


def _all_members() -> set[str]:
    return {m for members in GROUPS.values() for m in members}


def _ioctl_socket() -> socket.socket:
    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def _read_features(sock: socket.socket, ifname: str) -> tuple[list[str], list[Feature]]:
    count = feature_count(sock, ifname)
    names = feature_names(sock, ifname, count)
    return names, features_from_words(names, feature_words(sock, ifname, count), _all_members())


# ---------------------------------------------------------------- rtnetlink (workbench.shared.rtnetlink)


def _link_fields(link: rtnetlink.Link) -> dict[str, Any]:
    """What this module reads of a link: its name, MTU, qdisc, queue length and size limits, those known."""
    fields = {
        "name": link.name,
        "mtu_bytes": link.mtu_bytes,
        "qdisc": link.qdisc,
        "tx_queue_len": link.tx_queue_len,
        **link.size_limits(),
    }
    return {key: value for key, value in fields.items() if value is not None and value != ""}


def parse_link(payload: bytes) -> dict[str, Any]:
    """An RTM_NEWLINK payload (ifinfomsg + attributes): name, MTU, qdisc, queue length and the size limits."""
    return _link_fields(rtnetlink.parse_link(payload))


def read_link(ifname: str | None = None, index: int = 0) -> dict[str, Any]:
    """Interface `ifname` (or `index`) as parse_link gives it, read in this thread's namespace."""
    with rtnetlink.Rtnetlink() as netlink:
        return _link_fields(netlink.link(index, ifname))


# ---------------------------------------------------------------- macOS


def parse_sysctl_tso(text: str) -> bool | None:
    """`sysctl net.inet.tcp.tso` (or `sysctl -n …`): "net.inet.tcp.tso: 1" → True."""
    match = re.search(r"(?:^|:)\s*(\d+)\s*$", text.strip())
    return None if match is None else match.group(1) != "0"


def parse_ifconfig_v(text: str) -> dict[str, Any]:
    """`ifconfig -v IF` on macOS: MTU, the options the driver has on (TSO4/TSO6, TXCSUM, RXCSUM, LRO) and the
    output scheduler (the qdisc's counterpart). Keys absent when the text does not say."""
    found: dict[str, Any] = {}
    mtu = re.search(r"\bmtu (\d+)", text)
    if mtu:
        found["mtu_bytes"] = int(mtu.group(1))
    options = re.search(r"^\s*options=[0-9a-fA-F]+<([^>]*)>", text, re.MULTILINE)
    if options:
        flags = {f.strip().upper() for f in options.group(1).split(",") if f.strip()}
        found["groups"] = {
            "tso": bool(flags & {"TSO4", "TSO6"}),
            "lro": "LRO" in flags,
            "tx_checksum": "TXCSUM" in flags or "TXCSUM_IPV6" in flags,
            "rx_checksum": "RXCSUM" in flags or "RXCSUM_IPV6" in flags,
        }
    scheduler = re.search(r"^\s*scheduler:\s*(\S+)", text, re.MULTILINE)
    if scheduler:
        found["qdisc"] = scheduler.group(1).lower()
    return found


def _run(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _read_darwin(ifname: str) -> Offloads:
    tso_text = _run(["sysctl", "net.inet.tcp.tso"])
    host_tso = parse_sysctl_tso(tso_text) if tso_text else None
    ifconfig = _run(["ifconfig", "-v", ifname]) or _run(["ifconfig", ifname]) or ""
    parsed = parse_ifconfig_v(ifconfig)
    groups: dict[str, bool] = dict(parsed.get("groups", {}))
    if host_tso is False:
        # the host switch wins: with net.inet.tcp.tso=0 no interface's TSO is used, whatever its options say
        groups["tso"] = False
    # with it on, TSO is the interface's own option: not known when ifconfig printed none
    known = bool(groups) or "mtu_bytes" in parsed
    return Offloads(
        interface=ifname,
        source="sysctl + ifconfig -v" if known else NOT_KNOWN,
        mtu_bytes=parsed.get("mtu_bytes"),
        qdisc=parsed.get("qdisc"),
        group_states=tuple(groups.items()),
        note="" if known else "sysctl and ifconfig said nothing about this interface",
    )


def parse_route_get(text: str) -> str | None:
    """`route -n get ADDR` (macOS, BSD): the `interface:` line."""
    match = re.search(r"^\s*interface:\s*(\S+)", text, re.MULTILINE)
    return match.group(1) if match else None


# ---------------------------------------------------------------- the public functions


def read_offloads(ifname: str) -> Offloads:
    """The send-path state of `ifname` in this thread's network namespace. Never raises for a missing
    capability: what cannot be read is None, and `note` says why. An unknown interface is a WorkbenchError."""
    system = platform.system()
    if system == "Darwin":
        return _read_darwin(ifname)
    if system != "Linux":
        return Offloads(interface=ifname, source=NOT_KNOWN, note=f"offloads are not read on {system}")
    try:
        link = read_link(ifname)
    except OSError as exc:
        if exc.errno == errno.ENODEV:
            raise WorkbenchError(f"no interface named {ifname!r} here") from exc
        return Offloads(interface=ifname, source=NOT_KNOWN, note=f"rtnetlink: {exc.strerror or exc}")
    note = ""
    features: list[Feature] = []
    try:
        with _ioctl_socket() as sock:
            _, features = _read_features(sock, ifname)
    except OSError as exc:
        note = f"ethtool ioctl: {exc.strerror or exc}"
    return Offloads(
        interface=ifname,
        source="ethtool ioctl + rtnetlink" if not note else "rtnetlink",
        features=tuple(features),
        mtu_bytes=link.get("mtu_bytes"),
        qdisc=link.get("qdisc"),
        tx_queue_len=link.get("tx_queue_len"),
        **_size_limits(link),
        note=note,
    )


def _size_limits(link: Mapping[str, Any]) -> dict[str, Any]:
    """The size limits of a read link's fields (parse_link), those it has; the rest stay None."""
    return {name: link[name] for name in rtnetlink.SIZE_LIMITS if name in link}


def _kernel_names(name: str, present: list[str]) -> tuple[str, ...]:
    group = canonical_name(name)
    if group in GROUPS:
        return tuple(m for m in GROUPS[group] if m in present)
    if name in present:
        return (name,)
    raise UsageError(
        f"unknown offload {name!r}", f"use one of {', '.join(GROUPS)} (or tx, rx) or a kernel feature name"
    )


def set_offloads(ifname: str, wanted: Mapping[str, bool]) -> Offloads:
    """Switch offloads of `ifname` (short names as GROUPS, or kernel feature names) and read back what the
    kernel did. Fixed features are not asked for; they, and any wish the kernel did not grant (a feature that
    depends on one switched off), are listed in `unmet` of the result, never claimed. Linux only."""
    if platform.system() != "Linux":
        raise UnavailableError("offloads are switched only on Linux", "on macOS: sudo sysctl net.inet.tcp.tso=0")
    with _ioctl_socket() as sock:
        try:
            names, before = _read_features(sock, ifname)
        except OSError as exc:
            if exc.errno == errno.ENODEV:
                raise WorkbenchError(f"no interface named {ifname!r} here") from exc
            raise UnavailableError(f"cannot read the offloads of {ifname}: {exc.strerror or exc}") from exc
        fixed = {f.name for f in before if f.fixed}
        bits: dict[str, bool] = {}
        for name, on in wanted.items():
            for member in _kernel_names(name, names):
                if member not in fixed:
                    bits[member] = on
        if bits:
            buf = ctypes.create_string_buffer(pack_sfeatures(names, bits))
            try:
                _ethtool(sock, ifname, buf)
            except OSError as exc:
                raise UnavailableError(f"cannot switch offloads of {ifname}: {exc.strerror or exc}") from exc
    after = read_offloads(ifname)
    unmet = tuple(name for name, on in wanted.items() if _met(after, name, on) is not True)
    return Offloads(**{**after.__dict__, "unmet": unmet})


def _met(state: Offloads, name: str, on: bool) -> bool | None:
    group = canonical_name(name)
    if group in GROUPS:
        now = state.is_on(group)
        return None if now is None else now == on
    feature = state.feature(name)
    return None if feature is None else feature.active == on


def path_interface(peer_address: str) -> str | None:
    """The interface that carries traffic to `peer_address` (an IP address) in this thread's namespace: the
    kernel's route lookup (RTM_GETROUTE), as `ip route get` does. A local address gives "lo"; no route, None."""
    try:
        addr = ipaddress.ip_address(peer_address.split("%", 1)[0])
    except ValueError:
        return None
    if platform.system() == "Darwin":
        return parse_route_get(_run(["route", "-n", "get", str(addr)]) or "")
    if platform.system() != "Linux":
        return None
    try:
        with rtnetlink.Rtnetlink() as netlink:
            return netlink.link(netlink.route_interface(str(addr))).name or None
    except OSError:
        return None


def every_interface(limit: int = 32) -> list[Offloads]:
    """Each interface of this thread's namespace (at most `limit`), read as read_offloads does; one that went
    away between the listing and the read is left out."""
    found = []
    for _, name in socket.if_nameindex()[:limit]:
        try:
            found.append(read_offloads(name))
        except WorkbenchError:
            continue
    return found


def path_state(peer_host: str) -> Offloads:
    """The state of the interface toward `peer_host` (a name or address) from this thread's namespace; never
    raises: what cannot be known is "not known", with the reason in `note`."""
    try:
        address = str(socket.getaddrinfo(peer_host, None)[0][4][0])  # an IP family: the address is a str
    except (OSError, UnicodeError) as exc:
        return Offloads(interface="", source=NOT_KNOWN, note=f"{peer_host} did not resolve: {exc}")
    ifname = path_interface(address)
    if ifname is None:
        return Offloads(interface="", source=NOT_KNOWN, note=f"no route to {address} was found")
    try:
        return read_offloads(ifname)
    except (OSError, WorkbenchError) as exc:
        return Offloads(interface=ifname, source=NOT_KNOWN, note=str(exc))


def path_record(peer_host: str) -> dict[str, Any]:
    """The run metadata's `offloads` object for the path to `peer_host` (path_state as JSON)."""
    return path_state(peer_host).to_json()


# The recorded values that change what a sender hands its device, in the order a difference is told.
_COMPARED = ("mtu_bytes", *rtnetlink.SIZE_LIMITS, "qdisc", "tx_queue_len")


def differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What differs between two recorded `offloads` objects (to_json), as "tso on → off" items; a value either
    side does not know is not compared (an older run, a host that could not read it)."""
    found = []
    if before.get("interface") and after.get("interface") and before["interface"] != after["interface"]:
        found.append(f"interface {before['interface']} → {after['interface']}")
    states_a, states_b = before.get("offloads"), after.get("offloads")
    if isinstance(states_a, Mapping) and isinstance(states_b, Mapping):
        for group in GROUPS:
            a, b = states_a.get(group), states_b.get(group)
            if a and b and NOT_KNOWN not in (a, b) and a != b:
                found.append(f"{group} {a} → {b}")
    for key in _COMPARED:
        a, b = before.get(key), after.get(key)
        if a is not None and b is not None and a != b:
            found.append(f"{key} {a} → {b}")
    return found


def summary_of(record: Mapping[str, Any]) -> str | None:
    """A recorded `offloads` object (to_json) in one line, as Offloads.summary() says it; None when nothing of it
    is known."""
    states = record.get("offloads")
    parts = []
    if isinstance(states, Mapping):
        parts += [f"{group} {states[group]}" for group in GROUPS if states.get(group) not in (None, NOT_KNOWN)]
    for key, said in (("gso_max_size_bytes", "gso_max_size"), ("mtu_bytes", "mtu"), ("qdisc", "qdisc"),
                      ("tx_queue_len", "qlen")):  # fmt: skip
        if record.get(key) is not None:
            parts.append(f"{said} {record[key]}")
    if not parts:
        return None
    return f"{record.get('interface') or '?'}: {', '.join(parts)}"


def send_paths(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(host role, its send path in one line) for each host of a run's metadata that recorded one."""
    found = []
    for role in ("client", "server"):
        host = meta.get(role)
        record = host.get("offloads") if isinstance(host, Mapping) else None
        said = summary_of(record) if isinstance(record, Mapping) else None
        if said:
            found.append((role, said))
    return found


def parse_switches(text: str, hosts: tuple[str, ...], where: str) -> Switches:
    """`HOST:NAME=on|off[,NAME=on|off…][,HOST:…]` (e.g. "server:tso=off,gso=off,client:gro=off") as
    ((host, ((name, on), …)), …) in the order given; a NAME without a HOST: prefix belongs to the host before it.
    Refuses (one line, naming `where`) an unknown host or name, a value other than on/off, a name given twice."""
    hint = f"use HOST:NAME=on|off[,NAME=on|off], HOST one of {', '.join(hosts)}, NAME one of {', '.join(GROUPS)}"
    found: dict[str, dict[str, bool]] = {}
    host: str | None = None
    for token in (t.strip() for t in text.split(",")):
        if not token:
            raise UsageError(f"{where} {text!r} has an empty item", hint)
        if ":" in token:
            host, token = (part.strip() for part in token.split(":", 1))
            host = host.lower()
            if host not in hosts:
                raise UsageError(f"{where} {text!r}: unknown host {host!r}", hint)
        if host is None:
            raise UsageError(f"{where} {text!r} does not start with a host", hint)
        name, equals, value = token.partition("=")
        group = canonical_name(name)
        if not equals or group not in GROUPS:
            raise UsageError(f"{where} {text!r}: {token!r} is not a known NAME=on|off", hint)
        if value.strip().lower() not in ("on", "off"):
            raise UsageError(f"{where} {text!r}: {group} must be on or off, not {value.strip()!r}", hint)
        settings = found.setdefault(host, {})
        if group in settings:
            raise UsageError(f"{where} {text!r} sets {host}'s {group} twice", hint)
        settings[group] = value.strip().lower() == "on"
    return tuple((h, tuple(wanted.items())) for h, wanted in found.items())


def switch(ifname: str, wanted: Mapping[str, bool]) -> tuple[Offloads, dict[str, bool]]:
    """set_offloads, plus what undoes it: each changed kernel feature's state before, by kernel name, for
    restore() (a device must not keep an offload it was not built with)."""
    before = read_offloads(ifname)
    after = set_offloads(ifname, wanted)
    was = {f.name: f.requested for f in before.features if not f.fixed}
    now = {f.name: f.requested for f in after.features}
    return after, {name: on for name, on in was.items() if now.get(name) != on}


def restore(ifname: str, undo: Mapping[str, bool]) -> None:
    """Put back what switch() changed (kernel feature names as its second result)."""
    if undo:
        set_offloads(ifname, undo)


__all__ = [
    "GROUPS",
    "NOT_KNOWN",
    "Feature",
    "Offloads",
    "canonical_name",
    "differences",
    "every_interface",
    "parse_switches",
    "path_interface",
    "path_record",
    "path_state",
    "read_offloads",
    "restore",
    "send_paths",
    "set_offloads",
    "summary_of",
    "switch",
]
