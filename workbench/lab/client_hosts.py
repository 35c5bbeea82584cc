"""N client hosts behind a switch, sharing one lab link: the lab for `workbench fleet`.

Built on a started `Lab` without changing it: the lab's client namespace becomes the SWITCH and its
emulated link (delay line or kernel link) stays the ONE bottleneck to the server. Each client is a
namespace of its own, tuned as a lab host, joined to the switch by a veth pair on its own /24
(10.78.<i>.2, gateway 10.78.<i>.1); the switch forwards and the server routes 10.78.0.0/16 back over
the link. Every client runs an OpenSSH sshd on its address, port 22, with its own host key, letting
the current user in with one generated key, so `ssh -F ssh_config clientK` started in the switch lands
in client K's namespace with WORKBENCH_HOME set to that client's private home.

Client namespaces carry the lab's prefix and owner pid, so a lab killed outright is removed, clients
and sshds included, by the next lab's `cleanup_stale()`.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from workbench.lab import netns
from workbench.lab.lifecycle import tune_host_namespace
from workbench.lab.link import Lab
from workbench.shared import signals
from workbench.shared.errors import UnavailableError, UsageError, WorkbenchError

MAX_CLIENTS = 8
SUBNET = "10.78.0.0/16"
SSHD = "/usr/sbin/sshd"
SSH_PORT = 22
LISTEN_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 3.0
# The switch's sysctls this module changes, restored on exit: the lab's client namespace is a plain host again
SWITCH_SYSCTLS = {
    "net.ipv4.ip_forward": "1",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
}


@dataclass(frozen=True)
class FleetClient:
    """One client host: its ssh alias, namespace, address and the WORKBENCH_HOME its SSH sessions get."""

    alias: str
    namespace: str
    addr: str
    home: Path

    @property
    def gateway(self) -> str:
        return self.addr.rsplit(".", 1)[0] + ".1"


def client_addr(index: int) -> str:
    return f"10.78.{index}.2"


def default_remote_workbench() -> str:
    """The command that runs this workbench on a client host (the same machine, so this venv's)."""
    script = Path(sys.executable).with_name("workbench")
    if script.exists():
        return str(script)
    return f"{shlex.quote(sys.executable)} -m workbench"


def _keygen(path: Path, comment: str) -> None:
    try:
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
            check=True,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise WorkbenchError(f"ssh-keygen could not make {path.name}: {exc}") from exc


def _quoted(value: str) -> str:
    """One sshd_config / ssh_config argument, quoted when it holds a space."""
    if '"' in value:
        raise UsageError(f"path {value!r} holds a double quote", "use a work directory without quotes")
    return f'"{value}"' if any(c.isspace() for c in value) else value


class ClientHosts:
    """Context manager: `count` client hosts with an sshd each behind the lab's client namespace (the switch).

    Used as ``with Lab(spec) as lab, ClientHosts(lab, 3, work) as fleet: ...``. Teardown (exit, exception,
    Ctrl-C, SIGTERM or SIGHUP turned into Terminated by the Lab) stops every sshd and its sessions, deletes the client
    namespaces (their veth pairs go with them), and undoes the switch's and the server's changes.
    """

    def __init__(self, lab: Lab, count: int, work: Path) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_CLIENTS:
            raise UsageError(f"{count!r} client hosts is out of range", f"use 1 to {MAX_CLIENTS}")
        self.lab = lab
        self.work = Path(work)
        base = lab.client_ns.rsplit("-", 1)[0]  # wb-lab-<owner pid>-<n>: the lab's own prefix
        self.clients = [
            FleetClient(f"client{i}", f"{base}-k{i}", client_addr(i), self.work / f"client{i}" / "home")
            for i in range(1, count + 1)
        ]
        self.ssh_config = self.work / "ssh_config"
        self.hosts_file = self.work / "hosts"
        self.known_hosts = self.work / "known_hosts"
        self.identity = self.work / "client_key"
        self.remote_workbench = default_remote_workbench()
        self.user = getpass.getuser()
        self._sshd: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []
        self._namespaces: list[str] = []  # client namespaces created so far
        self._switch_devs: list[str] = []
        self._switch_saved: dict[str, str] = {}
        self._server_route: list[str] | None = None

    # -- life cycle -------------------------------------------------------------------------------

    def __enter__(self) -> ClientHosts:
        if not os.path.exists(SSHD) or shutil.which("ssh-keygen") is None:
            raise UnavailableError(
                f"client hosts need the OpenSSH server ({SSHD}) and ssh-keygen", "apt install openssh-server"
            )
        if not (netns.exists(self.lab.client_ns) and netns.exists(self.lab.server_ns)):
            raise UsageError(
                "client hosts need a started lab", "enter the Lab first: with Lab(spec) as lab, ClientHosts(lab, ...)"
            )
        try:
            self._build()
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._teardown()

    def _build(self) -> None:
        self.work.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.work, 0o700)  # it holds the login key
        _keygen(self.identity, "workbench-fleet")
        (self.work / "authorized_keys").write_bytes(self.identity.with_suffix(".pub").read_bytes())
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        self._open_switch()
        for index, client in enumerate(self.clients, start=1):
            self._add_client(index, client)
        for client in self.clients:
            self._wait_listening(client)
        self._write_client_config()

    def _open_switch(self) -> None:
        switch, server = self.lab.client_ns, self.lab.server_ns
        for key, value in SWITCH_SYSCTLS.items():
            self._switch_saved[key] = netns.read_sysctl(switch, key)
            netns.write_sysctl(switch, key, value)
        dev = self.lab.hosts.server_dev
        route = [SUBNET, "via", self.lab.client_addr, "dev", dev]
        # the lab may set its congestion control per route (congctl) on the link: the clients' route gets the same
        words = netns.ip("-n", server, "route", "show", f"{self.lab.client_addr}/32", "dev", dev).split()
        if "congctl" in words:
            route += words[words.index("congctl") : words.index("congctl") + 2]
        netns.ip("-n", server, "route", "add", *route)
        self._server_route = route

    def _add_client(self, index: int, client: FleetClient) -> None:
        lab, switch, mtu = self.lab, self.lab.client_ns, str(self.lab.spec.mtu)
        netns.create(client.namespace)
        self._namespaces.append(client.namespace)
        tune_host_namespace(client.namespace, lab.spec.host_buffers == "raised")
        outer, inner = f"wbk{index}", f"wbh{index}"
        # both ends are born in their namespaces: the root namespace never holds either
        netns.ip(
            "link", "add", outer, "netns", switch, "type", "veth", "peer", "name", inner, "netns", client.namespace
        )
        self._switch_devs.append(outer)
        netns.ip("-n", switch, "link", "set", outer, "mtu", mtu, "up")
        netns.ip("-n", switch, "addr", "add", f"{client.gateway}/24", "dev", outer)
        netns.write_sysctl(switch, f"net.ipv4.conf.{outer}.rp_filter", "0")
        netns.ip("-n", client.namespace, "link", "set", inner, "mtu", mtu, "up")
        netns.ip("-n", client.namespace, "addr", "add", f"{client.addr}/24", "dev", inner)
        netns.ip("-n", client.namespace, "route", "add", "default", "via", client.gateway, "dev", inner,
                 *self._congctl(client.namespace))  # fmt: skip
        self._start_sshd(client)

    def _congctl(self, ns: str) -> list[str]:
        """The lab's congestion control on this client: as its default if the host allows, else per route."""
        cc = self.lab.spec.cc
        if not cc:
            return []
        try:
            netns.write_sysctl(ns, "net.ipv4.tcp_congestion_control", cc)
        except PermissionError:
            return ["congctl", cc]  # as Lifecycle does: only some algorithms may be a namespace's default
        except OSError as exc:
            raise UsageError(f"congestion control {cc!r} is not available here ({exc.strerror})") from exc
        return []

    def _start_sshd(self, client: FleetClient) -> None:
        own = self.work / client.alias
        own.mkdir(mode=0o700, exist_ok=True)
        client.home.mkdir(mode=0o700, exist_ok=True)
        tmp = own / "tmp"
        tmp.mkdir(mode=0o700, exist_ok=True)
        _keygen(own / "host_key", f"workbench-fleet-{client.alias}")
        config = own / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"ListenAddress {client.addr}",
                    f"Port {SSH_PORT}",
                    f"HostKey {_quoted(str(own / 'host_key'))}",
                    "PidFile none",
                    f"AuthorizedKeysFile {_quoted(str(self.work / 'authorized_keys'))}",
                    f"AllowUsers {self.user}",
                    "AuthenticationMethods publickey",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    "UsePAM no",
                    "StrictModes no",
                    "PrintMotd no",
                    "UseDNS no",
                    f"SetEnv {_quoted(f'WORKBENCH_HOME={client.home}')} {_quoted(f'TMPDIR={tmp}')}",
                    "LogLevel ERROR",
                ]
            )
            + "\n"
        )
        log = open(own / "sshd.log", "ab")  # noqa: SIM115 -- held open for the sshd's life, closed at teardown
        self._logs.append(log)
        # `ip netns exec` execs sshd in place: this pid is the sshd's; its own session, so a terminal's
        # Ctrl-C reaches this process (which tears down) and never the sshds directly
        self._sshd[client.alias] = subprocess.Popen(
            ["ip", "netns", "exec", client.namespace, SSHD, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )

    def _wait_listening(self, client: FleetClient) -> None:
        proc = self._sshd[client.alias]
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise WorkbenchError(
                    f"{client.alias}'s sshd exited ({proc.returncode}) in {client.namespace}: {self._log_tail(client)}"
                )
            with self.in_switch():
                probe = socket.socket()  # made in the switch: it reaches the client over its veth
            with probe:
                probe.settimeout(0.5)
                if probe.connect_ex((client.addr, SSH_PORT)) == 0:
                    return
            if time.monotonic() > deadline:
                waited = f"{LISTEN_TIMEOUT_S:.0f} s"
                raise WorkbenchError(
                    f"{client.alias}'s sshd is not listening on {client.addr}:{SSH_PORT} after {waited}",
                    self._log_tail(client),
                )
            time.sleep(0.05)

    def _log_tail(self, client: FleetClient) -> str:
        try:
            lines = (self.work / client.alias / "sshd.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        return lines[-1] if lines else "no log output"

    def _write_client_config(self) -> None:
        lines = []
        for client in self.clients:
            kind, blob = (self.work / client.alias / "host_key.pub").read_text().split()[:2]
            lines.append(f"{client.addr} {kind} {blob}\n")
        self.known_hosts.write_text("".join(lines))
        entries = [
            f"Host {client.alias}\n"
            f"  HostName {client.addr}\n"
            f"  Port {SSH_PORT}\n"
            f"  User {self.user}\n"
            f"  IdentityFile {_quoted(str(self.identity))}\n"
            "  IdentitiesOnly yes\n"
            "  IdentityAgent none\n"
            f"  UserKnownHostsFile {_quoted(str(self.known_hosts))}\n"
            "  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n"
            "  BatchMode yes\n"
            for client in self.clients
        ]
        self.ssh_config.write_text("\n".join(entries))
        self.hosts_file.write_text("".join(f"{client.alias}\n" for client in self.clients))

    def _teardown(self) -> None:
        with signals.held():
            for proc in self._sshd.values():
                _stop(proc)
            self._sshd.clear()
            for ns in reversed(self._namespaces):
                with contextlib.suppress(WorkbenchError):
                    netns.delete(ns)  # kills the sessions inside; its veth pair goes with it
            self._namespaces.clear()
            switch = self.lab.client_ns
            if netns.exists(switch):
                for dev in self._switch_devs:
                    # normally gone with its peer's namespace; a pair half made on a failed start is not
                    with contextlib.suppress(WorkbenchError):
                        if netns.ip("-n", switch, "link", "show", dev).strip():
                            netns.ip("-n", switch, "link", "del", dev)
                for key, value in self._switch_saved.items():
                    with contextlib.suppress(OSError, WorkbenchError):
                        netns.write_sysctl(switch, key, value)
            self._switch_devs.clear()
            self._switch_saved.clear()
            if self._server_route is not None and netns.exists(self.lab.server_ns):
                with contextlib.suppress(WorkbenchError):
                    netns.ip("-n", self.lab.server_ns, "route", "del", *self._server_route)
            self._server_route = None
            for log in self._logs:
                log.close()
            self._logs.clear()

    # -- use --------------------------------------------------------------------------------------

    def in_switch(self) -> contextlib.AbstractContextManager[None]:
        """Run the calling thread in the switch (the lab's client namespace): ssh started inside reaches every
        client over its own veth, never across the bottleneck."""
        return self.lab.in_client()

    def in_client(self, alias: str) -> contextlib.AbstractContextManager[None]:
        """Run the calling thread in client `alias`'s namespace (threads and subprocesses started inside inherit it)."""
        return netns.entered(self.client(alias).namespace)

    def client(self, alias: str) -> FleetClient:
        for client in self.clients:
            if client.alias == alias:
                return client
        raise UsageError(f"{alias!r} is not one of this fleet's clients", ", ".join(c.alias for c in self.clients))

    def sshd_pids(self) -> dict[str, int]:
        """{alias: pid} of each client's sshd (the listener; sessions are its children)."""
        return {alias: proc.pid for alias, proc in self._sshd.items()}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)
