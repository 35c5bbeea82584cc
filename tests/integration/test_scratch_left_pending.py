"""A scratch directory a run could not remove at its end stays pending, and the next run against the URL removes it.

A real stock FTP server whose URL's directory holds the user's own files (tests/integration/
test_stranger_files_safe.py plants them) is killed mid-copy: the run ends with its rows failed and its scratch
directory left (the server is gone, nothing can remove it). Its record says so. The server is started again on
the same port and root; the next `workbench run` against the URL removes the first run's scratch directory,
says so in one line, and leaves the user's files byte-identical. A pending scratch directory that another user
swapped for a link meanwhile is left alone for good: said once, recorded, never tried again.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.integration.test_stranger_files_safe import LONG_RUN, _plant, _scratch_dirs, _start, _tree, _wait_for_copies
from tests.stock_urls import StockSite, run_workbench
from workbench.core.store import Store

SMALL_RUN = ("--sizes", "1M", "--repeat", "1", "--warmup", "0", "--directions", "upload")


def _restart(site: StockSite) -> None:
    """The FTP server again, on the port and root it had (its process group is dead already)."""
    server = site.servers["ftp"]
    server.stop()
    server.start()


def _run_whose_server_dies(site: StockSite, tmp_path: Path, data: Path, url: str) -> str:
    """A long run against the FTP server, killed mid-copy: its scratch directory's name, left there and pending."""
    proc = _start(site, tmp_path, url, *LONG_RUN)
    try:
        left = _wait_for_copies(data, proc)
        server = site.servers["ftp"]
        assert server.proc is not None
        os.killpg(server.proc.pid, signal.SIGKILL)  # mid-copy: nothing can remove the scratch directory now
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode not in (0, None), out[-3000:] + err
    assert "Traceback" not in err
    assert _scratch_dirs(data) == [left]
    with Store(tmp_path / "runs.sqlite") as store:
        first = store.load(1)
    assert first.meta.get("finished_utc") and first.meta.get("scratch_removed") is None, first.meta
    assert first.meta.get("scratch_left_alone") is None
    assert any(left in w and "next run" in w for w in first.warnings), first.warnings
    return left


def _again(site: StockSite, tmp_path: Path, url: str) -> tuple[int, list[str]]:
    """A short run against `url` from the same database: its exit code and its output's lines."""
    files = ("--files", str(tmp_path / "files"), "--db", str(tmp_path / "runs.sqlite"))
    done = run_workbench(site, "run", url, "--protocols", "ftp/ftplib", *SMALL_RUN, *files)
    assert "Traceback" not in done.stdout + done.stderr
    return done.returncode, (done.stdout + done.stderr).splitlines()


@pytest.fixture
def planted(site: StockSite) -> tuple[Path, str, dict[str, tuple[object, ...]]]:
    site.start("ftp")
    data = site.root("ftp") / "data"
    _plant(data)
    return data, site.url("ftp") + "data", _tree(data)


def test_a_scratch_left_by_a_dead_server_is_removed_by_the_next_run(
    site: StockSite, tmp_path: Path, planted: tuple[Path, str, dict[str, tuple[object, ...]]]
) -> None:
    data, url, before = planted
    left = _run_whose_server_dies(site, tmp_path, data, url)
    _restart(site)
    code, lines = _again(site, tmp_path, url)
    assert code == 0, lines[-40:]
    assert _scratch_dirs(data) == []
    assert _tree(data) == before  # the user's files beside it, byte for byte
    said = [line for line in lines if left in line]
    assert len(said) == 1 and "removed run 1's scratch directory" in said[0], said
    with Store(tmp_path / "runs.sqlite") as store:
        assert store.load(1).meta.get("scratch_removed") is True
        assert store.load(2).meta.get("scratch_removed") is True
        assert store.unfinished_runs() == []
    # settled: a third run has nothing left to remove and says nothing about it
    code, lines = _again(site, tmp_path, url)
    assert code == 0 and not [line for line in lines if left in line], lines[-40:]


def test_a_pending_scratch_swapped_for_a_link_is_left_alone_for_good(
    site: StockSite, tmp_path: Path, planted: tuple[Path, str, dict[str, tuple[object, ...]]]
) -> None:
    data, url, before = planted
    left = _run_whose_server_dies(site, tmp_path, data, url)
    # while nobody looks, another user puts a link to a folder of theirs where the scratch directory was
    shutil.rmtree(data / left)
    (data / left).symlink_to("sub")
    _restart(site)
    code, lines = _again(site, tmp_path, url)
    assert code == 0, lines[-40:]
    said = [line for line in lines if left in line]
    assert len(said) == 1 and "alone for good" in said[0], said
    assert (data / left).is_symlink() and os.readlink(data / left) == "sub"
    assert _tree(data) == before  # the folder the link leads to too
    with Store(tmp_path / "runs.sqlite") as store:
        assert store.load(1).meta.get("scratch_left_alone") and store.load(1).meta.get("scratch_removed") is None
        assert store.unfinished_runs() == []
    # never tried again: the next run says nothing of it, and the link and the folder stay as they are
    code, lines = _again(site, tmp_path, url)
    assert code == 0 and not [line for line in lines if left in line], lines[-40:]
    assert (data / left).is_symlink() and _tree(data) == before
