"""`workbench doctor`: what can run here and why not, and the local TCP settings that bound throughput;
`workbench doctor URL`: whether a server given by URL answers, takes the login, and which clients would run."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from workbench.protocols import registry
from workbench.shared import hostinfo, offloads

if TYPE_CHECKING:
    from workbench.core.url_check import Check

_MOUNTS = {"sftp/sshfs", "smb/cifs", "smb/mount_smbfs", "afp/mount_afp"}


def client_availability() -> list[tuple[str, str | None, bool]]:
    """(label, reason or None, is_reference) for every known client."""
    rows = []
    for entry in registry.KNOWN_CLIENTS:
        loaded = registry.load(entry)
        rows.append((entry.label, loaded if isinstance(loaded, str) else None, entry.reference))
    return rows


def server_availability() -> list[tuple[str, str | None]]:
    from workbench.probe.iperf import iperf3_available
    from workbench.server.daemons.supervisor import server_classes

    rows: list[tuple[str, str | None]] = [(cls.name, cls.unavailable_reason()) for cls in server_classes()]
    rows.append(("iperf3", iperf3_available()))
    return rows


def _server_note(name: str) -> str:
    """Which build of a server runs here, where there is a choice (AFP: the host's netatalk or setup's root)."""
    if name != "afpd":
        return ""
    from workbench.shared.netatalk import find

    found, _ = find()
    return f": {found.describe()}" if found is not None else ""


def lab_availability() -> str | None:
    try:
        from workbench.lab import check_available
    except ImportError as exc:
        return f"lab not importable: {exc}"
    from workbench.shared.errors import WorkbenchError

    try:
        check_available()
    except WorkbenchError as exc:
        return exc.one_line()
    return None


def triage_availability() -> str | None:
    """Why the TCP triage cannot read this host's sockets (None: it can, short connections included)."""
    from workbench.shared.inetdiag import DestroyListener, DiagReader

    try:
        DiagReader().close()
    except OSError as exc:
        return f"socket diagnostics (inet_diag) unavailable: {exc}"
    try:
        DestroyListener().close()
    except OSError as exc:
        return f"partly: connections shorter than 100 ms are missed (destroy events need CAP_NET_ADMIN: {exc})"
    return None


def report() -> dict[str, Any]:
    return {
        "clients": [{"client": c, "available": r is None, "reason": r} for c, r, _ in client_availability()],
        "servers": [{"server": s, "available": r is None, "reason": r} for s, r in server_availability()],
        "lab": lab_availability(),
        "tcp_triage": triage_availability(),
        "tcp": hostinfo.tcp_settings(),
        "offloads": [state.to_json() for state in offloads.every_interface()],
    }


def render_doctor(console: Console) -> None:
    table = Table(title="protocol clients", title_justify="left")
    for name in ("client", "kind", "status"):
        table.add_column(name)
    for label, reason, reference in client_availability():
        kind = "native reference" if reference else ("mount" if label in _MOUNTS else "python")
        status = "[green]available[/]" if reason is None else f"[yellow]unavailable:[/] {reason}"
        table.add_row(label, kind, status)
    console.print(table)

    servers = Table(title="local servers ('workbench servers up', the lab)", title_justify="left")
    servers.add_column("server")
    servers.add_column("status")
    for name, reason in server_availability():
        status = f"[green]available[/]{_server_note(name)}" if reason is None else f"[yellow]unavailable:[/] {reason}"
        servers.add_row(name, status)
    lab = lab_availability()
    servers.add_row("lab", "[green]available[/]" if lab is None else f"[yellow]unavailable:[/] {lab}")
    triage = triage_availability()
    servers.add_row("TCP triage", "[green]available[/]" if triage is None else f"[yellow]{triage}[/]")
    console.print(servers)

    tcp = Table(title="TCP settings on this host (they bound what one connection can carry)", title_justify="left")
    tcp.add_column("setting")
    tcp.add_column("value")
    tcp.add_column("what it means")
    settings = hostinfo.tcp_settings()
    meaning = {
        "tcp_rmem": "min/default/max receive buffer: max bounds the receive window",
        "tcp_wmem": "min/default/max send buffer: max bounds bytes in flight (4 MiB caps a 20 ms path near 1.6 Gbit/s)",
        "rmem_max": "largest SO_RCVBUF an application may ask for",
        "wmem_max": "largest SO_SNDBUF an application may ask for",
        "congestion_control": "BBR paces to the measured bottleneck; cubic fills queues",
        "window_scaling": "1 = windows above 64 KiB allowed",
    }
    for key, value in settings.items():
        tcp.add_row(key, " ".join(value.split()) if value is not None else "n/a", meaning.get(key, ""))
    with contextlib.suppress(Exception):
        wmem_max = int((settings.get("tcp_wmem") or "0 0 0").split()[2])
        for rtt_ms in (0.2, 2.8, 40.0):
            tcp.add_row(
                f"send-buffer ceiling at {rtt_ms} ms",
                f"{wmem_max / (rtt_ms / 1e3) * 8 / 1e6:,.0f} Mbit/s",
                "tcp_wmem max / RTT",
            )
    console.print(tcp)
    console.print(offload_table(offloads.every_interface()))


def offload_table(states: list[offloads.Offloads]) -> Table:
    """Each interface's send path as its kernel reports it: a sender with TSO/GSO on hands the device
    super-packets of up to gso_max_size bytes, and a path that mishandles them collapses."""
    from workbench.shared.safetext import for_markup as escape  # interface names come from the kernel

    table = Table(
        title="send path per interface (offloads from the kernel; a path that breaks super-packets needs tso/gso off)",
        title_justify="left",
    )
    columns = ("tso", "gso", "gro", "lro", "tx_checksum", "rx_checksum")
    for name in ("interface", *columns, "gso_max_size", "mtu", "qdisc", "qlen"):
        table.add_column(name.replace("_checksum", " csum"))
    for state in states:
        sizes = (state.gso_max_size_bytes, state.mtu_bytes)
        table.add_row(
            escape(state.interface),
            *(escape(state.group_state(group)) for group in columns),  # "[fixed]" is no markup
            *("n/a" if value is None else str(value) for value in sizes),
            escape(state.qdisc or "n/a"),
            "n/a" if state.tx_queue_len is None else str(state.tx_queue_len),
        )
    return table


def render_url_check(console: Console, found: Check) -> None:
    """One line each for reachability and the login, then the URL's clients: would run, or why not."""
    from workbench.shared.safetext import for_markup as escape  # a server's words: no markup, no control codes

    console.print(f"[bold]{escape(found.url)}[/]")
    if found.connect_ms is not None:
        console.print(
            f"reachable: [green]yes[/], {escape(found.address)} answers a TCP connect in {found.connect_ms:.2f} ms"
        )
    else:
        console.print(f"reachable: [red]no[/], {escape(found.reach_error or '')}")
    if found.login is not None:
        console.print(f"login: [green]ok[/], {escape(found.login)}")
    elif found.login_error is not None:
        console.print(f"login: [red]failed[/], {escape(found.login_error)}")
    else:
        console.print("login: not tried (the server does not answer)")
    table = Table(title="clients for this URL", title_justify="left")
    for name in ("client", "kind", "would run"):
        table.add_column(name)
    for label, reason in found.clients:
        kind = "mount" if label in _MOUNTS else "native reference" if _is_reference(label) else "python"
        status = "[green]yes[/]" if reason is None else f"[yellow]no:[/] {escape(reason)}"
        table.add_row(label, kind, status)
    console.print(table)
    if found.connect_ms is not None:
        host = found.address.rsplit(":", 1)[0].strip("[]")
        state = offloads.path_state(host)
        console.print(f"send path to {escape(host)}: {escape(state.note or state.summary())}")


def _is_reference(label: str) -> bool:
    return any(e.label == label and e.reference for e in registry.KNOWN_CLIENTS)
