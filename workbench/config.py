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
from pathlib import Path
from typing import Any

from protocols import registry
from protocols.base import DEFAULT_PORTS, ClientOptions, Target
from workbench import credentials as creds_mod
from workbench import paths
from workbench import target as target_mod
from workbench.errors import NotFoundError, UsageError
from workbench.plan import DIRECTIONS, Plan
from workbench.sizes import parse_sizes, parse_small_set

_KEYS = {
    "host",
    "target",
    "credentials",
    "protocols",
    "sizes",
    "small",
    "profile",
    "directions",
    "repeat",
    "warmup",
    "tcp_duration",
    "files",
    "compress",
    "ports",
    "seed",
    "block_size",
}


def load_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise NotFoundError(f"config file {path} not found", "check the path given to --config") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"malformed config {path}: {exc}", "fix the TOML syntax") from exc
    unknown = set(data) - _KEYS
    if unknown:
        raise UsageError(
            f"unknown key(s) in {path}: {', '.join(sorted(unknown))}", f"known: {', '.join(sorted(_KEYS))}"
        )
    return data


def _directions(text: str) -> tuple[str, ...]:
    words = tuple(w.strip() for w in text.split(",") if w.strip())
    bad = [w for w in words if w not in DIRECTIONS]
    if bad or not words:
        raise UsageError(f"unknown direction {', '.join(bad) or text!r}", "use upload, download or upload,download")
    return words


def _positive_int(value: Any, name: str, minimum: int = 0) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{name} must be a whole number, not {value!r}", f"e.g. --{name} 3") from exc
    if number < minimum:
        raise UsageError(f"{name} must be at least {minimum}", f"e.g. --{name} 3")
    return number


def _profile(name: str) -> str:
    from fixtures.profiles import PROFILES

    if name not in PROFILES:
        raise UsageError(f"unknown data profile {name!r}", f"choose from {', '.join(PROFILES)}")
    return name


def build_plan(*, config: Path | None, explicit: set[str], files_dir: Path | None, **flags: Any) -> Plan:
    """Merge the config file under the flags the user typed; validate everything before any traffic."""
    values = dict(flags)
    if config is not None:
        file_values = load_toml(config)
        if "files" in file_values and files_dir is None:
            files_dir = Path(file_values.pop("files"))
        for key, value in file_values.items():
            if key not in explicit:
                values[key] = value
    ports = {**DEFAULT_PORTS, **{k: int(v) for k, v in (values.get("ports") or {}).items()}}
    cred_path = Path(values["credentials"]) if values.get("credentials") else None
    creds = creds_mod.resolve(cred_path, paths.default_credentials())
    host = values.get("host")
    target_file = Path(values["target"]) if values.get("target") else None
    if target_file is None and host is None and (paths.default_state_dir() / target_mod.TARGET_NAME).exists():
        target_file = paths.default_state_dir() / target_mod.TARGET_NAME
    if target_file is not None:
        target = target_mod.read(target_file, creds, host)
    elif host:
        target = Target(host=str(host), credentials=creds, ports=ports)
    else:
        raise UsageError("no host to copy to", "pass --host HOST (running 'workbench serve') or --target FILE")
    small = values.get("small") or []
    if isinstance(small, str):
        small = [small]
    options = ClientOptions(
        compress=bool(values.get("compress")),
        verify_host_keys=bool(values.get("verify_host_keys", True)),
        block_size=_positive_int(values.get("block_size", 1 << 20), "block_size", 4096),
    )
    return Plan(
        target=target,
        entries=tuple(registry.select(str(values.get("protocols") or "http,ftp"))),
        directions=_directions(str(values.get("directions") or "upload,download")),
        sizes=tuple(parse_sizes(str(values.get("sizes") or "16M"))) if values.get("sizes") != "" else (),
        small_sets=tuple(parse_small_set(str(s)) for s in small),
        profile=_profile(str(values.get("profile") or "random")),
        seed=_positive_int(values.get("seed", 1), "seed"),
        repeat=_positive_int(values.get("repeat", 3), "repeat", 1),
        warmup=_positive_int(values.get("warmup", 1), "warmup"),
        tcp_duration=float(values.get("tcp_duration") or 3.0),
        files_dir=files_dir or paths.data_dir() / "files",
        options=options,
    )
