"""Build a run Plan from flags and an optional TOML config file (flags the user typed win).

Config file keys (all optional), e.g.::

    host = "nas.local"
    target = "/path/to/target.json"
    credentials = "/path/to/credentials.json"
    protocols = "http,ftp,smb"
    sizes = "16M,256M"
    small = ["1000x16K"]
    profile = "random"
    directions = "upload,download"
    repeat = 5
    warmup = 1
    tcp_duration = 3.0
    files = "/var/tmp/workbench-files"
    compress = false
    [ports]            # overrides of the default service ports
    http = 8181
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping, Set
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from workbench.core.plan import DIRECTIONS, Plan
from workbench.core.settings import BY_NAME, SETTINGS, Setting, default
from workbench.protocols import registry
from workbench.protocols.base import ClientOptions
from workbench.shared import credentials as creds_mod
from workbench.shared import paths
from workbench.shared import target as target_mod
from workbench.shared.errors import NotFoundError, UsageError
from workbench.shared.sizes import parse_sizes, parse_small_set
from workbench.shared.target import DEFAULT_PORTS, Target
from workbench.shared.validate import (
    RANGES,
    check_budget,
    check_free_space,
    check_host,
    check_range,
    flag,
    named,
    parse_model,
)

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
    if setting.name in RANGES:
        low, high, low_open, _whole, _example = RANGES[setting.name]
        bounds = {"gt" if low_open else "ge": low, "le": high}
    return (kind | None, Field(None, **bounds, **_doc(setting.expects_text, setting.example)))


# The TOML config file: every key optional (one per setting, plus [ports]); the types TOML carries are checked
# as they are, so `repeat = "3"` is a mistake to report, not a value to coerce.
ConfigFile: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "ConfigFile",
    __config__=_STRICT,
    **{s.name: _config_field(s) for s in SETTINGS},
    ports=(PortsTable | None, Field(None, **_doc("a table of service = port", "ports = {http = 8181}"))),
)


def load_toml(path: Path) -> dict[str, Any]:
    """The config file's keys, each checked for its type and range (one line naming the key if not)."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise NotFoundError(f"config file {path} not found", "check the path given to --config") from exc
    except IsADirectoryError as exc:
        raise UsageError(f"config {path} is a directory", "give a TOML file to --config") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"config {path} is not UTF-8 text", "give a TOML file to --config") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"malformed config {path}: {exc}", "fix the TOML syntax") from exc
    model = parse_model(ConfigFile, data, f"config {path}", "a TOML table: host = \"nas.local\"")
    values = model.model_dump(exclude_unset=True)
    if "ports" in values:
        values["ports"] = {k: v for k, v in values["ports"].items() if v is not None}
    return values


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


def plan_inputs(values: Mapping[str, Any], where: Callable[[str], str] = flag) -> dict[str, Any]:
    """Every part of a Plan but the target, parsed and range-checked; `where(key)` names a value's source.

    A setting not in `values` (or None) takes its default from workbench.core.settings. Nothing is contacted
    or written: `run` and `lab` call this before any server, file or namespace.
    """
    for key in RANGES:
        if key in BY_NAME and values.get(key) is not None:
            check_range(key, values[key], source=where(key))
    sizes_text = _text(_given(values, "sizes"))
    sizes = tuple(named(where("sizes"), parse_sizes, sizes_text)) if sizes_text.strip() else ()
    small = values.get("small") or []
    if isinstance(small, str):
        small = [small]
    small_sets = tuple(named(where("small"), parse_small_set, str(s)) for s in small)
    if not sizes and not small_sets:
        raise UsageError("nothing to copy: no --sizes and no --small sets", "e.g. --sizes 16M or --small 1000x16K")
    check_budget(sizes, small_sets)
    options = ClientOptions(
        compress=bool(values.get("compress")),
        verify_host_keys=bool(values.get("verify_host_keys", True)),
        block_size=int(_given(values, "block_size")),
        stall_timeout_s=float(_given(values, "stall_timeout")),
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


def draft_plan(
    values: Mapping[str, Any], *, config: Path | None = None, explicit: Set[str] = frozenset()
) -> tuple[dict[str, Any], Callable[[str], str], Callable[[Target], Plan]]:
    """Everything of a Plan but its target, checked now, before any traffic: the settings with the config
    file's values under those the user did not type (`explicit`), where each came from (for messages), and
    the function that makes the Plan once the target is known."""
    values = dict(values)
    from_file: set[str] = set()
    if config is not None:
        for key, value in load_toml(config).items():
            if key not in explicit:
                values[key] = value
                from_file.add(key)

    def where(key: str) -> str:
        return f"config {config} key '{key}'" if key in from_file else flag(key)

    inputs = plan_inputs(values, where)
    files_dir = Path(values["files"]) if values.get("files") else paths.data_dir() / "files"
    check_free_space(files_dir, sum(inputs["sizes"]) + sum(s.count * s.size for s in inputs["small_sets"]))

    def complete(target: Target) -> Plan:
        return Plan(target=target, files_dir=files_dir, **inputs)

    return values, where, complete


def build_plan(values: Mapping[str, Any], *, config: Path | None = None, explicit: Set[str] = frozenset()) -> Plan:
    """A Plan from settings by name (workbench.core.settings), with the config file's values under those the
    user did not type (`explicit`); everything validated before any traffic."""
    values, where, complete = draft_plan(values, config=config, explicit=explicit)
    host = check_host(str(values["host"]), source=where("host")) if values.get("host") is not None else None
    ports = {**DEFAULT_PORTS, **(values.get("ports") or {})}
    cred_path = Path(values["credentials"]) if values.get("credentials") else None
    creds = creds_mod.resolve(cred_path, paths.default_credentials())
    target_file = Path(values["target"]) if values.get("target") else None
    if target_file is None and host is None and (paths.default_state_dir() / paths.TARGET_FILE).exists():
        target_file = paths.default_state_dir() / paths.TARGET_FILE
    if target_file is not None:
        target = target_mod.read(target_file, creds, host)
    elif host:
        target = Target(host=host, credentials=creds, ports=ports)
    else:
        raise UsageError("no host to copy to", "pass --host HOST (running 'workbench serve') or --target FILE")
    return complete(target)
