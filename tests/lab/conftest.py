"""Lab tests: the emulated two-host lab (`workbench lab`, workbench.lab), in network namespaces the tests create.

They need root, network namespaces and TUN; without them they skip (marked `lab`, with the reason from
tests/helpers.lab_unavailable or the lab's own check). They are timing-sensitive: run them on a quiet
machine, one group at a time (`python -m pytest tests/lab`), never beside other heavy work.

Some lab runs are checked for what they show, not for their figures (a scenario's reduced form, a README line
run with the smallest plan): those are `concurrent_lab` jobs. Every selected one starts when the first test that
needs one asks for it, CONCURRENT_LABS at a time (each lab is named by its own process, and a lab cleans only the
leftovers of labs whose owner is gone, so labs side by side leave each other alone); most of a small lab's time
is waiting on its link's probes, namespaces and servers, so they overlap well. Every other lab test measures:
it waits until all of them have ended (this conftest's `pytest_runtest_protocol`), so no figure is taken beside them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.lab.concurrent_labs import DRAIN_DEADLINE_S, ConcurrentLabs, LabJob

CONCURRENT_LABS = 4  # labs at once: one scenario of four variants takes as long as the rest together on three
CONCURRENT_MARK = "concurrent_lab"
JOBS_HOOK = "concurrent_lab_jobs"  # a module's function (selected items, tmp_path_factory) -> list[LabJob]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{CONCURRENT_MARK}: the test reads a lab run its module's {JOBS_HOOK}() starts beside other such runs "
        "(checked for what it shows, not its figures); the other lab tests wait until those runs have ended",
    )


_started: list[ConcurrentLabs] = []  # the session's, once a test asked for it


@pytest.fixture(scope="session")
def concurrent_labs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConcurrentLabs]:
    """Every selected concurrent_lab test's job, from each of their modules' JOBS_HOOK, started at once."""
    items = [item for item in request.session.items if item.get_closest_marker(CONCURRENT_MARK)]
    jobs: list[LabJob] = []
    for module in dict.fromkeys(item.module for item in items if isinstance(item, pytest.Function)):
        jobs += getattr(module, JOBS_HOOK)(items, tmp_path_factory)
    labs = ConcurrentLabs(jobs, CONCURRENT_LABS)
    _started.append(labs)
    try:
        yield labs
    finally:
        labs.close()


def _wait_for_concurrent_labs() -> None:
    for labs in _started:
        labs.drain(DRAIN_DEADLINE_S)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A test that asks for the pool may start it, or find its job queued behind others, and waits for it inside
    # its own time limit (pytest-timeout's, 300 s for every test): give it the pool's deadline instead.
    for item in items:
        uses_pool = "concurrent_labs" in getattr(item, "fixturenames", ())
        if (uses_pool or item.get_closest_marker(CONCURRENT_MARK)) and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(DRAIN_DEADLINE_S))


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Every other test here measures: it waits for the concurrent runs before its setup (its module's labs
    included) and before its time limit starts (pytest-timeout's timer is set in its own wrapper of this hook,
    inside this one), so the wait is the pool's, not the test's."""
    if item.get_closest_marker(CONCURRENT_MARK) is None:
        _wait_for_concurrent_labs()
    yield
