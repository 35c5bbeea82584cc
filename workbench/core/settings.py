"""The settings of a run, declared once, and resolved once per command into one frozen value.

Each `Setting` below is the only declaration of one setting: its name (the config file's key; the flag is
the name with dashes, workbench.shared.validate.flag), type, default, help, unit and numeric range, which
commands use it, and what its recorded value in the run metadata's `plan` object is. From this table come
the options of `workbench run`, `fleet` and `lab` (workbench.cli.options), the TOML config file's keys and
their checks (workbench.core.config.ConfigFile), the config file's reference (docs/config.md, rendered by
`markdown_table` below) and the run metadata's `plan` object (`plan_json`).

`workbench.core.config.resolve(command, flags, config=…, typed=…)` is the one place the config file is read
and merged: a flag the user typed wins over the config file, which wins over the default. The result, a
`Settings`, is read-only, has a value for every setting (one the command does not use reads as its default),
and goes everywhere a run's settings are needed (the plan, the lab's link, a fleet's members).

To add a setting: add one `Setting(...)` to SETTINGS (name, type, default, help, expects, example; a `Range`
for a number, `commands` when not every command uses it, `flag=False` for a config-file-only key, `meta` and
`from_plan` when the run records it), then read it where it is used, as `settings["name"]` or from the Plan.
The flag, the config key, its checks and its documentation follow; `scripts/gen_docs.py` rewrites
docs/config.md (a test fails until it is rewritten), and tests/unit/test_settings_table.py checks that every
command honours the new key from a config file as from its flag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from workbench.core.first_lab import FIRST_LAB_PROTOCOLS, FIRST_LAB_SIZES
from workbench.protocols.smb_negotiated import DIALECT_NAMES
from workbench.shared.sizes import small_set_words
from workbench.shared.validate import TCP_DURATION_MAX_S, Range, flag

if TYPE_CHECKING:
    from workbench.core.plan import Plan

_SAME: Any = object()  # lab_default: the same default as run's
COMMANDS = ("run", "fleet", "lab")  # the commands whose settings come from this table
RUNS = ("run", "fleet")  # a far host named by the user: not the lab's own
# a far host named by a host, a target file or a credentials file: run only (fleet names its server by URL)
RUN = ("run",)
LAB = ("lab",)


@dataclass(frozen=True)
class Setting:
    name: str  # the config key; the flag is --name-with-dashes
    type: Any  # the flag's Python type
    default: Any  # run's default (a list option's flag default is always None: "not given")
    help: str  # the flag's help
    expects: str  # what a config file value must be, said in the one-line refusal of a wrong one ("": from range)
    example: str  # a config file line, of a value other than the default (the tests set each key this way)
    toml: Any = None  # the config file's type, when wider than the flag's (a list of words for a string)
    commands: tuple[str, ...] = COMMANDS  # the commands that use it, from a flag or the config file
    flag: bool = True  # a flag of those commands (else a config file key only)
    config: bool = True  # a config file key (else a flag only)
    lab_default: Any = _SAME
    lab_help: str | None = None
    lab_default_doc: str | None = None  # the lab's default in words, where its value is a list that changes
    meta: str | None = None  # the key in the run metadata's `plan` object, if recorded there
    from_plan: Callable[[Plan], Any] | None = None  # its value there, from the parsed Plan
    range: Range | None = None  # a number's accepted values
    unit: str = ""  # a ranged setting's unit, in the words of `expects` ("seconds")
    metavar: str | None = None  # the flag's placeholder in --help, when not its type's
    member: bool = True  # sent to a fleet's members (a path or login of this host is not)

    @property
    def flag_text(self) -> str:
        return flag(self.name)

    def applies_to(self, command: str) -> bool:
        return command in self.commands

    def default_for(self, command: str) -> Any:
        return self.lab_default if command == "lab" and self.lab_default is not _SAME else self.default

    def help_for(self, command: str) -> str:
        return self.lab_help if command == "lab" and self.lab_help else self.help

    @property
    def expects_text(self) -> str:
        return self.expects or (self.range.text(self.unit) if self.range else "")

    def check(self, value: float, source: str | None = None) -> None:
        """Refuse a number outside the setting's range; `source` names where it came from (default: its flag)."""
        if self.range is not None:
            self.range.check(value, where=source or self.flag_text, flag_text=self.flag_text, unit=self.unit)


WORDS = str | list[str]  # a config value given as "a,b" or as ["a", "b"]

WARMUP_FILES = 10  # what a warm-up of a download of many small files copies: the set's first files

SETTINGS: tuple[Setting, ...] = (
    # ---- the far host (a lab's is its own)
    Setting(
        "host",
        str | None,
        None,
        "Far host running 'workbench serve' (and 'servers up').",
        "a host name or IP address string",
        'host = "nas.local"',
        commands=RUN,
        member=False,
    ),
    Setting(
        "target",
        Path | None,
        None,
        "Target file written by the server (ports, paths).",
        "a path string to a target.json",
        'target = "/path/to/target.json"',
        toml=str,
        commands=RUN,
        member=False,
    ),
    Setting(
        "credentials",
        Path | None,
        None,
        "Credentials file written by the server (else $WORKBENCH_PASSWORD).",
        "a path string to a credentials.json",
        'credentials = "/path/to/credentials.json"',
        toml=str,
        commands=RUN,
        member=False,
    ),
    # ---- the plan: what is copied, how often
    Setting(
        "protocols",
        str,
        "http,ftp",
        "Protocols or protocol/client pairs, or 'all' (for a URL: all of its clients unless given).",
        "a comma-separated string or a list of protocols",
        'protocols = "http,sftp"',
        toml=WORDS,
        lab_default=FIRST_LAB_PROTOCOLS,  # each family's Python client and native reference (core/first_lab.py)
        lab_default_doc="each protocol's main Python client and its native reference",
        lab_help="Protocols or protocol/client pairs, or 'all' (default: each protocol's main Python client and "
        "its native reference).",
        meta="protocols",
        from_plan=lambda plan: [e.label for e in plan.entries],
    ),
    Setting(
        "sizes",
        str,
        "16M,256M",
        "File sizes to copy.",
        "a string of comma-separated sizes",
        'sizes = "4M,64M"',
        toml=WORDS,
        lab_default=FIRST_LAB_SIZES,
        meta="sizes",
        from_plan=lambda plan: list(plan.sizes),
    ),
    Setting(
        "small",
        list[str] | None,
        None,
        "Many-small-files sets, COUNTxSIZE, comma-separated or the flag repeated ('none' for none).",
        "a COUNTxSIZE string or a list of them ('none': none)",
        'small = ["1000x16K"]',
        toml=WORDS,
        # The lab copies a small-file set by default: files/s is half of the story users ask about.
        lab_default=("100x64K",),
        lab_help="Many-small-files sets, COUNTxSIZE, comma-separated or the flag repeated (default 100x64K; 'none' "
        "for none).",
        meta="small_sets",
        from_plan=lambda plan: [s.name for s in plan.small_sets],
    ),
    Setting(
        "profile",
        str,
        "random",
        "random, zero or text.",
        "one of random, zero, text",
        'profile = "text"',
        meta="profile",
        from_plan=lambda plan: plan.profile,
    ),
    Setting(
        "directions",
        str,
        "upload,download",
        "upload,download",
        "a string of upload and/or download",
        'directions = "upload"',
        toml=WORDS,
        meta="directions",
        from_plan=lambda plan: list(plan.directions),
    ),
    Setting(
        "repeat",
        int,
        3,
        "Timed copies per row.",
        "",
        "repeat = 5",
        meta="repeat",
        from_plan=lambda plan: plan.repeat,
        range=Range(1, 1000, "3", whole=True),
    ),
    Setting(
        "warmup",
        int,
        1,
        f"Untimed copies first (a download of many small files warms up with its first {WARMUP_FILES}).",
        "",
        "warmup = 2",
        meta="warmup",
        from_plan=lambda plan: plan.warmup,
        range=Range(0, 100, "1", whole=True),
    ),
    Setting(
        "tcp_duration",
        float,
        3.0,
        "Seconds per direction for the raw-TCP baseline.",
        "",
        "tcp_duration = 5.0",
        unit="seconds",
        range=Range(0, TCP_DURATION_MAX_S, "3", low_open=True),
    ),
    Setting(
        # The link's own check (one plain stream up, after a second of warm-up), apart from the run's baseline:
        # a run that needs only its rows (a quick check of a client) can skip it with 0. At most 9: with its 1 s
        # of warm-up a round stays within the meter's bound of load (workbench.lab.measure.GOODPUT_LOAD_MAX_S,
        # 10 s), so no value is cut short; at least 0.5, as a few hundredths would time the gap between two reads
        # of the stream, or none (a round with no time after its warm-up fails, and the run has no goodput).
        "goodput_duration",
        float,
        3.0,
        "Seconds of the lab link's goodput meter (one TCP stream up, after 1 s of warm-up): 0.5 to 9, "
        "or 0 to skip it.",
        "",
        "goodput_duration = 1.0",
        commands=LAB,
        unit="seconds",
        range=Range(0, 9, "3", off_below=0.5),
    ),
    Setting(
        # workbench's own probe is the baseline of a served host and of the lab; iperf3 only cross-checks it, and
        # iperf3 runs whole seconds: a run that needs only its rows (or a half-second baseline) can go without it
        "skip_iperf3",
        bool,
        False,
        "No iperf3 cross-check of the raw-TCP probe of a served host or the lab's servers (iperf3 runs whole "
        "seconds, at least 1 s each way). Refused where raw TCP is iperf3's own figure: beside --iperf3, "
        "in a stock lab.",
        "true or false",
        "skip_iperf3 = true",
    ),
    Setting(
        # A served host's own iperf3 (serve starts one) is always used; a stock server's only when named here.
        "iperf3",
        str | None,
        None,
        "URL runs: an iperf3 server for the raw-TCP baseline, [HOST:]PORT (HOST: the URL's host). "
        "Without it the run has no raw-TCP baseline and shows absolute figures.",
        "a [HOST:]PORT string",
        'iperf3 = "nas.local:5201"',
        commands=RUNS,
        member=False,  # travels in a fleet job of its own
    ),
    Setting(
        "files",
        Path | None,
        None,
        "Local test files directory.",
        "a directory path string",
        'files = "/var/tmp/workbench-files"',
        toml=str,
        commands=RUNS,
        member=False,
    ),
    Setting(
        "compress",
        bool,
        False,
        "rsync -z.",
        "true or false",
        "compress = true",
        meta="compress",
        from_plan=lambda plan: plan.options.compress,
    ),
    Setting(
        "afp_login",
        str,
        "secure",
        "AFP login: secure (DHX2, the password never in clear), cleartext (the password, at most 8 bytes, in "
        "clear on the link: only where you trust it) or guest.",
        "one of secure, cleartext, guest",
        'afp_login = "cleartext"',
        meta="afp_login",
        from_plan=lambda plan: plan.options.afp_login,
    ),
    Setting(
        "requests_in_flight",
        int,
        4,
        "Read/write requests a pipelining client (AFP) keeps outstanding, each of the block size.",
        "",
        "requests_in_flight = 8",
        meta="requests_in_flight",
        from_plan=lambda plan: plan.options.requests_in_flight,
        range=Range(1, 64, "4", whole=True),
    ),
    Setting(
        "smb_signing",
        str | None,
        None,
        "SMB clients' signing: off, on (when the server allows) or required (default: each client's own). A "
        "client that cannot do it fails its row as unavailable.",
        "one of off, on, required",
        'smb_signing = "required"',
        meta="smb_signing",
        from_plan=lambda plan: plan.options.smb_signing,
    ),
    Setting(
        "smb_encryption",
        str | None,
        None,
        "SMB clients' encryption: off or required (default: each client's own). A client that cannot do it "
        "fails its row as unavailable.",
        "one of off, required",
        'smb_encryption = "required"',
        meta="smb_encryption",
        from_plan=lambda plan: plan.options.smb_encryption,
    ),
    Setting(
        "smb_max_dialect",
        str | None,
        None,
        f"The highest SMB dialect the clients offer: {', '.join(DIALECT_NAMES[:-1])} or {DIALECT_NAMES[-1]} "
        "(default: each client's own). A client that cannot keep to it fails its row as unavailable.",
        f"one of {', '.join(DIALECT_NAMES)}",
        'smb_max_dialect = "2.1"',
        meta="smb_max_dialect",
        from_plan=lambda plan: plan.options.smb_max_dialect,
    ),
    Setting(
        "seed",
        int,
        1,
        "Same seed, same bytes, on every host.",
        "",
        "seed = 7",
        flag=False,
        meta="seed",
        from_plan=lambda plan: plan.seed,
        range=Range(0, (1 << 63) - 1, "1", whole=True),
    ),
    Setting(
        "stall_timeout",
        float,
        30.0,
        "Seconds without progress after which a copy (or a control call) fails its row; the run goes on.",
        "",
        "stall_timeout = 60",
        unit="seconds",
        range=Range(1, 3600, "30"),
    ),
    Setting(
        "block_size",
        int,
        1 << 20,
        "Application read/write size, in bytes, where the client has one.",
        "",
        "block_size = 4194304",
        flag=False,
        meta="block_size",
        from_plan=lambda plan: plan.options.block_size,
        unit="bytes",
        range=Range(4096, 64 << 20, "1048576", whole=True),
    ),
    Setting(
        # a flag only: turning verification off stays a decision typed for one run, never a file's default
        "insecure_host_keys",
        bool,
        False,
        "Do not verify SSH host keys or TLS certificates (not recommended).",
        "true or false",
        "",
        commands=RUNS,
        config=False,
    ),
    # ---- the lab's link and hosts
    Setting(
        "link",
        str,
        "wifi-ac",
        "Link preset: wifi-ac (default), gige, 10ge, wan.",
        "one of wifi-ac, gige, 10ge, wan",
        'link = "gige"',
        commands=LAB,
    ),
    Setting(
        "rate",
        str | None,
        None,
        "Link rate, e.g. 1gbit, 533mbit (overrides the preset).",
        "a rate string such as 1gbit or 533mbit",
        'rate = "1gbit"',
        commands=LAB,
    ),
    Setting(
        "rtt",
        str | None,
        None,
        "Round-trip time, e.g. 2.8ms (overrides the preset).",
        "a duration string such as 2.8ms",
        'rtt = "2.8ms"',
        commands=LAB,
    ),
    Setting(
        "loss",
        float,
        0.0,
        "Random loss probability per packet (0..1).",
        "a probability from 0 up to (not including) 1",
        "loss = 0.001",
        commands=LAB,
    ),
    Setting(
        "mtu",
        int,
        1500,
        "Link MTU.",
        "",
        "mtu = 9000",
        commands=LAB,
        range=Range(576, 65_000, "1500", whole=True),  # what the lab's TUN link accepts (lab.link.LinkSpec)
    ),
    Setting(
        "cc",
        str | None,
        None,
        "TCP congestion control in the lab (bbr, cubic).",
        "a congestion control name such as cubic or bbr",
        'cc = "cubic"',
        commands=LAB,
    ),
    Setting(
        "window_sweep",
        str | None,
        None,
        "Also sweep TCP windows, e.g. 32K,64K,128K,256K.",
        "a string of comma-separated window sizes",
        'window_sweep = "32K,64K,128K,256K"',
        commands=LAB,
    ),
    Setting(
        "rate_up",
        str | None,
        None,
        "Client-to-server rate when it differs, e.g. 100mbit.",
        "a rate string such as 100mbit",
        'rate_up = "100mbit"',
        commands=LAB,
    ),
    Setting(
        "rate_down",
        str | None,
        None,
        "Server-to-client rate when it differs.",
        "a rate string such as 1gbit",
        'rate_down = "1gbit"',
        commands=LAB,
    ),
    Setting(
        "client_window",
        str | None,
        None,
        "Cap the receive window of every connection on the client host (native clients and servers "
        "included, no co-operation needed), e.g. 64K: the window never scaled.",
        "a size string such as 64K",
        'client_window = "64K"',
        commands=LAB,
    ),
    Setting(
        "stall",
        str | None,
        None,
        "Pause the line: EVERY:DURATION[:up|down|both], e.g. 5s:300ms; ~5s:10ms for random gaps of that mean.",
        "an EVERY:DURATION[:up|down|both] string",
        'stall = "5s:300ms"',
        commands=LAB,
    ),
    Setting(
        "link_breaks",
        str | None,
        None,
        "Make the link mishandle something: 'offloaded' drops every TSO/GSO super-packet of 2+ segments and "
        "passes MTU-sized packets, as a bridge or NIC that breaks offloaded frames (the delay line is used).",
        "offloaded",
        'link_breaks = "offloaded"',
        commands=LAB,
    ),
    Setting(
        "offload",
        list[str] | None,
        None,
        "Switch offloads on a lab host's link device, read back after: HOST:NAME=on|off[,NAME=on|off], HOST "
        "client or server, NAME tso, gso, gro, lro, sg, tx_checksum or rx_checksum; e.g. server:tso=off,gso=off "
        "(repeat the flag for the other host).",
        "a HOST:NAME=on|off[,NAME=on|off] string or a list of them",
        'offload = ["server:tso=off,gso=off"]',
        toml=WORDS,
        commands=LAB,
        metavar="HOST:SET",
    ),
    Setting(
        "servers",
        str,
        "workbench",
        "The server host's servers: workbench (its own, default) or stock (plain daemons only, each measured by "
        "URL as 'run URL' does, one run each; --json/--markdown/--csv PATH write PATH-SCHEME.json/.md/.csv per "
        "run).",
        "workbench or stock",
        'servers = "stock"',
        commands=LAB,
    ),
    Setting(
        "smb_server",
        str | None,
        None,
        "How the lab's Samba treats SMB sessions, as a NAS set up that way: signing=offered|required, "
        f"encryption=offered|desired|required|off, max-dialect={'|'.join(DIALECT_NAMES)}, e.g. "
        "signing=required,max-dialect=2.0.2 (default: signing and encryption offered, SMB 3.1.1).",
        "a string of KEY=VALUE pairs such as signing=required,encryption=required,max-dialect=3.0",
        'smb_server = "signing=required"',
        commands=LAB,
    ),
    Setting(
        "server_cpu",
        float | None,
        None,
        "Cap the server host's CPU to this many cores (a cgroup CPU quota on all its processes), e.g. 0.25 for a "
        "small NAS.",
        "",
        "server_cpu = 0.25",
        commands=LAB,
        unit="cores",
        range=Range(0.01, 1024, "0.25"),  # the kernel's least quota is 1 ms per 100 ms (lab.cpucap.check_cores)
        metavar="CORES",
    ),
    Setting(
        "scenario",
        str | None,
        None,
        "Replay a published story (its link, options and figures beside the lab's): wifi-ac-64k, gige-jumbo, "
        "wireless-g, thunderbolt, nas-signing, broken-tso; 'list' lists them. --json/--markdown/--csv PATH write "
        "PATH-VARIANT.json/.md/"
        ".csv per run.",
        "a scenario name string",
        'scenario = "gige-jumbo"',
        commands=LAB,
    ),
    Setting(
        "quick",
        bool,
        False,
        "With --scenario: a reduced form (small files, fewer copies).",
        "true or false",
        "quick = true",
        commands=LAB,
    ),
    Setting(
        "clients",
        int,
        0,
        "N client hosts behind a switch, sharing the link to the server, each with an sshd: the run is "
        "'workbench fleet' over SSH (aggregate and per-client rows).",
        "a whole number of client hosts 1..8 (0: one client, no fleet)",
        "clients = 3",
        commands=LAB,
        metavar="N",
    ),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
# the link options a lab scenario sets itself (a scenario refuses them typed beside it)
LINK_SETTINGS = ("link", "rate", "rtt", "loss", "mtu", "cc", "window_sweep", "rate_up", "rate_down",
                 "client_window", "stall", "servers", "offload", "smb_server",
                 "server_cpu", "link_breaks")  # fmt: skip


def for_command(command: str, *, flags_only: bool = True) -> tuple[Setting, ...]:
    """The settings of `command` ("run", "fleet" or "lab"): its flags, or with flags_only=False every one it uses."""
    return tuple(s for s in SETTINGS if s.applies_to(command) and (s.flag or not flags_only))


def default(name: str, command: str = "run") -> Any:
    return BY_NAME[name].default_for(command)


def check(name: str, value: float, source: str | None = None) -> None:
    """Refuse a number outside setting `name`'s range (one line naming `source`, default its flag)."""
    BY_NAME[name].check(value, source)


def plan_json(plan: Plan) -> dict[str, Any]:
    """The run metadata's `plan` object: the parsed value of each recorded setting."""
    return {s.meta: s.from_plan(plan) for s in SETTINGS if s.meta and s.from_plan}


# ---------------------------------------------------------------- resolved settings
def typed_value(setting: Setting, value: Any) -> Any:
    """A config file's value in the flag's type: words joined ("a,b"), a path a Path, a small set a list."""
    if value is None:
        return None
    if setting.name == "small":
        # a list, a word each time the flag is given, or words joined by commas as --sizes takes them
        return small_set_words([value] if isinstance(value, str) else list(value))
    if setting.toml is WORDS and isinstance(value, list):
        return ",".join(str(v) for v in value)
    if setting.toml is str and isinstance(value, str) and Path in _members(setting.type):
        return Path(value) if value else None  # an empty path is no path, as an absent one
    return value


def _members(kind: Any) -> tuple[Any, ...]:
    return tuple(getattr(kind, "__args__", None) or (kind,))


@dataclass(frozen=True)
class Settings(Mapping[str, Any]):
    """Every setting one command uses, resolved: each name maps to its value (typed flag over config file
    over default). Read-only; `where(name)` says where a value came from, for the one-line refusals."""

    command: str
    by_name: Mapping[str, Any]
    typed: frozenset[str] = frozenset()  # given on the command line (or by the program that made them)
    from_file: frozenset[str] = frozenset()  # taken from the config file
    config: Path | None = None
    ports: Mapping[str, int] = field(default_factory=dict)  # the config file's [ports] (`run --host` only)

    def __getitem__(self, name: str) -> Any:
        return self.by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_name)

    def __len__(self) -> int:
        return len(self.by_name)

    @property
    def given(self) -> frozenset[str]:
        """The names the user chose, by flag or config file (the rest are defaults)."""
        return self.typed | self.from_file

    def where(self, name: str) -> str:
        """Where the value of `name` came from, as a refusal names it: its flag, or the config file's key."""
        return f"config {self.config} key '{name}'" if name in self.from_file else flag(name)

    def replace(self, **values: Any) -> Settings:
        """These values set by the program (a lab's own host, a scenario's plan), the rest as they were."""
        return Settings(
            self.command,
            MappingProxyType({**self.by_name, **values}),
            self.typed,
            self.from_file - set(values),
            self.config,
            self.ports,
        )

    def for_members(self) -> dict[str, Any]:
        """The settings a fleet's members get (as JSON): nothing of this host (its files, a target, a login)."""
        return {
            s.name: self.by_name[s.name]
            for s in for_command("fleet", flags_only=False)
            if s.member and self.by_name.get(s.name) is not None
        }


# ---------------------------------------------------------------- documentation
def _default_text(setting: Setting, command: str) -> str:
    if command == "lab" and setting.lab_default_doc:
        return setting.lab_default_doc
    value = setting.default_for(command)
    if value is None:
        return "—"
    if isinstance(value, tuple | list):
        return ", ".join(f"`{v}`" for v in value) or "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def markdown_table() -> str:
    """The config file's keys as a Markdown table, rendered from SETTINGS."""
    lines = [
        "| key | flag | commands | default | accepts | example |",
        "|---|---|---|---|---|---|",
    ]
    for s in SETTINGS:
        if not s.config:
            continue
        flag_cell = f"`{s.flag_text}`" if s.flag else "config file only"
        defaults = _default_text(s, s.commands[0])
        if "lab" in s.commands and s.commands != LAB and s.default_for("lab") != s.default:
            defaults += f" (lab: {_default_text(s, 'lab')})"
        expects = s.expects_text.replace("|", "\\|")
        lines.append(
            f"| `{s.name}` | {flag_cell} | {', '.join(s.commands)} | {defaults} | {expects} | `{s.example}` |"
        )
    return "\n".join(lines) + "\n"


def config_page() -> str:
    """docs/config.md: the config file's reference, every key from SETTINGS (scripts/gen_docs.py writes it)."""
    flag_only = ", ".join(f"`{s.flag_text}`" for s in SETTINGS if not s.config)
    return f"""# The config file

`workbench run`, `workbench fleet` and `workbench lab` read their settings from a TOML file given with
`--config FILE`. Every key is optional; a flag typed on the command line wins over the file, and the file over
the default. A key is checked for its type and range before anything starts (a wrong one is refused in one
line naming the file and the key); an unknown key is refused with the list of known ones.

One file can serve every command: a key the command does not use (a link option for `run`, say) is checked and
left alone. `host`, `target`, `credentials` and `[ports]` name a far host running `workbench serve`
(`run --host`); a run against servers given by URL (`run URL`, `fleet`) takes its server from the URL and leaves
them unused, and a fleet's members use their own `files` directory.

```toml
host = "nas.local"
protocols = "http,sftp"
sizes = "4M,64M"
small = ["1000x16K"]
repeat = 5

[ports]            # a service's port, where `workbench serve` listens elsewhere (run --host)
http = 8181
```

## Keys

{markdown_table()}
`[ports]` is a table of service = port (each 1..65535) for the services of `workbench serve` and `servers up`.

Some settings are flags only, never a file's default: {flag_only}.

This page is generated from the settings table (`workbench/core/settings.py`) by `scripts/gen_docs.py`.
"""
