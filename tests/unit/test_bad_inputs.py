"""The bad-input corpus: malformed flags, config keys, target.json and credentials.json fields, one row each.

Every row goes through the real CLI entry point (`workbench.cli.app.main`) and must end with the documented
exit code and exactly one `error:` line on stderr (click's own usage errors print a usage block: for those,
exit 2 and no traceback). Nothing may start: the functions that would start a run, a server, a lab, a
probe or write test files are replaced by tripwires, and a listening socket named in every target and
config records any connection. A row that slipped past validation therefore fails on its exit code, on the
tripwire, or on the socket.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from workbench.cli import app as cli
from workbench.shared.errors import ExitCode, WorkbenchError

REPO = Path(__file__).resolve().parents[2]
USAGE, NOT_FOUND, NETWORK = int(ExitCode.USAGE), int(ExitCode.NOT_FOUND), int(ExitCode.NETWORK)
CLICK = -1  # a usage error click finds: exit 2, one line, no traceback


@dataclass(frozen=True)
class Case:
    name: str
    args: list[str]
    code: int
    needle: str = ""
    files: dict[str, str] = field(default_factory=dict)  # written under tmp_path first
    reaches_server: bool = False  # the one row whose point is what a wrong service on the port answers


RUN = ["run", "--host", "127.0.0.1", "--credentials", "{tmp}/c.json"]
CFG = ["run", "--config", "{tmp}/c.toml", "--credentials", "{tmp}/c.json"]
TGT = ["run", "--target", "{tmp}/t.json", "--credentials", "{tmp}/c.json"]
KEY = ["run", "--host", "127.0.0.1", "--credentials", "{tmp}/k.json"]
DB = ["--db", "{tmp}/runs.sqlite"]
TRIP_PORTS = "[ports]\nhttp = {trip}\ntcp = {trip}\n"


def toml(name: str, body: str, needle: str, code: int = USAGE) -> Case:
    """A config-file row: `body` plus a host (unless it sets one) and ports aimed at the tripwire (unless it
    sets its own), so a row that slipped through would knock on the tripwire, not on a real service."""
    text = body if body.lstrip().startswith("host") else 'host = "127.0.0.1"\n' + body
    if "ports" not in body:
        text += "\n" + TRIP_PORTS
    return Case(f"config {name}", CFG, code, needle, {"c.toml": text})


def target(name: str, doc: str, needle: str) -> Case:
    return Case(f"target.json {name}", TGT, USAGE, needle, {"t.json": doc})


def creds(name: str, doc: str, needle: str) -> Case:
    return Case(f"credentials {name}", KEY, USAGE, needle, {"k.json": doc})


CASES: list[Case] = [
    # ---------------------------------------------------------------- files make
    Case("files bad size", ["files", "make", "{tmp}/f", "--sizes", "12Q"], USAGE, "--sizes: malformed size '12Q'"),
    Case("files empty sizes", ["files", "make", "{tmp}/f", "--sizes", ""], USAGE, "empty size list"),
    Case("files zero size", ["files", "make", "{tmp}/f", "--sizes", "0"], USAGE, "above zero"),
    Case("files fractional bytes", ["files", "make", "{tmp}/f", "--sizes", "1.5"], USAGE, "whole number of bytes"),
    Case("files bad set", ["files", "make", "{tmp}/f", "--small", "lots"], USAGE, "malformed small-file set"),
    Case("files empty set", ["files", "make", "{tmp}/f", "--small", "0x1K"], USAGE, "has no files"),
    Case(
        "files billion files",
        ["files", "make", "{tmp}/f", "--small", "1000000000x1K"],
        USAGE,
        "at most 100,000 per set",
    ),
    Case("files over budget", ["files", "make", "{tmp}/f", "--sizes", "100G"], USAGE, "at most 64 GiB"),
    Case("files bad profile", ["files", "make", "{tmp}/f", "--profile", "spicy"], USAGE, "unknown data profile"),
    Case("files negative seed", ["files", "make", "{tmp}/f", "--seed", "-1"], USAGE, "--seed must be"),
    Case("files dir is a file", ["files", "make", "{tmp}/afile"], USAGE, "is not a directory", {"afile": "x"}),
    Case("files seed not a number", ["files", "make", "{tmp}/f", "--seed", "abc"], CLICK),
    Case("files no directory", ["files", "make"], CLICK),
    # ---------------------------------------------------------------- serve
    Case("serve http port", ["serve", "--root", "{tmp}", "--http-port", "70000"], USAGE, "--http-port must be a port"),
    Case("serve ftp port", ["serve", "--root", "{tmp}", "--ftp-port", "-1"], USAGE, "--ftp-port must be a port"),
    Case("serve tcp port", ["serve", "--root", "{tmp}", "--tcp-port", "65536"], USAGE, "--tcp-port must be a port"),
    Case("serve iperf3 port", ["serve", "--root", "{tmp}", "--iperf3-port", "-5"], USAGE, "--iperf3-port must be"),
    Case("serve bind spaces", ["serve", "--root", "{tmp}", "--bind", "x y"], USAGE, "--bind must be a host name"),
    Case("serve bind empty", ["serve", "--root", "{tmp}", "--bind", ""], USAGE, "--bind must be a host name"),
    Case("serve missing root", ["serve", "--root", "{tmp}/nope"], NOT_FOUND, "does not exist"),
    Case(
        "serve state dir is a file",
        ["serve", "--root", "{tmp}", "--state-dir", "{tmp}/afile"],
        USAGE,
        "--state-dir",
        {"afile": "x"},
    ),
    Case("serve no root", ["serve"], CLICK),
    Case("serve port not a number", ["serve", "--root", "{tmp}", "--http-port", "abc"], CLICK),
    # ---------------------------------------------------------------- tcp
    Case("tcp zero duration", ["tcp", "127.0.0.1", "--port", "{trip}", "--duration", "0"], USAGE, "--duration must"),
    Case("tcp negative duration", ["tcp", "127.0.0.1", "--duration", "-1"], USAGE, "at most 60"),
    Case("tcp long duration", ["tcp", "127.0.0.1", "--duration", "61"], USAGE, "at most 60"),
    Case("tcp nan duration", ["tcp", "127.0.0.1", "--duration", "nan"], USAGE, "--duration must"),
    Case("tcp port zero", ["tcp", "127.0.0.1", "--port", "0"], USAGE, "--port must be a port 1..65535"),
    Case("tcp port too big", ["tcp", "127.0.0.1", "--port", "70000"], USAGE, "--port must be a port"),
    Case("tcp http port zero", ["tcp", "127.0.0.1", "--http-port", "0"], USAGE, "--http-port must be a port"),
    Case("tcp tiny window", ["tcp", "127.0.0.1", "--window", "1"], USAGE, "--window 1B is out of range"),
    Case("tcp bad window", ["tcp", "127.0.0.1", "--window", "12Q"], USAGE, "--window: malformed size"),
    Case("tcp bad sweep", ["tcp", "127.0.0.1", "--window-sweep", "64K,zz"], USAGE, "--window-sweep: malformed"),
    Case("tcp endless sweep", ["tcp", "127.0.0.1", "--window-sweep", ",".join(["64K"] * 201)], USAGE, "run over"),
    Case("tcp url host", ["tcp", "http://127.0.0.1/"], USAGE, "HOST must be a host name"),
    Case("tcp host with space", ["tcp", "a b"], USAGE, "HOST must be a host name"),
    Case("tcp missing credentials", ["tcp", "127.0.0.1", "--credentials", "{tmp}/none.json"], NOT_FOUND, "not found"),
    Case("tcp no host", ["tcp"], CLICK),
    # ---------------------------------------------------------------- run: flags
    Case("run negative tcp duration", [*RUN, "--tcp-duration", "-1"], USAGE, "--tcp-duration must be"),
    Case("run zero tcp duration", [*RUN, "--tcp-duration", "0"], USAGE, "--tcp-duration must be"),
    Case("run long tcp duration", [*RUN, "--tcp-duration", "61"], USAGE, "at most 60"),
    Case("run repeat zero", [*RUN, "--repeat", "0"], USAGE, "--repeat must be a whole number 1..1000"),
    Case("run repeat huge", [*RUN, "--repeat", "1001"], USAGE, "--repeat must be"),
    Case("run warmup negative", [*RUN, "--warmup", "-1"], USAGE, "--warmup must be a whole number 0..100"),
    Case("run warmup huge", [*RUN, "--warmup", "101"], USAGE, "--warmup must be"),
    Case("run billion files", [*RUN, "--small", "1000000000x1K"], USAGE, "at most 100,000 per set"),
    Case("run over budget", [*RUN, "--sizes", "65G"], USAGE, "at most 64 GiB"),
    Case("run nothing to copy", [*RUN, "--sizes", ""], USAGE, "nothing to copy"),
    Case("run bad size", [*RUN, "--sizes", "16M,12Q"], USAGE, "--sizes: malformed size '12Q'"),
    Case("run unknown protocol", [*RUN, "--protocols", "gopher"], USAGE, "--protocols: unknown protocol"),
    Case("run empty protocols", [*RUN, "--protocols", ""], USAGE, "no protocol given"),
    Case("run bad direction", [*RUN, "--directions", "sideways"], USAGE, "--directions: unknown direction"),
    Case("run bad profile", [*RUN, "--profile", "spicy"], USAGE, "--profile: unknown data profile"),
    Case("run url host", [*RUN, "--host", "http://x/"], USAGE, "--host must be a host name"),
    Case(
        "run url skips its iperf3",
        ["run", "sftp://127.0.0.1:1/tmp", "--iperf3", "5201", "--skip-iperf3"],
        USAGE,
        "--skip-iperf3 and --iperf3 ask for opposite things",
    ),
    Case("run files is a file", [*RUN, "--files", "{tmp}/afile"], USAGE, "--files", {"afile": "x"}),
    Case("run json dir missing", [*RUN, "--json", "{tmp}/nodir/run.json"], NOT_FOUND, "does not exist"),
    Case("run json is a dir", [*RUN, "--json", "{tmp}"], USAGE, "is a directory"),
    Case("run empty label", [*RUN, "--label", ""], USAGE, "--label must be"),
    Case("run two-line label", [*RUN, "--label", "a\nb"], USAGE, "--label must be"),
    Case("run stall timeout zero", [*RUN, "--stall-timeout", "0"], USAGE, "--stall-timeout must be"),
    Case("run missing credentials", [*RUN[:3], "--credentials", "{tmp}/none.json"], NOT_FOUND, "not found"),
    Case("run missing config", [*RUN, "--config", "{tmp}/missing.toml"], NOT_FOUND, "not found"),
    Case("run missing target", [*TGT[:1], "--target", "{tmp}/none.json", *TGT[3:]], NOT_FOUND, "not found"),
    Case("run repeat not a number", [*RUN, "--repeat", "abc"], CLICK),
    Case("run unknown flag", [*RUN, "--turbo"], CLICK),
    # ---------------------------------------------------------------- run: the TOML config file
    toml("ports not a table", "ports = 8181", "key 'ports' must be a table of service = port, not 8181"),
    toml("small a number", "small = 100", "key 'small' must be a COUNTxSIZE string"),
    toml("tcp_duration text", 'tcp_duration = "3s"', "key 'tcp_duration' must be a number of seconds"),
    toml("port text", 'host = "127.0.0.1"\nports = {http = "x"}', "key 'ports.http' must be a port number"),
    toml("port zero", 'host = "127.0.0.1"\nports = {http = 0}', "key 'ports.http' must be a port number"),
    toml("port too big", 'host = "127.0.0.1"\nports = {http = 70000}', "key 'ports.http'"),
    toml("unknown service", 'host = "127.0.0.1"\nports = {gopher = 1}', "unknown key 'ports.gopher'"),
    toml("unknown key", 'colour = "blue"', "unknown key 'colour'"),
    toml("repeat zero", "repeat = 0", "key 'repeat' must be a whole number 1..1000"),
    toml("repeat boolean", "repeat = true", "key 'repeat' must be a whole number"),
    toml("warmup fraction", "warmup = 1.5", "key 'warmup' must be a whole number"),
    toml("compress text", 'compress = "yes"', "key 'compress' must be true or false"),
    toml("sizes a number", "sizes = 16", "key 'sizes' must be a string"),
    toml("sizes malformed", 'sizes = "12Q"', "key 'sizes': malformed size '12Q'"),
    toml("host a number", "host = 42", "key 'host' must be a host name"),
    toml("host a url", 'host = "http://x/"\n[ports]\nhttp = {trip}', "key 'host' must be a host name"),
    toml("protocols mixed list", 'protocols = ["http", 3]', "key 'protocols'"),
    toml("tcp_duration nan", "tcp_duration = nan", "key 'tcp_duration'"),
    toml("tcp_duration too long", "tcp_duration = 600", "key 'tcp_duration'"),
    toml("goodput_duration tiny", "goodput_duration = 0.01", "key 'goodput_duration' must be 0, or a number of"),
    toml("block_size tiny", "block_size = 1", "key 'block_size'"),
    toml("seed negative", "seed = -1", "key 'seed'"),
    toml("directions unknown", 'directions = "sideways"', "key 'directions': unknown direction"),
    toml("stall_timeout zero", "stall_timeout = 0", "key 'stall_timeout'"),
    toml("not TOML", "protocols = [unclosed", "malformed config"),
    Case("config is a directory", [*CFG[:1], "--config", "{tmp}", *CFG[3:]], USAGE, "is a directory"),
    # ---------------------------------------------------------------- run: target.json
    target("a list", "[]", "must be a JSON object, not a list"),
    target("ports a list, no host", '{"ports": [1]}', "lacks the key 'host'"),
    target("ports a list", '{"host": "127.0.0.1", "ports": [1]}', "key 'ports' must be an object"),
    target("port text", '{"host": "127.0.0.1", "ports": {"http": "x"}}', "key 'ports.http' must be a port number"),
    target("port zero", '{"host": "127.0.0.1", "ports": {"http": 0}}', "key 'ports.http' must be a port 1..65535"),
    target("unknown service", '{"host": "127.0.0.1", "ports": {"gopher": 1}}', "unknown service 'ports.gopher'"),
    target("host a number", '{"host": 5}', "key 'host' must be a host name"),
    target("host with space", '{"host": "a b"}', "key 'host' must be a host name"),
    target("unknown key", '{"host": "127.0.0.1", "extra": 1}', "unknown key 'extra'"),
    target("remote_root a number", '{"host": "127.0.0.1", "remote_root": 7}', "key 'remote_root'"),
    target("not JSON", "nope", "malformed target file"),
    # ---------------------------------------------------------------- run: credentials.json
    creds("ssh_key a number", '{"user": "u", "password": "p", "ssh_key": 42}', "key 'ssh_key' must be a path"),
    creds("a list", "[]", "must be a JSON object, not a list"),
    creds("no password", '{"user": "u"}', "lacks the key 'password'"),
    creds("password a number", '{"user": "u", "password": 123456}', "key 'password' must be"),
    creds("empty user", '{"user": "", "password": "p"}', "key 'user' must be a non-empty"),
    creds("unknown key", '{"user": "u", "password": "p", "token": "t"}', "unknown key 'token'"),
    creds("known_hosts a list", '{"user": "u", "password": "p", "known_hosts": []}', "key 'known_hosts'"),
    creds("not JSON", "{", "cannot read credentials file"),
    # ---------------------------------------------------------------- report / compare / history
    Case("report huge id", ["report", "99999999999999999999999", *DB], USAGE, "run id RUN must be"),
    Case("report negative id", ["report", *DB, "--", "-5"], USAGE, "run id RUN must be"),
    Case("report zero id", ["report", "0", *DB], USAGE, "run id RUN must be"),
    Case("report no database", ["report", "999", *DB], NOT_FOUND, "no results database at"),
    Case("report json dir missing", ["report", *DB, "--json", "{tmp}/nodir/x.json"], NOT_FOUND, "does not exist"),
    Case("report not a database", ["report", "--db", "{tmp}/notdb"], USAGE, "not a workbench results database",
         {"notdb": "this is not SQLite, but long enough to be read as a header" * 4}),
    Case("report id not a number", ["report", "abc", *DB], CLICK),
    Case("compare huge id", ["compare", "1", "99999999999999999999999", *DB], USAGE, "run id AFTER must be"),
    Case("compare zero id", ["compare", "0", "1", *DB], USAGE, "run id BEFORE must be"),
    Case("compare no database", ["compare", "1", "2", *DB], NOT_FOUND, "no results database at"),
    Case("compare one id", ["compare", "1", *DB], CLICK),
    Case("history limit zero", ["history", "--limit", "0", *DB], USAGE, "--limit must be"),
    Case("history limit negative", ["history", "--limit", "-1", *DB], USAGE, "--limit must be"),
    Case("history limit huge", ["history", "--limit", "99999999999999999999999", *DB], USAGE, "--limit must be"),
    # ---------------------------------------------------------------- servers up / down / status
    Case("servers up missing root", ["servers", "up", "--root", "{tmp}/nope"], NOT_FOUND, "does not exist"),
    Case("servers up bad bind", ["servers", "up", "--root", "{tmp}", "--bind", "x y"], USAGE, "--bind must be"),
    Case("servers up no root", ["servers", "up"], CLICK),
    Case("servers down state file", ["servers", "down", "--state-dir", "{tmp}/afile"], USAGE, "--state-dir",
         {"afile": "x"}),
    Case("servers status state file", ["servers", "status", "--state-dir", "{tmp}/afile"], USAGE, "--state-dir",
         {"afile": "x"}),
    Case("servers unknown command", ["servers", "restart"], CLICK),
    # ---------------------------------------------------------------- lab (validated before any namespace)
    Case("lab unknown preset", ["lab", "--link", "moon"], USAGE, "unknown link preset"),
    Case("lab bad rate", ["lab", "--rate", "fast"], USAGE, "--rate: malformed rate"),
    Case("lab rate too low", ["lab", "--rate", "10"], USAGE, "below 1 kbit/s"),
    Case("lab hours of copies", ["lab", "--rate", "1kbit"], USAGE, "would take at least"),
    Case("lab bad rtt", ["lab", "--rtt", "soon"], USAGE, "--rtt: malformed time"),
    Case("lab rtt too long", ["lab", "--rtt", "20000ms"], USAGE, "RTT"),
    Case("lab loss one", ["lab", "--loss", "1"], USAGE, "--loss must be a probability"),
    Case("lab loss negative", ["lab", "--loss", "-0.1"], USAGE, "--loss must be a probability"),
    Case("lab loss nan", ["lab", "--loss", "nan"], USAGE, "--loss must be a probability"),
    Case("lab mtu small", ["lab", "--mtu", "100"], USAGE, "--mtu must be a whole number 576..65000"),
    Case("lab mtu big", ["lab", "--mtu", "70000"], USAGE, "--mtu must be"),
    Case("lab unknown cc", ["lab", "--cc", "nope"], USAGE, "--cc 'nope'"),
    Case("lab repeat zero", ["lab", "--repeat", "0"], USAGE, "--repeat must be"),
    Case("lab warmup huge", ["lab", "--warmup", "101"], USAGE, "--warmup must be"),
    Case("lab tcp duration zero", ["lab", "--tcp-duration", "0"], USAGE, "--tcp-duration must be"),
    Case("lab goodput tiny", ["lab", "--goodput-duration", "0.01"], USAGE, "--goodput-duration must be 0, or a"),
    Case("lab goodput past its bound", ["lab", "--goodput-duration", "30"], USAGE, "--goodput-duration must be"),
    Case("lab billion files", ["lab", "--small", "1000000000x1K"], USAGE, "at most 100,000 per set"),
    Case("lab bad size", ["lab", "--sizes", "12Q"], USAGE, "--sizes: malformed size"),
    Case("lab unknown protocol", ["lab", "--protocols", "gopher"], USAGE, "--protocols: unknown protocol"),
    Case("lab bad direction", ["lab", "--directions", "sideways"], USAGE, "--directions: unknown direction"),
    Case("lab tiny sweep window", ["lab", "--window-sweep", "1K"], USAGE, "--window-sweep 1K is out of range"),
    Case("lab empty label", ["lab", "--label", ""], USAGE, "--label must be"),
    Case("lab stock skips iperf3", ["lab", "--servers", "stock", "--skip-iperf3"], USAGE, "iperf3's own figure"),
    Case("lab json dir missing", ["lab", "--json", "{tmp}/nodir/x.json"], NOT_FOUND, "does not exist"),
    Case("lab mtu not a number", ["lab", "--mtu", "abc"], CLICK),
    # ---------------------------------------------------------------- doctor
    Case("doctor unknown flag", ["doctor", "--bogus"], CLICK),
    Case("doctor extra argument", ["doctor", "now"], CLICK),
    # ---------------------------------------------------------------- a wrong service on serve's port
    Case(
        "ssh banner on the http port",
        CFG,
        NETWORK,
        "did not answer as workbench serve",
        {"c.toml": 'host = "127.0.0.1"\n[ports]\nhttp = {banner}\ntcp = {trip}\n'},
        reaches_server=True,
    ),
]


class Tripwire(WorkbenchError):
    """Raised by whatever would start work: a row that reaches it passed validation it should have failed."""


def tripwire_for(what: str) -> Callable[..., None]:
    def fire(*args: object, **kwargs: object) -> None:
        raise Tripwire(f"TRIPWIRE: {what} was started")

    return fire


@dataclass
class Listener:
    """A loopback listener that counts connections (the tripwire) or answers like sshd (the wrong service)."""

    banner: bytes | None
    sock: socket.socket = field(init=False)
    accepted: int = 0

    def __post_init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            with conn:
                if self.banner is not None:
                    conn.sendall(self.banner)
                    conn.settimeout(2.0)
                    with contextlib.suppress(OSError):
                        conn.recv(65536)

    def close(self) -> None:
        self._stop.set()
        # Wakes the accept() at once (it fails), instead of at its next 0.2 s poll: 160 cases each waited for it.
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def listeners() -> Iterator[tuple[Listener, Listener]]:
    trip, banner = Listener(banner=None), Listener(banner=b"SSH-2.0-OpenSSH_9.2p1 Debian\r\n")
    try:
        yield trip, banner
    finally:
        trip.close()
        banner.close()


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private home for every path workbench might touch, and tripwires in place of anything that starts work."""
    home = tmp_path / "home"
    for var in ("HOME", "XDG_DATA_HOME", "WORKBENCH_HOME"):
        monkeypatch.setenv(var, str(home))
    for var in ("WORKBENCH_PASSWORD", "WORKBENCH_USER", "WORKBENCH_DEBUG", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)

    tripwire = tripwire_for
    import workbench.core.baseline
    import workbench.fixtures.generate
    import workbench.lab
    import workbench.server.daemons.supervisor
    import workbench.server.serve

    monkeypatch.setattr(workbench.fixtures.generate, "make", tripwire("files make"))
    monkeypatch.setattr(workbench.server.serve, "serve", tripwire("serve"))
    monkeypatch.setattr(workbench.server.daemons.supervisor, "up", tripwire("servers up"))
    monkeypatch.setattr(workbench.core.baseline, "measure_tcp", tripwire("the tcp probe"))
    monkeypatch.setattr(workbench.lab, "check_available", tripwire("a lab (check_available)"))
    monkeypatch.setattr(workbench.lab, "Lab", tripwire("a lab (namespaces)"))
    monkeypatch.setattr(workbench.lab, "cleanup_stale", tripwire("a lab (cleanup)"))
    return tmp_path


def run_main(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """workbench.cli.app.main as the console script runs it; main() installs a SIGTERM handler, restored here."""
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as info:
            cli.main(args)
    finally:
        signal.signal(signal.SIGTERM, previous)
    out, err = capsys.readouterr()
    code = info.value.code
    return (int(code) if code is not None else 0), out, err


def _fill(text: str, tmp: Path, trip: int, banner: int) -> str:
    return text.replace("{tmp}", str(tmp)).replace("{trip}", str(trip)).replace("{banner}", str(banner))


def test_the_corpus_is_large_and_covers_every_command() -> None:
    assert len(CASES) >= 60
    assert len({c.name for c in CASES}) == len(CASES)
    commands = {c.args[0] if c.args[0] not in ("files", "servers") else " ".join(c.args[:2]) for c in CASES}
    for command in ("files make", "serve", "tcp", "run", "report", "compare", "history", "lab", "doctor"):
        assert command in commands, command
    assert {"servers up", "servers down", "servers status"} <= commands


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_refused_in_one_line(
    case: Case,
    isolated: Path,
    listeners: tuple[Listener, Listener],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tmp = isolated
    trip, banner = listeners
    (tmp / "c.json").write_text(json.dumps({"user": "u", "password": "p"}))
    for name, text in case.files.items():
        (tmp / name).write_text(_fill(text, tmp, trip.port, banner.port))
    if not case.reaches_server:
        import workbench.core.runner

        monkeypatch.setattr(workbench.core.runner, "execute", tripwire_for("a run"))
    code, out, err = run_main([_fill(a, tmp, trip.port, banner.port) for a in case.args], capsys)

    everything = out + err
    assert "Traceback" not in everything and "internal error" not in everything, everything
    assert "TRIPWIRE" not in everything, everything
    assert trip.accepted == 0, f"a server was contacted: {everything}"
    lines = [line for line in err.splitlines() if line.strip()]
    if case.code == CLICK:  # what click refuses is one line too
        assert code == ExitCode.USAGE, (code, everything)
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        return
    assert code == case.code, (code, everything)
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), lines[0]
    assert case.needle in lines[0], lines[0]
    assert "123456" not in everything  # a password is never echoed, even a mistyped one


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_test_files_larger_than_the_free_disk_are_refused_before_writing(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = isolated / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], check=True)
    try:
        code, out, err = run_main(["files", "make", str(small / "f"), "--sizes", "4M"], capsys)
        assert code == ExitCode.DISK, (code, out, err)
        assert err.startswith("error: the test files would leave the disk full: they need 4.2 MB"), err
        assert "MB free" in err, err
        assert len(err.strip().splitlines()) == 1 and "TRIPWIRE" not in err
        assert not (small / "f").exists()  # refused before anything was written
        code, out, err = run_main(
            [*RUN[:3], "--credentials", str(isolated / "c.json"), "--files", str(small / "f"), "--sizes", "4M"],
            capsys,
        )
        assert code == ExitCode.DISK and "MB free" in err and "--files" in err, (code, err)
    finally:
        subprocess.run(["umount", str(small)], check=True)


SUBPROCESS_CASES = [
    (["report", "99999999999999999999999", "--db", "{tmp}/runs.sqlite"], USAGE, "run id RUN must be"),
    (["run", "--config", "{tmp}/c.toml", "--credentials", "{tmp}/c.json"], USAGE, "key 'ports' must be a table"),
    (["run", "--host", "127.0.0.1", "--credentials", "{tmp}/c.json", "--small", "1000000000x1K"], USAGE, "100,000"),
    (["tcp", "127.0.0.1", "--duration", "-1"], USAGE, "--duration must be"),
    (["lab", "--mtu", "100"], USAGE, "--mtu must be"),
]


@pytest.mark.parametrize(
    ("args", "code", "needle"), SUBPROCESS_CASES, ids=[" ".join(c[0][:2]) for c in SUBPROCESS_CASES]
)
def test_the_installed_console_script_says_one_line(tmp_path: Path, args: list[str], code: int, needle: str) -> None:
    """The same through `.venv/bin/workbench` (rich's real stderr, the real exit status)."""
    (tmp_path / "c.json").write_text(json.dumps({"user": "u", "password": "p"}))
    (tmp_path / "c.toml").write_text("ports = 8181\n")
    script = Path(sys.executable).parent / "workbench"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "workbench"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_") and k != "COLUMNS"}
    env.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path), WORKBENCH_HOME=str(tmp_path / "home"))
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(REPO), env.get("PYTHONPATH")) if x)
    proc = subprocess.run(
        [*command, *(a.replace("{tmp}", str(tmp_path)) for a in args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout and "internal error" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr


def test_a_message_quoting_brackets_prints_them(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Errors quote user input; text such as '[bold]' or '[ports]' must be printed, never read as markup."""
    missing = isolated / "[bold]conf[/bold].toml"
    code, _, err = run_main(["run", "--host", "127.0.0.1", "--config", str(missing)], capsys)
    assert code == ExitCode.NOT_FOUND
    assert "[bold]conf[/bold].toml" in err


@pytest.mark.parametrize(("args", "needle"), [(["report", "999"], "no run 999"), (["compare", "1", "2"], "no run 1")])
def test_a_run_id_missing_from_the_database_is_not_found(
    args: list[str], needle: str, isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from workbench.core.store import Store

    db = isolated / "runs.sqlite"
    Store(db).close()  # a workbench results database with no runs in it
    before = db.read_bytes()
    code, _, err = run_main([*args, "--db", str(db)], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == ExitCode.NOT_FOUND and len(lines) == 1 and needle in lines[0], err
    assert db.read_bytes() == before  # read, never written
