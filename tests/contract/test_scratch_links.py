"""A stranger's server loses nothing: the scratch directory of `workbench run URL` swapped for a link.

Another user with write access to the URL's folder (a NAS's public share) may replace `workbench-<hex>` with a
link to a folder the run's user can write, when it is made or while it is being deleted, or put a link to
outside beneath it. Each test here has a victim folder beside the scratch directory, hashes every file in it
before and after, and holds removal to: the victim folder is byte-identical, what cannot be proven the run's
own real directory stays, and finish() says so in one line (a warning of the run, never a traceback).

FTP runs against pyftpdlib in this process, its handler doing the swaps at the moment they hurt most (MKD of
the scratch makes a link; a DELE swaps the directory it just deleted in); SFTP against the stock OpenSSH.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer

from tests import swap_on_mkdir
from tests.helpers import write_random
from tests.stock_urls import StockSite, stock_site
from workbench.core import stock
from workbench.core.plan import Plan
from workbench.protocols.base import REMOVE_MAX_DEPTH, Client, LeftInPlace
from workbench.shared import login as login_mod
from workbench.shared import urls
from workbench.shared.credentials import Credentials, generate
from workbench.shared.errors import ExitCode, WorkbenchError

SHARE = "pub"  # the URL's folder, writable by everyone on the "NAS"


def hashes(folder: Path) -> dict[str, str]:
    """Every entry beneath `folder` (links as their target text, folders as such) and each file's SHA-256."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            found[rel] = f"link {os.readlink(path)}"
        elif path.is_dir():
            found[rel] = "dir"
        else:
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def make_victim(share: Path) -> Path:
    """A folder beside the scratch directory with files, a subfolder, and the names a scratch holds."""
    victim = share / "victim"
    write_random(victim / "thesis.pdf", 3000)
    write_random(victim / "photos" / "cat.jpg", 2000)
    for name in ("a.bin", "b.bin", "c.bin"):
        write_random(victim / "files" / name, 500)
    return victim


def fill_scratch(scratch: Path, victim: Path) -> None:
    """What a run leaves in its scratch directory, and a link to the victim planted beneath it."""
    for name in ("a.bin", "b.bin", "c.bin"):
        write_random(scratch / "files" / name, 100)
    write_random(scratch / "incoming" / "run-1" / "up.bin", 100)
    (scratch / "files" / "evil").symlink_to(victim)


def one_line(error: BaseException) -> str:
    assert isinstance(error, WorkbenchError), repr(error)
    text = error.one_line()
    assert "\n" not in text and "\r" not in text and "Traceback" not in text
    return text


# --- FTP: pyftpdlib whose handler swaps -----------------------------------------------------------------------


class SwapHandler(FTPHandler):
    """pyftpdlib as a hostile co-user sees to it: `swap` says when the scratch directory becomes a link."""

    swap: ClassVar[str] = ""  # "mkd": MKD workbench-… makes a link; "top"/"files": the first DELE swaps that dir
    victim: ClassVar[str] = ""
    swapped: ClassVar[list[str]] = []
    no_unique: ClassVar[bool] = False  # give no MLST unique fact, as vsftpd (no MLST at all) and others do

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.no_unique:
            self._current_facts = [f for f in self._current_facts if f != "unique"]
            self._available_facts = [f for f in self._available_facts if f != "unique"]

    def ftp_MKD(self, path: str) -> Any:
        if self.swap == "mkd" and os.path.basename(path).startswith("workbench-"):
            os.symlink(self.victim, path)
            self.respond(f'257 "{self.fs.fs2ftp(path)}" directory created.')
            return path
        return super().ftp_MKD(path)

    def ftp_DELE(self, path: str) -> Any:
        done = super().ftp_DELE(path)
        parts = Path(path).parts
        scratch = next((i for i, p in enumerate(parts) if p.startswith("workbench-")), None)
        if self.swap in ("top", "files") and scratch is not None and not self.swapped:
            swapped = Path(*parts[: scratch + 1]) if self.swap == "top" else Path(path).parent
            target = Path(self.victim) if self.swap == "top" else Path(self.victim) / "files"
            swapped.rename(swapped.with_name(swapped.name + ".moved"))
            swapped.symlink_to(target)
            self.swapped.append(str(swapped))
        return done


@dataclass
class Ftpd:
    root: Path
    port: int
    credentials: Credentials
    handler: type[SwapHandler]

    @property
    def share(self) -> Path:
        return self.root / SHARE

    @property
    def url(self) -> str:
        return f"ftp://{self.credentials.user}@127.0.0.1:{self.port}/{SHARE}"


@pytest.fixture
def ftpd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ftpd]:
    root = tmp_path / "ftp-root"
    (root / SHARE).mkdir(parents=True)
    creds = generate()
    authorizer = DummyAuthorizer()
    authorizer.add_user(creds.user, creds.password, str(root), perm="elradfmwMT")
    handler = type("Handler", (SwapHandler,), {"authorizer": authorizer, "swapped": []})
    server = FTPServer(("127.0.0.1", 0), handler)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            server.serve_forever(timeout=0.05, blocking=False, handle_exit=False)
        server.close_all()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setenv("WORKBENCH_PASSWORD", creds.password)
    try:
        yield Ftpd(root, server.address[1], creds, handler)
    finally:
        stop.set()
        thread.join(timeout=10)


def far_host(url_text: str, files_dir: Path) -> stock.StockFarHost:
    """The run's far host for `url_text`, logged in, as prepare() makes it (no plan of copies needed)."""
    url = urls.parse(url_text)
    host, port, ssh_user = stock.resolve_address(url, url.user)
    who = login_mod.resolve(url, prompt=False, ssh_user=ssh_user)
    scratch = f"workbench-{secrets.token_hex(6)}"
    creds = Credentials(who.user, who.password or "")
    target = stock.stock_target(url, host, port, creds, stock.join(url.path, scratch))
    plan = Plan(target, (), ("upload",), (), (), "random", 1, 1, 0, 1.0, files_dir)
    far = stock.StockFarHost(url, plan, scratch, who)
    far.connect()
    return far


def finish_warning(far: stock.StockFarHost) -> str | None:
    """finish() as the runner calls it: its WorkbenchError is the run's warning (one line); anything else fails."""
    try:
        far.finish()
    except WorkbenchError as exc:
        return one_line(exc)
    return None


@pytest.mark.parametrize("swap", ["top", "files"])
def test_ftp_scratch_swapped_for_a_link_mid_removal_leaves_the_victim_whole(
    ftpd: Ftpd, tmp_path: Path, swap: str
) -> None:
    victim = make_victim(ftpd.share)
    before = hashes(victim)
    ftpd.handler.victim, ftpd.handler.swap = str(victim), swap
    far = far_host(ftpd.url, tmp_path)
    far.info()
    fill_scratch(ftpd.share / far.scratch, victim)
    warning = finish_warning(far)
    assert ftpd.handler.swapped, "the server never swapped: the test proves nothing"
    assert hashes(victim) == before
    assert warning is not None and "left in place" in warning and "while it was being deleted" in warning, warning


def test_ftp_without_unique_facts_nested_directories_are_left_never_entered(ftpd: Ftpd, tmp_path: Path) -> None:
    # Without a unique fact nothing shows that files/ was swapped for a link after its first DELE: entering it
    # would delete the victim's files through the link.
    victim = make_victim(ftpd.share)
    before = hashes(victim)
    ftpd.handler.victim, ftpd.handler.swap, ftpd.handler.no_unique = str(victim), "files", True
    far = far_host(ftpd.url, tmp_path)
    far.info()
    scratch = ftpd.share / far.scratch
    for name in ("a.bin", "b.bin", "c.bin"):  # the victim's files/ holds the same names
        write_random(scratch / "files" / name, 100)
    warning = finish_warning(far)
    assert hashes(victim) == before
    assert warning is not None and "files on" in warning and "no MLST unique fact" in warning, warning
    assert sorted(p.name for p in scratch.iterdir()) == ["files"]  # left as it was
    assert len(list((scratch / "files").iterdir())) == 3


def test_ftp_scratch_made_as_a_link_is_never_entered(ftpd: Ftpd, tmp_path: Path) -> None:
    victim = make_victim(ftpd.share)
    before = hashes(victim)
    ftpd.handler.victim, ftpd.handler.swap = str(victim), "mkd"
    far = far_host(ftpd.url, tmp_path)
    with pytest.raises(LeftInPlace) as refused:
        far.info()  # the run stops before it copies anything through the link
    assert far.scratch in one_line(refused.value)
    assert finish_warning(far) is None  # nothing of its own to remove
    assert hashes(victim) == before
    assert (ftpd.share / far.scratch).is_symlink()  # left where the other user put it


def test_ftp_a_link_beneath_the_scratch_is_deleted_not_followed(ftpd: Ftpd, tmp_path: Path) -> None:
    victim = make_victim(ftpd.share)
    before = hashes(victim)
    far = far_host(ftpd.url, tmp_path)
    far.info()
    fill_scratch(ftpd.share / far.scratch, victim)
    (ftpd.share / far.scratch / "incoming" / "up").symlink_to(ftpd.share)  # to an ancestor: a loop
    assert finish_warning(far) is None
    assert not os.path.lexists(ftpd.share / far.scratch)
    assert hashes(victim) == before


def test_ftp_a_tree_deeper_than_the_bound_is_left_in_one_line(ftpd: Ftpd, tmp_path: Path) -> None:
    far = far_host(ftpd.url, tmp_path)
    far.info()
    deep = ftpd.share / far.scratch / Path(*["d"] * (REMOVE_MAX_DEPTH + 2))
    deep.mkdir(parents=True)
    write_random(ftpd.share / far.scratch / "files" / "a.bin", 10)
    warning = finish_warning(far)
    assert warning is not None and f"deeper than {REMOVE_MAX_DEPTH} levels" in warning
    assert not (ftpd.share / far.scratch / "files").exists()  # the rest was removed


def test_ftp_a_name_with_a_carriage_return_is_one_line(ftpd: Ftpd, tmp_path: Path) -> None:
    far = far_host(ftpd.url, tmp_path)
    far.info()
    write_random(ftpd.share / far.scratch / "odd\rname", 10)
    write_random(ftpd.share / far.scratch / "files" / "a.bin", 10)
    # ftplib reads listings with universal newlines: the name arrives as two ("odd", then "name" or a line of
    # facts that is no entry); neither is deleted, the rest is, and the warning is one line.
    warning = finish_warning(far)  # a refusal, not a link: pending, the next run tries again
    assert warning is not None and "DELE refused" in warning and "the next run against this URL tries again" in warning
    assert sorted(p.name for p in (ftpd.share / far.scratch).iterdir()) == ["odd\rname"]


def _env(tmp_path: Path, password: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORKBENCH_USER", "NETRC")}
    (tmp_path / "home").mkdir(exist_ok=True)
    env.update(
        HOME=str(tmp_path / "home"),
        WORKBENCH_HOME=str(tmp_path / "workbench-home"),
        WORKBENCH_PASSWORD=password,
        COLUMNS="220",
        PYTHONPATH=os.pathsep.join(x for x in (str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")) if x),
    )
    return env


SMALL_RUN = ("--sizes", "64K", "--small", "2x4K", "--repeat", "1", "--warmup", "0")


def test_a_whole_ftp_run_whose_scratch_the_server_made_a_link(ftpd: Ftpd, tmp_path: Path) -> None:
    victim = make_victim(ftpd.share)
    before = hashes(victim)
    ftpd.handler.victim, ftpd.handler.swap = str(victim), "mkd"
    argv = [sys.executable, "-m", "workbench", "run", ftpd.url, "--protocols", "ftp/ftplib", *SMALL_RUN]
    argv += ["--files", str(tmp_path / "files")]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=_env(tmp_path, ftpd.credentials.password),
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == ExitCode.DISK, (done.stdout[-3000:], done.stderr[-3000:])  # the folder is not safe
    assert "Traceback" not in done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if "not a real directory" in line]
    assert len(said) == 1 and "workbench-" in said[0], done.stderr
    assert hashes(victim) == before


# --- SFTP: the stock OpenSSH ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ssh_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockSite]:
    yield from stock_site(tmp_path_factory.mktemp("scratch-links"), ["ssh"])


@pytest.fixture
def sftp_share(ssh_site: StockSite, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for key, value in ssh_site.env().items():
        monkeypatch.setenv(key, value)
    share = ssh_site.root("ssh") / f"share-{secrets.token_hex(4)}"
    share.mkdir()
    yield share


def _sftp_url(site: StockSite, share: Path) -> str:
    return f"sftp://{'stock-ssh'}{share.resolve()}"


def _swap_after_first(far: stock.StockFarHost, method: str, swap: Callable[[str], None]) -> list[str]:
    """Swap on the server's disk right after the utility session's first `method` call (remove, rmdir) returns:
    the moment between two requests of the removal that a co-user's `mv; ln -s` would hit."""
    client = far._client
    sftp = client._sftp  # type: ignore[union-attr]
    real = getattr(sftp, method)
    done: list[str] = []

    def wrapped(path: str) -> Any:
        result = real(path)
        if not done:
            swap(path)
            done.append(path)
        return result

    setattr(sftp, method, wrapped)
    return done


def test_sftp_scratch_swapped_for_a_link_before_removal(ssh_site: StockSite, sftp_share: Path, tmp_path: Path) -> None:
    victim = make_victim(sftp_share)
    before = hashes(victim)
    far = far_host(_sftp_url(ssh_site, sftp_share), tmp_path)
    far.info()
    scratch = sftp_share / far.scratch
    fill_scratch(scratch, victim)
    scratch.rename(sftp_share / "moved")
    scratch.symlink_to(victim)
    warning = finish_warning(far)
    assert warning is not None and "is a link" in warning and far.scratch in warning
    assert hashes(victim) == before and scratch.is_symlink()


@pytest.mark.parametrize("swap", ["top", "files"])
def test_sftp_scratch_swapped_mid_removal(ssh_site: StockSite, sftp_share: Path, tmp_path: Path, swap: str) -> None:
    victim = make_victim(sftp_share)
    before = hashes(victim)
    far = far_host(_sftp_url(ssh_site, sftp_share), tmp_path)
    far.info()
    scratch = sftp_share / far.scratch
    fill_scratch(scratch, victim)

    def do_swap(removed: str) -> None:  # the scratch, or the directory of the file just removed
        swapped = scratch if swap == "top" else Path(removed).parent
        swapped.rename(swapped.with_name(swapped.name + ".moved"))
        swapped.symlink_to(victim if swap == "top" else victim / "files")

    happened = _swap_after_first(far, "remove", do_swap)
    warning = finish_warning(far)
    assert happened, "no removal ran: the test proves nothing"
    assert hashes(victim) == before
    assert warning is not None and "while it was being deleted" in warning, warning


def test_sftp_links_beneath_and_odd_names(ssh_site: StockSite, sftp_share: Path, tmp_path: Path) -> None:
    victim = make_victim(sftp_share)
    before = hashes(victim)
    far = far_host(_sftp_url(ssh_site, sftp_share), tmp_path)
    far.info()
    scratch = sftp_share / far.scratch
    fill_scratch(scratch, victim)
    (scratch / "incoming" / "up").symlink_to(sftp_share)
    write_random(scratch / "odd\nname", 10)
    warning = finish_warning(far)
    assert warning is not None and "not a plain name" in warning and "\\n" in warning
    assert sorted(p.name for p in scratch.iterdir()) == ["odd\nname"]
    assert hashes(victim) == before


def test_sftp_a_tree_deeper_than_the_bound(ssh_site: StockSite, sftp_share: Path, tmp_path: Path) -> None:
    far = far_host(_sftp_url(ssh_site, sftp_share), tmp_path)
    far.info()
    (sftp_share / far.scratch / Path(*["d"] * (REMOVE_MAX_DEPTH + 2))).mkdir(parents=True)
    warning = finish_warning(far)
    assert warning is not None and f"deeper than {REMOVE_MAX_DEPTH} levels" in warning


# --- SMB: the stock Samba (follow symlinks = yes, wide links = no: a link inside the share shows as a directory)


def fresh_share(
    site: StockSite, kind: str, monkeypatch: pytest.MonkeyPatch, mode: int | None = None
) -> tuple[str, Path]:
    """A new folder beneath `kind`'s served root, its URL, and the site's login in the environment."""
    for key, value in site.env().items():
        monkeypatch.setenv(key, value)
    name = f"share-{secrets.token_hex(4)}"
    folder = site.root(kind) / name
    folder.mkdir()
    if mode is not None:
        folder.chmod(mode)
    return f"{site.url(kind).rstrip('/')}/{name}", folder


@pytest.fixture(scope="module")
def smb_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockSite]:
    yield from stock_site(tmp_path_factory.mktemp("scratch-links-smb"), ["smb"])


@pytest.fixture
def smb_share(smb_site: StockSite, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    yield fresh_share(smb_site, "smb", monkeypatch, mode=0o777)


def _swap_smb_after_first_delete(far: stock.StockFarHost, swap: Callable[[str], None]) -> list[str]:
    """Swap on the server's disk right after the utility session's first delete returns (see _swap_after_first)."""
    conn = far._client._conn  # type: ignore[union-attr]
    real = conn.delete_entry
    done: list[str] = []

    def wrapped(tid: int, path: str, options: int, timeout: float) -> int:
        status = real(tid, path, options, timeout)
        if not done:
            swap(path)
            done.append(path)
        return int(status)

    conn.delete_entry = wrapped
    return done


def test_smb_scratch_swapped_for_a_link_to_a_sibling(smb_share: tuple[str, Path], tmp_path: Path) -> None:
    url, share = smb_share
    victim = make_victim(share)
    before = hashes(victim)
    far = far_host(url, tmp_path)
    far.info()
    scratch = share / far.scratch
    fill_scratch(scratch, victim)
    scratch.rename(share / "moved")
    scratch.symlink_to(victim)
    warning = finish_warning(far)
    assert warning is not None and "not a real directory" in warning and far.scratch in warning, warning
    assert hashes(victim) == before and scratch.is_symlink()


@pytest.mark.parametrize("swap", ["top", "files"])
def test_smb_scratch_swapped_mid_removal(smb_share: tuple[str, Path], tmp_path: Path, swap: str) -> None:
    url, share = smb_share
    victim = make_victim(share)
    before = hashes(victim)
    far = far_host(url, tmp_path)
    far.info()
    scratch = share / far.scratch
    for name in ("a.bin", "b.bin", "c.bin"):
        write_random(scratch / "files" / name, 100)

    def do_swap(removed: str) -> None:
        swapped = scratch if swap == "top" else scratch / "files"
        swapped.rename(swapped.with_name(swapped.name + ".moved"))
        swapped.symlink_to(victim if swap == "top" else victim / "files")

    happened = _swap_smb_after_first_delete(far, do_swap)
    warning = finish_warning(far)
    assert happened, "no removal ran: the test proves nothing"
    assert hashes(victim) == before
    assert warning is not None and "while it was being deleted" in warning, warning


def test_smb_a_link_beneath_the_scratch_is_never_entered(smb_share: tuple[str, Path], tmp_path: Path) -> None:
    url, share = smb_share
    victim = make_victim(share)
    before = hashes(victim)
    far = far_host(url, tmp_path)
    far.info()
    fill_scratch(share / far.scratch, victim)
    (share / far.scratch / "incoming" / "up").symlink_to(share)  # to an ancestor: a loop
    finish_warning(far)  # Samba may refuse to delete a link it shows as a directory: then it says so
    assert hashes(victim) == before
    assert not (share / far.scratch / "files" / "a.bin").exists()


# --- WebDAV: the stock WsgiDAV (follows no symlinks: it hides them) ------------------------------------------


@pytest.fixture(scope="module")
def dav_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockSite]:
    yield from stock_site(tmp_path_factory.mktemp("scratch-links-dav"), ["webdav"])


@pytest.fixture
def dav_share(dav_site: StockSite, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    yield fresh_share(dav_site, "webdav", monkeypatch)


@pytest.mark.parametrize("where", ["top", "nested"])
def test_webdav_scratch_swapped_for_a_link(dav_share: tuple[str, Path], tmp_path: Path, where: str) -> None:
    url, share = dav_share
    victim = make_victim(share)
    before = hashes(victim)
    far = far_host(url, tmp_path)
    far.info()
    scratch = share / far.scratch
    fill_scratch(scratch, victim)  # a link beneath it, to the victim
    if where == "top":
        scratch.rename(share / "moved")
        scratch.symlink_to(victim)
    warning = finish_warning(far)
    if where == "top":  # WsgiDAV refuses to show the link (403): the scratch is left, said in one line
        assert warning is not None and far.scratch in warning, warning
    else:  # it deletes the link beneath, never what it points to
        assert warning is None, warning
    assert hashes(victim) == before
    assert scratch.is_symlink() if where == "top" else not os.path.lexists(scratch)


def test_webdav_propfind_must_say_a_plain_collection() -> None:
    from workbench.protocols.http import is_plain_collection

    def answer(kinds: str) -> bytes:
        return (
            f'<?xml version="1.0"?><d:multistatus xmlns:d="DAV:"><d:response><d:href>/x/</d:href><d:propstat>'
            f"<d:prop><d:resourcetype>{kinds}</d:resourcetype></d:prop></d:propstat></d:response></d:multistatus>"
        ).encode()

    assert is_plain_collection(answer("<d:collection/>"))
    assert not is_plain_collection(answer(""))  # a file
    assert not is_plain_collection(answer("<d:collection/><d:redirectref/>"))  # a redirect reference
    assert not is_plain_collection(b"<not xml")


# --- a scratch made as a link on the stock Samba and the stock rsync daemon ----------------------------------
# No hook of the servers themselves: right after the utility client's mkdir returns, the new directory is moved
# aside and a link to the victim put in its place on the server's disk (tests/swap_on_mkdir.py), the moment a
# co-user's `mv; ln -s` between two requests of the run would hit.


@pytest.fixture(scope="module")
def rsync_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StockSite]:
    yield from stock_site(tmp_path_factory.mktemp("scratch-links-rsync"), ["rsync"])


@pytest.fixture
def rsync_share(rsync_site: StockSite, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    yield fresh_share(rsync_site, "rsync", monkeypatch)


@pytest.fixture(params=["smb", "rsync"])
def made_share(request: pytest.FixtureRequest) -> tuple[str, Path]:
    share: tuple[str, Path] = request.getfixturevalue(f"{request.param}_share")
    return share


def test_a_scratch_made_as_a_link_is_never_entered(
    made_share: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, share = made_share
    victim = make_victim(share)
    before = hashes(victim)
    far = far_host(url, tmp_path)
    utility = type(far._client)
    monkeypatch.setattr(utility, "mkdir", swap_on_mkdir._swapping(utility.mkdir, share, victim))
    with pytest.raises(LeftInPlace) as refused:
        far.info()  # the run stops before it copies anything through the link
    said = one_line(refused.value)
    assert far.scratch in said and "not a real directory" in said, said
    assert finish_warning(far) is None  # nothing of its own to remove
    assert hashes(victim) == before
    assert (share / far.scratch).is_symlink()  # left where the other user put it


def _utility_clients(far: stock.StockFarHost, service: str) -> list[Client]:
    """The far host's own utility session, and for SMB the other Python client (smbprotocol) logged in too."""
    assert far._client is not None
    clients: list[Client] = [far._client]
    if service == "smb":
        from workbench.protocols.smbprotocol_client import SmbprotocolClient

        other = SmbprotocolClient(far._utility_target(), far.plan.options)
        other.connect()
        clients.append(other)
    return clients


@pytest.mark.parametrize("service", ["smb", "rsync"])
def test_check_real_dir_tells_links_from_directories(
    service: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url, share = request.getfixturevalue(f"{service}_share")
    victim = make_victim(share)
    (share / "real").mkdir()
    (share / "to-sibling").symlink_to(victim)
    (share / "to-nested").symlink_to(victim / "photos")  # another parent: only its ".." tells it on Samba
    (share / "to-parent").symlink_to(share)
    write_random(share / "a-file", 10)
    far = far_host(url, tmp_path)
    for client in _utility_clients(far, service):
        try:
            client.check_real_dir("real")
            for name in ("to-sibling", "to-nested", "to-parent", "a-file"):
                with pytest.raises(LeftInPlace, match="not a real directory"):
                    client.check_real_dir(name)
        finally:
            client.close()


@pytest.mark.parametrize("service", ["smb", "rsync"])
def test_a_whole_run_whose_scratch_became_a_link(service: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url, share = request.getfixturevalue(f"{service}_share")
    victim = make_victim(share)
    before = hashes(victim)
    argv = [sys.executable, "-m", "tests.swap_on_mkdir", str(share), str(victim), "run", url, *SMALL_RUN]
    argv += ["--protocols", "smb/pysmb" if service == "smb" else "rsync/daemon", "--files", str(tmp_path / "files")]
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "workbench-home")}  # the site's HOME: its .netrc
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == ExitCode.DISK, (done.stdout[-3000:], done.stderr[-3000:])  # the folder is not safe
    assert "Traceback" not in done.stdout + done.stderr
    said = [line for line in done.stderr.splitlines() if "not a real directory" in line]
    assert len(said) == 1 and "workbench-" in said[0], done.stderr
    assert hashes(victim) == before
    links = [p.name for p in share.iterdir() if p.is_symlink()]
    assert len(links) == 1 and links[0].startswith("workbench-"), links  # swapped: the test proves something
