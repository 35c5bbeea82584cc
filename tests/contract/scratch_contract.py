"""The scratch-directory contract: mkdir, is_dir and remove_tree, the calls a run against a stock server makes
around its copies (it checks the URL's directory, makes its scratch directory beneath it, and deletes it at the
end). A ClientContract class opts into each call its client implements by also inheriting the mixin; it already
provides the fixtures used here (``make_client``, ``served_root``). What differs per server (links, the
server's root, TLS, wildcards) stays in that server's test module.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import write_random
from workbench.shared.errors import NotFoundError

BESIDE = ("scratch2", "scratc", "x")  # neighbours whose names a prefix match or a wildcard would catch


class MkdirContract:
    def test_mkdir_makes_every_missing_level_and_is_idempotent(self, make_client, served_root: Path) -> None:
        with make_client() as client:
            client.mkdir("made/one/two three")
            client.mkdir("made/one/two three")
            client.mkdir("made/one")
        assert (served_root / "made" / "one" / "two three").is_dir()


class IsDirContract:
    def test_is_dir_tells_a_directory_from_a_file_and_a_missing_path(self, make_client, served_root: Path) -> None:
        (served_root / "a dir" / "sub").mkdir(parents=True)
        write_random(served_root / "a dir" / "f.bin", 10)
        with make_client() as client:
            assert client.is_dir("a dir") and client.is_dir("a dir/sub")
            assert not client.is_dir("a dir/f.bin")
            assert not client.is_dir("no such dir")


class RemoveTreeContract:
    def test_remove_tree_deletes_the_directory_and_nothing_beside_it(self, make_client, served_root: Path) -> None:
        scratch = served_root / "scratch"
        (scratch / "files" / "deep" / "er").mkdir(parents=True)
        (scratch / "empty dir").mkdir()
        write_random(scratch / "a.bin", 1000)
        write_random(scratch / "files" / "b.bin", 70_000)
        write_random(scratch / "files" / "deep" / "er" / "c.bin", 10)
        write_random(scratch / "sub dir" / "d e.bin", 10)
        beside = {n: write_random(served_root / n / "keep.bin", 100) for n in BESIDE}
        with make_client() as client:
            client.remove_tree("scratch")
            assert not os.path.lexists(scratch)
            with pytest.raises(NotFoundError):  # a second time: nothing is there
                client.remove_tree("scratch")
        assert {n: (served_root / n / "keep.bin").read_bytes() for n in beside} == beside
        assert served_root.is_dir(), "only the named directory goes, not the one it is in"


class ScratchContract(MkdirContract, IsDirContract, RemoveTreeContract):
    """All three: a client that can check, make and delete a stock server's scratch directory."""
