"""`workbench serve`: the far host's HTTP, FTP and raw-TCP servers (plus iperf3 when installed), in one process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from workbench.server.ftpd import FtpServer
from workbench.server.http_app import IPERF3_KEY_KEY, AuthDeadlineRunner, make_app
from workbench.server.layout import check_layout, private_state_dir
from workbench.shared import credentials as creds_mod
from workbench.shared import target as target_mod
from workbench.shared.errors import NotFoundError, from_os_error
from workbench.shared.net import free_ports
from workbench.shared.paths import CREDENTIALS_FILE, FILES_DIR, INCOMING_DIR, SERVERS_FILE
from workbench.shared.target import DEFAULT_PORTS


@dataclass(frozen=True)
class ServeConfig:
    root: Path
    bind: str = "127.0.0.1"
    state_dir: Path = Path()
    ports: dict[str, int] | None = None  # service -> port; 0 = any free port
    credentials_file: Path | None = None
    iperf3: bool = True
    # `servers up` writes target.json itself, with every server's port: a serve it supervises must not
    # overwrite that file with its own ports only, however late it finishes starting.
    write_target: bool = True


def _server_pgids(state_dir: Path) -> Callable[[], set[int]]:
    def read() -> set[int]:
        try:
            data = json.loads((state_dir / SERVERS_FILE).read_text())
            pgids = {int(s["pgid"]) for s in data.get("servers", []) if s.get("pgid")}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return set()  # a file being written, or one that is not what 'servers up' writes: no group of ours
        return {pgid for pgid in pgids if pgid > 1}

    return read


async def _serve(
    cfg: ServeConfig, on_ready: Callable[[dict[str, int]], None] | None, stop: asyncio.Event
) -> None:
    if not cfg.root.is_dir():
        raise NotFoundError(f"root directory {cfg.root} does not exist", "create it or pass another --root")
    creds_path = cfg.credentials_file or cfg.state_dir / CREDENTIALS_FILE
    # before anything is written: a root holding the state or credentials would serve them to clients
    check_layout(cfg.root, cfg.state_dir, creds_path)
    private_state_dir(cfg.state_dir)
    (cfg.root / FILES_DIR).mkdir(exist_ok=True)
    (cfg.root / INCOMING_DIR).mkdir(exist_ok=True)
    creds = creds_mod.for_server(creds_path)
    wanted = {**DEFAULT_PORTS, **(cfg.ports or {})}
    ports: dict[str, int] = {}
    stack = contextlib.ExitStack()
    try:
        app = make_app(cfg.root, creds, _server_pgids(cfg.state_dir), cfg.bind)
        # iperf3 first: once HTTP, FTP and the probe listen (what `servers up` waits for) it is up too
        iperf3_port = None
        if cfg.iperf3:
            from workbench.probe.iperf import iperf3_available
            from workbench.server.iperf_server import Iperf3Server, write_server_auth

            if iperf3_available() is None:
                # Authenticated like everything else served: RSA key pair + users file from the credentials.
                auth = write_server_auth(cfg.state_dir / "iperf3", creds.user, creds.password)
                app[IPERF3_KEY_KEY] = auth.public_key
                iperf = Iperf3Server(cfg.bind, wanted["iperf3"] or free_ports(cfg.bind, 1)[0], auth)
                with contextlib.suppress(Exception):  # iperf3 is only a cross-check
                    iperf.start()
                    stack.callback(iperf.stop)
                    iperf3_port = iperf.port

        # Stop promptly on SIGTERM (`servers down`): in-flight copies get 2 s, not aiohttp's default 60.
        runner = AuthDeadlineRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        site = web.TCPSite(runner, cfg.bind, wanted["http"], reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            raise from_os_error(exc, f"binding HTTP to {cfg.bind}:{wanted['http']}") from exc
        ports["http"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        try:
            ftp = FtpServer(cfg.root, creds, cfg.bind, wanted["ftp"])
        except OSError as exc:
            raise from_os_error(exc, f"binding FTP to {cfg.bind}:{wanted['ftp']}") from exc
        ports["ftp"] = ftp.start()
        stack.callback(ftp.stop)

        from workbench.server.probe import ProbeServer

        probe = ProbeServer(cfg.bind, wanted["tcp"], creds.password)
        try:
            ports["tcp"] = probe.start()
        except OSError as exc:
            raise from_os_error(exc, f"binding the TCP probe to {cfg.bind}:{wanted['tcp']}") from exc
        stack.callback(probe.stop)
        if iperf3_port is not None:
            ports["iperf3"] = iperf3_port

        if cfg.write_target:
            target_mod.write(cfg.state_dir, cfg.bind, ports, cfg.root.resolve(), "workbench")
        if on_ready:
            on_ready(ports)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: its terminal closed
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()
    finally:
        stack.close()


def serve(cfg: ServeConfig, on_ready: Callable[[dict[str, int]], None] | None = None) -> None:
    """Run until SIGINT/SIGTERM/SIGHUP. `on_ready` receives the real ports once everything listens."""

    async def main() -> None:
        await _serve(cfg, on_ready, asyncio.Event())

    asyncio.run(main())
