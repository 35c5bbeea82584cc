"""Input validation shared by the CLI, the TOML config, target.json and credentials.json.

Every refusal is one line naming the key (or flag), what was expected and an example, raised as a
UsageError before anything starts: a bad input must never reach a server, a namespace or the disk.
File formats are pydantic models (strict: TOML and JSON already carry types, so `ports = 8181` or
`tcp_duration = "3s"` is a mistake to report, not a value to coerce); a ValidationError is translated
here into a UsageError and never shown as a traceback.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import shutil
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Union, get_args, get_origin

from workbench.shared.errors import DiskError, UsageError
from workbench.shared.jsontypes import JSONValue
from workbench.shared.sizes import SmallSet, total_bytes

if TYPE_CHECKING:  # pydantic loads with its caller's models, not in every command that only checks a flag
    from pydantic import BaseModel, ValidationError

_In = TypeVar("_In")
_Out = TypeVar("_Out")
_Model = TypeVar("_Model", bound="BaseModel")

# Limits on what one run or `files make` may ask for. They catch typos (1000000000x1K) before a billion
# files are written; a real test of a larger volume can run several sets or runs.
MAX_FILES_PER_SET = 100_000
MAX_TOTAL_BYTES = 64 << 30  # 64 GiB of test files per run
MAX_PORT = 65_535
# A plan whose copies alone would take longer than this at the path's rate (the lab's link rate, or a run's
# measured raw TCP) is a typo more often than a test: 1 GB files at 1 kbit/s. Refused before the first copy.
MAX_COPY_ESTIMATE_S = 4 * 3600
MAX_RUN_ID = (1 << 63) - 1  # SQLite's INTEGER: larger ids overflow inside the driver

# The TCP probe's hard limits, which its server enforces whatever a client asks; checked here first.
MAX_PROBE_DURATION_S = 60.0
MIN_WINDOW_BYTES = 2048  # the kernel will not clamp below about one small segment
TCP_DURATION_MAX_S = MAX_PROBE_DURATION_S


@dataclass(frozen=True)
class Range:
    """The numbers a flag or config key accepts, said the same way wherever the value came from."""

    low: float
    high: float
    example: str
    low_open: bool = False  # `low` itself excluded
    whole: bool = False  # whole numbers only
    off_below: float | None = None  # `low` itself (an "off"), else at least this: nothing in between

    def text(self, unit: str = "") -> str:
        """What the range accepts, in words: 'a whole number 1..1000', 'a number of seconds 1..3600'."""
        kind = ("a whole number" if self.whole else "a number") + (f" of {unit}" if unit else "")
        if self.off_below is not None:
            return f"{self.low:g}, or {kind} {self.off_below:g}..{self.high:g}"
        if self.low_open:
            return f"{kind} above {self.low:g} and at most {self.high:g}"
        return f"{kind} {int(self.low)}..{int(self.high)}" if self.whole else f"{kind} {self.low:g}..{self.high:g}"

    def check(self, value: float, *, where: str, flag_text: str, unit: str = "") -> None:
        """Refuse a number outside the range; `where` names its source, `flag_text` the flag of the example."""
        below = value <= self.low if self.low_open else value < self.low
        below = below or (self.off_below is not None and self.low < value < self.off_below)
        if math.isfinite(value) and not below and value <= self.high and (not self.whole or value == int(value)):
            return
        raise UsageError(f"{where} must be {self.text(unit)}, not {value!r}", f"e.g. {flag_text} {self.example}")


# The ranges of numeric flags that are not settings of a run (those carry theirs: workbench.core.settings).
RANGES: dict[str, Range] = {
    "duration": Range(0, TCP_DURATION_MAX_S, "5", low_open=True),
    "limit": Range(1, 1_000_000, "30", whole=True),
}


def flag(name: str) -> str:
    """The flag of a setting or option name: the one place a name becomes --its-flag."""
    return "--" + name.replace("_", "-")


def check_range(name: str, value: float, *, source: str | None = None) -> None:
    """Refuse a number outside RANGES[name]; `source` names where it came from (default: the flag)."""
    RANGES[name].check(value, where=source or flag(name), flag_text=flag(name))


def check_loss(value: float, source: str = "--loss") -> None:
    """A loss probability: 0 <= loss < 1 (1 would drop every packet and the lab could not even start)."""
    if not (math.isfinite(value) and 0 <= value < 1):
        raise UsageError(
            f"{source} must be a probability from 0 up to (not including) 1, not {value!r}", "e.g. --loss 0.001"
        )


def named(where: str, parse: Callable[[_In], _Out], value: _In) -> _Out:
    """Run a parser, putting the flag or config key that supplied the value at the front of its message."""
    try:
        return parse(value)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc.message}", exc.hint) from exc


def check_port(name: str, value: int, *, allow_zero: bool, example: int = 8181) -> None:
    low = 0 if allow_zero else 1
    if not low <= value <= MAX_PORT:
        extra = " (0: any free port)" if allow_zero else ""
        raise UsageError(
            f"{flag(name)} must be a port {low}..{MAX_PORT}{extra}, not {value}", f"e.g. {flag(name)} {example}"
        )


_HOSTNAME_RE = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_.])?$")


def _is_ip(text: str) -> bool:
    if text.startswith("[") != text.endswith("]"):  # a bracket without its pair ('[::1', '::1]')
        return False
    try:
        ipaddress.ip_address(text.removeprefix("[").removesuffix("]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def check_host(value: str, *, source: str = "--host") -> str:
    """A host name or an IP address (no scheme, path, port or spaces): caught before any lookup."""
    text = value.strip()
    if not (_is_ip(text) or _HOSTNAME_RE.match(text)):
        example = f"{source} nas.local" if source.startswith("--") else "nas.local or 192.0.2.10"
        raise UsageError(f"{source} must be a host name or IP address, not {value!r}", f"e.g. {example}")
    return text


def check_run_id(value: int, *, name: str = "RUN") -> None:
    if not 1 <= value <= MAX_RUN_ID:
        raise UsageError(
            f"run id {name} must be a whole number 1..{MAX_RUN_ID}, not {value}", "list runs with 'workbench history'"
        )


def check_label(value: str | None) -> None:
    if value is None:
        return
    if not value.strip() or len(value) > 200 or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise UsageError(
            "--label must be 1 to 200 printable characters on one line", "e.g. --label 'after tuning'"
        )


def check_output_file(path: Path | None, name: str = "--json") -> None:
    """An output file's directory must exist before the work starts, not after a long run."""
    if path is None:
        return
    if path.is_dir():
        example = {"--csv": "run.csv", "--markdown": "run.md", "--html": "run.html"}.get(name, "run.json")
        raise UsageError(f"{name} {path} is a directory", f"give a file name, e.g. {name} {path / example}")
    if path.parent.exists() and not path.parent.is_dir():
        raise UsageError(f"{name}: {path.parent} is a file, not a directory", "choose another path")
    if not path.parent.is_dir():
        from workbench.shared.errors import NotFoundError

        raise NotFoundError(f"{name}: directory {path.parent} does not exist", "create it first or choose another path")


def check_budget(sizes: Sequence[int], small_sets: Iterable[SmallSet], what: str = "the test files") -> int:
    """Refuse absurd requests (a billion files, terabytes) before any file is written; return the total bytes."""
    sets = list(small_sets)
    for s in sets:
        if s.count > MAX_FILES_PER_SET:
            raise UsageError(
                f"small-file set {s.name} has {s.count:,} files; at most {MAX_FILES_PER_SET:,} per set",
                f"use fewer files, e.g. --small 1000x{s.name.split('x', 1)[1]}",
            )
    total = total_bytes(sizes, sets)
    if total > MAX_TOTAL_BYTES:
        raise UsageError(
            f"{what} would take {total / (1 << 30):,.1f} GiB; at most {MAX_TOTAL_BYTES >> 30} GiB per run",
            "use smaller --sizes / --small sets, e.g. --sizes 16M,256M",
        )
    return total


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _bytes_in(directory: Path) -> int:
    """Bytes already in the files directory: valid files there are kept, the rest rewritten in place."""
    if not directory.is_dir():
        return 0
    total = 0
    for base, _dirs, names in os.walk(directory):
        for name in names:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:
                continue
    return total


def _bytes_text(n: float) -> str:
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"


def check_free_space(directory: Path, needed_bytes: int, name: str = "--files") -> None:
    """Refuse test files that cannot fit on the local disk, saying how much is free."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{name} {directory} is not a directory", f"e.g. {name} /var/tmp/workbench-files")
    free = shutil.disk_usage(_existing_ancestor(directory)).free + _bytes_in(directory)
    if needed_bytes > free:
        raise DiskError(
            f"the test files would leave the disk full: they need {_bytes_text(needed_bytes)}, "
            f"{directory} has {_bytes_text(free)} free",
            f"free some space, choose smaller sizes, or put the files elsewhere ({name})",
        )


def check_windows(
    window: str | None, window_sweep: str | None, duration_s: float
) -> tuple[int | None, list[int] | None]:
    """--window and --window-sweep in bytes, within what the probe accepts, checked before any connection."""
    from workbench.shared.sizes import format_size, parse_size, parse_sizes

    def bounded(name: str, value: int) -> int:
        if not MIN_WINDOW_BYTES <= value <= 1 << 30:
            raise UsageError(
                f"{name} {format_size(value)} is out of range: use {MIN_WINDOW_BYTES} bytes to 1G", f"e.g. {name} 64K"
            )
        return value

    window_bytes = bounded("--window", named("--window", parse_size, window)) if window is not None else None
    sweep = None
    if window_sweep is not None:
        sweep = [bounded("--window-sweep", w) for w in named("--window-sweep", parse_sizes, window_sweep)]
        # the sweep measures each window for at most 3 s (workbench.core.baseline.measure_tcp)
        if min(duration_s, 3.0) * len(sweep) > 10 * MAX_PROBE_DURATION_S:
            raise UsageError(
                f"--window-sweep of {len(sweep)} windows would run over {10 * MAX_PROBE_DURATION_S:.0f} s",
                "use fewer windows, e.g. --window-sweep 32K,64K,128K,256K",
            )
    return window_bytes, sweep


# ------------------------------------------------------------------ pydantic models -> one line
def _branches(annotation: object) -> tuple[object, ...]:
    """The members of a union annotation (X | None), or the annotation itself."""
    return get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)


def _model_of(annotation: object) -> type[BaseModel] | None:
    """The pydantic model inside an annotation such as `PortsTable | None`, if any."""
    from pydantic import BaseModel

    for branch in _branches(annotation):
        if isinstance(branch, type) and issubclass(branch, BaseModel):
            return branch
    return None


def _field_doc(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> tuple[str, str | None, str | None]:
    """The dotted key path of `loc` within `model`, and that field's expectation and example."""
    names: list[str] = []
    expected = example = None
    current = model
    in_dict = False
    item_doc: str | None = None
    for part in loc:
        if isinstance(part, int) and names:
            names[-1] += f"[{part}]"
            continue
        if in_dict and isinstance(part, str):
            names.append(part)  # a key of a mapping field, e.g. ports.http: its values have their own doc
            expected = item_doc or expected
            in_dict = False
            continue
        if current is None or not isinstance(part, str) or part not in current.model_fields:
            break  # a union branch tag such as 'list[str]': the key is already named
        info = current.model_fields[part]
        names.append(part)
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        expected = info.description or expected
        example = str(extra["example"]) if extra.get("example") is not None else example
        item_doc = str(extra["item"]) if extra.get("item") is not None else None
        in_dict = any(get_origin(a) is dict for a in _branches(info.annotation))
        current = _model_of(info.annotation)
    return (".".join(names) or ".".join(str(p) for p in loc)), expected, example


def _kind(value: object) -> str:
    """What a value is, without showing it (for secrets)."""
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    names = {bool: "true/false", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _input_text(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def validation_error(
    exc: ValidationError, model: type[BaseModel], what: str, example_doc: str, echo_input: bool = True
) -> UsageError:
    """One UsageError for a pydantic ValidationError: unknown keys first, else the first error."""
    errors = exc.errors()
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    error = unknown[0] if unknown else errors[0]
    loc = tuple(error["loc"])
    if not loc:
        kind, sample = example_doc.split(":", 1)
        return UsageError(f"{what} must be {kind}", f"e.g. {sample.strip()}")
    if error["type"] == "extra_forbidden":
        parent: type[BaseModel] | None = model
        for part in loc[:-1]:
            field = parent.model_fields.get(part) if parent and isinstance(part, str) else None
            parent = _model_of(field.annotation) if field else None
        known = ", ".join(parent.model_fields) if parent else ""
        key = ".".join(str(p) for p in loc)
        return UsageError(f"unknown key '{key}' in {what}", f"known keys: {known}")
    key, expected, example = _field_doc(model, loc)
    if error["type"] == "missing":
        return UsageError(f"{what} lacks the key '{key}' ({expected or 'required'})", f"e.g. {example or key}")
    got = f", not {_input_text(error.get('input'))}" if echo_input else f", not {_kind(error.get('input'))}"
    expectation = expected or error["msg"].lower()
    return UsageError(f"{what} key '{key}' must be {expectation}{got}", f"e.g. {example}" if example else "")


def parse_model(
    model: type[_Model], data: JSONValue, what: str, example_doc: str, echo_input: bool = True
) -> _Model:
    """Validate `data` against `model`; `example_doc` is 'a JSON object: {...}' used when data is not a mapping."""
    if not isinstance(data, dict):
        kind, example = example_doc.split(":", 1)
        raise UsageError(f"{what} must be {kind}, not a {type(data).__name__}", f"e.g. {example.strip()}")
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, model, what, example_doc, echo_input) from exc


def check_copy_estimate(least_s: float, copies: int, set_bytes: int, where: str, hint: str) -> None:
    """Refuse a plan whose copies alone take more than MAX_COPY_ESTIMATE_S at the path's rate (`where`)."""
    if least_s > MAX_COPY_ESTIMATE_S:
        raise UsageError(
            f"the copies would take at least {format_duration(least_s)} {where} ({copies} copies of "
            f"{set_bytes / 1e6:,.1f} MB); at most {MAX_COPY_ESTIMATE_S / 3600:.0f} h",
            hint,
        )


def format_duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"
