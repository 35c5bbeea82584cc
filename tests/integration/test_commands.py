"""Every command's success path, run from the installed console script (`<venv>/bin/workbench`, as an install
leaves it), with its documented options.

The commands are read from the script itself (`workbench --help`), from the app it calls (`files --help`,
`servers --help`, each command's options) and from the app for the hidden ones (`fleet-member`, `servers
over-ssh`); each must be run by a README line (tests/integration/test_readme_commands.py,
tests/lab/test_readme_lab_lines.py), by an invocation here, or, for the far side of an SSH session, by a command
that starts it there through the console script. Each option of
each command's `--help` must appear in one of those invocations or in OPTION_EXEMPT with the reason. So a new
command, or a new option, without a run that succeeds fails test_every_command_and_option_is_run.

Sizes are tiny (64 KiB files, 2 × 4 KiB sets, one copy, one or two clients), against the shared `serve` fixture's
kind of server started here by the script itself, stock servers and the login sshd of tests/ssh_login.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from tests.far_host import fleet_members
from tests.helpers import free_port
from tests.integration import test_readme_commands as readme
from tests.lab import test_readme_lab_lines as lab_readme
from tests.schema_check import assert_valid_run_document
from tests.ssh_login import REMOTE_WORKBENCH, LoginHost
from tests.stock_urls import StockSite
from workbench.cli.app import app
from workbench.shared.net import port_open

SCRIPT = Path(sys.prefix) / "bin" / "workbench"
# Raw-TCP probes of a quarter second: no test here reads their figures beyond their presence, and the probe, like
# the copies, keeps both cores busy while it lasts (iperf3's cross-check still takes its whole second per direction)
PLAN = ["--sizes", "64K", "--repeat", "1", "--warmup", "0", "--tcp-duration", "0.25"]
SIDE_ADDRESS = f"127.78.{os.getpid() % 200 + 20}.11"  # `servers up`'s default ports, on an address of its own

SERVE = ["serve", "--root", "{root}", "--bind", "127.0.0.1", "--state-dir", "{state}", "--credentials", "{creds}"]
SERVE += ["--http-port", "0", "--ftp-port", "0", "--tcp-port", "0", "--iperf3-port", "0"]
SERVE_NO_IPERF3 = ["serve", "--root", "{root}", "--state-dir", "{state2}", "--http-port", "0", "--ftp-port", "0"]
SERVE_NO_IPERF3 += ["--tcp-port", "0", "--no-iperf3"]
TCP_AT = ["--port", "{tcp}", "--http-port", "{http}", "--iperf3-port", "{iperf3}", "--credentials", "{creds}"]
TCP_JSON = ["tcp", "127.0.0.1", *TCP_AT, "--duration", "0.25", "--window", "64K", "--json"]
# Windows a loopback probe fills at once: behind a 32 KiB clamp a sender's buffer took about a second to drain
TCP_SWEEP = ["tcp", "127.0.0.1", *TCP_AT, "--duration", "0.25", "--reverse", "--window-sweep", "128K,1M"]
# The SMB client's choices ride along (no SMB client is in these runs: they are parsed, planned and recorded;
# what each SMB client does with them runs in tests/contract/test_smb_negotiated.py against a real smbd)
SMB_CHOICES = ["--smb-signing", "on", "--smb-encryption", "off", "--smb-max-dialect", "3.1.1"]
RUN = ["run", "--config", "{config}", "--host", "127.0.0.1", "--target", "{state}/target.json"]
RUN += ["--credentials", "{creds}", "--protocols", "http/aiohttp", "--small", "2x4K", "--profile", "text"]
RUN += ["--directions", "upload,download", "--files", "{files}", "--compress", "--stall-timeout", "20"]
RUN += ["--db", "{db}", "--json", "{out}/run.json", "--markdown", "{out}/run.md", "--csv", "{out}/run.csv"]
RUN += ["--label", "console script", "--wide", "--insecure-host-keys", "--afp-login", "secure"]
RUN += ["--requests-in-flight", "2", "--skip-iperf3", *SMB_CHOICES, *PLAN]
REPORT = ["report", "{run_id}", "--db", "{db}", "--json", "{out}/r.json", "--markdown", "{out}/r.md"]
REPORT += ["--csv", "{out}/r.csv", "--html", "{out}/r.html", "--wide"]
HISTORY = ["history", "--db", "{db}", "--limit", "5"]
COMPARE = ["compare", "{run_id}", "{run_id}", "--db", "{db}", "--markdown", "{out}/compare.md"]
FILES_MAKE = ["files", "make", "{out}/files", "--sizes", "64K", "--small", "2x4K", "--small", "3x1K"]
FILES_MAKE += ["--profile", "text", "--seed", "7"]
SERVERS_UP = ["servers", "up", "--root", "{root}", "--bind", SIDE_ADDRESS, "--state-dir", "{state}"]
SERVERS_UP += ["--only", "serve,rsyncd"]
SERVERS_STATUS = ["servers", "status", "--state-dir", "{state}"]
SERVERS_DOWN = ["servers", "down", "--state-dir", "{state}"]
VIA_SSH = ["run", "--via-ssh", "farbox", "--remote-workbench", REMOTE_WORKBENCH, "--protocols", "http/aiohttp"]
VIA_SSH += ["--db", "{db}", *PLAN]
FLEET = ["fleet", "--clients", "{hosts}", "{url}", "--remote-workbench", REMOTE_WORKBENCH, "--iperf3", "{iperf3}"]
FLEET += ["--protocols", "http/aiohttp", "--small", "2x4K", "--profile", "zero", "--directions", "download"]
FLEET += ["--files", "{files}", "--compress", "--stall-timeout", "20", "--config", "{config}", "--db", "{db}"]
FLEET += ["--json", "{out}/f.json", "--markdown", "{out}/f.md", "--csv", "{out}/f.csv", "--label", "fleet"]
FLEET += ["--insecure-host-keys", "--wide", "--afp-login", "secure", "--requests-in-flight", "2", *SMB_CHOICES, *PLAN]

INVOCATIONS = [SERVE, SERVE_NO_IPERF3, TCP_JSON, TCP_SWEEP, RUN, REPORT, HISTORY, COMPARE, FILES_MAKE, SERVERS_UP]
INVOCATIONS += [SERVERS_STATUS, SERVERS_DOWN, VIA_SSH, FLEET]

# Hidden commands run on the far side of an SSH session, by the far host's console script: the command that
# starts them (its argv's start), run by one of the invocations above or a README line.
FAR_SIDE = {"fleet-member": ["fleet"], "servers over-ssh": ["run", "--via-ssh"]}

OPTION_EXEMPT: dict[tuple[str, str], str] = {
    ("lab", "--quick"): "a --scenario's reduced form, several labs: tests/lab/test_lab_scenarios.py",
    ("lab", "--clients"): "N client namespaces and a fleet: tests/lab/test_lab_fleet.py",
    ("lab", "--config"): "read as run's is; each key through lab: tests/unit/test_settings_table.py",
    ("lab", "--afp-login"): "read as run's is; each key through lab: tests/unit/test_settings_table.py",
    ("lab", "--requests-in-flight"): "read as run's is; each key through lab: tests/unit/test_settings_table.py",
    ("lab", "--smb-signing"): "read as run's is; each key through lab: tests/unit/test_settings_table.py",
    ("lab", "--smb-encryption"): "read as run's is; each key through lab: tests/unit/test_settings_table.py",
    ("lab", "--smb-max-dialect"): "read as run's is; each key through lab: tests/unit/test_settings_table.py",
    ("fleet", "--skip-iperf3"): "FLEET's raw TCP is its --iperf3; a served fleet's plan: test_settings_table.py",
}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_") and k != "COLUMNS"}
    env.update(HOME=str(tmp_path), WORKBENCH_HOME=str(tmp_path / "wb-home"), COLUMNS="200", **extra)
    return env


def workbench(argv: list[str], values: dict[str, str], env: dict[str, str], timeout: float = 300) -> str:
    """Run the console script with `argv` (its {names} filled from `values`); it must succeed. Its stdout."""
    proc = subprocess.run(
        [str(SCRIPT), *(a.format(**values) for a in argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, (argv[:2], proc.returncode, text[-5000:])
    assert "Traceback" not in text and "internal error" not in text, text[-5000:]
    return proc.stdout


def _command_of(argv: list[str]) -> str:
    return " ".join(argv[:2]) if argv[0] in ("files", "servers") else argv[0]


# -- the listing -----------------------------------------------------------------------------------------------------


def _script_help() -> str:
    proc = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _help(*command: str) -> str:
    """`--help` of a command or group from the app the console script calls, in this process: the same text as the
    script's (the top-level listing is checked against it), without ~0.3 s of CPU for a process per command."""
    done = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, (command, done.output)
    return done.stdout


def _panel(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"╭─ {title} "))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("╰"))
    return lines[start + 1 : end]


def listed_commands() -> set[str]:
    """Every command `--help` lists (groups opened), plus the hidden ones the app declares."""
    found: set[str] = set()
    listing = _help()
    assert _panel(_script_help(), "Commands") == _panel(listing, "Commands"), "the console script lists other commands"
    for line in _panel(listing, "Commands"):
        if m := re.match(r"^│ (\S+)\s", line):
            found.add(m.group(1))
    for group in ("files", "servers"):
        assert group in found
        found.discard(group)
        for line in _panel(_help(group), "Commands"):
            if m := re.match(r"^│ (\S+)\s", line):
                found.add(f"{group} {m.group(1)}")
    root = typer.main.get_command(app)
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        subs = getattr(cmd, "commands", None)
        if subs:
            found |= {f"{name} {sub}" for sub, c in subs.items() if c.hidden}
        elif cmd.hidden:
            found.add(name)
    return found


def listed_options(command: str) -> set[str]:
    options: set[str] = set()
    for panel in ("Options",):
        for line in _panel(_help(*command.split()), panel):
            if m := re.match(r"^│ (?:\* +|\s{0,3})(--[a-z0-9][a-z0-9-]*)", line):
                options.add(m.group(1))
    return options - {"--help"}


def _runs() -> list[list[str]]:
    """Every argv run from the console script: the invocations here, and the README's lines as the tests run them
    (after their substitutions and with their appended bounds), without the leading `workbench`."""
    runs = [list(a) for a in INVOCATIONS]
    for line in readme.RUNNABLE:
        if line.argv[0] == "workbench":
            runs.append(line.argv[1:] + readme.bounds_for(line))
    for line in lab_readme.LAB_LINES:
        runs.append(line.argv[1:] + lab_readme.bounds_for(line))
    return runs


def test_every_command_and_option_is_run() -> None:
    commands = listed_commands()
    assert {"run", "lab", "fleet", "fleet-member", "files make", "servers up", "servers over-ssh"} <= commands
    runs = _runs()
    run_commands = {_command_of(a) for a in runs}
    for command in sorted(commands):
        if command in FAR_SIDE:
            starter = FAR_SIDE[command]
            assert any(a[0] == starter[0] and set(starter) <= set(a) for a in runs), (command, starter)
            continue
        assert command in run_commands, f"`workbench {command}` has no success path run from the console script"
        used = {word.split("=")[0] for a in runs if _command_of(a) == command for word in a if word.startswith("--")}
        for option in sorted(listed_options(command)):
            if (command, option) in OPTION_EXEMPT:
                assert option not in used, f"{command} {option} runs now: drop it from OPTION_EXEMPT"
                continue
            assert option in used, f"`workbench {command} {option}` is never run from the console script"


# -- the success paths -----------------------------------------------------------------------------------------------


def _ready_line(proc: subprocess.Popen[str]) -> dict[str, int]:
    """`serve`'s first line, `serving ROOT on ADDR: http N, ftp N, ...`, as {service: port}."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("serving "), (line, proc.poll())
    return {name: int(port) for name, port in re.findall(r"(\w+) (\d+)", line.split(": ", 1)[1])}


def _stop_serve(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)  # the documented way to end it: Ctrl-C
    proc.communicate(timeout=30)
    assert proc.returncode in (0, 130), proc.returncode


def test_serve_tcp_run_report_history_compare(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"user": "bench", "password": "console-script-test-pw"}))
    creds.chmod(0o600)
    config = tmp_path / "config.toml"
    config.write_text('sizes = "1M"\nstall_timeout = 25\n')  # both given as flags too: the flags win
    values = {"root": str(root), "state": str(tmp_path / "state"), "state2": str(tmp_path / "state2")}
    values |= {"creds": str(creds), "config": str(config), "files": str(tmp_path / "files"), "out": str(out)}
    values["db"] = str(tmp_path / "runs.sqlite")
    env = _env(tmp_path)

    bare = subprocess.Popen(
        [str(SCRIPT), *(a.format(**values) for a in SERVE_NO_IPERF3)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert "iperf3" not in _ready_line(bare)
    finally:
        _stop_serve(bare)

    serve = subprocess.Popen(
        [str(SCRIPT), *(a.format(**values) for a in SERVE)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        ports = _ready_line(serve)
        assert set(ports) == {"http", "ftp", "tcp", "iperf3"}
        values |= {name: str(port) for name, port in ports.items()}

        figures = json.loads(workbench(TCP_JSON, values, env))
        assert figures, figures
        sweep = workbench(TCP_SWEEP, values, env)
        assert "128 KiB" in sweep and "1024 KiB" in sweep, sweep

        workbench(RUN, values, env)
        doc = json.loads((out / "run.json").read_text())
        assert_valid_run_document(doc)
        plan = doc["run"]["plan"]
        assert plan["sizes"] == [64 << 10] and plan["profile"] == "text" and plan["repeat"] == 1, plan
        assert all(r["error"] is None and r["verified"] for r in doc["results"]), doc["results"]
        baseline = doc["baseline"]  # --skip-iperf3: the probe's figures alone, with serve's iperf3 left alone
        assert baseline["up_bytes_per_s"] and baseline["iperf3_up_bytes_per_s"] is None, baseline
        assert (out / "run.md").read_text().startswith("#") and (out / "run.csv").read_text().startswith("run_id")
        values["run_id"] = str(doc["run"]["id"])
    finally:
        _stop_serve(serve)

    assert "http/aiohttp" in workbench(REPORT, values, env)
    assert json.loads((out / "r.json").read_text())["run"]["id"] == int(values["run_id"])
    assert "<svg" in (out / "r.html").read_text() and (out / "r.csv").exists() and (out / "r.md").exists()
    assert "console script" in workbench(HISTORY, values, env)
    workbench(COMPARE, values, env)
    assert (out / "compare.md").read_text().strip()


def test_files_make(tmp_path: Path) -> None:
    values = {"out": str(tmp_path)}
    workbench(FILES_MAKE, values, _env(tmp_path))
    manifest = json.loads((tmp_path / "files" / "manifest.json").read_text())
    assert manifest["seed"] == 7 and manifest["profile"] == "text", {k: manifest[k] for k in ("seed", "profile")}
    assert len(manifest["sets"]) == 3


def test_servers_up_status_down(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    values = {"root": str(root), "state": str(tmp_path / "state")}
    env = _env(tmp_path)
    try:
        up = workbench(SERVERS_UP, values, env)
        assert "serve" in up and "rsyncd" in up and "smbd" not in up, up
        assert port_open(SIDE_ADDRESS, 8181)  # serve's default HTTP port, on the address asked for
        status = workbench(SERVERS_STATUS, values, env)
        assert status.count("running") == 2, status
    finally:
        down = workbench(SERVERS_DOWN, values, env)
    assert down.count("stopped") == 2, down
    assert not port_open(SIDE_ADDRESS, 8181)


def test_run_via_ssh_starts_servers_over_ssh(login_host: LoginHost, tmp_path: Path) -> None:
    """`run --via-ssh` from the console script; the far side is `servers over-ssh` of the far console script."""
    values = {"db": str(tmp_path / "runs.sqlite")}
    shown = workbench(VIA_SSH, values, _env(tmp_path, WORKBENCH_SSH_CONFIG=str(login_host.ssh_config)))
    assert "http/aiohttp" in shown


def test_fleet_runs_fleet_members(site: StockSite, login_host: LoginHost, tmp_path: Path) -> None:
    """`fleet` from the console script with every option; its clients run `fleet-member` of the console script."""
    config = login_host.ssh_config.read_text()
    login_host.ssh_config.write_text(config + "Host farbox2\n" + config.split("Host farbox\n", 1)[1])
    hosts = tmp_path / "hosts"
    hosts.write_text("farbox\nfarbox2\n")
    site.start("webdav")
    iperf3_port = free_port()
    iperf3 = subprocess.Popen(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(iperf3_port)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while not port_open("127.0.0.1", iperf3_port):
            assert iperf3.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        config_file = tmp_path / "fleet.toml"
        config_file.write_text("repeat = 3\n")
        out = tmp_path / "out"
        out.mkdir()
        values = {"hosts": str(hosts), "url": site.url("webdav"), "iperf3": f"127.0.0.1:{iperf3_port}"}
        values |= {"files": str(tmp_path / "files"), "config": str(config_file), "db": str(tmp_path / "runs.sqlite")}
        values["out"] = str(out)
        env = site.env(WORKBENCH_SSH_CONFIG=str(login_host.ssh_config))
        env.pop("PYTHONPATH", None)  # the installed script, as a user runs it
        workbench(FLEET, values, env)
    finally:
        iperf3.terminate()
        iperf3.wait(timeout=10)
    doc = json.loads((out / "f.json").read_text())
    assert {r["client_host"] for r in doc["results"]} == {"all", "farbox", "farbox2"}
    assert all(r["error"] is None for r in doc["results"]), [(r["client"], r["error"]) for r in doc["results"]]
    assert doc["run"]["plan"]["repeat"] == 1 and (out / "f.md").exists() and (out / "f.csv").exists()
    assert fleet_members() == []


@pytest.fixture(autouse=True)
def _console_script_installed() -> None:
    assert SCRIPT.is_file(), f"no console script at {SCRIPT}"
