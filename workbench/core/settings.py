"""The settings of a run, declared once: each one's name, type, default, help and what a config file value
must be. `workbench run` and `workbench lab` make their options from this table (workbench.cli.options),
the TOML config file its keys (workbench.core.config.ConfigFile), the lab its request, and the run's
metadata its `plan` object. Numeric ranges live in workbench.shared.validate.RANGES, by the same names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.core.first_lab import FIRST_LAB_PROTOCOLS, FIRST_LAB_SIZES
from workbench.shared.validate import range_text

if TYPE_CHECKING:
    from workbench.core.plan import Plan

_SAME: Any = object()  # lab_default: the same default as run's


@dataclass(frozen=True)
class Setting:
    name: str  # the config key; the flag is --name-with-dashes
    type: Any  # the flag's Python type
    default: Any  # run's default (a list option's flag default is always None: "not given")
    help: str  # the flag's help
    expects: str  # what a config file value must be, said in the one-line refusal of a wrong one ("": from RANGES)
    example: str  # a config file line
    toml: Any = None  # the config file's type, when wider than the flag's (a list of words for a string)
    run: bool = True  # a flag of `workbench run` (else a config file key only)
    lab: bool = True  # a flag of `workbench lab`
    lab_default: Any = _SAME
    lab_help: str | None = None
    meta: str | None = None  # the key in the run metadata's `plan` object, if recorded there
    from_plan: Callable[[Plan], Any] | None = None  # its value there, from the parsed Plan
    unit: str = ""  # a ranged setting's unit, in the words of `expects` ("seconds")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default_for(self, command: str) -> Any:
        return self.lab_default if command == "lab" and self.lab_default is not _SAME else self.default

    def help_for(self, command: str) -> str:
        return self.lab_help if command == "lab" and self.lab_help else self.help

    @property
    def expects_text(self) -> str:
        return self.expects or range_text(self.name, self.unit)


WORDS = str | list[str]  # a config value given as "a,b" or as ["a", "b"]

SETTINGS: tuple[Setting, ...] = (
    Setting(
        "host",
        str | None,
        None,
        "Far host running 'workbench serve' (and 'servers up').",
        "a host name or IP address string",
        'host = "nas.local"',
        lab=False,
    ),
    Setting(
        "target",
        Path | None,
        None,
        "Target file written by the server (ports, paths).",
        "a path string to a target.json",
        'target = "/path/to/target.json"',
        toml=str,
        lab=False,
    ),
    Setting(
        "credentials",
        Path | None,
        None,
        "Credentials file written by the server (else $WORKBENCH_PASSWORD).",
        "a path string to a credentials.json",
        'credentials = "/path/to/credentials.json"',
        toml=str,
        lab=False,
    ),
    Setting(
        "protocols",
        str,
        "http,ftp",
        "Protocols or protocol/client pairs, or 'all' (for a URL: all of its clients unless given).",
        "a comma-separated string or a list of protocols",
        'protocols = "http,ftp"',
        toml=WORDS,
        lab_default=FIRST_LAB_PROTOCOLS,  # each family's Python client and native reference (core/first_lab.py)
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
        'sizes = "16M,256M"',
        toml=WORDS,
        lab_default=FIRST_LAB_SIZES,
        meta="sizes",
        from_plan=lambda plan: list(plan.sizes),
    ),
    Setting(
        "small",
        list[str] | None,
        None,
        "Many-small-files sets, COUNTxSIZE.",
        "a COUNTxSIZE string or a list of them",
        'small = ["1000x16K"]',
        toml=WORDS,
        # The lab copies a small-file set by default: files/s is half of the story users ask about.
        lab_default=("100x64K",),
        lab_help="Many-small-files sets, COUNTxSIZE (default 100x64K; 'none' for none).",
        meta="small_sets",
        from_plan=lambda plan: [s.name for s in plan.small_sets],
    ),
    Setting(
        "profile",
        str,
        "random",
        "random, zero or text.",
        "one of random, zero, text",
        'profile = "random"',
        meta="profile",
        from_plan=lambda plan: plan.profile,
    ),
    Setting(
        "directions",
        str,
        "upload,download",
        "upload,download",
        "a string of upload and/or download",
        'directions = "upload,download"',
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
        "repeat = 3",
        meta="repeat",
        from_plan=lambda plan: plan.repeat,
    ),
    Setting(
        "warmup",
        int,
        1,
        "Untimed copies first.",
        "",
        "warmup = 1",
        meta="warmup",
        from_plan=lambda plan: plan.warmup,
    ),
    Setting(
        "tcp_duration",
        float,
        3.0,
        "Seconds per direction for the raw-TCP baseline.",
        "",
        "tcp_duration = 3.0",
        unit="seconds",
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
        lab=False,
    ),
    Setting(
        "files",
        Path | None,
        None,
        "Local test files directory.",
        "a directory path string",
        'files = "/var/tmp/workbench-files"',
        toml=str,
        lab=False,
    ),
    Setting(
        "compress",
        bool,
        False,
        "rsync -z.",
        "true or false",
        "compress = false",
        meta="compress",
        from_plan=lambda plan: plan.options.compress,
    ),
    Setting(
        "seed",
        int,
        1,
        "Same seed, same bytes, on every host.",
        "",
        "seed = 1",
        run=False,
        lab=False,
        meta="seed",
        from_plan=lambda plan: plan.seed,
    ),
    Setting(
        "stall_timeout",
        float,
        30.0,
        "Seconds without progress after which a copy (or a control call) fails its row; the run goes on.",
        "",
        "stall_timeout = 30",
        unit="seconds",
    ),
    Setting(
        "block_size",
        int,
        1 << 20,
        "Application read/write size, in bytes, where the client has one.",
        "",
        "block_size = 1048576",
        run=False,
        lab=False,
        meta="block_size",
        from_plan=lambda plan: plan.options.block_size,
        unit="bytes",
    ),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def for_command(command: str) -> tuple[Setting, ...]:
    """The settings that are flags of `command` ("run" or "lab")."""
    return tuple(s for s in SETTINGS if (s.run if command == "run" else s.lab))


def default(name: str, command: str = "run") -> Any:
    return BY_NAME[name].default_for(command)


def lab_defaults() -> dict[str, Any]:
    """Every lab setting at its default, as `workbench lab` with no flags has them."""
    return {s.name: s.default_for("lab") for s in for_command("lab")}


def plan_json(plan: Plan) -> dict[str, Any]:
    """The run metadata's `plan` object: the parsed value of each recorded setting."""
    return {s.meta: s.from_plan(plan) for s in SETTINGS if s.meta and s.from_plan}
