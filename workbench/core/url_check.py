"""`workbench doctor URL`: does a server given by URL answer, does the login work, and which of its clients would
run here; copies nothing (a run against it is workbench.core.stock's)."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from workbench.core.plan import Plan
from workbench.core.stock import StockFarHost, clients_for, connect_rtt_ms, resolve_address, stock_target
from workbench.protocols import registry
from workbench.shared import login as login_mod
from workbench.shared import urls
from workbench.shared.credentials import Credentials
from workbench.shared.errors import WorkbenchError
from workbench.shared.target import url_host


@dataclass(frozen=True)
class Check:
    """What `workbench doctor URL` found, without copying anything."""

    url: str  # the display form
    address: str  # host:port connected to (for SSH as ssh -G resolved it)
    connect_ms: float | None  # median TCP connect time; None: not reachable
    reach_error: str | None
    login: str | None  # login.describe() once the utility client logged in
    login_error: str | None
    clients: tuple[tuple[str, str | None], ...]  # (label, why it cannot run or None) for the URL's clients

    @property
    def exit_code(self) -> int:
        from workbench.shared.errors import ExitCode

        if self.reach_error is not None:
            return int(ExitCode.NETWORK)
        return int(ExitCode.AUTH) if self.login_error is not None else 0


def check(url_text: str, *, prompt: bool) -> Check:
    """Reachability (TCP connect time), the login (the utility client connects and leaves), and which of the
    URL's clients can run here, and why not."""
    url = urls.parse(url_text)
    clients = tuple(
        (e.label, loaded if isinstance(loaded := registry.load(e), str) else None)
        for e in clients_for(url, registry.KNOWN_CLIENTS)
    )
    host, port, ssh_user = resolve_address(url, url.user)
    address = f"{url_host(host)}:{port}"
    rtt = connect_rtt_ms(host, port, count=3)
    if rtt is None:
        reach = _reach_error(host, port)
        return Check(url.display(), address, None, reach, None, None, clients)
    login_text: str | None = None
    login_error: str | None = None
    try:
        who = login_mod.resolve(url, prompt=prompt, ssh_user=ssh_user)
        creds = Credentials(who.user, who.password or "")
        plan = Plan(stock_target(url, host, port, creds, ""), (), ("upload",), (), (), "random", 1, 1, 0, 1.0, Path())
        far = StockFarHost(url, plan, "", who, prompt=prompt)
        if far.unavailable is not None:
            login_error = f"not checked: {far.utility_label} {far.unavailable}"
        else:
            try:
                far.connect()
                login_text = far.login.describe()
            finally:
                far.close()
    except WorkbenchError as exc:
        login_error = exc.one_line()
    return Check(url.display(), address, rtt, None, login_text, login_error, clients)


def _reach_error(host: str, port: int) -> str:
    from workbench.shared.errors import from_os_error

    try:
        with socket.create_connection((host, port), timeout=3.0):
            return "connects only intermittently"
    except OSError as exc:
        return from_os_error(exc, "connecting", host, port).one_line()
