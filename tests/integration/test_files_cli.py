"""`workbench files make DIR` through the installed console script, as a user runs it: it exits 0, writes the
files and a manifest whose hashes match them, and prints what it wrote and at what rate. A renamed report
attribute once made it end in an internal error after the files were written; only the real command, run
to its last line, sees that."""

from __future__ import annotations

import os
import re
import subprocess
import sysconfig
from pathlib import Path

from workbench.fixtures import manifest as mf

# The console script pip installed beside the interpreter running the tests (.venv/bin/workbench).
WORKBENCH = Path(sysconfig.get_path("scripts")) / "workbench"

SIZES = {"file-64K.bin": 64 << 10, "file-1M.bin": 1 << 20}
SMALL = {f"small-3x4K/f{i:06d}.bin": 4 << 10 for i in range(3)}
TOTAL_BYTES = sum(SIZES.values()) + sum(SMALL.values())


def _files_make(tmp_path: Path, directory: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "300"}
    return subprocess.run(
        [str(WORKBENCH), "files", "make", str(directory), "--sizes", "64K,1M", "--small", "3x4K"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_files_make_writes_the_files_and_the_manifest_and_prints_the_rate(tmp_path: Path) -> None:
    assert WORKBENCH.is_file(), f"no console script at {WORKBENCH}: is the package installed in this venv?"
    directory = tmp_path / "files"

    proc = _files_make(tmp_path, directory)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "internal error" not in proc.stdout + proc.stderr
    line = " ".join(proc.stdout.split())  # rich may wrap a long path
    match = re.search(r"wrote (\d+\.\d) MB, (\d+) MB/s, kept (\d+\.\d) MB valid; manifest: (\S+)", line)
    assert match, proc.stdout
    assert float(match[1]) == round(TOTAL_BYTES / 1e6, 1)
    assert float(match[3]) == 0.0
    assert Path(match[4]) == directory / mf.MANIFEST_NAME

    on_disk = {str(p.relative_to(directory)) for p in directory.rglob("*.bin")}
    assert on_disk == set(SIZES) | set(SMALL)
    manifest = mf.read(directory)
    entries = manifest.entries()
    assert {name: e.size for name, e in entries.items()} == {**SIZES, **SMALL}
    for name, entry in entries.items():
        assert (directory / name).stat().st_size == entry.size
        assert mf.hash_file(directory / name) == entry.xxh3_128, name


def test_files_make_again_keeps_the_valid_files_and_prints_no_rate(tmp_path: Path) -> None:
    directory = tmp_path / "files"
    assert _files_make(tmp_path, directory).returncode == 0

    proc = _files_make(tmp_path, directory)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = " ".join(proc.stdout.split())
    assert f"wrote 0.0 MB, kept {TOTAL_BYTES / 1e6:.1f} MB valid" in line, proc.stdout
    assert "MB/s" not in line


def test_files_make_takes_small_sets_joined_by_commas_and_refuses_an_empty_one(tmp_path: Path) -> None:
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "300"}
    directory = tmp_path / "files"
    command = [str(WORKBENCH), "files", "make", str(directory), "--sizes", "64K", "--small"]
    proc = subprocess.run([*command, "3x4K,2x8K"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    on_disk = {str(p.relative_to(directory)) for p in directory.rglob("small-*/*.bin")}
    assert on_disk == set(SMALL) | {f"small-2x8K/f{i:06d}.bin" for i in range(2)}
    refused = subprocess.run([*command, " , "], capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "error: --small: empty small-file set list (give sets like 1000x16K, or 'none' for none)"
    ]
