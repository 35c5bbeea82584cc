"""The one interface every protocol client implements, and the target it copies to and from.

A client copies whole files between a local path and a path relative to the far host's served
root (POSIX style, e.g. ``files/file-16M.bin`` or ``incoming/run-3/file-16M.bin``). The runner
times each call from the first request to the last byte written (download) or acknowledged
(upload); ``connect()`` (session set-up, login) is outside the timed span unless the client says
otherwise in ``details().timed_includes_setup`` (native CLI clients must connect per copy).

Clients never print. They report bytes as they move through ``progress(n)`` so the runner can
sample throughput every 100 ms, and they translate their library's errors into
``workbench.shared.errors`` at this boundary.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, ParamSpec, TypeVar

from workbench.protocols.details import ClientDetails
from workbench.shared.errors import NetworkError, UnavailableError, WorkbenchError
from workbench.shared.target import Target

Progress = Callable[[int], None]
"""Called with the number of bytes just moved (not a running total)."""


_Params = ParamSpec("_Params")
_Result = TypeVar("_Result")


def call_translating(
    translate: Callable[[Exception, str], WorkbenchError | None],
    what: str,
    fn: Callable[_Params, _Result],
    *args: _Params.args,
    **kwargs: _Params.kwargs,
) -> _Result:
    """Run one library call, turning its exceptions into WorkbenchErrors with `translate` (None: re-raise as is)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        error = translate(exc, what)
        if error is None:
            raise
        raise error from exc


@dataclass(frozen=True)
class ClientOptions:
    """Knobs a user may turn per run; each client reads the ones that apply to it."""

    block_size: int = 1 << 20  # application read/write size where the client has one
    cipher: str | None = None  # SSH cipher; None pins the client's fastest default
    compress: bool = False  # rsync -z
    stall_timeout_s: float = 30.0  # seconds without progress before a transfer is declared dead (--stall-timeout)
    # A reachable host answers a TCP connect in milliseconds: a few seconds tell an unreachable one apart.
    connect_timeout_s: float = 5.0
    verify_host_keys: bool = True
    # AFP login: "secure" (DHX2: the password never in clear), "cleartext" (Cleartxt Passwrd: the password, at
    # most 8 bytes, in clear on the wire; only when the user asks for it) or "guest" (No User Authent).
    afp_login: str = "secure"
    requests_in_flight: int = 4  # read/write requests a pipelining client (AFP) keeps outstanding
    # SMB's client side (protocols/smb_options.py); None everywhere: the client's own default.
    smb_signing: str | None = None  # "off", "on" or "required"
    smb_encryption: str | None = None  # "off" or "required"
    smb_max_dialect: str | None = None  # the highest dialect offered, e.g. "3.0.2"


@dataclass(frozen=True)
class FileCopy:
    """One file of a copy job: the local path and the remote path relative to the served root."""

    local: Path
    remote: str
    size: int


# Bounds of one remove_tree. A scratch directory is a few levels deep (files/<set>/..., incoming/run-.../...) and
# holds at most the run's test files twice (up to 100 000 per small-file set, uploaded and downloaded): a server
# listing deeper or more than this is looping (a link to an ancestor it follows) or hostile.
REMOVE_MAX_DEPTH = 32
REMOVE_MAX_ENTRIES = 1_000_000
# Characters no name of a scratch directory holds, and FTP cannot even send (CR and LF end a command).
_ODD_CHARACTERS = ("\0", "\r", "\n")


class LeftInPlace(WorkbenchError):
    """remove_tree left something on the server because deleting it could follow a link or never end: an entry
    it could not prove to be a real directory, one swapped for a link meanwhile, a tree too deep or too large."""


def listed_name(name: str, where: str, separators: str = "/") -> str:
    """A name from a server's directory listing, refused unless it names one entry of that very directory.

    remove_tree joins listed names onto the directory it deletes: a name such as "..", "a/b" or "/etc" from
    a hostile or broken server would lead it elsewhere, and a CR or LF would end an FTP command early.
    `separators`: the protocol's path separators. The message shows the name escaped, on one line.
    """
    if not name or name in (".", "..") or any(c in name for c in _ODD_CHARACTERS) or any(s in name for s in separators):
        raise WorkbenchError(
            f"{where} listed an entry named {name!r}, which is not a plain name: nothing was deleted through it",
            "delete what is left by hand",
        )
    return name


class RemovalBudget:
    """Counts one remove_tree's depth and entries against REMOVE_MAX_DEPTH and REMOVE_MAX_ENTRIES."""

    def __init__(self, where: str, max_depth: int = REMOVE_MAX_DEPTH, max_entries: int = REMOVE_MAX_ENTRIES) -> None:
        self.where = where
        self.max_depth = max_depth
        self.max_entries = max_entries
        self.entries = 0

    def enter(self, depth: int, path: str) -> None:
        """Before listing a directory `depth` levels beneath the top (the top is 0)."""
        if depth > self.max_depth:
            raise LeftInPlace(
                f"{path} on {self.where} is nested deeper than {self.max_depth} levels (a link loop?): left in place",
                "delete it by hand",
            )

    def count(self, more: int, path: str) -> None:
        """`more` entries listed in `path`."""
        self.entries += more
        if self.entries > self.max_entries:
            raise LeftInPlace(
                f"{path} on {self.where}: more than {self.max_entries} entries listed (a link loop?): the rest was "
                "left in place",
                "delete it by hand",
            )


_Entry = TypeVar("_Entry")


class Removal:
    """What one remove_tree collects while it walks: its budget and the problems met, each entry's one line.

    Every protocol removes a directory the same way: each listed entry in turn (a file or link deleted, a real
    directory emptied and removed), and whatever one entry leaves behind is noted and the next one tried, so that
    one refusal or one link does not keep the rest. Only a removal whose entry budget ran out stops at once.
    """

    def __init__(self, where: str, budget: RemovalBudget | None = None) -> None:
        self.where = where
        self.budget = budget or RemovalBudget(where)
        self.problems: list[WorkbenchError] = []

    @property
    def exhausted(self) -> bool:
        """The entry budget ran out: nothing more is tried."""
        return self.budget.entries > self.budget.max_entries

    def each(
        self,
        entries: Iterable[_Entry],
        remove: Callable[[_Entry], bool],
        refused: Callable[[_Entry, Exception], WorkbenchError | None] = lambda entry, exc: None,
    ) -> bool:
        """`remove(entry)` for every entry; True when each went (`remove` says False when something of an entry
        had to stay, its reason noted). A WorkbenchError (a LeftInPlace among them) is noted and the walk goes on;
        so is a protocol's own exception that `refused` turns into one (it returns None for those that end the
        whole removal, as a NetworkError does: a dropped connection)."""
        complete = True
        for entry in entries:
            try:
                complete = remove(entry) and complete
            except LeftInPlace as exc:
                if self.exhausted:
                    raise
                self.problems.append(exc)
                complete = False
            except NetworkError:
                raise  # the connection is gone: every further entry would fail the same way
            except WorkbenchError as exc:
                self.problems.append(exc)
                complete = False
            except Exception as exc:
                problem = refused(entry, exc)
                if problem is None:
                    raise
                self.problems.append(problem)
                complete = False
        return complete

    def raise_first(self) -> None:
        """Raise the first problem noted (saying how many more there were), if any."""
        problem = first_problem(self.problems)
        if problem is not None:
            raise problem


def first_problem(problems: list[WorkbenchError]) -> WorkbenchError | None:
    """The first of `problems` on one line, saying how many more there were; None when there were none."""
    if not problems:
        return None
    first = problems[0]
    if len(problems) == 1:
        return first
    return type(first)(f"{first.message} (and {len(problems) - 1} more)", first.hint)


class Client(ABC):
    """A protocol client. Subclasses set `protocol` and `name`; the row is shown as 'protocol/name'."""

    protocol: ClassVar[str]
    name: ClassVar[str]
    # A reference tool that moves data of its own making: its copies cannot be checked against the manifest, and
    # this is the row's state saying so (never verified, never a failure). None: every copy is verified.
    unverifiable: ClassVar[str | None] = None

    def __init__(self, target: Target, options: ClientOptions | None = None) -> None:
        self.target = target
        self.options = options or ClientOptions()

    @property
    def label(self) -> str:
        return f"{self.protocol}/{self.name}"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when this client can run here; otherwise why not and what to install."""
        return None

    @abstractmethod
    def connect(self) -> None:
        """Open the session and log in. Raises AuthError / NetworkError."""

    @abstractmethod
    def upload(self, local: Path, remote: str, progress: Progress) -> None:
        """Copy local -> remote (overwriting). Parent directories of `remote` already exist."""

    @abstractmethod
    def download(self, remote: str, local: Path, progress: Progress) -> None:
        """Copy remote -> local (overwriting). Raises NotFoundError when `remote` is missing."""

    def upload_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        """Copy a set of files in one timed span; clients with a batch mode override this."""
        for item in files:
            self.upload(item.local, item.remote, progress)

    def download_many(self, files: Sequence[FileCopy], progress: Progress) -> None:
        for item in files:
            self.download(item.remote, item.local, progress)

    def mkdir(self, remote_dir: str) -> None:
        """Create a remote directory and its parents (idempotent)."""
        raise NotImplementedError

    def remove_tree(self, remote_dir: str) -> None:
        """Delete a remote directory and everything beneath it, never following a link out of it.

        A run against a stock server deletes its scratch directory with this at the end (also after a
        failure or Ctrl-C). Raises NotFoundError when `remote_dir` does not exist.
        """
        raise UnavailableError(f"{self.label} cannot delete a remote directory", "use another client of the URL")

    def check_real_dir(self, remote: str) -> None:
        """Raise LeftInPlace unless `remote` is a real directory, not a link to one. A run against a stock server
        checks the scratch directory it just made with this, so that no copy goes through a link another user
        (or the server) put in its place. Clients that cannot tell a link apart check nothing."""

    def is_dir(self, remote: str) -> bool:
        """Whether `remote` is an existing directory (a link to one counts). A run against a stock server checks
        the URL's directory with this before it makes its scratch directory there: mkdir would make a
        mistyped path's missing parents instead of saying it is not there."""
        raise UnavailableError(f"{self.label} cannot look a remote directory up", "use another client of the URL")

    def row_details(self, direction: str) -> ClientDetails:
        """details() as they apply to one direction: a mount's reads are paced by the kernel, its writes not."""
        return self.details()

    def helper_cpu_seconds(self) -> float:
        """CPU seconds so far of processes that work for this client but outlive a copy (a FUSE daemon).

        The runner counts its own CPU and its reaped children's; a daemon is never reaped during a copy,
        so a client that has one reports it here and the row's client CPU includes it.
        """
        return 0.0

    def timed_by_itself_s(self) -> float | None:
        """The seconds the last copy took by the tool's own clock, for a tool that times itself (the row's sample
        then); None: the runner's clock times the copy."""
        return None

    def close(self) -> None:
        """Close the session; must be safe to call twice and after a failed connect."""

    def details(self) -> ClientDetails:
        """What shapes this client's speed, for the row's metadata and the ceilings (see ClientDetails)."""
        return ClientDetails()

    def __enter__(self) -> Client:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
