"""`workbench run`: baseline first, then protocol × direction × file set, warm-up then timed copies (a download of
a set of many small files warms up with its first WARMUP_FILES files).

Each copy is timed from the first request to the last byte written (download) or acknowledged
(upload), then verified against the manifest's xxh3-128 outside the timed span. A failing copy
fails its row with the reason and the run goes on; each finished row is saved at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import resource
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from workbench.core import fleet_scratch, scratch_record, settings
from workbench.core.context import EmulatorReport, LabContext
from workbench.core.copy_watcher import CopyWatcher
from workbench.core.farhost import FarHost, ServedFarHost, run_dir
from workbench.core.fleet import ALL_CLIENTS
from workbench.core.observe import (
    COPY_STEP,
    STEP_BASELINE,
    STEP_PREPARE,
    CopyGate,
    QuietObserver,
    Recorder,
    RunObserver,
    pace_of,
)
from workbench.core.plan import Plan
from workbench.core.results import Baseline, Result, Run, Sample
from workbench.core.sampler import CopyMeter
from workbench.fixtures import generate
from workbench.fixtures.manifest import FileEntry, FileSet, Manifest, hash_file
from workbench.protocols import process, registry
from workbench.protocols.base import Client, FileCopy
from workbench.shared import childcpu, cryptocost, hostinfo, procs, schedstat, triage
from workbench.shared.errors import UnavailableError, WorkbenchError, from_os_error
from workbench.shared.paths import FILES_DIR

UNAVAILABLE = "unavailable:"  # a row's error that says the platform cannot run it: not a failed run
VERIFY_CALLS = 8  # a set's uploads checked at once by a far host that hashes them itself (serve hashes in threads)
# A set's files at most this big are small: its uploads are checked side by side, its download's warm-up is a part
SMALL_FILE_MAX_BYTES = 1 << 20


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _cpu_now() -> tuple[float, float]:
    """This process's CPU seconds and its client children's (a copy's curl, scp, rsync, smbclient).

    Its own: getrusage, whose sum of user and system time is the scheduler's own runtime in microseconds
    (os.times() cuts it to 10 ms ticks). Its children's: getrusage's reaped ones, and what the trees of the tools
    that leave children unreaped (scp's ssh per remote file) used besides, from the cgroup v2 group run_native
    starts those in (workbench.shared.childcpu); where no group can be made, what such a tool leaves unreaped
    is not counted."""
    children_s = childcpu.children_cpu_s()
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime, children_s


def _waited(before: dict[int, int] | None, after: dict[int, int] | None) -> float | None:
    """The most-waiting thread's run-queue wait between two readings of each thread's (schedstat.most_waited)."""
    return round(schedstat.most_waited(before, after), 4) if before is not None and after is not None else None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)


class _Copier:
    """Runs the copies of one client and turns them into Samples."""

    def __init__(self, client: Client, control: FarHost, plan: Plan, scratch: Path, watcher: CopyWatcher) -> None:
        self.client = client  # replaced by a fresh session after a failed copy (see _reconnect)
        self.control = control
        self.plan = plan
        self.scratch = scratch
        self.watcher = watcher
        self.started_perf_s = 0.0  # time.perf_counter() at the last copy's first request

    def _jobs(self, file_set: FileSet, direction: str, upload_dir: str) -> list[FileCopy]:
        if direction == "download":
            return [FileCopy(self.scratch / Path(f.name).name, f"{FILES_DIR}/{f.name}", f.size) for f in file_set.files]
        return [
            FileCopy(self.plan.files_dir / f.name, f"{upload_dir}/{Path(f.name).name}", f.size) for f in file_set.files
        ]

    def copy_once(
        self, file_set: FileSet, direction: str, upload_dir: str, progress_hook: Callable[[int], None]
    ) -> Sample:
        jobs = self._jobs(file_set, direction, upload_dir)
        meter = CopyMeter(on_tick=progress_hook)
        error: str | None = None
        with self.watcher.watch(direction) as seen:  # the TCP triage: started before t0, stopped after it
            # CPU is read inside the watch, so that starting and stopping it (control calls) stay out of it
            server_cpu0 = self.control.cpu_seconds()
            server_wait0 = self.control.cpu_waits_ns()  # read with its CPU
            # the helper's CPU is read first here and last below, so the /proc scans stay out of the figure
            helper_cpu0, (own_cpu0, children_cpu0) = self.client.helper_cpu_seconds(), _cpu_now()
            native_runs0 = process.native_runs_started()
            meter.start()
            t0 = self.started_perf_s = time.perf_counter()
            try:
                if len(jobs) == 1 and self.client.unverifiable is None:  # a reference tool: one call, the sizes
                    job = jobs[0]
                    if direction == "download":
                        self.client.download(job.remote, job.local, meter)
                    else:
                        self.client.upload(job.local, job.remote, meter)
                elif direction == "download":
                    self.client.download_many(jobs, meter)
                else:
                    self.client.upload_many(jobs, meter)
            except WorkbenchError as exc:
                error = exc.one_line()
            except OSError as exc:
                error = from_os_error(exc, f"{direction} over {self.client.label}").one_line()
            except BaseException:
                # Ctrl-C or SIGTERM mid-copy: stop the sampler before the progress bar it ticks is torn down.
                meter.stop()
                self._cleanup(jobs, direction)
                raise
            seconds = time.perf_counter() - t0
            intervals = meter.stop()
            own_s = self.client.timed_by_itself_s() if error is None else None
            if own_s is not None:  # what the tool timed is the sample; its progress is not seen as it goes
                seconds, intervals = own_s, ()
            childcpu.wait_emptied()  # what the tool left unreaped may still be ending: its CPU is this copy's
            (own_cpu1, children_cpu1), helper_cpu1 = _cpu_now(), self.client.helper_cpu_seconds()
            server_cpu1 = self.control.cpu_seconds()
            server_wait1 = self.control.cpu_waits_ns()
        # 0 if the helper died; the triage's sampling thread ran in this process but is not the client's work
        others_cpu = children_cpu1 - children_cpu0 + helper_cpu1 - helper_cpu0
        in_child = process.native_runs_started() != native_runs0
        cpu = max(0.0, own_cpu1 - own_cpu0 + others_cpu - seen.sampling_cpu_s)
        if meter.cpu_s is not None:  # this process's own to the nanosecond, the watching threads already left out
            cpu = max(0.0, meter.cpu_s + others_cpu)
        # Read from serve's process trees (outside a lab), a process that ended between the readings, unreaped
        # inside the tree, takes its CPU with it: the difference is then an undercount (a lab's cgroup keeps it).
        # Never read as below zero.
        server_cpu = (
            max(0.0, server_cpu1 - server_cpu0) if server_cpu0 is not None and server_cpu1 is not None else None
        )
        moved = file_set.total_bytes if error is None else meter.total
        verified: bool | None = None
        if error is None and self.client.unverifiable is None:
            verified, problem = self._verify(file_set, jobs, direction)
            if problem:
                error = problem
        self._cleanup(jobs, direction)
        return Sample(
            bytes=moved,
            seconds=seconds,
            files=len(jobs),
            verified=verified,
            client_cpu_s=round(cpu, 4),
            server_cpu_s=round(server_cpu, 4) if server_cpu is not None else None,
            intervals=intervals,
            error=error,
            tcp=triage.seen(seen.triage, moved, seconds),
            # this process's threads only: a copy done by a child process or a helper (curl, scp, rsync, the sshfs
            # daemon) waited there, unseen, and this process's idle threads' near-zero would read as measured
            client_wait_s=None if in_child or helper_cpu1 > 0 else meter.wait_s,
            server_wait_s=_waited(server_wait0, server_wait1),
        )

    def _verify(self, file_set: FileSet, jobs: list[FileCopy], direction: str) -> tuple[bool | None, str | None]:
        expected: dict[str, FileEntry] = {f"{Path(f.name).name}": f for f in file_set.files}

        def check(job: FileCopy) -> bool | OSError | WorkbenchError:
            entry = expected[Path(job.remote).name]
            try:
                if direction == "download":
                    return hash_file(job.local) == entry.xxh3_128
                # the far host hashes it, or reads it back, or asks rsync for its checksums
                return self.control.upload_matches(job.local, job.remote, entry.size, entry.xxh3_128)
            except (OSError, WorkbenchError) as exc:
                return exc

        outcomes: Iterator[bool | OSError | WorkbenchError]
        if direction == "upload" and self.control.upload_check is None and len(jobs) > 1 and _all_small(file_set):
            # A far host that hashes its files itself answers each in a round trip of its own: a set of small
            # files is asked VERIFY_CALLS at a time (a hundred one by one cost a second per copy). Big files stay
            # one at a time: each call's deadline counts on the far disk's whole rate. One read back through the
            # client's own session goes one file at a time.
            pool = ThreadPoolExecutor(VERIFY_CALLS, thread_name_prefix="verify")
            try:
                outcomes = iter(list(pool.map(check, jobs)))
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)  # Ctrl-C: no call not yet made, none waited for
                raise
            pool.shutdown()
        else:
            outcomes = map(check, jobs)  # lazily: the first mismatch ends the check
        for job, same in zip(jobs, outcomes, strict=False):
            if isinstance(same, (OSError, WorkbenchError)):
                why = same.one_line() if isinstance(same, WorkbenchError) else same  # a server's words: one line, cut
                return None, f"could not verify {job.remote}: {why}"
            if not same:
                return False, f"verification failed: {Path(job.remote).name} arrived corrupted (hash mismatch)"
        return True, None

    def _cleanup(self, jobs: list[FileCopy], direction: str) -> None:
        if direction == "download":
            for job in jobs:
                with contextlib.suppress(OSError):
                    job.local.unlink()


def _prepare_files(plan: Plan, control: FarHost) -> Manifest:
    """Make the files locally and on the far host (same seed, same bytes) and check both manifests agree."""
    local = generate.make(plan.files_dir, plan.sizes, plan.small_sets, plan.profile, plan.seed).manifest
    remote = Manifest.from_json(
        control.make_files(list(plan.sizes), [(s.count, s.size) for s in plan.small_sets], plan.profile, plan.seed)
    )
    if local.entries() != remote.entries():
        raise WorkbenchError(
            "the far host generated different test files than this one",
            "run the same workbench version on both hosts",
        )
    return local


def _unavailable_rows(entry: registry.Entry, reason: str, plan: Plan) -> list[Result]:
    protocol, client = entry.label.split("/")
    return [
        Result(protocol, client, direction, "-", 0, 0, error=f"{UNAVAILABLE} {reason}") for direction in plan.directions
    ]


@contextlib.contextmanager
def _scratch_dir() -> Iterator[Path]:
    # the owner pid in the name lets the next lab remove what a SIGKILLed one left (lab/leftovers.py)
    path = Path(tempfile.mkdtemp(prefix=f"workbench-dl-{os.getpid()}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def failed_rows(run: Run) -> list[Result]:
    """Rows that could run here but failed or did not verify ('unavailable:' rows are the platform's, not failures).

    A fleet's aggregate rows are made of its clients' rows, which answer for themselves: an aggregate is never a
    failure of its own (it may have no rate when the clients never copied at once; its notes say so)."""
    def failed(row: Result) -> bool:
        if row.error is not None:
            return not row.error.startswith(UNAVAILABLE)
        return not row.verified and row.unverifiable is None  # a reference of its own data: by design, no failure

    return [row for row in run.results if row.client_host != ALL_CLIENTS and failed(row)]


def _measure_rows(
    plan: Plan,
    run_id: int,
    run_dir: str,
    manifest: Manifest,
    control: FarHost,
    recorder: Recorder,
    observer: RunObserver,
    results: list[Result],
    gate: CopyGate | None = None,
) -> list[Result]:
    """Measure every row, appending each to `results` and handing it to the recorder as it finishes (so
    Ctrl-C/SIGTERM keep the finished rows in the database and the JSON). `gate` holds each copy until it may
    start (a fleet's member)."""

    def save(row: Result) -> None:
        index = len(results)
        results.append(row)
        recorder.row(run_id, index, row)

    watcher = CopyWatcher(control, plan.target.host)
    with _scratch_dir() as scratch:
        for entry_index, entry in enumerate(plan.entries):
            loaded = registry.load(entry)
            if isinstance(loaded, str):
                for row in _unavailable_rows(entry, loaded, plan):
                    save(row)
                continue
            client = loaded(plan.target, plan.options)
            protocol, name = entry.label.split("/")
            try:
                client.connect()
            except WorkbenchError as exc:
                # a mount helper this platform lacks (UnavailableError) is the platform's, like a missing module
                text = f"{UNAVAILABLE} {exc.one_line()}" if isinstance(exc, UnavailableError) else exc.one_line()
                for direction in plan.directions:
                    save(Result(protocol, name, direction, "-", 0, 0, error=text))
                per_direction = plan.copies_per_row
                pace_of(observer).copies_dropped(
                    per_direction * len(manifest.sets) * len(plan.directions),
                    per_direction * sum(s.total_bytes for s in manifest.sets) * len(plan.directions),
                )
                client.close()
                continue
            copier = _Copier(client, control, plan, scratch, watcher)
            try:
                for direction_index, direction in enumerate(plan.directions):
                    for set_index, file_set in enumerate(manifest.sets):
                        step = (COPY_STEP, entry_index, direction_index, set_index)
                        save(_measure_row(plan, run_dir, copier, entry, direction, file_set, observer, gate, step))
            finally:
                copier.client.close()
    return results


def _measure_row(
    plan: Plan,
    run_dir: str,
    copier: _Copier,
    entry: registry.Entry,
    direction: str,
    file_set: FileSet,
    observer: RunObserver,
    gate: CopyGate | None = None,
    step: tuple[int, ...] = (),
) -> Result:
    protocol, name = entry.label.split("/")
    row = functools.partial(Result, protocol, name, direction, file_set.name, file_set.total_bytes, len(file_set.files))
    upload_dir = f"{run_dir}/{_slug(entry.label)}-{_slug(file_set.name)}"
    total = plan.copies_per_row
    pace = pace_of(observer)
    try:
        if direction == "upload":
            copier.client.mkdir(upload_dir)
    except WorkbenchError as exc:
        copier.client = _reconnect(copier.client)  # a session that broke between rows must not fail the rest
        pace.copies_dropped(total, total * file_set.total_bytes)
        return row(error=exc.one_line())
    samples: list[Sample] = []
    warmup = 0
    error: str | None = None
    progress = observer.row_progress(f"{entry.label} {direction} {file_set.name}", file_set.total_bytes)
    try:
        for attempt in range(total):
            warm = attempt < plan.warmup
            label = "warm-up" if warm else f"{attempt - plan.warmup + 1}/{plan.repeat}"
            progress.restart(f"{entry.label} {direction} {file_set.name} {label}")
            if gate is not None:
                gate.wait((*step, attempt))
            copied = _warm_set(file_set, direction) if warm else file_set
            sample = copier.copy_once(copied, direction, upload_dir, progress.advance)
            if gate is not None:
                gate.copied((*step, attempt), (entry.label, direction, file_set.name), sample, copier.started_perf_s)
            pace.copy_done(copied.total_bytes)
            if copied is not file_set:  # the planned bytes counted the whole set
                pace.copies_dropped(0, file_set.total_bytes - copied.total_bytes)
            if warm:
                warmup += 1
                if sample.error is None:
                    continue
            else:
                samples.append(sample)
            if sample.error is not None:
                error = sample.error
                copier.client = _reconnect(copier.client)
                skipped = total - attempt - 1
                pace.copies_dropped(skipped, skipped * file_set.total_bytes)
                break
    finally:
        progress.close()
    with contextlib.suppress(WorkbenchError):
        copier.control.delete(upload_dir)
    details = copier.client.row_details(direction)
    if details.page_cache is None:  # every client but a mount: the copy is served from the server's page cache
        details = dataclasses.replace(details, page_cache="server reads from its page cache")
    if direction == "upload" and copier.control.upload_check is not None:
        details = dataclasses.replace(details, verified_by=copier.control.upload_check)
    return row(
        samples=tuple(samples), warmup=warmup, error=error, details=details, unverifiable=copier.client.unverifiable
    )


WARMUP_FILES = settings.WARMUP_FILES


def _warm_set(file_set: FileSet, direction: str) -> FileSet:
    """What a warm-up copies of `file_set`. A download of a set of many small files: its first WARMUP_FILES
    files, which warm the session and the per-file path as well as all would. Anything else whole: an upload's
    warm-up leaves every file in place, so each timed upload overwrites the same files as the next one does (a
    part would make the first timed copy create the rest); a single file's pages are the ones the timed copies
    touch first, and memory the host gave back is slow to touch again."""
    if direction == "upload" or len(file_set.files) <= WARMUP_FILES or not _all_small(file_set):
        return file_set
    return dataclasses.replace(file_set, files=file_set.files[:WARMUP_FILES])


def _all_small(file_set: FileSet) -> bool:
    return all(f.size <= SMALL_FILE_MAX_BYTES for f in file_set.files)


def _reconnect(client: Client) -> Client:
    """A failed copy may leave the session broken: start the next row on a fresh one."""
    client.close()
    fresh = type(client)(client.target, client.options)
    with contextlib.suppress(WorkbenchError):
        fresh.connect()
    return fresh


def run_meta(plan: Plan, control: FarHost, server: dict[str, Any]) -> Mapping[str, Any]:
    """The run's metadata as the record keeps it from its start, built once and never changed after."""
    target: dict[str, Any] = {"host": plan.target.host, "ports": dict(plan.target.ports)}
    url = control.given_url()
    if url is not None:
        target["url"] = url  # a stock run's far host is its URL (two shares may share host and port)
    crypto: dict[str, Any] = {}
    if any(entry.label.startswith("smb/") for entry in plan.entries):
        # What signing and encryption cost each host per byte, for the crypto ceiling: each host measures its own.
        why = "the far host runs no workbench serve to measure them" if url is not None else None
        crypto["crypto"] = cryptocost.run_record(cryptocost.measure(), control.crypto_costs(), why)
    return MappingProxyType(
        {
            **crypto,
            "started_utc": _utc_now(),
            "client": hostinfo.describe(plan.target.host),
            "server": server,
            "target": target,
            "plan": settings.plan_json(plan),
            "disk": "downloads land in the client's page cache (no fsync); uploads are read from it",
            # Uploads go under a directory no other client can pick: the database id alone is per client, so two
            # clients with their own databases would share incoming/run-1 and delete each other's files.
            "upload_token": secrets.token_hex(8),
            # Who runs it: a later run from this database can tell a killed run (owner gone) from a live one, and
            # a run of another host sharing the data directory from either (procs.owner_state).
            "owner": procs.owner_record(),
        }
    )


def _clean_this_machine() -> None:
    """Remove what a run killed outright left on this machine: mounts, then its temporary files (an smbclient
    auth file holds a password). A dead lab's directory is the next lab's to clean: it names that lab's servers."""
    from workbench.protocols.mounts import stale

    stale.unmount_stale()
    stale.remove_stale_temp(keep_kinds=("lab",))


def execute(
    plan: Plan,
    recorder: Recorder,
    observer: RunObserver | None = None,
    *,
    far: FarHost | None = None,
    lab: LabContext | None = None,
    label: str | None = None,
    gate: CopyGate | None = None,
) -> Run:
    """Run the plan: baseline, then every row, each handed to `recorder.row` as it finishes; the finished run.

    First what killed runs left is removed, on this machine (mounts, temporary files) and on the far host (their
    upload or scratch directories). `recorder.finish(run)` gets the run as it ended, also when Ctrl-C, SIGTERM
    or a failure stops it (the exception then goes on): its finished rows are kept. `far` is the far host
    (default: `workbench serve` at plan.target); `lab` adds the lab's link, window sweep and emulator figures.
    `gate` (a fleet's member) holds the file preparation, the baselines and each copy until the fleet lets them
    start.
    """
    from workbench.core.explain import explain

    _clean_this_machine()
    observer = observer or QuietObserver()
    control: FarHost = far if far is not None else ServedFarHost(plan.target, timeout=plan.options.stall_timeout_s)
    finished = False
    try:
        # The first call reaches the server: an unreachable host or a bad password stops here, in one line.
        meta = run_meta(plan, control, control.info())
        left_notes = remove_left_by_killed_runs(recorder, control)
        link = dict(lab.link) if lab is not None else None
        emulator: EmulatorReport | None = None
        link_reported = False
        window_sweep = lab.window_sweep if lab is not None else None
        run_id = recorder.begin(meta, label, link, window_sweep)
        upload_dir = run_dir(run_id, meta["upload_token"])
        baseline = Baseline()
        rows: list[Result] = []  # the runner's own list: the Run is made once, from it, when the run ends
        warnings: list[str] = [*control.notes(), *left_notes]
        measured = False  # every row measured and the link's account read: the run is then explained
        try:
            observer.status(f"run {run_id}: preparing test files on both hosts…")
            if gate is not None:
                gate.wait(STEP_PREPARE)
            manifest = _prepare_files(plan, control)
            observer.status(control.describe_baseline(plan))
            if gate is not None:
                gate.wait(STEP_BASELINE)
            baseline = control.baseline(plan)
            recorder.baseline(run_id, baseline)
            if gate is not None:
                gate.together(plan if control.raw_tcp_probe else None)
            if lab is not None and lab.after_baseline is not None:
                lab.after_baseline()
            if not (baseline.up_bytes_per_s or baseline.down_bytes_per_s) and baseline.details.get("no_baseline"):
                observer.status(f"no raw-TCP baseline: {baseline.details['no_baseline']}")
            least_s = _check_copy_estimate(plan, manifest, baseline, observer)
            pace_of(observer).plan(*_planned_copies(plan, manifest), least_s)
            # Made by serve before any client: every server may then write beneath it (the rsync daemon, which
            # transfers as its own uid, through the write grant it inherits from incoming/'s default ACL).
            control.mkdir(upload_dir)
            _measure_rows(plan, run_id, upload_dir, manifest, control, recorder, observer, rows, gate)
            if lab is not None:
                # the link's own account (queue drops, offloaded packets it dropped) before the explanation:
                # retransmissions read differently on a link whose queue overflowed
                emulator = _emulator_report(lab)
                link = lab.link_after(emulator)
                link_reported = True
            measured = True
        finally:
            with contextlib.suppress(WorkbenchError):  # rows remove their own; this takes the empty run directory
                control.delete(upload_dir)
            finished = True
            problem = _finish(control)
            if problem is not None:
                warnings.append(problem.one_line())
            # the end of the record: where the uploads went, what became of what the run left, when it ended
            ending = {"upload_dir": upload_dir, **control.finish_record(problem), "finished_utc": _utc_now()}
            if lab is not None:
                if not link_reported:
                    emulator = _emulator_report(lab)
                    link = lab.link_after(emulator)
                warnings.extend(emulator.notes if emulator is not None else ())
            run = Run(
                id=run_id,
                meta={**meta, **ending},
                baseline=baseline,
                results=tuple(rows),
                link=link,
                window_sweep=window_sweep,
                warnings=tuple(warnings),
            )
            try:
                if measured:  # the explanation reads the very run it is attached to
                    run = run.explained(explain(run, plan.target.host))
            finally:
                recorder.finish(run)  # explained or not: the finished rows are kept
    finally:
        if not finished:  # stopped before the run was recorded (info() failed, or Ctrl-C came early)
            _finish(control)
    return run


def _finish(control: FarHost) -> WorkbenchError | None:
    """Let the far host undo what the run left there (a stock server's scratch directory); why not, if it could
    not."""
    try:
        control.finish()
    except WorkbenchError as exc:
        return exc
    return None


def _emulator_report(lab: LabContext) -> EmulatorReport | None:
    if lab.emulator is None:
        return None
    try:
        return lab.emulator.report()
    except Exception:  # a note about the run must never lose the run
        return None


def remove_left_by_killed_runs(recorder: Recorder, control: FarHost) -> list[str]:
    """Remove on the far host what each earlier run of this database left there when it was killed (or, against a
    server given by URL, when its own removal failed); the one-line notes to show.

    A run ended by Ctrl-C or SIGTERM removes its own; one killed outright (SIGKILL) cannot, and no other
    client may guess it (its name holds a random token). Only runs against this same far host (FarHost.left_here)
    whose owning process is gone are touched: a run still going in another shell keeps its files. A run that
    another host (sharing this data directory) owns is never taken for killed: a note says it was left. What
    became of each is recorded beside that run's record (Recorder.record_cleanup), never in its metadata.
    """
    notes: list[str] = []
    for run_id, meta in recorder.unfinished_runs():
        if fleet_scratch.is_fleet(meta):  # its members' scratch directories (their uploads were beneath them)
            notes += fleet_scratch.remove_left(recorder, run_id, meta, control.remove_scratch_of)
            continue
        owner = meta.get("owner") or {}
        if not meta.get("upload_token") or meta.get("upload_removed") or scratch_record.settled(meta):
            continue
        if not control.left_here(meta):
            continue
        # A run that finished is done with its scratch directory whoever owned it: only a pending one is left.
        state = procs.OWNER_DEAD if meta.get("finished_utc") else procs.owner_state(owner)
        if state == procs.OWNER_ELSEWHERE:
            notes.append(procs.elsewhere_note(owner, f"run {run_id}'s {control.left_name}"))
            continue
        if state != procs.OWNER_DEAD:
            continue  # still running, or not a run that says who owns it
        removed = control.remove_left(run_id, meta)
        if removed.note is not None:
            notes.append(removed.note)
        if removed.record:  # empty: the far host is unwell, try again next run
            recorder.record_cleanup(run_id, removed.record)
    return notes


def _check_copy_estimate(plan: Plan, manifest: Manifest, baseline: Baseline, observer: RunObserver) -> float | None:
    """Say how long the copies take at least, at the raw TCP rate just measured; refuse hours of them. Returns
    that least time (None without a raw TCP rate either way).

    The raw TCP rate bounds every client, so this is a floor: a plan of 1 GB files over a 1 Mbit/s path
    is refused here, before its first copy, not found out after a night.
    """
    from workbench.shared.validate import check_copy_estimate, format_duration

    runnable = [e for e in plan.entries if not isinstance(registry.load(e), str)]  # unavailable clients copy nothing
    copies_per_direction = len(runnable) * plan.copies_per_row
    set_bytes = sum(s.total_bytes for s in manifest.sets)
    least_s = 0.0
    for direction in plan.directions:
        rate_bytes_per_s = baseline.for_direction(direction)
        if not rate_bytes_per_s:
            return None  # no baseline this way: nothing to estimate from
        least_s += copies_per_direction * set_bytes / rate_bytes_per_s
    observer.status(f"the copies take at least {format_duration(least_s)} at the raw TCP rate")
    check_copy_estimate(
        least_s,
        copies_per_direction * len(plan.directions),
        set_bytes,
        "at the measured raw TCP rate",
        "use smaller --sizes, fewer --protocols or --repeat",
    )
    return least_s


def _planned_copies(plan: Plan, manifest: Manifest) -> tuple[int, int]:
    """Every copy the rows will make, warm-ups included, and their bytes (clients this host cannot load copy
    nothing): the totals of the run's progress."""
    runnable = [e for e in plan.entries if not isinstance(registry.load(e), str)]
    per_set = plan.copies(clients=len(runnable))
    return per_set * len(manifest.sets), per_set * sum(s.total_bytes for s in manifest.sets)
