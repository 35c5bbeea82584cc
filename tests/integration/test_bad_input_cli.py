"""Bad input given to the installed console script, as a user types it: one line on stderr naming what was wrong,
the documented exit code, no traceback, nothing started and nothing of the input's control characters echoed."""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

import pytest

WORKBENCH = Path(sysconfig.get_path("scripts")) / "workbench"


def _workbench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home"), "COLUMNS": "300"}
    env.pop("WORKBENCH_PASSWORD", None)
    return subprocess.run([str(WORKBENCH), *args], capture_output=True, text=True, env=env, timeout=60)


def _one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code and len(lines) == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "\x1b" not in done.stdout + done.stderr
    return lines[0]


def test_a_flag_click_refuses_is_one_line_naming_the_commands_help(tmp_path: Path) -> None:
    line = _one_line(_workbench(tmp_path, "run", "--no-such-flag"), 2)
    assert line.startswith("error: No such option: --no-such-flag") and line.endswith("(see 'workbench run --help')")
    line = _one_line(_workbench(tmp_path, "lab", "--repeat", "three"), 2)
    assert "'--repeat'" in line and line.endswith("(see 'workbench lab --help')")


@pytest.mark.parametrize(
    "args",
    [
        ("serve", "--root", ""),
        ("servers", "up", "--root", ""),
        ("files", "make", ""),
        ("report", "--db", ""),
        ("run", "--host", "127.0.0.1", "--config", ""),
        ("run", "--host", "127.0.0.1", "--files", ""),
        ("fleet", "--clients", "", "--sizes", "1M"),
    ],
)
def test_an_empty_path_is_refused_not_read_as_the_working_directory(tmp_path: Path, args: tuple[str, ...]) -> None:
    line = _one_line(_workbench(tmp_path, *args), 2)
    assert "an empty path names nothing" in line
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("servers.json"))


def test_a_config_from_a_pipe_is_read_and_one_from_a_device_is_cut_short(tmp_path: Path) -> None:
    # the shell's --config <(…): a FIFO someone writes to is read to its end (its repeat = 0 is then refused)
    env = {**os.environ, "WORKBENCH_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        ["bash", "-c", f"{WORKBENCH} run --host 127.0.0.1 --config <(echo 'repeat = 0')"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert "key 'repeat'" in _one_line(done, 2)
    # a FIFO no one writes to reads as empty rather than waiting for ever: the typed --repeat 0 is then refused
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    line = _one_line(_workbench(tmp_path, "run", "--host", "127.0.0.1", "--config", str(fifo), "--repeat", "0"), 2)
    assert line.startswith("error: --repeat must be")
    line = _one_line(_workbench(tmp_path, "run", "--host", "127.0.0.1", "--config", "/dev/zero"), 2)
    assert line == "error: config /dev/zero is over 1024 KiB (give a TOML file to --config)"
    huge = tmp_path / "huge.toml"
    huge.write_text("# " + "x" * (1 << 20) + "\n")
    assert "is over 1024 KiB" in _one_line(_workbench(tmp_path, "run", "--host", "127.0.0.1", "--config", str(huge)), 2)
    line = _one_line(_workbench(tmp_path, "run", "--host", "127.0.0.1", "--config", str(tmp_path)), 2)
    assert line == f"error: config {tmp_path} is a directory (give a TOML file to --config)"


def test_a_run_with_no_host_says_so_before_looking_for_credentials(tmp_path: Path) -> None:
    line = _one_line(_workbench(tmp_path, "run", "--sizes", "1M"), 2)
    assert line == "error: no host to copy to (pass --host HOST (running 'workbench serve') or --target FILE)"


def test_an_output_path_through_a_file_is_refused_as_such(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("a file\n")
    line = _one_line(_workbench(tmp_path, "report", "--json", str(plain / "run.json")), 2)
    assert line == f"error: --json: {plain} is a file, not a directory (choose another path)"
    line = _one_line(_workbench(tmp_path, "report", "--csv", str(tmp_path)), 2)
    assert line.endswith(f"(give a file name, e.g. --csv {tmp_path / 'run.csv'})")
    line = _one_line(_workbench(tmp_path, "files", "make", str(plain / "files"), "--sizes", "1K"), 2)
    assert "a path goes through a file" in line


def test_a_state_directory_named_with_escapes_is_shown_without_them(tmp_path: Path) -> None:
    state = tmp_path / "st\x1b[31mate\x1b]0;title\x07"
    done = _workbench(tmp_path, "servers", "status", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    assert "no servers recorded in" in done.stdout and "st" in done.stdout


@pytest.mark.parametrize("host", ["[::1", "::1]", "127.0.0.1/24", "nas local"])
def test_a_host_that_is_no_name_nor_address_is_refused(tmp_path: Path, host: str) -> None:
    line = _one_line(_workbench(tmp_path, "run", "--host", host, "--sizes", "1M"), 2)
    assert line.startswith(f"error: --host must be a host name or IP address, not {host!r}")


def test_history_before_any_run_is_empty_and_creates_nothing(tmp_path: Path) -> None:
    done = _workbench(tmp_path, "history")
    assert done.returncode == 0 and done.stdout.startswith("no runs yet: no results database at"), done.stderr
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*.sqlite"))
    line = _one_line(_workbench(tmp_path, "report"), 5)
    assert line.startswith("error: no results database at")
