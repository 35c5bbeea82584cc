"""`workbench lab`: build the two-host lab, start the servers its clients need on the server host, run the
baseline and the comparison from the client host, print the table, and tear everything down.

With `--servers stock` the server host runs stock daemons only (lab/stock_daemons.py), nothing of workbench: each
is measured as `workbench run URL` measures a stranger's server (workbench.core.stock), one run per URL,
with a plain iperf3 for the raw-TCP baseline.

The default preset is wifi-ac (533 Mbit/s, 2.8 ms), not gige: it is the case users ask about (iperf
says 533, the copy says 170), and its 2.8 ms RTT is long enough that request-bound clients (pysmb's
64 KiB × 1, paramiko's prefetch) show their ceilings, where at gige's 0.2 ms a 2-core machine's
CPU would hide them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.core.context import EmulatorReport, LabContext
from workbench.core.observe import Recorder, RunObserver
from workbench.core.results import Run
from workbench.core.session import DriveFleet, Start
from workbench.core.settings import Settings
from workbench.core.settings import check as check_setting
from workbench.shared import offloads, paths
from workbench.shared.errors import UsageError, WorkbenchError

if TYPE_CHECKING:
    from workbench.core.plan import Plan
    from workbench.lab.cpucap import HostCpuWatch
    from workbench.lab.link import Lab
    from workbench.lab.stock_daemons import StockDaemons
    from workbench.server.daemons.smbd import SmbServerOptions

SERVER_KINDS = ("workbench", "stock")  # --servers: workbench's own (`servers up`), or plainly configured daemons

# A stock lab is one run per URL. Its session shows each as `run` does: present(name, start) calls start(recorder,
# observer) inside its own recorder and progress display, shows the table and returns the run; None when the URL
# could not be measured at all (present said why, and its exit code counts with the others').
Present = Callable[[str, Start], Run | None]


@dataclass(frozen=True, kw_only=True)
class LabRequest:
    """The emulated link asked for, and the plan's settings (workbench.core.settings): built from the resolved
    settings (lab_request) or a scenario's variant, by name."""

    preset: str
    rate: str | None
    rtt: str | None
    loss: float
    mtu: int
    cc: str | None
    window_sweep: str | None
    settings: Settings
    servers: str = "workbench"  # one of SERVER_KINDS
    rate_up: str | None = None  # client to server, e.g. "100mbit"
    rate_down: str | None = None
    client_window: str | None = None  # e.g. "64K": the client host's receive window, on every connection
    stall: str | None = None  # EVERY:DURATION[:DIRECTION]
    offload: str | None = None  # HOST:NAME=on|off[,…], e.g. "server:tso=off,gso=off" (offloads.parse_switches)
    client_window_services: tuple[str, ...] | None = None  # only connections to these services (scenarios)
    host_buffers: str = "raised"  # or "default": the kernel's own TCP buffer limits on both hosts
    link_breaks: str | None = None  # "offloaded": the line drops TSO/GSO super-packets (lab.linkemu.BREAKS)
    smb_server: str | None = None  # e.g. "signing=required,max-dialect=2.0.2" (smbd.SmbServerOptions.parse)
    server_cpu: float | None = None  # the server host's CPU cap, in cores (lab.cpucap)


def lab_request(settings: Settings) -> LabRequest:
    """The lab that `workbench lab`'s resolved settings ask for (workbench.core.settings)."""
    return LabRequest(
        preset=settings["link"],
        rate=settings["rate"],
        rtt=settings["rtt"],
        loss=settings["loss"],
        mtu=settings["mtu"],
        cc=settings["cc"],
        window_sweep=settings["window_sweep"],
        settings=settings,
        servers=settings["servers"],
        rate_up=settings["rate_up"],
        rate_down=settings["rate_down"],
        client_window=settings["client_window"],
        stall=settings["stall"],
        smb_server=settings["smb_server"],
        server_cpu=settings["server_cpu"],
        offload=settings["offload"],
        link_breaks=settings["link_breaks"],
    )


def link_spec(req: LabRequest) -> Any:
    from workbench.lab import PRESETS
    from workbench.lab.link import Stall, check_breaks
    from workbench.shared.sizes import parse_duration_ms, parse_rate, parse_size
    from workbench.shared.validate import named

    where = req.settings.where  # a flag, or the config file's key
    if req.preset not in PRESETS:
        raise UsageError(f"{where('link')}: unknown link preset {req.preset!r}", f"choose from {', '.join(PRESETS)}")
    spec = PRESETS[req.preset]
    changes: dict[str, Any] = {"loss": req.loss, "mtu": req.mtu, "cc": req.cc}
    if req.rate is not None:
        changes["rate_bits_per_s"] = named(where("rate"), parse_rate, req.rate)
    if req.rtt is not None:
        changes["rtt_ms"] = named(where("rtt"), parse_duration_ms, req.rtt)
    if req.rate_up is not None:
        changes["rate_up_bits_per_s"] = named(where("rate_up"), parse_rate, req.rate_up)
    if req.rate_down is not None:
        changes["rate_down_bits_per_s"] = named(where("rate_down"), parse_rate, req.rate_down)
    if req.client_window is not None:
        changes["client_window_bytes"] = named(where("client_window"), parse_size, req.client_window)
    if req.stall is not None:
        changes["stall"] = Stall.parse(req.stall)
    if req.offload is not None:
        changes["offloads"] = offloads.parse_switches(req.offload, ("client", "server"), where("offload"))
    changes["host_buffers"] = req.host_buffers
    if req.link_breaks is not None:
        changes["breaks"] = check_breaks(req.link_breaks, where("link_breaks"))
    spec = dataclasses.replace(spec, **changes)
    spec.validate()
    return spec


def validate_request(req: LabRequest) -> Any:
    """Every lab input checked as `run` checks its own, without root and before any namespace; the link spec."""
    from workbench.core.config import shape
    from workbench.shared.validate import check_copy_estimate, check_loss, check_windows

    if req.servers not in SERVER_KINDS:
        where = req.settings.where("servers")
        raise UsageError(f"{where}: unknown kind {req.servers!r}", f"choose from {', '.join(SERVER_KINDS)}")
    check_loss(req.loss, req.settings.where("loss"))
    _smb_server(req)
    if req.server_cpu is not None:
        check_setting("server_cpu", req.server_cpu, req.settings.where("server_cpu"))
    check_setting("mtu", req.mtu, req.settings.where("mtu"))
    if req.cc is not None:
        available = _available_cc()
        if req.cc not in available:
            raise UsageError(
                f"--cc {req.cc!r} is not a congestion control this kernel offers",
                f"choose from {', '.join(available)}, e.g. --cc cubic",
            )
    plan = shape(req.settings)  # the files must fit on the disk, too
    if req.servers == "stock":
        _check_stock(req, plan.entries)
    check_windows(None, req.window_sweep, float(req.settings["tcp_duration"]))
    files_bytes = plan.files_bytes
    spec = link_spec(req)
    # The link rate is known before anything starts, so the copies' least duration is plain arithmetic.
    copies = plan.copies()
    least_s = copies * files_bytes * 8 / spec.fastest_bits_per_s  # LinkSpec's rates are in bits per second
    check_copy_estimate(
        least_s,
        copies,
        files_bytes,
        f"on the lab's {spec.rate_bits_per_s / 1e6:g} Mbit/s link",
        "use smaller --sizes, fewer --protocols or --repeat, or a faster --rate",
    )
    return spec


def _check_stock(req: LabRequest, entries: tuple[Any, ...]) -> None:
    """A stock lab has no probe on its server host (no window sweep) and needs a client of a stock server."""
    from workbench.core.stock import FAMILIES
    from workbench.lab.stock_daemons import STOCK_SERVICES

    if req.window_sweep:
        raise UsageError(
            "--window-sweep needs workbench's TCP probe on the server host, and a stock lab runs none",
            "drop --window-sweep, or use --servers workbench",
        )
    if req.settings["skip_iperf3"]:
        raise UsageError(
            f"{req.settings.where('skip_iperf3')}: a stock lab's raw TCP is iperf3's own figure (no probe to check)",
            "drop it, or use --servers workbench",
        )
    wanted = [f for service in STOCK_SERVICES for f in FAMILIES[service]]
    if not any(e.label == f or (f.endswith("/") and e.label.startswith(f)) for e in entries for f in wanted):
        raise UsageError(
            "--protocols selects no client of the lab's stock servers",
            f"choose among {', '.join(f.rstrip('/') for f in wanted)}",
        )


def _smb_server(req: LabRequest) -> SmbServerOptions | None:
    """What the request asks of the server host's smbd (None: its defaults); refused with stock servers, which
    keep Samba's own defaults as a stranger's server has them."""
    from workbench.server.daemons.smbd import SmbServerOptions

    if req.smb_server is None:
        return None
    where = req.settings.where("smb_server")
    if req.servers == "stock":
        raise UsageError(
            f"{where} configures workbench's own smbd, and a stock lab runs Samba as shipped",
            "drop it, or use --servers workbench",
        )
    return SmbServerOptions.parse(req.smb_server, where)


def _available_cc() -> list[str]:
    try:
        return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    except OSError:
        return ["cubic", "reno"]  # not Linux: check_available() says why the lab cannot run


def link_document(described: dict[str, Any], preset: str) -> dict[str, Any]:
    """The JSON `link` object: rates of the wire in bits/s (`*_bits_per_s`), goodputs in bytes/s like every
    other rate of the document (`*_bytes_per_s`)."""

    def bytes_per_s(key: str) -> float | None:
        bits = described.get(key)
        return bits / 8 if bits else None

    return {
        "preset": preset,
        "rate_bits_per_s": described["rate_bits_per_s"],
        "rate_up_bits_per_s": described.get("rate_up_bits_per_s"),
        "rate_down_bits_per_s": described.get("rate_down_bits_per_s"),
        "rtt_ms": described.get("rtt_ms"),
        "mtu": described.get("mtu"),
        "loss": described.get("loss"),
        "cc": described.get("cc"),
        "queue_bytes": described.get("queue_bytes"),
        "expected_goodput_bytes_per_s": bytes_per_s("expected_goodput_bits_per_s"),
        "expected_goodput_up_bytes_per_s": bytes_per_s("expected_goodput_up_bits_per_s"),
        "expected_goodput_down_bytes_per_s": bytes_per_s("expected_goodput_down_bits_per_s"),
        "client_window_bytes": described.get("client_window_bytes"),
        "client_window_ports": described.get("client_window_ports"),
        "stall": described.get("stall"),
        "breaks": described.get("breaks"),  # what the line mishandles on purpose (--link-breaks), or null
        # each host's link device as read back from its kernel, and what --offload asked of it
        "offloads": described.get("offloads"),
        "offloads_asked": described.get("offloads_asked") or None,
        "goodput_bytes_per_s": bytes_per_s("goodput_bits_per_s"),
        "requested": described.get("requested"),
        "cores_awake": described.get("cores_awake"),
        # the server host's CPU cap in cores (null: none) and how it is set (null: no cgroup here)
        "server_cpu_cap_cores": described.get("server_cpu_cap_cores"),
        "server_cpu_cgroup": described.get("server_cpu_cgroup"),
        "notes": "; ".join(described.get("notes") or []),
    }


def run_lab(req: LabRequest, recorder: Recorder, observer: RunObserver, label: str | None = None) -> Run:
    """Build the lab, run the comparison inside it, tear it down (also on Ctrl-C and SIGTERM); the finished run.

    Each finished row goes to `recorder` as in `run`; `observer` shows what the lab and the run do.
    """
    with _built_lab(req, observer) as (lab, work, link):
        root = work / "root"
        root.mkdir()
        state = work / "state"
        return _run_inside(lab, req, root, state, link, recorder, observer, label or f"lab {req.preset}")


@contextlib.contextmanager
def _built_lab(req: LabRequest, observer: RunObserver) -> Iterator[tuple[Lab, Path, dict[str, Any]]]:
    """The request checked, stale labs removed, the lab built and measured (idle RTT, goodput): (lab, a private
    work directory, the link document). The lab and the directory go when the block ends, however it ends."""
    from workbench.lab import Lab, check_available, cleanup_stale

    spec = validate_request(req)  # before anything is built: a typo must not cost a namespace
    check_available()
    for removed in cleanup_stale():
        observer.status(f"removed a stale lab left by a killed run: {removed}")
    work = Path(tempfile.mkdtemp(prefix=f"workbench-lab-{os.getpid()}-"))  # owner pid: see lab/leftovers.py
    try:
        rate_text = f"{spec.rate_bits_per_s / 1e6:,.0f} Mbit/s"
        broken = ", dropping TSO/GSO super-packets" if spec.breaks == "offloaded" else ""
        observer.status(f"lab: {req.preset} link, {rate_text}, RTT {spec.rtt_ms} ms, MTU {spec.mtu}{broken}: building…")
        smb = _smb_server(req)
        if req.server_cpu is not None:
            observer.status(f"lab: the server host's CPU capped at {req.server_cpu:g} core(s)")
        if smb is not None:
            observer.status(f"lab: the server host's smbd: {smb.describe()}")
        # a run's stalls start after its raw-TCP baseline: the baseline is the path's capacity, the copies
        # are what stalls (a stall inside the 1 s probe would make every copy's share of raw TCP meaningless)
        with Lab(spec, defer_stalls=True, server_cpu_cores=req.server_cpu) as lab:
            goodput_s = float(req.settings["goodput_duration"])  # 0: the link's meter is skipped, as asked
            measuring = f"; measuring goodput ({goodput_s:g} s)…" if goodput_s else ""
            observer.status(f"lab: idle RTT measured {lab.idle_rtt_ms:.2f} ms{measuring}")
            goodput_error = None
            if goodput_s:
                try:
                    lab.measure_goodput_bits_per_s(seconds=goodput_s)
                except WorkbenchError as exc:  # the copies still run; the link says why it has no goodput
                    goodput_error = exc.one_line()
                    observer.status(f"lab: goodput not measured: {goodput_error}")
            link = link_document(lab.describe(), req.preset)
            link["smb_server"] = smb.to_json() if smb is not None else None
            link["goodput_duration_s"] = goodput_s  # 0: skipped, so goodput_bytes_per_s is null, not a figure
            link["goodput_error"] = goodput_error
            yield lab, work, link
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_inside(
    lab: Lab,
    req: LabRequest,
    root: Path,
    state: Path,
    link: dict[str, Any],
    recorder: Recorder,
    observer: RunObserver,
    label: str,
) -> Run:
    from workbench.core import runner
    from workbench.core.config import build_plan
    from workbench.lab import servercpu
    from workbench.server.daemons import supervisor

    _servers_up(lab, req, root, state, link, observer)
    try:
        with lab.in_client():
            plan = build_plan(
                req.settings.replace(
                    host=lab.server_addr, target=state / paths.TARGET_FILE, credentials=state / paths.CREDENTIALS_FILE
                )
            )
            sweep = _sweep(plan, req.window_sweep, link, observer) if req.window_sweep else None
            cpu = lab.cpu_watch()  # both hosts' CPU over the copies: from the end of the baseline on
            far = servercpu.far_host(plan.target, cpu.server_usage(), plan.options.stall_timeout_s)
            link["server_cpu_per_copy"] = servercpu.method(far)  # each copy's server CPU: from the cgroup, exact
            context = LabContext(
                link=link,
                window_sweep=sweep,
                emulator=_EmulatorWatch(lab, _left_out(req, observer), cpu),
                after_baseline=_then(cpu.start, lab.start_stalls),
            )
            return runner.execute(plan, recorder, observer, far=far, lab=context, label=label)
    finally:
        for line in supervisor.down(state):
            observer.status(f"  {line}")


# A fleet lab's run is driven by its session (workbench.core.session's DriveFleet, with the fleet's controller).
MAX_FLEET_CLIENTS = 8


def run_fleet_lab(req: LabRequest, clients: int, drive: DriveFleet, observer: RunObserver) -> Run:
    """Build the lab with `clients` client hosts behind a switch (the link between switch and server is the one
    shared bottleneck), each with its own sshd, and workbench's servers on the server host; `drive` runs the fleet
    over SSH from the switch. Everything is torn down however it ends."""
    from workbench.lab.client_hosts import ClientHosts
    from workbench.server.daemons import supervisor

    if req.servers != "workbench":
        raise UsageError("--clients runs the fleet against workbench's own servers", "drop --servers stock")
    if req.window_sweep:
        raise UsageError("--window-sweep is for one client", "drop --window-sweep, or --clients")
    if not 1 <= clients <= MAX_FLEET_CLIENTS:
        raise UsageError(f"--clients {clients} is out of range", f"use 1 to {MAX_FLEET_CLIENTS}")
    cc_note = None
    if req.cc is None:
        # Clients share one bottleneck here, so their congestion control decides the shares. BBR (a host's default
        # where so configured) left one of three streams 470 of the link's 502 Mbit/s in the lab; CUBIC, the default
        # of Windows, macOS and stock Linux, shared it evenly (Jain's index 0.9-1.0). The clients a user has run
        # CUBIC.
        req = dataclasses.replace(req, cc="cubic")
        cc_note = "congestion control cubic on every lab host (what Windows, macOS and stock Linux use); --cc to change"
    stall_note = "stalls run from the start: the clients' baselines, alone and at once, meet them too"
    with _built_lab(req, observer) as (lab, work, link):
        said = (link.get("notes"), cc_note, stall_note if req.stall else None)
        link["notes"] = "; ".join(n for n in said if n)
        root, state = work / "root", work / "state"
        root.mkdir()
        _servers_up(lab, req, root, state, link, observer)
        try:
            observer.status(f"lab: {clients} client hosts behind a switch, each with an sshd…")
            with ClientHosts(lab, clients, work / "clients") as hosts:
                link["clients"] = clients
                lab.start_stalls()  # no single baseline to keep clear of them: the fleet's start together
                return drive(lab, hosts, state, link)
        finally:
            for line in supervisor.down(state):
                observer.status(f"  {line}")


def _servers_up(
    lab: Lab, req: LabRequest, root: Path, state: Path, link: dict[str, Any], observer: RunObserver
) -> None:
    """workbench's servers on the server host, their lines shown; the client window clamp narrowed to the
    services the request names, now that their ports are known (the servers go down again if that fails)."""
    from workbench.core.config import shape
    from workbench.server.daemons import supervisor

    observer.status(f"lab: starting servers on the server host {lab.server_addr}…")
    smb = _smb_server(req)
    # the clients the run copies with, from the settings its plan is built from (build_plan, served_job)
    only = lab_servers(e.label for e in shape(req.settings).entries)
    servers = supervisor.up(
        root, lab.server_addr, state, only=only, netns=lab.server_ns,
        smb_server=smb.to_json() if smb is not None else None,
        afp_reference=True,  # the lab's private namespaces: afp/afp_speedtest's volume (daemons/afpd.py)
    )  # fmt: skip
    for line in servers.lines():
        observer.status(f"  {line}")
    skipped = [c.name for c in supervisor.server_classes() if c.name not in only]
    if skipped:
        observer.status(f"  not started (no selected client copies over them): {', '.join(skipped)}")
    _cap_server_host(lab, req, observer)
    if req.client_window and req.client_window_services:
        # every named service's port, started or not: its port is the target's either way, and a server not
        # started takes no connection the clamp could touch
        try:
            link["client_window_ports"] = _clamp_services(lab, state, req.client_window_services)
        except BaseException:
            supervisor.down(state)
            raise


# Started in every workbench lab: `serve` answers the run's control API (/ctl/cpu, /ctl/crypto-cost, clocks,
# scratch directories), runs the raw-TCP probe and the baseline's iperf3, and serves HTTP and FTP.
ALWAYS_STARTED = ("serve",)


def lab_servers(labels: Iterable[str]) -> list[str]:
    """The servers (supervisor names, in its start order) a workbench lab starts for clients with these labels
    ("protocol/client"): ALWAYS_STARTED, and each server listening on a service a chosen client copies over
    (workbench.core.stock.FAMILIES: sftp, scp and rsync/ssh over ssh, rsync/daemon over rsync, smb, afp). A
    server no client uses is processes on the server host (its CPU is measured) and a start and a stop for
    nothing; a label of no known family starts every server, so a new client is never left without its server."""
    from workbench.core.stock import FAMILIES
    from workbench.server.daemons.supervisor import server_classes

    names = [cls.name for cls in server_classes()]
    services: set[str] = set()
    for label in labels:
        found = {s for s, family in FAMILIES.items() if any(_in_family(label, f) for f in family)}
        if not found:
            return names
        services |= found
    return [cls.name for cls in server_classes() if cls.name in ALWAYS_STARTED or services & set(cls.services)]


def _in_family(label: str, family: str) -> bool:
    """`label` ("smb/pysmb") is one of `family`'s clients: that label, or under a "protocol/" prefix."""
    return label == family or (family.endswith("/") and label.startswith(family))


def run_stock_lab(req: LabRequest, present: Present, observer: RunObserver, label: str | None = None) -> list[Run]:
    """Build the lab with stock daemons only on its server host and run each daemon's URL; the finished runs.

    `present` shows each run (see Present); `observer` the lab's own status lines. Everything is torn down
    however it ends (Ctrl-C, SIGTERM, a failure). A URL that cannot be measured at all (its login refused,
    say) does not stop the others: `present` says so and the next URL runs.
    """
    with _built_lab(req, observer) as (lab, work, link):
        return _stock_runs(lab, req, work, link, present, observer, label or f"lab {req.preset} stock")


def _stock_runs(
    lab: Lab, req: LabRequest, work: Path, link: dict[str, Any], present: Present, observer: RunObserver, label: str
) -> list[Run]:
    from workbench.core.config import url_plan
    from workbench.core.stock import clients_for
    from workbench.lab.stock_daemons import StockDaemons
    from workbench.shared.urls import parse

    host = StockDaemons(work, lab.server_addr, lab.server_ns)
    observer.status(f"lab: starting stock servers on the server host {lab.server_addr} (no workbench there)…")
    try:
        for server in host.up():
            observer.status(f"  {server.line()}")
        _cap_server_host(lab, req, observer)
        # --protocols as typed (the lab's default is every client); each URL keeps the clients of its protocol
        plan = url_plan(req.settings)
        runs: list[Run] = []
        with host.client_environment(), lab.in_client():
            for url in host.urls():
                name = parse(url).scheme
                if not clients_for(parse(url), plan.entries):
                    observer.status(f"lab: {url}: --protocols selects none of its clients; not run")
                    continue
                observer.status(f"lab: measuring {url}…")
                _check_iperf3(lab, host, observer)

                def start(recorder: Recorder, run_observer: RunObserver, url: str = url, name: str = name) -> Run:
                    return _stock_run(lab, host, url, plan, link, recorder, run_observer, f"{label} {name}")

                run = present(name, start)
                if run is not None:
                    runs.append(run)
        return runs
    finally:
        for line in host.down():
            observer.status(f"  {line}")


def _stock_run(
    lab: Lab,
    host: StockDaemons,
    url: str,
    plan: Plan,
    link: dict[str, Any],
    recorder: Recorder,
    observer: RunObserver,
    label: str,
) -> Run:
    """One URL's run, as `workbench run URL --iperf3 HOST:PORT` makes it, with the lab's link and emulator."""
    from workbench.core import runner
    from workbench.core.stock import prepare

    url_run_plan, far = prepare(url, plan, prompt=False, iperf3=host.iperf3)
    try:
        # stalls start after the first server's baseline and run on: later servers' baselines may meet one
        cpu = lab.cpu_watch()
        context = LabContext(
            link=link, emulator=_EmulatorWatch(lab, cpu=cpu), after_baseline=_then(cpu.start, lab.start_stalls)
        )
    except BaseException:
        far.close()  # logged in, nothing made yet: execute() would have finished it
        raise
    return runner.execute(url_run_plan, recorder, observer, far=far, lab=context, label=label)


def _check_iperf3(lab: Lab, host: StockDaemons, observer: RunObserver) -> None:
    """The baseline's iperf3, started again if it died meanwhile: the new one joins the server host's cgroup, so
    it runs under the same CPU cap (and is counted) as the one it replaces."""
    problem = host.iperf3_check()
    if problem:
        lab.cap_server_host()
        observer.status(f"lab: {problem}")


def _cap_server_host(lab: Lab, req: LabRequest, observer: RunObserver) -> None:
    """The server host's processes, its servers started, into its cgroup (under the CPU cap, if asked)."""
    moved = lab.cap_server_host()
    if req.server_cpu is not None:
        observer.status(f"lab: {moved} processes of the server host under its CPU cap of {req.server_cpu:g} core(s)")


def _then(*steps: Callable[[], None]) -> Callable[[], None]:
    """One call running each step in turn."""

    def run() -> None:
        for step in steps:
            step()

    return run


EMULATOR_BUSY = 0.8  # of one core: above this the link emulator may have shaped results, not just the link


class _EmulatorWatch:
    """The link emulator's CPU and drops from now until report(), with a note when it was near a full core, and
    the lab's own notes (`lab_notes`: what a default lab left out) to show under the table."""

    def __init__(self, lab: Lab, lab_notes: tuple[str, ...] = (), cpu: HostCpuWatch | None = None) -> None:
        self._lab = lab
        self._lab_notes = lab_notes
        self._cpu = cpu  # both hosts' CPU, reported beside the emulator's
        self._before = lab.forwarder_stats()

    def report(self) -> EmulatorReport:
        after = self._lab.forwarder_stats()
        wall = max(1e-9, after["wall_seconds"] - self._before["wall_seconds"])
        busy = (after["cpu_seconds"] - self._before["cpu_seconds"]) / wall
        drops = after.get("drops", 0) - self._before.get("drops", 0)
        offloaded_drops = after.get("offloaded_drops", 0) - self._before.get("offloaded_drops", 0)
        notes = []
        if busy > EMULATOR_BUSY:
            notes.append(
                f"the link emulator used {busy:.0%} of a core on average: rows near the link rate may be bound by "
                "this machine's CPU rather than by the emulated link"
            )
        host_cpu = self._cpu.report() if self._cpu is not None else None
        return EmulatorReport(
            round(busy, 3), drops, round(wall, 1), (*notes, *self._lab_notes), host_cpu, offloaded_drops
        )


def _clamp_services(lab: Lab, state: Path, services: tuple[str, ...]) -> list[int]:
    """Limit the client window clamp to these services' ports, now that their servers listen; the ports."""
    from workbench.shared import credentials, target

    served = target.read(state / paths.TARGET_FILE, credentials.read(state / paths.CREDENTIALS_FILE))
    ports = sorted({served.port(name) for name in services})
    lab.emulator.ask(f"clamp-ports {','.join(map(str, ports))}")
    return ports


def _left_out(req: LabRequest, observer: RunObserver) -> tuple[str, ...]:
    """What a default lab left out of the full matrix, said before the copies and among the run's notes."""
    from workbench.core.first_lab import left_out_note

    note = left_out_note(str(req.settings.get("protocols") or ""), str(req.settings.get("sizes") or ""))
    if note is None:
        return ()
    observer.status(f"lab: {note}")
    return (note,)


def _sweep(plan: Plan, spec: str, link: dict[str, Any], observer: RunObserver) -> tuple[dict[str, Any], ...]:
    from workbench.core.baseline import sweep_windows
    from workbench.shared.sizes import parse_sizes

    windows = parse_sizes(spec)
    observer.status(f"window sweep: {', '.join(str(w // 1024) + ' KiB' for w in windows)}…")
    # the sweep downloads: the link's goodput that way (bytes/s in this dict; the measured goodput is upload's)
    path_bytes_per_s = link.get("expected_goodput_down_bytes_per_s") or link.get("expected_goodput_bytes_per_s")
    return tuple(sweep_windows(plan.target, windows, link.get("rtt_ms") or 1.0, 2.0, path_bytes_per_s))
