"""A run against a server given by URL (`workbench run smb://nas/share`), with nothing of workbench there.

`prepare(url, plan, prompt=..., iperf3=...)` resolves the URL (for SSH through `ssh -G`, so ~/.ssh/config
applies), finds the login (workbench.shared.login), logs in once with the protocol's utility client and
returns the plan with a stock Target (its clients limited to the ones that speak the URL's protocol, then
by --protocols) and a `StockFarHost`, the runner's far host for it:

- info() makes a private scratch directory `workbench-<random hex>` beneath the URL's path; every copy of
  the run happens beneath it (files/ for downloads, incoming/ for uploads), and finish() deletes it at the
  end, also after a failure, Ctrl-C or SIGTERM; what a run killed outright left, or one whose removal failed,
  the next run against the same URL removes (remove_scratch_of; the record is workbench.core.scratch_record);
- make_files() uploads the locally generated test files to files/ (untimed), only when downloads are planned;
- uploads are verified by rsync's checksums against the local file (rsync://) or by reading the file back with
  the utility client outside the timed window;
- baseline(): iperf3 at --iperf3 [HOST:]PORT when given, else no raw-TCP baseline: the RTT comes from TCP
  connects to the service and the figures are absolute;
- the far host's CPU is unknown (cpu_seconds() is None).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import posixpath
import re
import secrets
import shutil
import socket
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from workbench.core import scratch_record
from workbench.core.copy_watcher import CopyWatcher
from workbench.core.farhost import LeftRemoved
from workbench.core.plan import Plan
from workbench.core.results import Baseline
from workbench.core.scratch_record import Cleanup, ScratchLeftAlone
from workbench.fixtures import manifest as mf
from workbench.fixtures.manifest import hash_file
from workbench.probe import iperf
from workbench.protocols import registry
from workbench.protocols.base import Client, FileCopy, LeftInPlace
from workbench.protocols.mounts.stale import owned_prefix
from workbench.shared import login as login_mod
from workbench.shared import sshconfig, urls
from workbench.shared.credentials import Credentials
from workbench.shared.errors import (
    AuthError,
    DiskError,
    NetworkError,
    NotFoundError,
    UnavailableError,
    UsageError,
    WorkbenchError,
    one_line_of,
)
from workbench.shared.paths import FILES_DIR
from workbench.shared.target import Target, url_host
from workbench.shared.urls import StockUrl

T = TypeVar("T")

# The clients that speak each service (labels, or "protocol/" for all of a protocol's), in registry order.
FAMILIES: Mapping[str, tuple[str, ...]] = {
    "smb": ("smb/",),
    "ssh": ("sftp/", "scp/", "rsync/ssh"),
    "ftp": ("ftp/",),
    "rsync": ("rsync/daemon",),
    "http": ("http/",),
    "afp": ("afp/",),
}
# The client the run itself uses to make and remove the scratch directory, upload the test files and read
# uploads back: the library one where there is one, so a missing native program does not stop the run.
UTILITY: Mapping[str, str] = {
    "smb": "smb/pysmb",
    "ssh": "sftp/paramiko",
    "ftp": "ftp/ftplib",
    "rsync": "rsync/daemon",
    "http": "http/aiohttp",
    "afp": "afp/python",
}
SCRATCH_NAME = re.compile(r"^workbench-[0-9a-f]{12}$")
RTT_CONNECTS = 5
NO_IPERF3 = "no iperf3 server given (--iperf3 [HOST:]PORT)"
PAGE_CACHE_NOTE = (
    "the server's page cache: each download follows the upload of the same files, so the server sends them "
    "from its memory, not its disk; files larger than the server's RAM (--sizes) are the way to measure its disk"
)
CPU_NOTE = "the server's CPU is unknown (nothing of workbench runs there): a CPU bound names this host's side only"


def _ignore(_moved_bytes: int) -> None:
    """Progress of the untimed copies (test files up, uploads read back): nobody watches it."""


def join(base: str, name: str) -> str:
    """A POSIX path beneath `base` ("" is the export's root or the login's home; "/..." absolute)."""
    return posixpath.join(base, name) if base else name


def clients_for(url: StockUrl, entries: Sequence[registry.Entry]) -> tuple[registry.Entry, ...]:
    """The entries among `entries` that speak the URL's protocol, in their order."""
    family = FAMILIES[url.service]
    return tuple(e for e in entries if any(e.label == f or (f.endswith("/") and e.label.startswith(f)) for f in family))


def check_clients(url: StockUrl, entries: Sequence[registry.Entry]) -> tuple[registry.Entry, ...]:
    """clients_for, refused in one line when --protocols leaves none for this URL."""
    chosen = clients_for(url, entries)
    if not chosen:
        every = ", ".join(e.label for e in clients_for(url, registry.KNOWN_CLIENTS))
        raise UsageError(
            f"--protocols selects no client for {url.scheme}:// ({url.display()})", f"its clients: {every}"
        )
    return chosen


def stock_target(url: StockUrl, host: str, port: int, creds: Credentials, path: str) -> Target:
    """A stock Target whose clients work beneath `path` (prefix, or remote_root for the SSH family)."""
    common: dict[str, Any] = {"host": host, "credentials": creds, "ports": {url.service: port}, "stock": True}
    if url.is_ssh:
        return Target(**common, remote_root=path, share="", ssh_alias=url.host)
    return Target(**common, prefix=path, share=url.share, tls=url.tls)


def resolve_address(url: StockUrl, user: str | None) -> tuple[str, int, str | None]:
    """(host, port, ssh's user) to connect to: for SSH as `ssh -G` resolves the alias, else the URL's."""
    if not url.is_ssh:
        return url.host, url.port, None
    resolved = sshconfig.resolve(url.host, port=url.port if url.port_given else None, user=user)
    return resolved.hostname, resolved.port, resolved.user


def prepare(url_text: str, plan: Plan, *, prompt: bool, iperf3: str | None) -> tuple[Plan, StockFarHost]:
    """The plan for the server at `url_text` and its far host, logged in once (see the module docstring).

    `plan`: the run's settings (its target is replaced; its entries are filtered to the URL's clients).
    `prompt`: a password may be asked for on a terminal. `iperf3`: "[HOST:]PORT" of an iperf3 server for the
    raw-TCP baseline (HOST defaults to the URL's host), or None. Raises a WorkbenchError (one line) when the
    URL is malformed, no client is left, the host does not resolve or answer, or the login is refused.
    """
    url = urls.parse(url_text)
    entries = check_clients(url, plan.entries)
    iperf_at = urls.parse_host_port(iperf3) if iperf3 else None
    host, port, ssh_user = resolve_address(url, url.user)
    who = login_mod.resolve(url, prompt=prompt, ssh_user=ssh_user)
    if url.is_ssh and who.user != ssh_user:  # WORKBENCH_USER or netrc named another user: %r tokens follow it
        host, port, ssh_user = resolve_address(url, who.user)
    scratch = f"workbench-{secrets.token_hex(6)}"
    creds = Credentials(who.user, who.password or "")
    target = stock_target(url, host, port, creds, join(url.path, scratch))
    far = StockFarHost(url, dataclasses.replace(plan, target=target, entries=entries), scratch, who, iperf_at, prompt)
    far.connect()
    return far.plan, far


class StockFarHost:
    """The runner's far host for a stock server (core.farhost.FarHost): everything through a utility client, no
    hash API (uploads are read back, or rsync's checksums asked for), no raw-TCP probe, and a scratch directory
    that a killed run, or one whose removal failed, leaves for the next run against the URL.

    Paths the runner gives are relative to the scratch directory; the utility client works one level up, at
    the URL's path, so it can make and remove the scratch directory itself. `plan` is the run's plan (its
    target may gain a password typed at an SSH prompt during connect()).
    """

    def __init__(
        self,
        url: StockUrl,
        plan: Plan,
        scratch: str,
        who: login_mod.Login,
        iperf_at: tuple[str | None, int] | None = None,
        prompt: bool = False,
    ) -> None:
        self.url = url
        self.plan = plan
        self.scratch = scratch
        self.login = who
        self._iperf_at = iperf_at
        self._prompt = prompt
        self.utility_label = UTILITY[url.service]
        loaded = registry.load(next(e for e in registry.KNOWN_CLIENTS if e.label == self.utility_label))
        # Without its utility client (mount_afp off macOS) the run still records why each row cannot run.
        self.unavailable: str | None = loaded if isinstance(loaded, str) else None
        self._utility_class: type[Client] | None = None if isinstance(loaded, str) else loaded
        checksums = url.service == "rsync" and hasattr(self._utility_class, "same_as_local")
        self.upload_check: str | None = "rsync checksums" if checksums else "read back"
        self.raw_tcp_probe = False  # nothing of workbench runs there
        self.left_name = "scratch directory"
        self._client: Client | None = None
        self._made = False  # the scratch directory exists (info() made it; finish() removed it)

    # ---------------------------------------------------------------- the utility client
    @property
    def scratch_path(self) -> str:
        return join(self.url.path, self.scratch)

    @property
    def service_port(self) -> int:
        # from the ports the URL gave (Target.port() knows only workbench's own services' defaults: not afp)
        return int(self.plan.target.ports[self.url.service])

    def _utility_target(self) -> Target:
        target = self.plan.target
        if self.url.is_ssh:
            return dataclasses.replace(target, remote_root=self.url.path)
        return dataclasses.replace(target, prefix=self.url.path)

    def _open(self) -> Client:
        if self._utility_class is None:
            raise UnavailableError(f"{self.utility_label}: {self.unavailable}")
        # The utility copies outside the timed copies: SMB's chosen signing, encryption and dialect are for the
        # measured clients (pysmb, the utility, could not encrypt), so it keeps its own defaults.
        options = dataclasses.replace(self.plan.options, smb_signing=None, smb_encryption=None, smb_max_dialect=None)
        client = self._utility_class(self._utility_target(), options)
        try:
            client.connect()
        except BaseException:
            client.close()
            raise
        return client

    def connect(self) -> None:
        """Log in once with the utility client: a refused login or an unknown host key stops the run here.

        SSH logs in with keys and the agent; only when they are refused, and a terminal is there to ask on,
        is a password asked for (as ssh itself does), and it then serves every SSH client of the run.
        """
        if self.unavailable is not None:
            return
        try:
            self._client = self._open()
        except AuthError:
            if not (self.url.is_ssh and self.login.password is None and login_mod.can_prompt(self._prompt)):
                raise
            self._use_password(login_mod.ask(self.url, self.login.user, prompt=self._prompt))
            self._client = self._open()

    def _use_password(self, password: str) -> None:
        target = self.plan.target
        creds = dataclasses.replace(target.credentials, password=password)
        self.plan = dataclasses.replace(self.plan, target=dataclasses.replace(target, credentials=creds))
        self.login = dataclasses.replace(self.login, password=password, password_from="the prompt")

    def _utility(self, action: Callable[[Client], T]) -> T:
        """Run `action` on the utility session; once more on a fresh one if the server dropped it meanwhile
        (an FTP or SMB server closes a session idle for minutes while the run's own clients copy)."""
        if self._client is None:
            self._client = self._open()
        try:
            return action(self._client)
        except NetworkError:
            self.close()
            self._client = self._open()
            return action(self._client)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    # ---------------------------------------------------------------- FarHost
    def given_url(self) -> str | None:
        return self.url.display()

    def notes(self) -> list[str]:
        """What the run says about this server beyond its rows."""
        if self.unavailable is not None:
            return [f"nothing was copied: {self.utility_label}, which makes the scratch directory, cannot run here"]
        if self.upload_check == "rsync checksums":
            check = "uploads are verified with rsync's checksums against the local files (rsync -n -c)"
        else:
            check = f"uploads are verified by reading each file back with {self.utility_label}, outside the timed copy"
        return [check, PAGE_CACHE_NOTE, CPU_NOTE]

    def info(self) -> dict[str, Any]:
        """Make the scratch directory; who the far host is, as the run's metadata keeps it (no secret)."""
        doc: dict[str, Any] = {
            "kind": "stock",
            "url": self.url.display(),
            "service": self.url.service,
            "login": self.login.describe(),
            "utility": self.utility_label,
            "scratch": self.scratch,
            "scratch_path": self.scratch_path,
            "notes": self.notes(),
        }
        if self.url.is_ssh:
            doc["ssh"] = {"host": self.plan.target.host, "port": self.plan.target.port("ssh")}
        if self.unavailable is not None:
            return {**doc, "unavailable": self.unavailable, "scratch": None, "scratch_path": None}
        # mkdir makes missing parents: a mistyped path would be created on the server instead of refused
        if self.url.path and not self._utility(lambda c: c.is_dir("")):
            raise NotFoundError(
                f"{self.url.display()}: the server has no directory {self.url.path!r}",
                "check the URL's path; workbench makes only its own scratch directory there",
            )
        self._utility(lambda c: c.mkdir(self.scratch))
        self._made = True  # from here on finish() removes it (link-safe), also when the check below cannot run
        # What the server made (or another user put there meanwhile) may be a link to a folder of theirs: no copy
        # goes through it, and finish() leaves it alone.
        try:
            self._utility(lambda c: c.check_real_dir(self.scratch))
        except LeftInPlace as exc:
            self._made = False
            raise UnsafeScratch(exc.message, exc.hint) from exc
        return doc

    def make_files(self, sizes: list[int], small: list[tuple[int, int]], profile: str, seed: int) -> dict[str, Any]:
        """Upload the local test files (the runner made them just before) to files/, when downloads need them."""
        manifest = mf.read(self.plan.files_dir)
        if self.unavailable is not None or "download" not in self.plan.directions:
            return manifest.to_json()
        files = [f for s in manifest.sets for f in s.files]
        for parent in sorted({posixpath.dirname(f.name) for f in files}):
            self._mkdir(join(self.scratch, join(FILES_DIR, parent) if parent else FILES_DIR))
        jobs = [FileCopy(self.plan.files_dir / f.name, f"{self.scratch}/{FILES_DIR}/{f.name}", f.size) for f in files]
        self._utility(lambda c: c.upload_many(jobs, _ignore))
        return manifest.to_json()

    def _mkdir(self, path: str) -> None:
        self._utility(lambda c: c.mkdir(path))

    def hash(self, path: str, size_bytes: int = 0) -> dict[str, Any]:
        """Read the file back with the utility client into a private temporary file, and hash that."""
        tmp = Path(tempfile.mkdtemp(prefix=owned_prefix("readback")))
        try:
            copy = tmp / "copy"
            self._utility(lambda c: c.download(f"{self.scratch}/{path}", copy, _ignore))
            return {"xxh3_128": hash_file(copy)}
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def upload_matches(self, local: Path, remote: str, size_bytes: int, xxh3_128: str) -> bool:
        if self.upload_check == "rsync checksums":
            return bool(self._utility(lambda c: c.same_as_local(local, f"{self.scratch}/{remote}")))  # type: ignore[attr-defined]
        return self.hash(remote, size_bytes)["xxh3_128"] == xxh3_128

    def mkdir(self, path: str) -> None:
        if self.unavailable is None:
            self._utility(lambda c: c.mkdir(f"{self.scratch}/{path}"))

    def delete(self, path: str) -> None:
        if self.unavailable is None:
            try:
                self._utility(lambda c: c.remove_tree(f"{self.scratch}/{path}"))
            except WorkbenchError:
                raise
            except Exception as exc:  # the runner expects WorkbenchErrors only
                raise WorkbenchError(f"could not delete {path} in the scratch directory: {exc!r}") from exc

    def cpu_seconds(self) -> float | None:
        return None

    def cpu_waits_ns(self) -> dict[int, int] | None:
        return None  # nothing of workbench runs there to read them

    def crypto_costs(self) -> dict[str, Any] | None:
        return None  # nothing of workbench runs there to measure them

    def tcp_watch_start(self, role: str) -> str | None:
        """Nothing of workbench runs there to sample its sockets: the runner watches this side instead."""
        return None

    def tcp_watch_stop(self, watch_id: str) -> dict[str, Any] | None:
        return None

    def describe_baseline(self, plan: Plan) -> str:
        """The status line before baseline(): what it measures."""
        if self._iperf_at is None:
            return f"measuring the RTT to {self._where()} by TCP connects…"
        host, port = self._iperf_endpoint()
        seconds = max(1, round(plan.tcp_duration))  # iperf3 runs whole seconds, at least one (probe.iperf)
        return f"measuring the raw TCP limit with iperf3 at {url_host(host)}:{port} ({seconds} s each way)…"

    def _where(self) -> str:
        return f"{url_host(self.plan.target.host)}:{self.service_port}"

    def _iperf_endpoint(self) -> tuple[str, int]:
        assert self._iperf_at is not None
        host, port = self._iperf_at
        return host or self.plan.target.host, port

    def baseline(self, plan: Plan) -> Baseline:
        """iperf3 both ways when --iperf3 was given, else none; the RTT from TCP connects to the service."""
        rtt_ms = connect_rtt_ms(self.plan.target.host, self.service_port)
        base = Baseline(rtt_ms=rtt_ms, connect_rtt_ms=rtt_ms, details={"rtt": "TCP connect to the service"})
        if self._iperf_at is None:
            return dataclasses.replace(base, details={**base.details, "no_baseline": NO_IPERF3})
        host, port = self._iperf_endpoint()
        # iperf3's connections are watched from this side, as a copy's are: the sender of an upload, the
        # receiver of a download (nothing of workbench runs on the far host to see its sending side).
        watcher = CopyWatcher(self, host)

        def iperf3(direction: str) -> iperf.IperfResult | None:
            return iperf.run_iperf3(host, port, direction, plan.tcp_duration)

        try:
            up, seen_up = watcher.measured("upload", functools.partial(iperf3, "upload"))
            down, seen_down = None, None
            if up is not None:
                down, seen_down = watcher.measured("download", functools.partial(iperf3, "download"))
        except WorkbenchError as exc:
            why = f"iperf3 at {url_host(host)}:{port} failed: {exc.one_line()}"
            return dataclasses.replace(base, error=why, details={**base.details, "no_baseline": why})
        if up is None or down is None:
            why = iperf.iperf3_available() or "iperf3 gave no result"
            return dataclasses.replace(base, error=why, details={**base.details, "no_baseline": why})
        figures = {d.direction: {"bytes_per_s": d.bytes_per_s, "retransmits": d.retransmits} for d in (up, down)}
        return dataclasses.replace(
            base,
            up_bytes_per_s=up.bytes_per_s,
            down_bytes_per_s=down.bytes_per_s,
            iperf3_up_bytes_per_s=up.bytes_per_s,
            iperf3_down_bytes_per_s=down.bytes_per_s,
            tcp={d: t for d, t in (("upload", seen_up), ("download", seen_down)) if t is not None} or None,
            details={**base.details, "raw_tcp": "iperf3", "iperf3": {"host": host, "port": port, **figures}},
        )

    def finish(self) -> None:
        """Delete the scratch directory (and everything the run left in it); close the utility session.

        Raises one WorkbenchError (the run shows it as a warning) when something stays: a ScratchLeftAlone for
        what could not be proven a real directory of the run's own (a link swapped in; left for good), another
        for what the server refused or a server that failed (pending: the next run against the URL tries again).
        Never anything else, so the runner's own work after it (recording the run) always happens.
        """
        try:
            if self._made:
                self._made = False  # tried once: a failure is reported, not retried by a second finish()
                try:
                    self._utility(lambda c: c.remove_tree(self.scratch))
                except NotFoundError:
                    pass  # someone removed it already
                except Exception as exc:  # whatever the client raised, the run must still be recorded
                    raise scratch_left(self.scratch_path, self.url.display(), exc) from exc
        finally:
            with contextlib.suppress(Exception):  # a session that cannot even close has nothing left to undo
                self.close()

    def finish_record(self, problem: WorkbenchError | None) -> dict[str, Any]:
        """Removed, left alone for good, or (no key) pending for the next run against the URL."""
        return scratch_record.after_finish(problem)

    def left_here(self, meta: Mapping[str, Any]) -> bool:
        server = meta.get("server") or {}
        return bool(server.get("kind") == "stock" and server.get("url") == self.url.display())

    def remove_left(self, run_id: int, meta: Mapping[str, Any]) -> LeftRemoved:
        """The earlier run's whole scratch directory, with the same link-safe removal as finish()."""
        done = self.remove_scratch_of(meta.get("server") or {})
        if done is None:
            return LeftRemoved()  # not a name this code made
        # nothing recorded while it is pending: the server is unwell, the next run tries again
        return LeftRemoved(note=done.note(f"run {run_id}'s"), record=done.meta() if done.settled else {})

    def remove_scratch_of(self, server: Mapping[str, Any]) -> Cleanup | None:
        """Remove the scratch directory an earlier run left (killed outright, or its own removal failed) if that
        run was against this same URL, with the same link-safe removal as finish(); None: not this URL's."""
        name = server.get("scratch")
        if server.get("kind") != "stock" or server.get("url") != self.url.display():
            return None
        if not isinstance(name, str) or not SCRATCH_NAME.match(name) or name == self.scratch:
            return None  # never delete a name this code did not make
        done = Cleanup(join(self.url.path, name), self.url.display())
        if self.unavailable is not None:
            return dataclasses.replace(done, failed=f"{self.utility_label} {self.unavailable}")
        try:
            self._utility(lambda c: c.remove_tree(name))
        except NotFoundError:
            return dataclasses.replace(done, removed=True)
        except LeftInPlace as exc:  # not provably its own real directory: left for good, never tried again
            return dataclasses.replace(done, left_alone=exc.one_line())
        except Exception as exc:  # a refusal, a failing server: the next run tries again
            return dataclasses.replace(done, failed=one_line_of(exc))  # kept in the record: bounded, safe
        return dataclasses.replace(done, removed=True, deleted=True)


class UnsafeScratch(LeftInPlace, DiskError):
    """The scratch directory the run just made is not a real directory (the server made a link, or another user
    swapped one in): the run stops before any copy goes through it. Exit code 6 (not writable): the URL's folder
    cannot be written into safely."""


def scratch_left(scratch_path: str, url: str, exc: BaseException) -> WorkbenchError:
    """The one-line warning when (part of) the scratch directory stays on the server, naming it and why."""
    why = one_line_of(exc)
    if isinstance(exc, LeftInPlace):  # refused on purpose: no later run tries it again
        return ScratchLeftAlone(
            f"left in place on {url}: {why}", f"the scratch directory was {scratch_path}; delete what is yours by hand"
        )
    return WorkbenchError(
        f"could not remove the scratch directory {scratch_path} on {url}: {why}",
        "delete it by hand; the next run against this URL tries again",
    )


def connect_rtt_ms(host: str, port: int, count: int = RTT_CONNECTS, timeout_s: float = 3.0) -> float | None:
    """The median time of `count` TCP connects to host:port (one round trip each), in ms; None if none got through.

    The name is resolved once, first, so the lookup is not counted.
    """
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError:
        return None
    times: list[float] = []
    for _ in range(count):
        with socket.socket(family, kind, proto) as sock:
            sock.settimeout(timeout_s)
            started = time.perf_counter()
            try:
                sock.connect(address)
            except OSError:
                continue
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3 if times else None
