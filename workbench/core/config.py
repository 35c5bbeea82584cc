"""A run's Plan from its resolved settings (workbench.core.settings.resolve), and the TOML config file's model.

The config file's keys are the settings table's (docs/config.md lists them, with what each accepts), plus a
`[ports]` table of service ports for `run --host`, e.g.::

    host = "nas.local"
    protocols = "http,ftp,smb"
    sizes = "16M,256M"
    small = ["1000x16K"]
    repeat = 5
    [ports]            # overrides of the default service ports
    http = 8181
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
import tomllib
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from workbench.core.plan import DIRECTIONS, Plan
from workbench.core.settings import BY_NAME, SETTINGS, Setting, Settings, default, typed_value
from workbench.protocols import registry, smb_options
from workbench.protocols.afp_wire import AFP_LOGINS
from workbench.protocols.base import ClientOptions
from workbench.shared import credentials as creds_mod
from workbench.shared import paths
from workbench.shared import target as target_mod
from workbench.shared.credentials import Credentials
from workbench.shared.errors import NotFoundError, UsageError, from_os_error
from workbench.shared.sizes import parse_sizes, parse_small_set, total_bytes
from workbench.shared.target import DEFAULT_PORTS, Target
from workbench.shared.validate import check_budget, check_free_space, check_host, flag, named, parse_model

_STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)


def _doc(expected: str, example: str) -> dict[str, Any]:
    """Field metadata read back by workbench.shared.validate to say what a key expects, with an example."""
    return {"description": expected, "json_schema_extra": {"example": example}}


PORT_DOC = "a port number 1..65535"

# One optional field per known service: `[ports] htp = 1` is refused with the list of known services.
# The ignores here and on ConfigFile: pydantic types each field's type as a TypeForm, and mypy does not
# yet take a runtime union such as `int | None` for one.
PortsTable: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "PortsTable",
    __config__=_STRICT,
    **{
        name: (int | None, Field(None, ge=1, le=65_535, **_doc(PORT_DOC, f"ports = {{{name} = {port}}}")))
        for name, port in DEFAULT_PORTS.items()
    },
)


def _config_field(setting: Setting) -> tuple[Any, Any]:
    """A config key from the settings table: optional, of the type TOML carries, within validate.RANGES."""
    kind = setting.toml if setting.toml is not None else setting.type
    bounds: dict[str, Any] = {}
    if setting.range is not None:
        bounds = {"gt" if setting.range.low_open else "ge": setting.range.low, "le": setting.range.high}
    return (kind | None, Field(None, **bounds, **_doc(setting.expects_text, setting.example)))


# The TOML config file: every key optional (one per setting, plus [ports]); the types TOML carries are checked
# as they are, so `repeat = "3"` is a mistake to report, not a value to coerce.
ConfigFile: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "ConfigFile",
    __config__=_STRICT,
    **{s.name: _config_field(s) for s in SETTINGS if s.config},
    ports=(PortsTable | None, Field(None, **_doc("a table of service = port", "ports = {http = 8181}"))),
)


CONFIG_MAX_BYTES = 1 << 20  # a config of settings is a few hundred bytes; a MiB is room to spare


def _read_config_bytes(path: Path) -> bytes:
    """The config file's bytes, at most CONFIG_MAX_BYTES + 1 of them: a device (/dev/zero) never ends. Opened
    without blocking, so that a FIFO no one writes to reads as empty instead of waiting, while one that is
    written (the shell's `--config <(…)`) is read to its end."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= CONFIG_MAX_BYTES and (chunk := os.read(fd, CONFIG_MAX_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def load_toml(path: Path) -> dict[str, Any]:
    """The config file's keys, each checked for its type and range (one line naming the key if not)."""
    try:
        raw = _read_config_bytes(path)
        if len(raw) > CONFIG_MAX_BYTES:
            raise UsageError(f"config {path} is over {CONFIG_MAX_BYTES // 1024} KiB", "give a TOML file to --config")
        data = tomllib.loads(raw.decode())
    except FileNotFoundError as exc:
        raise NotFoundError(f"config file {path} not found", "check the path given to --config") from exc
    except IsADirectoryError as exc:
        raise UsageError(f"config {path} is a directory", "give a TOML file to --config") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"config {path} is not UTF-8 text", "give a TOML file to --config") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"malformed config {path}: {exc}", "fix the TOML syntax") from exc
    except OSError as exc:
        raise from_os_error(exc, f"reading config {path}") from exc
    model = parse_model(ConfigFile, data, f"config {path}", "a TOML table: host = \"nas.local\"")
    values = model.model_dump(exclude_unset=True)
    # the model's bounds cannot say every range ("0, or 0.5..9"): each key, whether this command uses it or not
    _check_ranges(values, lambda key: f"config {path} key '{key}'")
    if "ports" in values:
        values["ports"] = {k: v for k, v in values["ports"].items() if v is not None}
    return values


def resolve(
    command: str, flags: Mapping[str, Any], *, config: Path | None = None, typed: Iterable[str] = ()
) -> Settings:
    """The settings of `command`: each typed flag (`typed` names them), else the config file's key, else the value
    in `flags` (a flag's default, or one a program set), else the setting's default for the command.

    The only place the config file is read. A key of a setting `command` does not use (a link option for `run`)
    is checked like any other and then left alone. Refuses (one line) an unknown name in `flags`.
    """
    unknown = sorted(set(flags) - set(BY_NAME))
    if unknown:
        raise UsageError(f"unknown setting {', '.join(unknown)}", f"known settings: {', '.join(BY_NAME)}")
    typed_set = frozenset(typed) & set(flags)
    file_values = load_toml(config) if config is not None else {}
    ports = file_values.pop("ports", None) or {}
    values: dict[str, Any] = {}
    from_file: set[str] = set()
    for s in SETTINGS:
        if not s.applies_to(command):  # read as its default (or as a program set it), never from the file
            values[s.name] = typed_value(s, s.default_for(command) if flags.get(s.name) is None else flags[s.name])
            continue
        if s.name in typed_set:
            value = flags[s.name]
        elif s.name in file_values:
            value = file_values[s.name]
            from_file.add(s.name)
        elif flags.get(s.name) is not None:
            value = flags[s.name]
        else:
            value = s.default_for(command)
        source = f"config {config} key '{s.name}'" if s.name in from_file else flag(s.name)
        values[s.name] = named(source, partial(typed_value, s), value)
    return Settings(command, MappingProxyType(values), typed_set, frozenset(from_file), config, ports)


def _text(value: object) -> str:
    """A config value that may be a list of words (protocols = ["http", "ftp"]) as the flag's text form."""
    return ",".join(value) if isinstance(value, list) else str(value)


def _directions(text: str) -> tuple[str, ...]:
    words = tuple(w.strip() for w in text.split(",") if w.strip())
    bad = [w for w in words if w not in DIRECTIONS]
    if bad or not words:
        raise UsageError(f"unknown direction {', '.join(bad) or text!r}", "use upload, download or upload,download")
    return words


def _given(values: Mapping[str, Any], key: str) -> Any:
    """The value the user gave (even an empty one, which is then refused), else the setting's default."""
    return default(key) if values.get(key) is None else values[key]


def _protocols(text: str) -> list[registry.Entry]:
    if not text.strip(" ,"):
        raise UsageError("no protocol given", "e.g. http,ftp or all")
    return registry.select(text)


def check_profile(name: str) -> str:
    from workbench.fixtures.profiles import PROFILES

    if name not in PROFILES:
        raise UsageError(f"unknown data profile {name!r}", f"choose from {', '.join(PROFILES)}")
    return name


def check_afp_login(name: str) -> str:
    if name not in AFP_LOGINS:
        raise UsageError(f"unknown AFP login {name!r}", f"choose from {', '.join(AFP_LOGINS)}")
    return name


def _check_ranges(values: Mapping[str, Any], where: Callable[[str], str]) -> None:
    """Every setting given in `values` that declares a range, checked against it; `where(key)` names the source."""
    for setting in SETTINGS:
        if setting.range is not None and values.get(setting.name) is not None:
            setting.check(values[setting.name], source=where(setting.name))


def _optional(
    values: Mapping[str, Any], key: str, where: Callable[[str], str], check: Callable[[str], str]
) -> str | None:
    """A word setting whose absence means "the client's own default" (None), checked when given."""
    given = values.get(key)
    return None if given is None else named(where(key), check, str(given))


def _plan_inputs(values: Mapping[str, Any], where: Callable[[str], str] = flag) -> dict[str, Any]:
    """Every part of a Plan but the target, parsed and range-checked; `where(key)` names a value's source.

    A setting not in `values` (or None) takes its default from workbench.core.settings. Nothing is contacted
    or written: `run` and `lab` call this before any server, file or namespace.
    """
    _check_ranges(values, where)
    sizes_text = _text(_given(values, "sizes"))
    sizes = tuple(named(where("sizes"), parse_sizes, sizes_text)) if sizes_text.strip() else ()
    small = values.get("small") or []
    if isinstance(small, str):
        small = [small]
    small_sets = tuple(named(where("small"), parse_small_set, str(s)) for s in small if s.lower() != "none")
    if not sizes and not small_sets:
        raise UsageError("nothing to copy: no --sizes and no --small sets", "e.g. --sizes 16M or --small 1000x16K")
    check_budget(sizes, small_sets)
    options = ClientOptions(
        compress=bool(values.get("compress")),
        verify_host_keys=not values.get("insecure_host_keys"),
        block_size=int(_given(values, "block_size")),
        stall_timeout_s=float(_given(values, "stall_timeout")),
        afp_login=named(where("afp_login"), check_afp_login, str(_given(values, "afp_login"))),
        requests_in_flight=int(_given(values, "requests_in_flight")),
        smb_signing=_optional(values, "smb_signing", where, smb_options.check_signing),
        smb_encryption=_optional(values, "smb_encryption", where, smb_options.check_encryption),
        smb_max_dialect=_optional(values, "smb_max_dialect", where, smb_options.check_dialect),
    )
    return {
        "entries": tuple(named(where("protocols"), _protocols, _text(_given(values, "protocols")))),
        "directions": named(where("directions"), _directions, _text(_given(values, "directions"))),
        "sizes": sizes,
        "small_sets": small_sets,
        "profile": named(where("profile"), check_profile, str(values.get("profile") or default("profile"))),
        "seed": int(_given(values, "seed")),
        "repeat": int(_given(values, "repeat")),
        "warmup": int(_given(values, "warmup")),
        "tcp_duration": float(_given(values, "tcp_duration")),
        "options": options,
    }


def files_dir(settings: Mapping[str, Any]) -> Path:
    """The local test files directory: the `files` setting, else the one default place."""
    given = settings.get("files")
    return Path(given) if given else paths.data_dir() / paths.FILES_DIR


def draft_plan(settings: Settings) -> Callable[[Target], Plan]:
    """Everything of a Plan but its target, checked now, before any traffic (the files must fit on the disk):
    the function that makes the Plan once the target is known."""
    inputs = _plan_inputs(settings, settings.where)
    directory = files_dir(settings)
    check_free_space(directory, total_bytes(inputs["sizes"], inputs["small_sets"]))

    def complete(target: Target) -> Plan:
        # a served host's or the lab's baseline: iperf3 cross-checks the probe unless skipped (a URL run's
        # plan, url_plan, has no probe: its iperf3 is the baseline itself, named by --iperf3)
        return Plan(target=target, files_dir=directory, iperf3=not settings["skip_iperf3"], **inputs)

    return complete


# A plan whose far host is not known yet (a URL's, found at login; a fleet's, on each member) has this target.
PLACEHOLDER_TARGET = Target(host="localhost", credentials=Credentials("", ""))


def shape(settings: Settings) -> Plan:
    """The plan's shape (clients, directions, copies, files) before its target is known: checked as a run's."""
    return draft_plan(settings)(PLACEHOLDER_TARGET)


def url_plan(settings: Settings) -> Plan:
    """The plan of a run against servers given by URL: every client unless --protocols (or the config file)
    names some, no iperf3 unless --iperf3 names one; its target is set when the URL is logged in to."""
    if settings["skip_iperf3"] and settings.get("iperf3") is not None:  # run URL, a fleet and its members alike
        raise UsageError(
            f"{settings.where('skip_iperf3')} and {settings.where('iperf3')} ask for opposite things",
            "drop one: a URL run's raw-TCP baseline is the iperf3 named by --iperf3",
        )
    if settings.get("protocols") is None or "protocols" not in settings.given:
        settings = settings.replace(protocols="all")
    return dataclasses.replace(shape(settings), iperf3=False)


def build_plan(settings: Settings) -> Plan:
    """The Plan of a run against `workbench serve` (--host, --target or the state directory's target file);
    everything validated before any traffic."""
    complete = draft_plan(settings)
    where = settings.where
    host = check_host(str(settings["host"]), source=where("host")) if settings.get("host") is not None else None
    ports = {**DEFAULT_PORTS, **settings.ports}
    target_file = Path(settings["target"]) if settings.get("target") else None
    if target_file is None and host is None and (paths.default_state_dir() / paths.TARGET_FILE).exists():
        target_file = paths.default_state_dir() / paths.TARGET_FILE
    if target_file is None and not host:  # said before the credentials are looked for: they are not the problem
        raise UsageError("no host to copy to", "pass --host HOST (running 'workbench serve') or --target FILE")
    cred_path = Path(settings["credentials"]) if settings.get("credentials") else None
    creds = creds_mod.resolve(cred_path, paths.default_credentials())
    if target_file is not None:
        target = target_mod.read(target_file, creds, host)
    else:
        target = Target(host=str(host), credentials=creds, ports=ports)
    return complete(target)
