"""`workbench servers up|down|status`: every real server with private state, recorded so `down` stops all.

State lives in STATE_DIR: credentials.json (0600), target.json (ports, paths; no secrets),
servers.json (pid, process group, start time and command line of each server: `down` and `status`
check that a pid still names the process that was started before trusting it), and one private
folder per server.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench.server.daemons.base import ManagedServer, ServerContext, stop_recorded
from workbench.server.layout import check_layout, private_state_dir
from workbench.shared import credentials as creds_mod
from workbench.shared import procs
from workbench.shared import target as target_mod
from workbench.shared.errors import NotFoundError, UnavailableError, UsageError
from workbench.shared.paths import CREDENTIALS_FILE, FILES_DIR, INCOMING_DIR, SERVERS_FILE
from workbench.shared.target import DEFAULT_PORTS


def server_classes() -> list[type[ManagedServer]]:
    from workbench.server.daemons.afpd import Afpd
    from workbench.server.daemons.rsyncd import Rsyncd
    from workbench.server.daemons.serve_process import ServeProcess
    from workbench.server.daemons.smbd import Smbd
    from workbench.server.daemons.sshd import Sshd

    return [ServeProcess, Sshd, Smbd, Rsyncd, Afpd]


@dataclass
class ServersState:
    bind: str
    root: str
    netns: str | None = None
    # name, pid, pgid, start_ticks, cmdline, exe, ports | name, unavailable reason
    servers: list[dict] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = []
        for s in self.servers:
            if s.get("unavailable"):
                out.append(f"{s['name']:8} unavailable: {s['unavailable']}")
            else:
                ports = ", ".join(f"{k} {v}" for k, v in s.get("ports", {}).items())
                out.append(f"{s['name']:8} pid {s['pid']:>7}  {self.bind}: {ports}")
        return out


def read_state(state_dir: Path) -> ServersState | None:
    try:
        data = json.loads((state_dir / SERVERS_FILE).read_text())
        return ServersState(**data)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{state_dir / SERVERS_FILE} is corrupt: {exc}", "remove it and stop servers by hand") from exc


def _write_state(state_dir: Path, state: ServersState) -> None:
    path = state_dir / SERVERS_FILE
    path.write_text(json.dumps(state.__dict__, indent=2))


def up(
    root: Path,
    bind: str,
    state_dir: Path,
    only: list[str] | None = None,
    netns: str | None = None,
    ports: dict[str, int] | None = None,
    smb_server: dict[str, str] | None = None,
    afp_reference: bool = False,
) -> ServersState:
    """Start every available server; on any failure or Ctrl-C, stop the ones already started. `smb_server`: how
    smbd treats signing, encryption and dialects (smbd.SmbServerOptions.to_json(); None: its defaults).
    `afp_reference`: afpd also serves its reference volume to a password-less account (the lab's, for netatalk's
    afp_speedtest; see daemons/afpd.py)."""
    if not root.is_dir():
        raise NotFoundError(f"root directory {root} does not exist", "create it or pass another --root")
    check_layout(root, state_dir, state_dir / CREDENTIALS_FILE)
    private_state_dir(state_dir)
    existing = read_state(state_dir)
    if existing and any(_running(s) for s in existing.servers if s.get("pid")):
        raise UsageError(f"servers from {state_dir} are already running", "run 'workbench servers down' first")
    classes = server_classes()
    names = {c.name for c in classes}
    if only:
        unknown = set(only) - names
        if unknown:
            raise UsageError(
                f"unknown server(s) {', '.join(sorted(unknown))}", f"choose from {', '.join(sorted(names))}"
            )
        classes = [c for c in classes if c.name in only]
    for sub in (FILES_DIR, INCOMING_DIR):
        (root / sub).mkdir(exist_ok=True)
    from workbench.server.daemons.sshd import Sshd

    creds_path = state_dir / CREDENTIALS_FILE
    creds = creds_mod.load_or_create(creds_path)
    all_ports = {**DEFAULT_PORTS, **(ports or {})}
    ctx = ServerContext(
        root=root.resolve(),
        bind=bind,
        state_dir=state_dir,
        credentials=creds,
        ports=all_ports,
        netns=netns,
        smb_server=smb_server or {},
        afp_reference=afp_reference,
    )
    state = ServersState(bind=bind, root=str(root.resolve()), netns=netns)
    started: list[ManagedServer] = []
    try:
        for cls in classes:
            reason = cls.unavailable_reason()
            if reason:
                state.servers.append({"name": cls.name, "unavailable": reason})
                continue
            server = cls(ctx)
            try:
                pid = server.start()
            except UnavailableError as exc:
                # Found only once it prepares (e.g. the rsync daemon on a root whose file system has no ACLs):
                # that server's rows say why; the others still serve.
                state.servers.append({"name": cls.name, "unavailable": exc.one_line()})
                continue
            started.append(server)
            # read once it listens: by then `ip netns exec` has exec'd the server, so the argv is final
            ident = procs.identity(pid) or {}
            state.servers.append(
                {
                    "name": cls.name,
                    "pid": pid,
                    "pgid": os.getpgid(pid),
                    "start_ticks": ident.get("start_ticks"),
                    "cmdline": ident.get("cmdline"),
                    "exe": ident.get("exe"),
                    "ports": {s: all_ports[s] for s in cls.services},
                }
            )
            _write_state(state_dir, state)  # written as we go: `down` can clean up even after a crash
            if isinstance(server, Sshd):
                creds = replace(creds, ssh_key=server.client_key_path, known_hosts=server.known_hosts_path)
                creds_mod.write_private(creds_path, creds)
    except BaseException:
        for server in reversed(started):
            with contextlib.suppress(Exception):
                server.stop()
        with contextlib.suppress(OSError):
            (state_dir / SERVERS_FILE).unlink()
        raise
    _write_state(state_dir, state)
    target_mod.write(state_dir, bind, all_ports, root.resolve(), ctx.share)
    return state


def _recorded_is(s: dict) -> str:
    """What the recorded server's pid names now: see procs.recorded_is."""
    start = s.get("start_ticks")
    return procs.recorded_is(int(s["pid"]), int(start) if start is not None else None, s.get("cmdline"), s.get("exe"))


def _running(s: dict) -> bool:
    """True while the recorded pid is still the server that was started (not a reused pid) and runs."""
    return _recorded_is(s) == "same" and procs.pid_alive(int(s["pid"]))


def down(state_dir: Path) -> list[str]:
    """Stop every recorded server and what is left of its process group; never a reused pid; idempotent."""
    state = read_state(state_dir)
    if state is None:
        return [f"no servers recorded in {state_dir}"]
    lines = []
    for s in state.servers:
        if not s.get("pid"):
            continue
        pid = int(s["pid"])
        done = stop_recorded(pid, int(s.get("pgid") or pid), s.get("start_ticks"), s.get("cmdline"), s.get("exe"))
        if s["name"] == "smbd":  # its sockets may live outside the state directory (smbd.socket_dir_for)
            from workbench.server.daemons.smbd import remove_socket_dir

            remove_socket_dir(state_dir / s["name"])
        lines.append(f"{s['name']:8} {done}")
    (state_dir / SERVERS_FILE).unlink(missing_ok=True)
    return lines


def status(state_dir: Path) -> list[str]:
    state = read_state(state_dir)
    if state is None:
        return [f"no servers recorded in {state_dir}"]
    lines = []
    for s in state.servers:
        if s.get("unavailable"):
            lines.append(f"{s['name']:8} unavailable: {s['unavailable']}")
            continue
        pid = int(s["pid"])
        now = _recorded_is(s)
        alive = "running" if now == "same" and procs.pid_alive(pid) else "DEAD"
        ports = ", ".join(f"{k} {v}" for k, v in s.get("ports", {}).items())
        line = f"{s['name']:8} {alive:7} pid {pid:>7}  {state.bind}: {ports}"
        if now == "reused":
            line += f"  (pid {pid} is now another process)"
        elif now == "unknown":
            line += "  (no recorded start time: cannot tell whether this pid is still the server)"
        lines.append(line)
    return lines
