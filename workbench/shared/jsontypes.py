"""Names for values whose shape only their use decides."""

from __future__ import annotations

from typing import Any, TypeAlias

# A value read from a JSON document, a TOML file or a request's body, or on its way into one: any of
# dict, list, str, int, float, bool or None, nested. Each reader checks the parts it uses (isinstance, a
# pydantic model), so the alias names what the value is without claiming a shape the data may not have.
JSONValue: TypeAlias = Any
