"""The run document's versions: schema 2 (units in every rate's name) and reading schema 1.

Schema 1 named every rate `*_bps` and meant **bytes** per second by it, where every network tool (iperf3's
`bits_per_second` among them) reads bps as bits: a script off by eight. Schema 2 says the unit in the name:
`*_bytes_per_s`, `*_bits_per_s` where a bit rate is the natural unit (a link's rate), times in `_s` or `_ms`,
sizes in `_bytes`. Since every schema-1 `*_bps` was bytes/s, reading one is a rename of keys, plus the
lab's link object, which also held bit rates under other names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

SCHEMA = 2

_BPS = re.compile(r"^(?:(.+)_)?bps$")
_RENAMED_V1 = {"stall_seconds": "stall_s"}


def _key_v1(key: str) -> str:
    if key in _RENAMED_V1:
        return _RENAMED_V1[key]
    match = _BPS.match(key)
    if match is None:
        return key
    return f"{match.group(1)}_bytes_per_s" if match.group(1) else "bytes_per_s"


def upgrade_v1(value: Any) -> Any:
    """A schema-1 value (any part of the document) with schema 2's names; the numbers are unchanged."""
    if isinstance(value, Mapping):
        return {_key_v1(str(k)): upgrade_v1(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [upgrade_v1(v) for v in value]
    return value


def upgrade_link_v1(link: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A schema-1 `link` object in schema 2. It held the wire's rate twice (`rate_bps` in bytes/s, later
    also `rate_bits_per_s`) and the link as asked for under `requested`, whose `*_bps` were bits/s."""
    if link is None:
        return None
    requested = link.get("requested")
    doc = upgrade_v1({k: v for k, v in link.items() if k != "requested"})
    rate_bytes_per_s = doc.pop("rate_bytes_per_s", None)
    if doc.get("rate_bits_per_s") is None and rate_bytes_per_s is not None:
        doc["rate_bits_per_s"] = rate_bytes_per_s * 8
    if isinstance(requested, Mapping):  # the link as asked for: every rate in it was bits/s
        doc["requested"] = {_BPS.sub(r"\1_bits_per_s", k) if _BPS.match(k) else k: v for k, v in requested.items()}
    return doc


def upgrade_document(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A whole run document of any known schema, in the current one."""
    schema = doc.get("schema", 1)
    if schema == SCHEMA:
        return dict(doc)
    if schema != 1:
        raise ValueError(f"unknown run document schema {schema!r} (this version reads 1 and {SCHEMA})")
    new = upgrade_v1({k: v for k, v in doc.items() if k != "link"})
    if "link" in doc:
        new["link"] = upgrade_link_v1(doc["link"])
    new["schema"] = SCHEMA
    return new


def json_schema() -> dict[str, Any]:
    """The JSON Schema (Draft 2020-12) of the current run document, shipped in the package as run_schema.json."""
    return json.loads(resources.files(__package__).joinpath("run_schema.json").read_text(encoding="utf-8"))
