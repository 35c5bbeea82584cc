"""Offload state: the ethtool and rtnetlink layouts, the macOS parsers, and loopback read for real; switching on
a veth pair inside a private namespace (root only), never on a host device."""

from __future__ import annotations

import os
import platform
import struct
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from workbench.lab import netns
from workbench.shared import offloads
from workbench.shared.errors import UsageError, WorkbenchError

IFCONFIG_V = """en0: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500 index 6
\teflags=1002080<TXSTART,NOAUTOIPV6LL,ECN_ENABLE,FASTLN_ON>
\toptions=6463<RXCSUM,TXCSUM,TSO4,TSO6,CHANNEL_IO,PARTIAL_CSUM,ZEROINVERT_CSUM>
\tether 3c:22:fb:00:00:01
\tinet 192.168.1.20 netmask 0xffffff00 broadcast 192.168.1.255
\tmedia: autoselect
\tstatus: active
\ttype: Wi-Fi
\tlink rate: 866.70 Mbps
\tscheduler: FQ_CODEL
\tlink quality: 100 (good)
"""

IFCONFIG_BRIDGE = """bridge0: flags=8863<UP,BROADCAST,SMART,RUNNING,SIMPLEX,MULTICAST> mtu 1500 index 9
\toptions=63<RXCSUM,TXCSUM,TSO4,TSO6>
\tscheduler: QFQ
"""

ROUTE_GET = """   route to: 192.168.1.30
destination: 192.168.1.0
       mask: 255.255.255.0
  interface: bridge0
      flags: <UP,DONE,CLONING>
"""


def test_gstrings_are_32_byte_nul_padded_names_after_a_12_byte_head() -> None:
    names = [b"tx-scatter-gather", b"tx-tcp-segmentation", b"rx-gro"]
    raw = struct.pack("=III", offloads.ETHTOOL_GSTRINGS, offloads.ETH_SS_FEATURES, 3)
    raw += b"".join(n.ljust(32, b"\0") for n in names)
    assert offloads.parse_gstrings(raw, 3) == ["tx-scatter-gather", "tx-tcp-segmentation", "rx-gro"]


def test_gfeatures_blocks_give_active_requested_and_fixed_per_bit() -> None:
    names = [f"f{i}" for i in range(40)]
    names[1], names[33], names[34] = "rx-gro", "tx-tcp-segmentation", "rx-lro"
    # block 0: bit 1 available, requested, active; block 1: bit 1 (33) available, requested on, not active
    # (a wish not granted); bit 2 (34) never changeable
    raw = struct.pack("=II", offloads.ETHTOOL_GFEATURES, 2)
    raw += struct.pack("=IIII", 0b10, 0b10, 0b10, 0) + struct.pack("=IIII", 0b010, 0b010, 0, 0b100)
    words = offloads.parse_gfeatures(raw, 2)
    found = {f.name: f for f in offloads.features_from_words(names, words, {"rx-gro", "tx-tcp-segmentation", "rx-lro"})}
    assert found["rx-gro"] == offloads.Feature("rx-gro", active=True, requested=True, fixed=False)
    assert found["tx-tcp-segmentation"].state() == "off [requested on]"
    assert found["rx-lro"].state() == "off [fixed]"


def test_sfeatures_marks_valid_bits_and_their_values_per_block() -> None:
    names = [f"f{i}" for i in range(33)]
    raw = offloads.pack_sfeatures(names, {"f0": True, "f2": False, "f32": True})
    cmd, blocks = struct.unpack_from("=II", raw)
    assert (cmd, blocks, len(raw)) == (offloads.ETHTOOL_SFEATURES, 2, 8 + 2 * 8)
    assert struct.unpack_from("=IIII", raw, 8) == (0b101, 0b001, 0b1, 0b1)


def _rta(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * ((-length) % 4)


def test_rtnetlink_link_attributes_give_mtu_qdisc_queue_and_size_limits() -> None:
    payload = struct.pack("=BxHiII", 0, 772, 1, 0, 0)
    payload += _rta(offloads.IFLA_IFNAME, b"lo\0") + _rta(offloads.IFLA_QDISC, b"fq_codel\0")
    for kind, value in (
        (offloads.IFLA_MTU, 1500),
        (offloads.IFLA_TXQLEN, 500),
        (offloads.IFLA_GSO_MAX_SIZE, 16384),
        (offloads.IFLA_GSO_MAX_SEGS, 64),
        (offloads.IFLA_GRO_MAX_SIZE, 65536),
        (offloads.IFLA_TSO_MAX_SIZE, 524280),
        (offloads.IFLA_TSO_MAX_SEGS, 65535),
    ):
        payload += _rta(kind, struct.pack("=I", value))
    assert offloads.parse_link(payload) == {
        "name": "lo",
        "qdisc": "fq_codel",
        "mtu_bytes": 1500,
        "tx_queue_len": 500,
        "gso_max_size_bytes": 16384,
        "gso_max_segs": 64,
        "gro_max_size_bytes": 65536,
        "tso_max_size_bytes": 524280,
        "tso_max_segs": 65535,
    }


def test_route_answer_gives_its_output_interface() -> None:
    head = struct.pack("=BBBBBBBBI", 2, 32, 0, 0, 254, 0, 0, 1, 0)
    assert offloads.parse_route_oif(head + _rta(offloads.RTA_OIF, struct.pack("=I", 7))) == 7
    assert offloads.parse_route_oif(head) is None


def test_macos_parsers() -> None:
    assert offloads.parse_sysctl_tso("net.inet.tcp.tso: 1\n") is True
    assert offloads.parse_sysctl_tso("net.inet.tcp.tso: 0") is False
    assert offloads.parse_sysctl_tso("0\n") is False
    assert offloads.parse_sysctl_tso("sysctl: unknown oid") is None
    parsed = offloads.parse_ifconfig_v(IFCONFIG_V)
    assert parsed == {
        "mtu_bytes": 1500,
        "qdisc": "fq_codel",
        "groups": {"tso": True, "lro": False, "tx_checksum": True, "rx_checksum": True},
    }
    assert offloads.parse_ifconfig_v(IFCONFIG_BRIDGE)["qdisc"] == "qfq"
    assert offloads.parse_ifconfig_v("") == {}
    assert offloads.parse_route_get(ROUTE_GET) == "bridge0"
    assert offloads.parse_route_get("route: writing to routing socket: not in table") is None


def test_group_states_stand_for_a_host_without_kernel_bits() -> None:
    mac = offloads.Offloads("en0", "sysctl + ifconfig -v", group_states=(("tso", False),), mtu_bytes=1500)
    assert mac.is_on("tso") is False
    assert mac.is_on("gso") is None
    assert mac.to_json()["offloads"]["gso"] == offloads.NOT_KNOWN
    assert mac.to_json()["offloads"]["tso"] == "off"


def test_names_and_aliases() -> None:
    assert offloads.canonical_name("TX") == "tx_checksum"
    assert offloads.canonical_name("rx-checksum") == "rx_checksum"
    assert offloads.canonical_name("tso") == "tso"
    assert offloads.canonical_name("rx-gro-hw") == "rx-gro-hw"


@pytest.mark.skipif(platform.system() != "Linux", reason="reads the Linux kernel")
def test_loopback_read_for_real() -> None:
    state = offloads.read_offloads("lo")
    assert state.source == "ethtool ioctl + rtnetlink", state.note
    # what `ip -d link show lo` prints, read independently
    shown = subprocess.run(["ip", "-d", "link", "show", "lo"], capture_output=True, text=True, check=True).stdout
    words = shown.split()
    assert state.mtu_bytes == int(words[words.index("mtu") + 1])
    assert state.qdisc == words[words.index("qdisc") + 1]
    assert state.tx_queue_len == int(words[words.index("qlen") + 1])
    assert state.gso_max_size_bytes == int(words[words.index("gso_max_size") + 1])
    assert state.gso_max_segs == int(words[words.index("gso_max_segs") + 1])
    # loopback checksums nothing and cannot be told to: its tx checksum is on and fixed, LRO off and fixed
    assert state.group_state("lro") == "off [fixed]"
    assert state.is_on("tx_checksum") is True and state.is_fixed("tx_checksum") is True
    assert state.is_on("tso") is not None and state.is_on("gso") is not None
    document = state.to_json()
    assert set(document["offloads"]) == set(offloads.GROUPS)
    assert "tx-tcp-segmentation" in document["kernel_features"]


@pytest.mark.skipif(platform.system() != "Linux", reason="reads the Linux kernel")
def test_path_interface_of_loopback_addresses() -> None:
    assert offloads.path_interface("127.0.0.1") == "lo"
    assert offloads.path_interface("::1") == "lo"
    assert offloads.path_interface("not an address") is None


@pytest.mark.skipif(platform.system() != "Linux", reason="reads the Linux kernel")
def test_unknown_interface_is_one_line_error() -> None:
    with pytest.raises(WorkbenchError, match="no interface named 'wb-none0' here"):
        offloads.read_offloads("wb-none0")


@pytest.fixture
def veth_namespace() -> Iterator[str]:
    if platform.system() != "Linux" or os.geteuid() != 0:
        pytest.skip("needs root on Linux to make a namespace")
    name = f"wb-offloads-test-{uuid.uuid4().hex[:8]}"
    netns.create(name)
    try:
        netns.ip("-n", name, "link", "add", "va", "type", "veth", "peer", "name", "vb")
        yield name
    finally:
        netns.delete(name)


def test_set_offloads_reads_back_what_the_kernel_did(veth_namespace: str) -> None:
    host_lo = offloads.read_offloads("lo")
    with netns.entered(veth_namespace):
        assert offloads.read_offloads("va").is_on("tso") is True
        off = offloads.set_offloads("va", {"tso": False, "gso": False})
        assert (off.is_on("tso"), off.is_on("gso"), off.unmet) == (False, False, ())
        # TSO needs scatter-gather: with sg off the kernel keeps TSO off, and the result says the wish was unmet
        offloads.set_offloads("va", {"sg": False})
        unmet = offloads.set_offloads("va", {"tso": True})
        assert unmet.is_on("tso") is False and unmet.unmet == ("tso",)
        assert unmet.to_json()["kernel_features"]["tx-tcp-segmentation"] == "off [requested on]"
        # a fixed feature is not claimed: veth's LRO cannot be switched on
        fixed = offloads.set_offloads("va", {"lro": True})
        assert fixed.group_state("lro") == "off [fixed]" and fixed.unmet == ("lro",)
        with pytest.raises(UsageError, match="unknown offload 'warp'"):
            offloads.set_offloads("va", {"warp": False})
    # the host's loopback was never touched
    assert offloads.read_offloads("lo").to_json() == host_lo.to_json()


def test_switches_parse_hosts_names_and_the_comma_form() -> None:
    hosts = ("client", "server")
    parsed = offloads.parse_switches("server:tso=off,gso=off,client:gro=OFF,tx=on", hosts, "--offload")
    assert parsed == (("server", (("tso", False), ("gso", False))), ("client", (("gro", False), ("tx_checksum", True))))
    # a repeated flag arrives joined with commas (settings.typed_value): the same result as one flag
    assert offloads.parse_switches("client:gro=off,server:tso=off", hosts, "--offload") == (
        ("client", (("gro", False),)),
        ("server", (("tso", False),)),
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("tso=off", "does not start with a host"),
        ("router:tso=off", "unknown host 'router'"),
        ("server:tso", "'tso' is not a known NAME=on|off"),
        ("server:warp=off", "'warp=off' is not a known NAME=on|off"),
        ("server:tso=no", "tso must be on or off, not 'no'"),
        ("server:tso=off,,gso=off", "has an empty item"),
        ("server:tso=off,tso=on", "sets server's tso twice"),
    ],
)
def test_switches_refuse_in_one_line(text: str, said: str) -> None:
    with pytest.raises(UsageError) as caught:
        offloads.parse_switches(text, ("client", "server"), "--offload")
    assert said in caught.value.one_line() and "\n" not in caught.value.one_line()
    assert caught.value.one_line().startswith(f"--offload {text!r}")


def test_differences_name_each_changed_value_and_skip_what_is_not_known() -> None:
    base = offloads.Offloads("eth0", "ethtool ioctl + rtnetlink", mtu_bytes=1500, qdisc="fq_codel").to_json()
    a = {**base, "offloads": {"tso": "on", "gso": "on", "gro": offloads.NOT_KNOWN}, "gso_max_size_bytes": 65536}
    b = {**base, "offloads": {"tso": "off", "gso": "on", "gro": "off"}, "gso_max_size_bytes": 16384, "mtu_bytes": 9000}
    assert offloads.differences(a, b) == ["tso on → off", "mtu_bytes 1500 → 9000", "gso_max_size_bytes 65536 → 16384"]
    assert offloads.differences(a, a) == []
    assert offloads.differences(a, {**b, "interface": "en0"})[0] == "interface eth0 → en0"
    assert offloads.differences({}, b) == []  # an older run recorded nothing: nothing to compare


def test_send_paths_of_a_runs_metadata() -> None:
    record = {**offloads.Offloads("wbs0", "x", mtu_bytes=1500).to_json(), "offloads": {"tso": "off", "gso": "on"}}
    meta = {"client": {"hostname": "c"}, "server": {"hostname": "s", "offloads": record}}
    assert offloads.send_paths(meta) == [("server", "wbs0: tso off, gso on, mtu 1500")]
    assert offloads.send_paths({"client": None}) == []


def test_switch_then_restore_puts_back_what_it_changed(veth_namespace: str) -> None:
    with netns.entered(veth_namespace):
        offloads.set_offloads("va", {"gro": True})  # a state that is not veth's default, to be restored to
        before = offloads.read_offloads("va").to_json()
        after, undo = offloads.switch("va", {"tso": False, "gso": False, "gro": False})
        assert (after.is_on("tso"), after.is_on("gso"), after.is_on("gro")) == (False, False, False)
        assert undo["rx-gro"] is True and undo["tx-generic-segmentation"] is True
        offloads.restore("va", undo)
        assert offloads.read_offloads("va").to_json() == before


def _darwin(monkeypatch, sysctl: str, ifconfig: str) -> dict[str, bool]:
    answers = {"sysctl": sysctl, "ifconfig": ifconfig}
    monkeypatch.setattr(offloads, "_run", lambda argv: answers[argv[0]])
    return dict(offloads._read_darwin("en0").group_states)


def test_macos_tso_is_off_when_the_host_switch_is_off_and_not_known_when_nothing_said(monkeypatch) -> None:
    bare = "en0: flags=8863<UP,BROADCAST,RUNNING> mtu 1500\n"
    assert _darwin(monkeypatch, "net.inet.tcp.tso: 0\n", bare)["tso"] is False
    assert "tso" not in _darwin(monkeypatch, "net.inet.tcp.tso: 1\n", bare)  # the switch on says nothing of en0


def test_the_size_limits_are_one_list_recorded_and_compared_alike() -> None:
    from workbench.shared import rtnetlink

    assert rtnetlink.SIZE_LIMITS == (
        "gso_max_size_bytes",
        "gso_max_segs",
        "gro_max_size_bytes",
        "tso_max_size_bytes",
        "tso_max_segs",
    )
    limits = {name: 1000 + i for i, name in enumerate(rtnetlink.SIZE_LIMITS)}
    record = offloads.Offloads(interface="eth0", source="test", **limits).to_json()
    assert {name: record[name] for name in limits} == limits
    for name in rtnetlink.SIZE_LIMITS:  # a difference in any of them is told, tso_max_segs included
        assert offloads.differences(record, {**record, name: 1}) == [f"{name} {limits[name]} → 1"]
