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
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench.server.daemons.base import ManagedServer, ServerContext, stop_recorded
from workbench.server.layout import check_layout, private_state_dir
from workbench.shared import credentials as creds_mod
from workbench.shared import procs
from workbench.shared import target as target_mod
from workbench.shared.errors import NotFoundError, UnavailableError, UsageError
from workbench.shared.paths import CREDENTIALS_FILE, FILES_DIR, INCOMING_DIR, SERVERS_FILE
from workbench.shared.safetext import cut, strip_controls
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


# Largest pid (and process group) a pid_t holds: a bigger number would make os.kill raise OverflowError.
MAX_PID = 2**31 - 1
# C0 (tab and newline too: a name is one word on one line), DEL and C1: never part of a name written here.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class _Corrupt(ValueError):
    """What is wrong with one field of servers.json: read_state turns it into its one-line 'is corrupt' error."""


def _shown(value: object) -> str:
    """A field's value in an error, as repr (control characters escaped) and short: the file is outside words."""
    return cut(repr(value), 60)


def _int(value: object, where: str, least: int, most: int = MAX_PID) -> int:
    # bool is an int to Python, but `true` is no pid; a float or a string is not one either ("pid": "abc")
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise _Corrupt(f"{where} is {_shown(value)}, not a whole number from {least} to {most}")
    return value


def _word(value: object, where: str, empty: bool = False) -> str:
    """A name (server, service, bind address): a string without control characters, shown in status lines."""
    if not isinstance(value, str) or (not value and not empty) or _CONTROL.search(value):
        raise _Corrupt(f"{where} is {_shown(value)}, not a name without control characters")
    return value


def _check_record(s: object, where: str) -> None:
    """One server's record as up() writes it (name, pid, pgid, start_ticks, cmdline, exe, ports; or name and
    unavailable); raises _Corrupt naming the first field that is not. Keys it does not read are left alone."""
    if not isinstance(s, dict):
        raise _Corrupt(f"{where} is {_shown(s)}, not an object")
    if "name" not in s:
        raise _Corrupt(f"{where} has no name")
    _word(s["name"], f"{where}.name")
    if "unavailable" in s:
        # a server that could not start: its reason only (up() records no pid for it)
        # a reason is words from outside (a path from the environment, a daemon's error): any text, shown escaped;
        # refusing the file for it would leave down() unable to stop the servers recorded beside it
        if not isinstance(s["unavailable"], str):
            raise _Corrupt(f"{where}.unavailable is {_shown(s['unavailable'])}, not a string")
        if "pid" in s:
            raise _Corrupt(f"{where} has both a pid and an unavailable reason")
        return
    if "pid" not in s:
        raise _Corrupt(f"{where} has neither a pid nor an unavailable reason")
    _int(s["pid"], f"{where}.pid", 2)  # pid 1 is init: never a server of ours, never signalled
    if s.get("pgid") is not None:
        _int(s["pgid"], f"{where}.pgid", 2)
    if s.get("start_ticks") is not None:  # None or absent: a file from an older workbench, never signalled
        _int(s["start_ticks"], f"{where}.start_ticks", 0, 2**63 - 1)
    args = s.get("cmdline")
    if args is not None and (not isinstance(args, list) or not all(isinstance(a, str) for a in args)):
        raise _Corrupt(f"{where}.cmdline is {_shown(args)}, not a list of strings")
    if s.get("exe") is not None and not isinstance(s["exe"], str):
        raise _Corrupt(f"{where}.exe is {_shown(s['exe'])}, not a string")
    ports = s.get("ports", {})
    if not isinstance(ports, dict):
        raise _Corrupt(f"{where}.ports is {_shown(ports)}, not an object")
    for service, port in ports.items():
        _word(service, f"{where}.ports key")
        _int(port, f"{where}.ports[{service!r}]", 0, 65535)


def _check_state(data: object) -> ServersState:
    """servers.json's document as _write_state writes it, or _Corrupt: every field status() and down() read is
    checked here, so that they never meet a wrong type, a missing key or a name that would write to the terminal."""
    if not isinstance(data, dict):
        raise _Corrupt(f"the document is {_shown(data)}, not an object")
    for key in ("bind", "root"):
        if key not in data:
            raise _Corrupt(f"it has no {key!r}")
    _word(data["bind"], "bind", empty=True)
    if not isinstance(data["root"], str):
        raise _Corrupt(f"root is {_shown(data['root'])}, not a string")
    if data.get("netns") is not None:
        _word(data["netns"], "netns")
    servers = data.get("servers", [])
    if not isinstance(servers, list):
        raise _Corrupt(f"servers is {_shown(servers)}, not a list")
    for index, s in enumerate(servers):
        _check_record(s, f"servers[{index}]")
    return ServersState(**data)  # an unknown top-level key: TypeError, reported as corrupt by read_state


def read_state(state_dir: Path) -> ServersState | None:
    """The servers `up` recorded in `state_dir`, None when it recorded none; a file that is not what
    _write_state writes (bad JSON, a wrong type, a missing key, a pid that is no pid, a name with control
    characters) is one UsageError saying it is corrupt, never a traceback in status or down."""
    path = state_dir / SERVERS_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8 (a ValueError), or nested past all reason
        raise UsageError(f"{path} is corrupt: {exc}", "remove it and stop servers by hand") from exc
    try:
        return _check_state(data)
    except (_Corrupt, TypeError) as exc:
        raise UsageError(f"{path} is corrupt: {exc}", "remove it and stop servers by hand") from exc


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
                state.servers.append({"name": cls.name, "unavailable": strip_controls(reason)})
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
