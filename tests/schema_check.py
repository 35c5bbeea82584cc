"""Every run document a test reads is checked against the JSON Schema the package ships
(workbench/core/run_schema.json, loaded as a user would load it: workbench.core.schema.json_schema)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator

from workbench.core.schema import json_schema


@functools.cache
def run_document_validator() -> Draft202012Validator:
    schema = json_schema()
    Draft202012Validator.check_schema(schema)  # a broken schema fails here, not as "every document is valid"
    return Draft202012Validator(schema)


def schema_errors(doc: Mapping[str, Any]) -> list[str]:
    """What the schema says is wrong with `doc`, one line each ('where: what'); empty when it validates."""
    errors = sorted(run_document_validator().iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(document)'}: {e.message}" for e in errors]


def assert_valid_run_document(doc: Mapping[str, Any]) -> None:
    """Fail with the first errors when `doc` is not a valid run document of the current schema."""
    errors = schema_errors(doc)
    assert not errors, f"{len(errors)} schema error(s):\n" + "\n".join(errors[:10])
