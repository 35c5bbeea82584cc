"""`workbench lab`: build the two-host lab, start every available server on the server host, run the
baseline and the comparison from the client host, print the table, and tear everything down.

The default preset is wifi-ac (533 Mbit/s, 2.8 ms), not gige: it is the case users ask about (iperf
says 533, the copy says 170), and its 2.8 ms RTT is long enough that request-bound clients (pysmb's
64 KiB × 1, paramiko's prefetch) show their ceilings, where at gige's 0.2 ms this 2-core machine's
CPU would hide them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from workbench.shared import paths
from workbench.shared.errors import UsageError, WorkbenchError

if TYPE_CHECKING:
    from workbench.core.results import Run

DEFAULT_PRESET = "wifi-ac"
DEFAULT_SMALL = ("100x64K",)


@dataclass(frozen=True)
class LabRequest:
    preset: str = DEFAULT_PRESET
    rate: str | None = None
    rtt: str | None = None
    loss: float = 0.0
    mtu: int = 1500
    cc: str | None = None
    protocols: str = "all"
    sizes: str = "16M,128M"
    small: tuple[str, ...] = ()
    profile: str = "random"
    directions: str = "upload,download"
    repeat: int = 3
    warmup: int = 1
    tcp_duration: float = 3.0
    window_sweep: str | None = None
    compress: bool = False
    stall_timeout: float = 30.0  # seconds without progress before a copy fails its row (ClientOptions.timeout)


def link_spec(req: LabRequest) -> Any:
    from workbench.lab import PRESETS
    from workbench.shared.sizes import parse_duration_ms, parse_rate
    from workbench.shared.validate import named

    if req.preset not in PRESETS:
        raise UsageError(f"--link: unknown link preset {req.preset!r}", f"choose from {', '.join(PRESETS)}")
    spec = PRESETS[req.preset]
    changes: dict[str, Any] = {"loss": req.loss, "mtu": req.mtu, "cc": req.cc}
    if req.rate is not None:
        changes["rate_bps"] = named("--rate", parse_rate, req.rate)
    if req.rtt is not None:
        changes["rtt_ms"] = named("--rtt", parse_duration_ms, req.rtt)
    spec = dataclasses.replace(spec, **changes)
    spec.validate()
    return spec


def validate_request(req: LabRequest) -> Any:
    """Every lab input checked as `run` checks its own, without root and before any namespace; the link spec."""
    from workbench.core.config import plan_inputs
    from workbench.shared.validate import check_copy_estimate, check_free_space, check_loss, check_range, check_windows

    check_loss(req.loss)
    check_range("mtu", req.mtu)
    if req.cc is not None:
        available = _available_cc()
        if req.cc not in available:
            raise UsageError(
                f"--cc {req.cc!r} is not a congestion control this kernel offers",
                f"choose from {', '.join(available)}, e.g. --cc cubic",
            )
    inputs = plan_inputs(
        {
            "protocols": req.protocols,
            "sizes": req.sizes,
            "small": list(req.small),
            "profile": req.profile,
            "directions": req.directions,
            "repeat": req.repeat,
            "warmup": req.warmup,
            "tcp_duration": req.tcp_duration,
            "stall_timeout": req.stall_timeout,
        }
    )
    check_windows(None, req.window_sweep, req.tcp_duration)
    files_bytes = sum(inputs["sizes"]) + sum(s.count * s.size for s in inputs["small_sets"])
    check_free_space(paths.data_dir() / "files", files_bytes)
    spec = link_spec(req)
    # The link rate is known before anything starts, so the copies' least duration is plain arithmetic.
    copies = len(inputs["entries"]) * len(inputs["directions"]) * (inputs["repeat"] + inputs["warmup"])
    least_s = copies * files_bytes * 8 / spec.rate_bps  # LinkSpec's rate is in bits per second
    check_copy_estimate(
        least_s,
        copies,
        files_bytes,
        f"on the lab's {spec.rate_bps / 1e6:g} Mbit/s link",
        "use smaller --sizes, fewer --protocols or --repeat, or a faster --rate",
    )
    return spec


def _available_cc() -> list[str]:
    try:
        return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    except OSError:
        return ["cubic", "reno"]  # not Linux: check_available() says why the lab cannot run


def link_document(described: dict[str, Any], preset: str) -> dict[str, Any]:
    """The JSON `link` object. Like every *_bps in the document it is bytes/s; *_bits_per_s are bits."""
    rate_bits = described["rate_bps"]
    doc = {
        "preset": preset,
        "rate_bps": rate_bits / 8,
        "rate_bits_per_s": rate_bits,
        "rtt_ms": described.get("rtt_ms"),
        "mtu": described.get("mtu"),
        "loss": described.get("loss"),
        "cc": described.get("cc"),
        "queue_bytes": described.get("queue_bytes"),
        "expected_goodput_bps": (described.get("expected_goodput_bps") or 0) / 8 or None,
        "goodput_bps": (described.get("goodput_bps") or 0) / 8 or None,
        "requested": described.get("requested"),
        "cores_awake": described.get("cores_awake"),
        "notes": "; ".join(described.get("notes") or []),
    }
    return doc


def run_lab(req: LabRequest, db_path: Path, json_out: Path | None, label: str | None, console: Console) -> Run:
    """Build the lab, run the comparison inside it, tear it down (also on Ctrl-C and SIGTERM); the finished run."""
    from workbench.lab import Lab, check_available, cleanup_stale

    spec = validate_request(req)  # before anything is built: a typo must not cost a namespace
    check_available()
    for removed in cleanup_stale():
        console.print(f"removed a stale lab left by a killed run: {removed}")
    work = Path(tempfile.mkdtemp(prefix=f"workbench-lab-{os.getpid()}-"))  # owner pid: see lab/leftovers.py
    root = work / "root"
    root.mkdir()
    state = work / "state"
    try:
        rate_text = f"{spec.rate_bps / 1e6:,.0f} Mbit/s"
        console.print(f"lab: {req.preset} link, {rate_text}, RTT {spec.rtt_ms} ms, MTU {spec.mtu}: building…")
        with Lab(spec) as lab:
            console.print(f"lab: idle RTT measured {lab.idle_rtt_ms:.2f} ms; measuring goodput (3 s)…")
            with contextlib.suppress(WorkbenchError):
                lab.measure_goodput(seconds=3.0)
            link = link_document(lab.describe(), req.preset)
            return _run_inside(lab, req, root, state, link, db_path, json_out, label, console)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_inside(
    lab: Any,
    req: LabRequest,
    root: Path,
    state: Path,
    link: dict[str, Any],
    db_path: Path,
    json_out: Path | None,
    label: str | None,
    console: Console,
) -> Run:
    from workbench.core.config import build_plan
    from workbench.core.runner import execute
    from workbench.server.daemons import supervisor

    console.print(f"lab: starting servers on the server host {lab.server_addr}…")
    servers = supervisor.up(root, lab.server_addr, state, netns=lab.server_ns)
    for line in servers.lines():
        console.print(f"  {line}")
    try:
        with lab.in_client():
            plan = build_plan(
                config=None,
                explicit=set(),
                files_dir=paths.data_dir() / "files",
                host=lab.server_addr,
                target=state / paths.TARGET_FILE,
                credentials=state / paths.CREDENTIALS_FILE,
                protocols=req.protocols,
                sizes=req.sizes,
                small=list(req.small),
                profile=req.profile,
                directions=req.directions,
                repeat=req.repeat,
                warmup=req.warmup,
                tcp_duration=req.tcp_duration,
                compress=req.compress,
                stall_timeout=req.stall_timeout,
            )
            plan = dataclasses.replace(plan, link=link)
            extra: dict[str, Any] = {}
            if req.window_sweep:
                extra["window_sweep"] = _sweep(plan, req.window_sweep, link, console)
            before = lab.forwarder_stats()

            def emulator_notes(run: Any) -> list[str]:
                return _emulator_report(run, before, lab.forwarder_stats())

            return execute(
                plan,
                db_path=db_path,
                json_out=json_out,
                label=label or f"lab {req.preset}",
                console=console,
                extra=extra,
                on_finish=emulator_notes,
            )
    finally:
        for line in supervisor.down(state):
            console.print(f"  {line}")


EMULATOR_BUSY = 0.8  # of one core: above this the link emulator may have shaped results, not just the link


def _emulator_report(run: Any, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Record what the link emulator did during the run, and say when it was near a full core."""
    wall = max(1e-9, after["wall_seconds"] - before["wall_seconds"])
    busy = (after["cpu_seconds"] - before["cpu_seconds"]) / wall
    drops = after.get("drops", 0) - before.get("drops", 0)
    if run.link is not None:
        run.link["emulator"] = {"cpu_fraction": round(busy, 3), "drops": drops, "seconds": round(wall, 1)}
    notes = []
    if busy > EMULATOR_BUSY:
        notes.append(
            f"the link emulator used {busy:.0%} of a core on average: rows near the link rate may be bound by "
            "this machine's CPU rather than by the emulated link"
        )
    return notes


def _sweep(plan: Any, spec: str, link: dict[str, Any], console: Console) -> list[dict[str, Any]]:
    from workbench.core.baseline import sweep_windows
    from workbench.shared.sizes import parse_sizes

    windows = parse_sizes(spec)
    console.print(f"window sweep: {', '.join(str(w // 1024) + ' KiB' for w in windows)}…")
    return sweep_windows(plan.target, windows, link.get("rtt_ms") or 1.0, 2.0)
