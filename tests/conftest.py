"""Suite-wide test settings: the strict switch CI sets, and the fixtures every module may use.

WORKBENCH_TESTS_STRICT=1 (set by .ci/run) turns a skipped test into a failed one. CI's setup installs
every server, runs as root and has FUSE, TUN and namespaces, so a test that skips there for a missing
binary or privilege is a broken setup hiding behind a green run. Only tests that cannot run on this
platform at all may still skip: those marked `macos`, or `skip_elsewhere` (a check of what one kind of
host says, e.g. "CIFS is unavailable here", that has nothing to check on another).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Shared fixtures, imported once here instead of into each module (where they needed `noqa: F811`).
from tests.far_host import far_host  # noqa: F401
from tests.serve_fixtures import serve_runner, served  # noqa: F401

STRICT_ENV = "WORKBENCH_TESTS_STRICT"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "skip_elsewhere: the test checks one kind of host and may skip on others even when "
        f"{STRICT_ENV}=1 (give the reason in the skipif)",
    )


def strict() -> bool:
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _may_skip(item: pytest.Item) -> bool:
    # Markers only, never the reason's wording: a general skip("... {why}") must not pass because `why`
    # happened to mention macOS.
    return bool(item.get_closest_marker("macos") or item.get_closest_marker("skip_elsewhere"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not strict() or not report.skipped or hasattr(report, "wasxfail"):
        return
    if _may_skip(item):
        return
    reason = _skip_reason(report)
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under {STRICT_ENV}=1, where every server, root, FUSE, TUN and namespaces are expected: "
        f"{reason}"
    )
