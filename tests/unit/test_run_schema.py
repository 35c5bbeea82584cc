"""The JSON Schema of the run document (workbench/core/run_schema.json, shipped in the package): a valid Draft
2020-12 schema, met by the document of every kind of run, and failing the documents it exists to catch: a
bare `bps` anywhere (schema 1's bytes-per-second rates), a wrong schema number, direction or type."""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.schema_check import assert_valid_run_document, schema_errors
from tests.synthetic_runs import fleet_run, lab_run, stock_run, stopped_run
from tests.unit.test_results_values import _new_run, old_document
from workbench.core.results import Run
from workbench.core.schema import SCHEMA, json_schema

ROOT = Path(__file__).resolve().parents[2]


def _doc(run: Run) -> dict[str, Any]:
    return json.loads(json.dumps(run.to_json()))  # as a reader gets it: tuples are lists


def test_the_shipped_schema_is_a_draft_2020_12_schema_of_the_current_version() -> None:
    schema = json_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"].endswith("/draft/2020-12/schema")
    assert schema["properties"]["schema"] == {"const": SCHEMA}
    # it ships as package data beside the module that loads it
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "run_schema.json" in package_data["workbench.core"]
    assert (ROOT / "workbench" / "core" / "run_schema.json").is_file()


@pytest.mark.parametrize(
    "make",
    [
        lab_run,  # link with the emulator's figures, window sweep, triage, failed and unavailable rows
        stock_run,  # a stranger's server: no baseline, a receiver-side triage, stock metadata
        stopped_run,  # stopped before any row: no explanation, no verdict
        _new_run,  # the runner's way: clients' own details, the explanation's bounds and fixed costs
        fleet_run,  # several clients at once: client_host on every row, aggregate rows, the fleet's metadata
        lambda: Run.from_json(old_document()),  # a schema-1 run, read back and written again
    ],
    ids=["lab", "stock", "stopped", "served", "fleet", "schema-1-upgraded"],
)
def test_the_document_of_every_kind_of_run_validates(make: Callable[[], Run]) -> None:
    doc = _doc(make())
    assert_valid_run_document(doc)
    assert Run.from_json(doc).to_json() == doc  # and what reads it back writes the same, valid again


def _rename(doc: dict[str, Any], path: tuple[Any, ...], old: str, new: str) -> None:
    target = doc
    for key in path:
        target = target[key]
    target[new] = target.pop(old)


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


# (what is wrong, how to break a valid lab document, where the schema must say so)
BROKEN: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("a row's rate named bps", lambda d: _rename(d, ("results", 0), "median_bytes_per_s", "median_bps"), "results/0"),
    ("the baseline's rate named bps", lambda d: _rename(d, ("baseline",), "up_bytes_per_s", "up_bps"), "baseline"),
    ("a bps key in a client's open details", lambda d: _set(d, ("results", 1, "details", "read_bps"), 1.0),
     "results/1/details"),
    ("a bound's rate named bps", lambda d: _rename(d, ("results", 0, "details", "bounds", 0), "bytes_per_s", "bps"),
     "results/0/details/bounds/0"),
    ("the link's goodput named bps", lambda d: _rename(d, ("link",), "goodput_bytes_per_s", "goodput_bps"), "link"),
    ("a bps key in the open requested link", lambda d: _set(d, ("link", "requested", "rate_bps"), 533e6),
     "link/requested"),
    ("a Mbps key deep in the run's metadata", lambda d: _set(d, ("run", "client", "tcp", "max_Mbps"), 1000),
     "run/client/tcp"),
    ("a sweep point's rate named bps",
     lambda d: _rename(d, ("window_sweep", 0), "measured_bytes_per_s", "measured_bps"), "window_sweep/0"),
    ("schema 1", lambda d: _set(d, ("schema",), 1), "schema"),
    ("schema 2", lambda d: _set(d, ("schema",), 2), "schema"),
    ("a row without its client host", lambda d: d["results"][0].pop("client_host"), "results/0"),
    ("an aggregate that is not an object", lambda d: _set(d, ("results", 0, "aggregate"), []), "results/0/aggregate"),
    ("a short direction", lambda d: _set(d, ("results", 0, "direction"), "up"), "results/0/direction"),
    ("a negative rate", lambda d: _set(d, ("results", 0, "median_bytes_per_s"), -1.0), "results/0/median_bytes_per_s"),
    ("a rate as text", lambda d: _set(d, ("baseline", "down_bytes_per_s"), "62.6 MB/s"), "baseline/down_bytes_per_s"),
    ("a row without its verdict on verification", lambda d: d["results"][2].pop("verified"), "results/2"),
    ("an unknown TCP limit", lambda d: _set(d, ("results", 0, "samples", 0, "tcp", "limit"), "cpu"),
     "results/0/samples/0/tcp/limit"),
    ("a stall that is not [first, length]", lambda d: _set(d, ("results", 1, "samples", 0, "stalls"), [[2]]),
     "results/1/samples/0/stalls/0"),
    ("no results", lambda d: d.pop("results"), "(document)"),
    ("a key the document does not have", lambda d: _set(d, ("results", 0, "median_mbit"), 463), "results/0"),
]  # fmt: skip


@pytest.mark.parametrize(("wrong", "damage", "where"), BROKEN, ids=[wrong for wrong, _, _ in BROKEN])
def test_the_schema_fails_what_it_exists_to_catch(
    wrong: str, damage: Callable[[dict[str, Any]], None], where: str
) -> None:
    doc = _doc(lab_run())
    assert not schema_errors(doc)
    broken = copy.deepcopy(doc)
    damage(broken)
    errors = schema_errors(broken)
    assert errors, f"{wrong}: the schema let it through"
    assert any(e.startswith(f"{where}:") for e in errors), (wrong, errors)
    if "bps" in wrong:  # said by the unit rule itself, also where the object is open to other keys
        assert any("[Bb][Pp][Ss]" in e for e in errors), errors


def test_a_schema_1_document_as_stored_is_not_schema_2() -> None:
    errors = schema_errors(old_document())
    assert any(e.startswith("schema:") for e in errors)
    assert any("median_bps" in e for e in errors)
    assert not schema_errors(_doc(Run.from_json(old_document())))  # read through the upgrade, it is


def test_a_schema_1_lab_document_reads_with_its_bit_rates_named_as_bits() -> None:
    """Schema 1's lab link: `rate_bps` was bytes/s, while under `requested` every `*_bps` was bits/s."""
    old = json.loads(json.dumps(_doc(lab_run())))
    link = old["link"]
    link["rate_bps"] = link.pop("rate_bits_per_s") / 8
    link["requested"] = {"rate_bps": 533_000_000, "rate_up_bps": None, "rate_down_bps": 200_000_000, "mtu": 1500}
    old["schema"] = 1
    for row in old["results"]:
        row["median_bps"] = row.pop("median_bytes_per_s")
    again = _doc(Run.from_json(old))
    assert_valid_run_document(again)
    assert again["link"]["rate_bits_per_s"] == 533_000_000
    assert again["link"]["requested"]["rate_down_bits_per_s"] == 200_000_000
    assert again["results"][0]["median_bytes_per_s"] == old["results"][0]["median_bps"]
