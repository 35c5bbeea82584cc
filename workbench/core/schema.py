"""The run document's versions: schema 3 (fleet runs), reading schema 2 (units in every rate's name) and 1.

Schema 1 named every rate `*_bps` and meant **bytes** per second by it, where every network tool (iperf3's
`bits_per_second` among them) reads bps as bits: a script off by eight. Schema 2 says the unit in the name:
`*_bytes_per_s`, `*_bits_per_s` where a bit rate is the natural unit (a link's rate), times in `_s` or `_ms`,
sizes in `_bytes`. Since every schema-1 `*_bps` was bytes/s, reading one is a rename of keys, plus the
lab's link object, which also held bit rates under other names.

Schema 3 adds two keys to every row: `client_host` (the client host that measured the row in a fleet run,
"all" on an aggregate row, null outside a fleet) and `aggregate` (an aggregate row's figures, null on any
other). A schema-2 row is a schema-3 row with both null; a schema-1 document goes to 2, then to 3.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from workbench.shared.jsontypes import JSONValue

SCHEMA = 3
READABLE = (1, 2, 3)  # the schemas upgrade_document and the results database read

_BPS = re.compile(r"^(?:(.+)_)?bps$")
_RENAMED_V1 = {"stall_seconds": "stall_s"}


def _key_v1(key: str) -> str:
    if key in _RENAMED_V1:
        return _RENAMED_V1[key]
    match = _BPS.match(key)
    if match is None:
        return key
    return f"{match.group(1)}_bytes_per_s" if match.group(1) else "bytes_per_s"


def upgrade_v1(value: JSONValue) -> JSONValue:
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


def upgrade_row_v2(row: Mapping[str, Any]) -> dict[str, Any]:
    """A schema-2 row object in schema 3: measured by the one client of a run that was no fleet."""
    return {**row, "client_host": row.get("client_host"), "aggregate": row.get("aggregate")}


def upgrade_v2(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A whole schema-2 document in schema 3."""
    new = dict(doc)
    new["results"] = [upgrade_row_v2(row) for row in doc.get("results") or ()]
    new["schema"] = 3
    return new


def upgrade_document(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A whole run document of any known schema, in the current one (1 -> 2 -> 3)."""
    schema = doc.get("schema", 1)
    if schema not in READABLE:
        raise ValueError(f"unknown run document schema {schema!r} (this version reads 1 to {SCHEMA})")
    new = dict(doc)
    if schema == 1:
        new = upgrade_v1({k: v for k, v in doc.items() if k != "link"})
        if "link" in doc:
            new["link"] = upgrade_link_v1(doc["link"])
        new["schema"] = schema = 2
    if schema == 2:
        new = upgrade_v2(new)
    return new


def upgrade_stored_row(row: Mapping[str, Any], schema: int) -> dict[str, Any]:
    """One row object as the results database kept it, written under `schema`, in the current schema."""
    if schema == 1:
        row = upgrade_v1(row)
    return upgrade_row_v2(row) if schema in (1, 2) else dict(row)


def json_schema() -> dict[str, Any]:
    """The JSON Schema (Draft 2020-12) of the current run document, shipped in the package as run_schema.json."""
    return json.loads(resources.files(__package__).joinpath("run_schema.json").read_text(encoding="utf-8"))
